package main

import (
	"errors"
	"io/fs"
	"os"
	"os/exec"

	"github.com/spf13/pflag"

	"github.com/tally-dev/tally/errs"
)

// execMCP runs the MCP server, tally-mcp (see mcp_unix.go), as this
// process's child with its environment and stdio, and exits as it exits:
// Windows cannot replace a process. The holder process the server's claims
// record (its parent) is then this process, which lives exactly as long as
// the server; the agent's closing of stdin ends both.
func execMCP(flags *pflag.FlagSet) error {
	path, err := mcpProgram()
	if err != nil {
		return err
	}
	argv := mcpArgv(flags)
	cmd := &exec.Cmd{Path: path, Args: argv, Stdin: os.Stdin, Stdout: os.Stdout, Stderr: os.Stderr}
	err = cmd.Run()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		os.Exit(ee.ExitCode())
	}
	if err != nil {
		return notInstalled(errs.Wrap(errs.NotInstalled, err, "run %s", path))
	}
	os.Exit(0)
	return nil
}

// programSuffix ends the name of a program file on Windows.
const programSuffix = ".exe"

// isProgram reports whether fi is a file one may run: on Windows, any
// regular file (its name says it runs, not its mode).
func isProgram(fi fs.FileInfo) bool { return fi.Mode().IsRegular() }
