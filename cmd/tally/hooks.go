package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/hooks"
	"github.com/tally-dev/tally/ledger"
)

func (a *app) hooksCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "hooks",
		Short: "install, inspect or remove the git hooks that enforce the ledger, and agent harnesses' edit hooks",
		Args:  args(cobra.NoArgs),
	}
	var server, commitMsg, client bool
	var tallyBin string
	var agentFlags []string
	names := func() []string {
		if server {
			return hooks.ServerHooks
		}
		names := slices.Clone(hooks.ClientHooks)
		if client {
			names = append(names, hooks.PreCommitHook)
		}
		if commitMsg {
			names = append(names, "commit-msg")
		}
		return names
	}
	install := &cobra.Command{
		Use:   "install [--server] [--client] [--commit-msg] [--agent HARNESS] [--tally PATH]",
		Short: "write thin hook shims that call tally (pre-push, and pre-commit with --client; pre-receive with --server), chaining existing hooks or joining a <hook>.d/ dispatcher; with --agent, an agent harness's edit guard instead",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				bin, err := installBinary(tallyBin)
				if err != nil {
					return err
				}
				if len(agentFlags) > 0 {
					return a.changeAgents(c, agentFlags, func(wt, agent string) (hooks.AgentChange, error) {
						return hooks.InstallAgent(wt, agent, bin)
					})
				}
				var report *pusherReport
				if server { // before Install moves the existing pre-receive aside
					if report, err = newPusherReport(c); err != nil {
						return err
					}
				}
				paths, err := hooks.Install(c.L.Repo, bin, names())
				if err != nil {
					return err
				}
				out := map[string]any{"installed": paths, "binary": bin}
				var seq *hooks.Sequencer
				var settings *hooks.ServerConfig
				if server {
					if seq, err = hooks.InstallSequencer(c.L.Repo, bin, tally.SequencedOps); err != nil {
						return err
					}
					out["sequencer"] = seq
					if settings, err = hooks.SetServerConfig(c.L.Repo); err != nil {
						return err
					}
					out["config"] = settings
				}
				if report != nil {
					out["pusher"] = report
				}
				return a.emit(out, func(w io.Writer) {
					for _, p := range paths {
						fmt.Fprintf(w, "installed %s (calls %s)\n", p, bin)
					}
					if seq != nil && seq.Shim != "" {
						fmt.Fprintf(w, "installed %s: requests to %s/* are sequenced here, offered to clones by %s\n", seq.Shim, seq.Refs, seq.Offer)
					} else if seq != nil {
						fmt.Fprintf(w, "sequencer: not installed: %s\n", seq.Skipped)
					}
					if settings != nil {
						for k, v := range settings.Set {
							fmt.Fprintf(w, "set %s=%s (no git for-each-ref on every push)\n", k, v)
						}
						if settings.Skipped != "" {
							fmt.Fprintf(w, "%s: not set: %s\n", hooks.AlternateRefsConfig, settings.Skipped)
						}
					}
					if report != nil {
						report.print(w)
					}
				})
			})
		},
	}
	install.Flags().BoolVar(&server, "server", false, "the server hook (pre-receive) of a bare repository")
	install.Flags().BoolVar(&client, "client", false, "also the pre-commit hook, which refuses a commit of staged paths another actor holds (the edit guard's backstop for shell commands)")
	install.Flags().BoolVar(&commitMsg, "commit-msg", false, "also the commit-msg hook, which adds a Tally-Checkpoint trailer to code commits")
	install.Flags().StringVar(&tallyBin, "tally", "", "the tally binary the shims call, kept as this absolute path (default: this binary, symbolic links resolved)")
	install.Flags().StringArrayVar(&agentFlags, "agent", nil, "install the edit guard of agent harness `HARNESS` into this work tree instead of git hooks: "+strings.Join(hooks.Agents, ", ")+", or all (repeatable, or a comma list)")
	uninstall := &cobra.Command{
		Use:   "uninstall [--agent HARNESS]",
		Short: "remove every hook shim tally installed (client and server, in any placement) and restore the hooks they chained; with --agent, an agent harness's edit guard instead",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				if len(agentFlags) > 0 {
					return a.changeAgents(c, agentFlags, hooks.UninstallAgent)
				}
				paths, err := hooks.Uninstall(c.L.Repo)
				if err != nil {
					return err
				}
				if paths == nil {
					paths = []string{}
				}
				return a.emit(map[string]any{"removed": paths}, func(w io.Writer) {
					for _, p := range paths {
						fmt.Fprintf(w, "removed %s\n", p)
					}
				})
			})
		},
	}
	// Uninstall removes every shim whatever these say; they stay accepted so
	// that scripts written for the uninstall that took them keep working.
	uninstall.Flags().BoolVar(&server, "server", false, "")
	uninstall.Flags().BoolVar(&commitMsg, "commit-msg", false, "")
	uninstall.Flags().BoolVar(&client, "client", false, "")
	uninstall.Flags().MarkHidden("client")
	uninstall.Flags().MarkHidden("server")
	uninstall.Flags().MarkHidden("commit-msg")
	uninstall.Flags().StringArrayVar(&agentFlags, "agent", nil, "remove what install wrote for agent harness `HARNESS` from this work tree, and nothing else: "+strings.Join(hooks.Agents, ", ")+", or all (repeatable, or a comma list)")
	status := &cobra.Command{
		Use:   "status",
		Short: "show which tally hooks (git and agent harness) are installed where, the binary they call, whether they are active, and what each harness still needs",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				st := hooks.Status(c.L.Repo)
				out := map[string]any{"hooks": st}
				var agents []hooks.AgentStatus
				if wt := c.L.Repo.WorkTree; wt != "" {
					agents = hooks.StatusAgents(wt, hooks.DefaultAgentTrust(os.Getenv))
					out["agents"] = agents
				}
				return a.emit(out, func(w io.Writer) {
					printHookStatus(w, st)
					printAgentStatus(w, agents)
				})
			})
		},
	}
	cmd.AddCommand(install, uninstall, status)
	return cmd
}

// installBinary is the binary the shims will call: flag (kept as given, made
// absolute) or this process's own executable with symbolic links resolved.
func installBinary(flag string) (string, error) {
	if flag != "" {
		return hooks.Binary(flag)
	}
	self, err := os.Executable()
	if err != nil {
		return "", err
	}
	if self, err = filepath.EvalSymlinks(self); err != nil {
		return "", err
	}
	return hooks.Binary(self)
}

func printHookStatus(w io.Writer, st []hooks.HookStatus) {
	for _, s := range st {
		if !s.Installed {
			fmt.Fprintf(w, "%s: not installed", s.Hook)
			if s.OtherHook != "" {
				fmt.Fprintf(w, " (%s is another hook)", s.OtherHook)
			}
			fmt.Fprintln(w)
			continue
		}
		state := "active"
		if !s.Active {
			state = "INACTIVE"
		}
		fmt.Fprintf(w, "%s: %s, %s\n", s.Hook, state, s.Shim)
		fmt.Fprintf(w, "  placement: %s", s.Placement)
		if s.Dispatcher != "" {
			fmt.Fprintf(w, " (run by %s)", s.Dispatcher)
		}
		fmt.Fprintln(w)
		exists := "exists"
		if !s.BinaryExists {
			exists = "MISSING"
		}
		fmt.Fprintf(w, "  binary: %s (%s)\n", s.Binary, exists)
		if s.Chained != "" {
			fmt.Fprintf(w, "  chains: %s (runs first)\n", s.Chained)
		}
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
	}
}

// changeAgents installs or uninstalls (change) the agent hooks that flags
// name, in the work tree, and reports each file.
func (a *app) changeAgents(c *tally.Client, flags []string, change func(workTree, agent string) (hooks.AgentChange, error)) error {
	agents, err := hooks.ParseAgents(flags)
	if err != nil {
		return err
	}
	wt := c.L.Repo.WorkTree
	if wt == "" {
		return usageErr("agent hooks go into a work tree, and this repository is bare")
	}
	var changes []hooks.AgentChange
	for _, agent := range agents {
		ch, err := change(wt, agent)
		if err != nil {
			return err
		}
		changes = append(changes, ch)
	}
	return a.emit(map[string]any{"agents": changes}, func(w io.Writer) {
		for _, ch := range changes {
			fmt.Fprintf(w, "%s: %s %s\n", ch.Agent, ch.Action, ch.File)
		}
	})
}

func printAgentStatus(w io.Writer, st []hooks.AgentStatus) {
	for _, s := range st {
		if !s.Installed && s.Binary == "" {
			fmt.Fprintf(w, "agent %s: not installed (%s)\n", s.Agent, s.File)
			for _, p := range s.Problems {
				fmt.Fprintf(w, "  problem: %s\n", p)
			}
			continue
		}
		state := "active"
		if !s.Active {
			state = "INACTIVE"
		}
		exists := "exists"
		if !s.BinaryExists {
			exists = "MISSING"
		}
		fmt.Fprintf(w, "agent %s: %s, %s\n  binary: %s (%s)\n", s.Agent, state, s.File, s.Binary, exists)
		for _, p := range s.Problems {
			fmt.Fprintf(w, "  problem: %s\n", p)
		}
		for _, n := range s.Needs {
			fmt.Fprintf(w, "  needs: %s\n", n)
		}
	}
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
			if argv[0] == hooks.SequencerHook {
				// A server that cannot open its ledger (a signing key that
				// does not load, among others) still answers the protocol:
				// each request is refused with why, never lost.
				c, err := a.client(false)
				if err == nil {
					c.SetRequestGuard(func(pusher map[string]string) tally.Guard {
						return tally.Guard(hooks.PusherGuard(hooks.EnvOf(pusher)))
					})
				}
				return hooks.ProcReceive(cmd.InOrStdin(), a.stdout, func(u hooks.Update) hooks.Answer {
					if err != nil {
						return hooks.Refusal(err)
					}
					return serveRequest(c, u, a.stderr)
				})
			}
			return a.withClient(false, func(c *tally.Client) error {
				var err error
				if argv[0] == hooks.PreCommitHook {
					return a.preCommit(c)
				}
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
				var findings []hooks.Finding
				if chk.Server { // a lost race is refused before anything is verified
					lost, err := hooks.LostRace(c.L, updates)
					if err != nil {
						return err
					}
					if lost != nil {
						findings = []hooks.Finding{*lost}
					}
				}
				if findings == nil {
					if findings, err = chk.CheckWithin(updates, start, bound); err != nil {
						return err
					}
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
			})
		},
	}
	return cmd
}

// serveRequest applies one request pushed to the sequencer (FORMAT.md §9b)
// and answers with the ledger's move, or the refusal's code; the entries
// the pusher lacks go to sent (the hook's stderr, which receive-pack passes
// to the pusher as "remote: " lines). What costs nothing is judged before
// the request is read: whether this server serves requests at all, and
// whether the pusher may push entries of any actor; then the request is
// read only up to ledger.MaxRequest bytes.
func serveRequest(c *tally.Client, u hooks.Update, sent io.Writer) hooks.Answer {
	op, ok := strings.CutPrefix(u.Ref, ledger.RequestPrefix+"/")
	if !ok {
		return hooks.Refusal(errs.New(errs.Usage, "%s is not a request ref (%s/<op>)", u.Ref, ledger.RequestPrefix))
	}
	if err := c.ServesRequests(); err != nil {
		return hooks.Refusal(err)
	}
	pusher, err := hooks.RequestPusher(c.L, os.LookupEnv)
	if err != nil {
		return hooks.Refusal(err)
	}
	db, err := c.L.Repo.Objects()
	if err != nil {
		return hooks.Refusal(err)
	}
	intent, err := db.ReadCommitAtMost(u.New, ledger.MaxRequest)
	if errors.Is(err, gitstore.ErrObjectTooLarge) {
		return hooks.Refusal(errs.New(errs.LimitExceeded, "the request %s is larger than %d bytes", u.New, ledger.MaxRequest).
			With("limit", "request_bytes").With("max", ledger.MaxRequest))
	}
	if err != nil {
		return hooks.Refusal(errs.Wrap(errs.Usage, err, "reading the request %s", u.New))
	}
	ap, err := c.ServeRequest(op, []byte(intent.Message), pusher, sent)
	if err != nil {
		return hooks.Refusal(err)
	}
	entry, err := db.ReadCommit(ap.Commit)
	if err != nil || len(entry.Parents) != 1 {
		return hooks.Refusal(errs.New(errs.Internal, "the appended entry %s has no single parent", ap.Commit))
	}
	return hooks.Answer{OK: true, Ref: c.L.Ref, Old: entry.Parents[0], New: ap.Commit}
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
	p, _, err := c.Policy()
	if errs.CodeOf(err) == errs.NotInitialized {
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
