//go:build unix

package main

import (
	"io/fs"
	"os"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/tally-dev/tally/errs"
)

// execMCP replaces this process with the MCP server, tally-mcp, which is
// a program of its own so that its SDK is not linked into every tally
// process (package cliopt). The server gets every flag this command line set,
// global or mcp's, as --name=value (it parses the same flags), and this
// process's environment and stdio. Being this process, it is the agent's
// child as tally mcp was: the agent's signals and its stdin reach it, and
// the holder process its claims record (its parent) is the agent.
func execMCP(flags *pflag.FlagSet) error {
	path, err := mcpProgram()
	if err != nil {
		return err
	}
	err = syscall.Exec(path, mcpArgv(flags), os.Environ())
	return notInstalled(errs.Wrap(errs.NotInstalled, err, "exec %s", path))
}

// programSuffix ends the name of a program file: nothing on unix.
const programSuffix = ""

// isProgram reports whether fi is a file one may run.
func isProgram(fi fs.FileInfo) bool { return fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 }
