package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/cliopt"
)

func (a *app) mcpCmd() *cobra.Command {
	var server cliopt.MCP // parsed here only to refuse a malformed command line before the exec
	cmd := &cobra.Command{
		Use:   "mcp [--auto-renew]",
		Short: "serve the ledger to one agent as an MCP server on stdin/stdout",
		Long:  cliopt.MCPHelp,
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return execMCP(cmd.Flags())
		},
	}
	server.AddFlags(cmd.Flags())
	return cmd
}

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
	argv := []string{cliopt.MCPProgram}
	flags.Visit(func(f *pflag.Flag) { argv = append(argv, "--"+f.Name+"="+f.Value.String()) })
	err = syscall.Exec(path, argv, os.Environ())
	return notInstalled(errs.Wrap(errs.NotInstalled, err, "exec %s", path))
}

// notInstalled adds to a NOT-INSTALLED error what to install, and how.
func notInstalled(e *errs.Error) *errs.Error {
	return e.With("program", cliopt.MCPProgram).With("install", cliopt.MCPInstall)
}

// mcpProgram finds tally-mcp: beside this executable (where go install
// puts both programs), else on PATH; neither is NOT-INSTALLED, naming the
// command that installs it.
func mcpProgram() (string, error) {
	self, err := os.Executable()
	if err == nil {
		p := filepath.Join(filepath.Dir(self), cliopt.MCPProgram)
		if fi, err := os.Stat(p); err == nil && fi.Mode().IsRegular() && fi.Mode().Perm()&0o111 != 0 {
			return p, nil
		}
	}
	if p, err := exec.LookPath(cliopt.MCPProgram); err == nil {
		return p, nil
	}
	return "", notInstalled(errs.New(errs.NotInstalled, "tally mcp runs the MCP server %s, which is neither beside %s nor on PATH: install both programs with %s",
		cliopt.MCPProgram, self, cliopt.MCPInstall))
}
