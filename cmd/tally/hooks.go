package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/hooks"
)

func (a *app) hooksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "install or remove the git hooks that enforce the ledger at push",
		Args:  args(cobra.NoArgs),
	}
	var server, commitMsg bool
	names := func() []string {
		if server {
			return hooks.ServerHooks
		}
		if commitMsg {
			return append(hooks.ClientHooks, "commit-msg")
		}
		return hooks.ClientHooks
	}
	install := &cobra.Command{
		Use:   "install [--server]",
		Short: "write thin hook shims that call tally (pre-push; pre-receive with --server), chaining existing hooks",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			self, err := os.Executable()
			if err != nil {
				return err
			}
			if self, err = filepath.EvalSymlinks(self); err != nil {
				return err
			}
			paths, err := hooks.Install(c.L.Repo, self, names())
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"installed": paths}, func(w io.Writer) {
				for _, p := range paths {
					fmt.Fprintf(w, "installed %s\n", p)
				}
			})
		},
	}
	uninstall := &cobra.Command{
		Use:   "uninstall [--server]",
		Short: "remove tally's hook shims and restore the hooks they chained",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			paths, err := hooks.Uninstall(c.L.Repo, names())
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"removed": paths}, func(w io.Writer) {
				for _, p := range paths {
					fmt.Fprintf(w, "removed %s\n", p)
				}
			})
		},
	}
	for _, c := range []*cobra.Command{install, uninstall} {
		c.Flags().BoolVar(&server, "server", false, "the server hook (pre-receive) of a bare repository")
		c.Flags().BoolVar(&commitMsg, "commit-msg", false, "also the commit-msg hook, which adds a Tally-Checkpoint trailer to code commits")
	}
	cmd.AddCommand(install, uninstall)
	return cmd
}

// hookCmd is what the shims call: `tally hook NAME ARGS...` with git's hook
// input on stdin. It prints one line per refused ref and exits 1 if any.
func (a *app) hookCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:    "hook NAME [ARGS...]",
		Short:  "run a git hook's checks (called by the installed shims)",
		Hidden: true,
		Args:   args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			start := time.Now() // the server's time bound counts from here
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			if argv[0] == "commit-msg" {
				if len(argv) != 2 {
					return usageErr("commit-msg needs the message file")
				}
				_, err := c.StampCommitMessage(argv[1])
				return err
			}
			chk := &hooks.Checker{L: c.L, Now: c.L.Now()}
			var updates []hooks.Update
			var bound time.Duration // none on the client: its user can interrupt
			switch argv[0] {
			case "pre-receive":
				chk.Server = true
				if bound, err = hooks.Timeout(c.L.Repo); err != nil {
					return err
				}
				updates, err = hooks.ParsePreReceive(cmd.InOrStdin())
			case "pre-push":
				if len(argv) < 2 {
					return usageErr("pre-push needs the remote name")
				}
				chk.Remote = argv[1]
				updates, err = hooks.ParsePrePush(cmd.InOrStdin())
			default:
				return usageErr("unknown hook %q", argv[0])
			}
			if err != nil {
				return err
			}
			findings, err := chk.CheckWithin(updates, start, bound)
			if err != nil {
				return err
			}
			refused := 0
			for _, f := range findings {
				fmt.Fprintln(a.stderr, f)
				if !f.Warning {
					refused++
				}
			}
			if a.jsonOut {
				writeJSON(a.stdout, map[string]any{"ok": refused == 0, "findings": findings})
			}
			if refused > 0 {
				return exitCode(1)
			}
			return nil
		},
	}
	return cmd
}
