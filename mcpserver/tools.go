package mcpserver

import (
	"cmp"
	"context"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/proctree"
	"github.com/tally-dev/tally/receipt"
)

// Inputs. A field without omitempty is required by the inferred schema.

// CellIn names a cell.
type CellIn struct {
	Wave string `json:"wave" jsonschema:"the wave id"`
	Cell string `json:"cell" jsonschema:"the cell id within the wave"`
}

// LeaseIn names your lease on a cell.
type LeaseIn struct {
	CellIn
	Epoch int64 `json:"epoch" jsonschema:"the epoch of your lease, as claim returned it"`
}

// WaveIn optionally restricts a view to one wave.
type WaveIn struct {
	Wave string `json:"wave,omitempty" jsonschema:"only this wave (default: all)"`
}

// ClaimIn is the input of claim: a cell, or next.
type ClaimIn struct {
	Wave        string `json:"wave,omitempty" jsonschema:"the cell's wave; with next: only consider this wave"`
	Cell        string `json:"cell,omitempty" jsonschema:"the cell id (omit with next)"`
	Next        bool   `json:"next,omitempty" jsonschema:"claim the first ready cell instead of naming one"`
	TTL         int    `json:"ttl,omitempty" jsonschema:"lease time to live in seconds"`
	Steal       bool   `json:"steal,omitempty" jsonschema:"take a live lease held past its max-hold time"`
	ReclaimDead bool   `json:"reclaim_dead,omitempty" jsonschema:"take a live lease whose holder process, in this boot and PID namespace, is gone (refused through a remote)"`
	WaitSeconds int    `json:"wait_seconds,omitempty" jsonschema:"on NO-READY-CELL or LEASE-HELD, wait for the ledger to change and try again for up to this long (else WAIT-TIMEOUT), as claim --wait; give the call a request timeout longer than this (the TypeScript SDK's default is 60 s): a cancelled call stops waiting and claims nothing more"`
	Worktree    bool   `json:"worktree,omitempty" jsonschema:"also make the cell's worktree (tally claim --worktree): a linked git worktree on a new branch from the branch checked out here, whose path, branch and base the result's worktree gives; work there, then done with worktree or merge"`
	WorktreeDir string `json:"worktree_dir,omitempty" jsonschema:"with worktree: its directory (default: <repo>.tally/WAVE/CELL beside the repository)"`
}

func (ClaimIn) defaults() map[string]any { return map[string]any{"ttl": lease.TTLDefault} }

// RenewIn is the input of renew.
type RenewIn struct {
	LeaseIn
	TTL int `json:"ttl,omitempty" jsonschema:"new time to live in seconds (default: keep the lease's)"`
}

// FailIn is the input of fail.
type FailIn struct {
	LeaseIn
	Reason string `json:"reason,omitempty" jsonschema:"why it failed"`
}

// DoneIn is the input of done.
type DoneIn struct {
	LeaseIn
	Commit   string `json:"commit,omitempty" jsonschema:"the commit holding the work (default HEAD)"`
	Base     string `json:"base,omitempty" jsonschema:"where the work started (default: HEAD when claimed)"`
	Evidence string `json:"evidence_file,omitempty" jsonschema:"extra evidence file (JSON), relative to the work tree"`
	// Next claims the next ready cell after the done (Client.DoneNext).
	Next         bool   `json:"next,omitempty" jsonschema:"then claim the next ready cell, as claim with next; its outcome is the result's next"`
	NextWave     string `json:"next_wave,omitempty" jsonschema:"with next, only consider this wave"`
	TTL          int    `json:"ttl,omitempty" jsonschema:"with next, the new lease's time to live in seconds"`
	WaitSeconds  int    `json:"wait_seconds,omitempty" jsonschema:"with next, wait for a ready cell up to this long, as claim's wait_seconds"`
	Worktree     bool   `json:"worktree,omitempty" jsonschema:"the work is in the cell's worktree (claim with worktree): refuse if it has uncommitted changes (WORKTREE-DIRTY), and bind its branch's tip (default when this server runs in that worktree)"`
	NextWorktree bool   `json:"next_worktree,omitempty" jsonschema:"with next, also make the next cell's worktree, as claim with worktree (next then carries worktree)"`
	Merge        string `json:"merge,omitempty" jsonschema:"in the cell's worktree, first land its branch on its target branch: ff, rebase or merge (a merge commit, or a fast-forward when one does); none: do not. Default: git config tally.worktree.merge, else none. A conflict is MERGE-CONFLICT, everything left as it was"`
}

// RunIn is the input of run.
type RunIn struct {
	CellIn
	Epoch          int64    `json:"epoch,omitempty" jsonschema:"the epoch of your lease (checked if given)"`
	Argv           []string `json:"argv" jsonschema:"the command and its arguments, run in the work tree without a shell"`
	TimeoutSeconds int      `json:"timeout_seconds,omitempty" jsonschema:"kill the command after this many seconds (default: no limit)"`
}

// LockIn is the input of lock.
type LockIn struct {
	Patterns    []string `json:"patterns" jsonschema:"repository-relative globs (*, ?, **), all or none"`
	TTL         int      `json:"ttl,omitempty" jsonschema:"lock time to live in seconds (omitted: a relocked pattern keeps its TTL, a new one gets the default)"`
	Reason      string   `json:"reason,omitempty" jsonschema:"why, for the others"`
	WaitSeconds int      `json:"wait_seconds,omitempty" jsonschema:"on LEASE-HELD record a wait and retry up to this long (else WAIT-TIMEOUT)"`
	Epochs      []int64  `json:"epochs,omitempty" jsonschema:"only renew your locks at these epochs (one for all, or one per pattern)"`
}

// UnlockIn is the input of unlock.
type UnlockIn struct {
	Patterns []string `json:"patterns" jsonschema:"the patterns of your locks"`
	Epochs   []int64  `json:"epochs" jsonschema:"their epochs: one for all, or one per pattern"`
}

// VerifyIn is the input of verify.
type VerifyIn struct {
	Full bool `json:"full,omitempty" jsonschema:"verify from genesis, not only what is new since the last verify"`
}

// LogIn is the input of log.
type LogIn struct {
	N int `json:"n,omitempty" jsonschema:"at most this many entries, newest first (default: all)"`
}

// Outputs not defined by the facade; their fields are the command line's --json fields.

// StatusOut is the output of status.
type StatusOut struct {
	Now   string             `json:"now"`
	Waves []tally.WaveStatus `json:"waves"`
}

// NextOut is the output of next.
type NextOut struct {
	Ready []lease.Candidate `json:"ready"`
}

// LogOut is the output of log.
type LogOut struct {
	Entries []ledger.LogEntry `json:"entries"`
}

// RunOut is the output of run: the evidence recorded and the command's
// last output, for reading, not recorded.
type RunOut struct {
	Evidence   lease.Evidence `json:"evidence"`
	StdoutTail string         `json:"stdout_tail" jsonschema:"the last 4 KiB of stdout"`
	StderrTail string         `json:"stderr_tail" jsonschema:"the last 4 KiB of stderr"`
}

func (s *Server) tools() {
	add(s, "status", "Cells by state with holders and seconds left, claimed ones expiring soonest first (tally status).",
		func(_ context.Context, in WaveIn) (out *StatusOut, err error) {
			out = &StatusOut{}
			err = s.call(func(c *tally.Client) error {
				var now time.Time
				out.Waves, now, err = c.Status(in.Wave)
				out.Now = chain.FormatTime(now)
				return err
			})
			return out, err
		})
	add(s, "next", "The cells claimable now, in the order claim with next takes them (tally next).",
		func(_ context.Context, in WaveIn) (out *NextOut, err error) {
			out = &NextOut{}
			err = s.call(func(c *tally.Client) error { out.Ready, err = c.Next(in.Wave); return err })
			return out, err
		})
	add(s, "show", "A cell (title, deps, paths, state, lease) and its history (tally show).",
		func(_ context.Context, in CellIn) (out *tally.CellView, err error) {
			err = s.call(func(c *tally.Client) error { out, err = c.Show(in.Wave, in.Cell); return err })
			return out, err
		})
	add(s, "claim", "Claim a cell (wave and cell, or next): a lease at a new epoch; keep the epoch for renew, run, done. "+
		"LEASE-HELD (retryable) names the holder, epoch and expires_at; LEASE-OWNED (not retryable, yours: true) "+
		"means you hold it already: renew it. With wait_seconds, NO-READY-CELL and LEASE-HELD wait in the server for "+
		"the ledger to change (tally claim --wait).",
		func(ctx context.Context, in ClaimIn) (out *tally.WorktreeClaim, err error) {
			o := tally.ClaimOptions{Wave: in.Wave, Cell: in.Cell, Next: in.Next, TTL: in.TTL, PID: s.opt.PID,
				Steal: in.Steal, ReclaimDead: in.ReclaimDead}
			if in.Next {
				o.Wave, o.NextWave = "", in.Wave
			}
			if in.WorktreeDir != "" && !in.Worktree {
				return nil, errs.New(errs.Usage, "worktree_dir goes with worktree")
			}
			wait := time.Duration(in.WaitSeconds) * time.Second
			out = &tally.WorktreeClaim{}
			if err = s.call(func(c *tally.Client) error {
				if in.Worktree {
					out, err = c.ClaimWorktree(ctx, o, wait, nil, s.inWorkTree(in.WorktreeDir))
				} else {
					out.LeaseResult, err = c.ClaimWait(ctx, o, wait, nil)
				}
				return err
			}); err == nil {
				s.track(out.CellRef, out.Lease)
			}
			return out, err
		})
	add(s, "renew", "Heartbeat: extend your live lease, not past its max-hold time (tally renew).",
		func(_ context.Context, in RenewIn) (out *tally.LeaseResult, err error) {
			if err = s.call(func(c *tally.Client) error { out, err = c.Renew(in.Wave, in.Cell, in.Epoch, in.TTL); return err }); err == nil {
				s.track(out.CellRef, out.Lease)
			}
			return out, err
		})
	add(s, "release", "Give your cell back: pending again, epoch kept (tally release).",
		func(_ context.Context, in LeaseIn) (out *tally.Appended, err error) {
			if err = s.call(func(c *tally.Client) error { out, err = c.Release(in.Wave, in.Cell, in.Epoch); return err }); err == nil {
				s.untrack(lease.CellRef{Wave: in.Wave, Cell: in.Cell}, in.Epoch)
			}
			return out, err
		})
	add(s, "fail", "Mark your claimed cell failed (tally fail).",
		func(_ context.Context, in FailIn) (out *tally.Appended, err error) {
			if err = s.call(func(c *tally.Client) error { out, err = c.Fail(in.Wave, in.Cell, in.Epoch, in.Reason); return err }); err == nil {
				s.untrack(lease.CellRef{Wave: in.Wave, Cell: in.Cell}, in.Epoch)
			}
			return out, err
		})
	add(s, "done", "Finish your cell with a receipt binding it to a commit: its tree, the paths changed from base, "+
		"the evidence recorded by run (tally done). With next, then claim the next ready cell (tally done --next): "+
		"once the receipt stands the call succeeds, and next is the claim's result (ok: true, keep its epoch) or its "+
		"error object (ok: false: NO-READY-CELL, PLAN-COMPLETE, WAIT-TIMEOUT...).",
		func(ctx context.Context, in DoneIn) (out *tally.DoneNextResult, err error) {
			if !in.Next && (in.NextWave != "" || in.TTL != 0 || in.WaitSeconds != 0 || in.NextWorktree) {
				return nil, errs.New(errs.Usage, "next_wave, ttl, wait_seconds and next_worktree go with next")
			}
			req := receipt.Request{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: in.Wave, Cell: in.Cell}, Epoch: in.Epoch},
				Commit: in.Commit, Base: in.Base, EvidenceFile: s.inWorkTree(in.Evidence)}
			err = s.call(func(c *tally.Client) error {
				wt, err := c.CellWorktree(req.CellRef, req.Epoch)
				if err != nil {
					return err
				}
				if wt == nil && (in.Worktree || in.Merge != "") {
					return errs.New(errs.Usage, "%s/%s epoch %d has no worktree here (claim it with worktree)", in.Wave, in.Cell, in.Epoch)
				}
				var landed *tally.Landing
				if wt != nil && !(in.Worktree || in.Merge != "" || c.DefaultMerge() != "" || s.inCellWorktree(wt)) {
					wt = nil // a done of the cell that does not use its worktree
				}
				if wt != nil {
					if landed, err = c.WorktreeRequest(wt, &req, cmp.Or(in.Merge, c.DefaultMerge())); err != nil {
						return err
					}
				}
				if !in.Next {
					out = &tally.DoneNextResult{}
					out.DoneResult, err = c.Done(req)
				} else {
					var plan *tally.WorktreePlan
					if in.NextWorktree {
						if plan, err = c.PlanWorktree(""); err != nil {
							return err
						}
					}
					o := tally.ClaimOptions{Next: true, NextWave: in.NextWave, TTL: in.TTL, PID: s.opt.PID}
					if out, err = c.DoneNext(ctx, req, o, time.Duration(in.WaitSeconds)*time.Second, nil); err == nil && plan != nil {
						c.NextWorktree(out, plan)
					}
				}
				if err == nil && wt != nil {
					c.FinishWorktree(out.DoneResult, wt, landed)
				}
				return err
			})
			if err == nil {
				s.untrack(req.CellRef, in.Epoch)
				if out.Claim != nil {
					s.track(out.Claim.CellRef, out.Claim.Lease)
				}
			}
			return out, err
		})
	add(s, "run", "Run a command in the work tree under your live lease and record its evidence for done: argv, "+
		"exit code, duration, size and digests of stdout and stderr (tally run). A failing command is the tool error "+
		"COMMAND-FAILED, its evidence still recorded: read exit_code, stdout_tail and stderr_tail in its details.", s.run)
	add(s, "lock", "Lease repository paths, all or none; a pattern you hold is renewed (tally lock).",
		func(_ context.Context, in LockIn) (out *tally.LockResult, err error) {
			if in.WaitSeconds > 0 && in.Epochs != nil { // the schema admits no negative wait
				return nil, errs.New(errs.Usage, "wait_seconds excludes epochs")
			}
			err = s.call(func(c *tally.Client) error {
				if in.Epochs != nil {
					out, err = c.RenewLocks(in.Patterns, in.Epochs, in.TTL, in.Reason)
				} else {
					out, err = c.Lock(in.Patterns, in.TTL, in.Reason, time.Duration(in.WaitSeconds)*time.Second)
				}
				return err
			})
			return out, err
		})
	add(s, "unlock", "Release your path locks, each at its epoch (tally unlock).",
		func(_ context.Context, in UnlockIn) (out *tally.Appended, err error) {
			err = s.call(func(c *tally.Client) error { out, err = c.Unlock(in.Patterns, in.Epochs); return err })
			return out, err
		})
	add(s, "locks", "Live path locks, claimed cells' declared paths and live waits (tally locks).",
		func(_ context.Context, _ struct{}) (out *tally.LocksView, err error) {
			err = s.call(func(c *tally.Client) error { out, err = c.Locks(); return err })
			return out, err
		})
	add(s, "verify", "Replay the ledger and check every entry new since the last verify, or all with full (tally verify).",
		func(_ context.Context, in VerifyIn) (out *ledger.Report, err error) {
			err = s.call(func(c *tally.Client) error { out, err = c.Verify(in.Full); return err })
			return out, err
		})
	add(s, "log", "Ledger entries, newest first (tally log).",
		func(_ context.Context, in LogIn) (out *LogOut, err error) {
			out = &LogOut{}
			err = s.call(func(c *tally.Client) error { out.Entries, err = c.Log(in.N, ledger.LogFilter{}); return err })
			return out, err
		})
}

// inCellWorktree reports whether the server runs in the worktree wt.
func (s *Server) inCellWorktree(wt *tally.Worktree) bool {
	own, err := s.c.WorktreeCell()
	return err == nil && own != nil && own.CellRef == wt.CellRef && own.Epoch == wt.Epoch
}

// inWorkTree resolves a relative path against the work tree (the server's
// working directory is the agent's business).
func (s *Server) inWorkTree(p string) string {
	if wt := s.c.L.Repo.WorkTree; p != "" && wt != "" && !filepath.IsAbs(p) {
		return filepath.Join(wt, p)
	}
	return p
}

// tailMax bounds the output run returns.
const tailMax = 4096

// run is tally run without streaming: the command's stdin is empty, its
// output is digested and its tail returned. Cancelling the call, or its
// timeout, kills the command's process group.
func (s *Server) run(ctx context.Context, in RunIn) (*RunOut, error) {
	if len(in.Argv) == 0 { // the schema admits no negative timeout
		return nil, errs.New(errs.Usage, "give argv, the command to run")
	}
	if in.TimeoutSeconds > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, time.Duration(in.TimeoutSeconds)*time.Second)
		defer cancel()
	}
	var outTail, errTail tail
	child := exec.CommandContext(ctx, in.Argv[0], in.Argv[1:]...)
	child.Dir = s.inWorkTree(".")
	child.Stdout, child.Stderr = &outTail, &errTail
	proctree.KillGroupOnCancel(child)
	child.WaitDelay = 5 * time.Second
	res, err := s.c.Run(in.Wave, in.Cell, in.Epoch, child, s.lend)
	if errs.Is(err, errs.CommandFailed) {
		// The tails are what an agent reads to see why; the CLI streams them.
		return nil, errs.From(err).With("stdout_tail", outTail.String()).With("stderr_tail", errTail.String())
	}
	if err != nil {
		return nil, err
	}
	return &RunOut{Evidence: res.Evidence, StdoutTail: outTail.String(), StderrTail: errTail.String()}, nil
}

// tail keeps the last tailMax bytes written to it.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 2*tailMax {
		t.b = append(t.b[:0], t.b[len(t.b)-tailMax:]...)
	}
	return len(p), nil
}

func (t *tail) String() string {
	return strings.ToValidUTF8(string(t.b[max(0, len(t.b)-tailMax):]), "\uFFFD")
}
