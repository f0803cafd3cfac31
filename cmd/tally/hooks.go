package main

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
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
			var report *pusherReport
			if server { // before Install moves the existing pre-receive aside
				if report, err = newPusherReport(c); err != nil {
					return err
				}
			}
			paths, err := hooks.Install(c.L.Repo, self, names())
			if err != nil {
				return err
			}
			out := map[string]any{"installed": paths}
			if report != nil {
				out["pusher"] = report
			}
			return a.emit(out, func(w io.Writer) {
				for _, p := range paths {
					fmt.Fprintf(w, "installed %s\n", p)
				}
				if report != nil {
					report.print(w)
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
				chk.Server, chk.Pusher = true, os.LookupEnv
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

// pusherReport is what `hooks install --server` found about pusher
// identities: the mechanisms it saw evidence of, and whether the policy binds
// pushers at all (only then does the hook use them).
type pusherReport struct {
	Mechanisms []hooks.PusherMechanism `json:"mechanisms"`
	Vars       []string                `json:"vars"` // what the hook reads, in order
	Bound      bool                    `json:"bound"`
}

func newPusherReport(c *tally.Client) (*pusherReport, error) {
	home, _ := os.UserHomeDir()
	r := &pusherReport{Mechanisms: hooks.DetectPushers(c.L.Repo, os.Environ(), home), Vars: hooks.PusherVars}
	if r.Mechanisms == nil {
		r.Mechanisms = []hooks.PusherMechanism{}
	}
	p, err := c.Policy()
	if errs.Code(err) == "NOT-INITIALIZED" {
		return r, nil // no ledger yet: no policy binds pushers
	}
	if err != nil {
		return nil, err
	}
	r.Bound = p.PushersBound()
	if p.PusherVar != "" {
		r.Vars = append([]string{p.PusherVar}, r.Vars...)
	}
	return r, nil
}

func (r *pusherReport) print(w io.Writer) {
	for _, m := range r.Mechanisms {
		fmt.Fprintf(w, "pusher identity: %s sets %s (%s)\n", m.Server, m.Var, m.Evidence)
	}
	if len(r.Mechanisms) == 0 {
		fmt.Fprintf(w, "pusher identity: no mechanism found here (the hook reads %s)\n", strings.Join(r.Vars, ", "))
	}
	switch {
	case !r.Bound:
		fmt.Fprintln(w, "pushers: the policy binds none, so any pusher may push any actor's entries (bind them with tally policy set-pushers)")
	case len(r.Mechanisms) == 0:
		fmt.Fprintln(w, "pushers: bound by the policy; unless the server sets one of those variables, every ledger push is refused (PUSHER-UNKNOWN)")
	default:
		fmt.Fprintln(w, "pushers: bound by the policy")
	}
}
