package main

import (
	"os"
	"os/exec"
	"path/filepath"

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
		p := filepath.Join(filepath.Dir(self), cliopt.MCPProgram+programSuffix)
		if fi, err := os.Stat(p); err == nil && isProgram(fi) {
			return p, nil
		}
	}
	if p, err := exec.LookPath(cliopt.MCPProgram); err == nil {
		return p, nil
	}
	return "", notInstalled(errs.New(errs.NotInstalled, "tally mcp runs the MCP server %s, which is neither beside %s nor on PATH: install both programs with %s",
		cliopt.MCPProgram, self, cliopt.MCPInstall))
}

// mcpArgv is tally-mcp's command line: every flag this command line set,
// global or mcp's, as --name=value.
func mcpArgv(flags *pflag.FlagSet) []string {
	argv := []string{cliopt.MCPProgram}
	flags.Visit(func(f *pflag.Flag) { argv = append(argv, "--"+f.Name+"="+f.Value.String()) })
	return argv
}
