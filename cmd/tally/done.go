package main

import (
	"cmp"
	"context"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/receipt"
)

func (a *app) doneCmd() *cobra.Command {
	var req receipt.Request
	var next nextFlags
	var merge string
	var nextWorktree bool
	cmd := &cobra.Command{
		Use:   "done [WAVE/CELL --epoch N] [--commit REV] [--base REV] [--merge[=ff|rebase|merge]] [--evidence FILE] [--next [--wave W] [--wait D] [--ttl T]]",
		Short: "finish your cell with a receipt binding it to a commit",
		Long: `done appends a receipt: the cell, your epoch, the commit (default HEAD) and its
tree, the base (default: HEAD when the lease was claimed), the paths changed
from base to commit, and the evidence recorded by tally run. The lease must be
yours and live (a fenced-off holder gets EPOCH-MISMATCH); if the cell declares
paths, every changed path must match them (else RECEIPT-SCOPE). A git note on
the commit under refs/notes/tally points at the receipt. In remote mode the
note is then pushed to the remote's refs/notes/tally (merged with the notes
other clones pushed); if that push fails, done still succeeds, warns, and
the next done or tally sync pushes the pending note.

  --next   then claim the next ready cell, as claim --next [--wave W]
           [--wait D] [--ttl T] would, in this process. On a local ledger
           with a cell ready the receipt and the claim are one append (two
           entries, one move of the ledger ref: a crash leaves both or
           neither). The exit code and errors are the done's: once the
           receipt stands, done exits 0 whatever the claim gave, and
           reports it as "next": the object claim --next prints, with
           "ok": true and the lease, or "ok": false and its error
           (NO-READY-CELL, PLAN-COMPLETE, WAIT-TIMEOUT, ...).

In a cell's worktree (claim --worktree) the cell and epoch are its lease's,
the receipt binds the worktree branch's tip from the commit the worktree
started at, and uncommitted changes there refuse it (WORKTREE-DIRTY).

  --merge[=S]  first land the branch on its target branch (the one checked
           out where it was claimed) by S: ff (fast-forward only), rebase
           (replay the branch on the target, in the worktree) or merge (a
           merge commit, or a fast-forward when one does); --merge alone is
           git config tally.worktree.merge, else merge. With that config
           set, done merges without --merge; --merge=none does not. The
           receipt binds the commit that landed, from the target's tip it
           landed on. A target checked out in a worktree moves there by
           git merge --ff-only, which keeps its uncommitted edits or refuses
           (WORKTREE-DIRTY). A conflict is MERGE-CONFLICT (exit 2) with the
           worktree, branch and lease as they were: merge or rebase the
           target into the branch there, resolve, commit, done again.
  --next --worktree  the next cell gets its worktree too, as claim --next
           --worktree makes it ("next" then carries "worktree").`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if !next.o.Next {
				for _, name := range []string{"wave", "wait", "ttl", "pid", "worktree"} {
					if cmd.Flags().Changed(name) {
						return usageErr("--%s goes with --next", name)
					}
				}
			} else if err := next.check(cmd); err != nil {
				return err
			}
			return a.withLeaseCell(cmd, argv, &req.Epoch, func(c *tally.Client, w, cell string, wt *tally.Worktree) error {
				req.CellRef = lease.CellRef{Wave: w, Cell: cell}
				strategy := c.DefaultMerge()
				if cmd.Flags().Changed("merge") {
					strategy = merge
					if merge == mergeDefault {
						strategy = cmp.Or(c.DefaultMerge(), tally.MergeCommit)
					}
				}
				var landed *tally.Landing
				if wt != nil {
					var err error
					if landed, err = c.WorktreeRequest(wt, &req, strategy); err != nil {
						return err
					}
				} else if cmd.Flags().Changed("merge") {
					return usageErr("--merge lands a cell's worktree: run done in the worktree claim --worktree made")
				}
				if !next.o.Next {
					res, err := c.Done(req)
					if err != nil {
						return err
					}
					if wt != nil {
						c.FinishWorktree(res, wt, landed)
					}
					return a.emit(res, func(w io.Writer) { a.printDone(w, res) })
				}
				var plan *tally.WorktreePlan
				if nextWorktree {
					var err error
					if plan, err = c.PlanWorktree(""); err != nil {
						return err
					}
				}
				res, err := c.DoneNext(context.Background(), req, next.o, next.wait, next.onWait(cmd))
				if err != nil {
					return err
				}
				if wt != nil {
					c.FinishWorktree(res.DoneResult, wt, landed)
				}
				if plan != nil {
					c.NextWorktree(res, plan)
				}
				return a.emit(res, func(w io.Writer) {
					a.printDone(w, res.DoneResult)
					if res.NextErr != nil {
						e := errs.From(res.NextErr)
						fmt.Fprintf(a.stderr, "tally: next: %s: %s\n", e.Code, e.Message)
						return
					}
					printLease(w, res.Claim)
					if nw := res.NextWorktree; nw != nil {
						fmt.Fprintf(w, "worktree: %s\nbranch: %s (from %s at %s)\n", nw.Path, nw.Branch, nw.Target, nw.Base)
					}
				})
			})
		},
	}
	cmd.Flags().Int64Var(&req.Epoch, "epoch", 0, "the epoch of your lease")
	cmd.Flags().StringVar(&req.Commit, "commit", "", "the commit holding the work (default HEAD)")
	cmd.Flags().StringVar(&req.Base, "base", "", "where the work started (default: HEAD when claimed)")
	cmd.Flags().StringVar(&req.EvidenceFile, "evidence", "", "extra evidence `FILE` (JSON)")
	cmd.Flags().StringVar(&merge, "merge", "", "in a cell's worktree, first land its branch on its target: `STRATEGY` ff, rebase or merge (default: git config tally.worktree.merge, else merge)")
	cmd.Flags().Lookup("merge").NoOptDefVal = mergeDefault
	cmd.Flags().BoolVar(&next.o.Next, "next", false, "then claim the next ready cell (exit 0 once the receipt stands; the claim's outcome is \"next\")")
	next.add(cmd, "with --next, the claim's ")
	cmd.Flags().BoolVar(&nextWorktree, "worktree", false, "with --next, also make the next cell's worktree (as claim --worktree)")
	return cmd
}

// printDone renders a receipt: its entry and note on w, its notes push and
// warnings on stderr.
func (a *app) printDone(w io.Writer, res *tally.DoneResult) {
	printAppended(w, &res.Appended)
	r := res.Receipt
	if res.Landed != nil {
		fmt.Fprintf(w, "landed: %s on %s\n", res.Landed.Commit, res.Landed.Onto)
	}
	fmt.Fprintf(w, "receipt: %s/%s epoch %d -> commit %s (note: %s)\n", r.Wave, r.Cell, r.Epoch, r.Commit, res.Note)
	if bp := res.BranchPush; bp != nil && bp.Error == "" {
		fmt.Fprintf(w, "pushed %s to %s as %s\n", bp.Commit, bp.Remote, bp.Ref)
	}
	printNotesPush(w, a.stderr, res.NotesPush)
	for _, warning := range res.Warnings {
		fmt.Fprintf(a.stderr, "tally: warning: %s\n", warning)
	}
}

// printNotesPush reports a notes push (nil: none was made): what reached the
// remote on w, and on warn what is still pending and why.
func printNotesPush(w, warn io.Writer, np *receipt.NotesPush) {
	if np == nil {
		return
	}
	if len(np.Pushed) > 0 {
		fmt.Fprintf(w, "notes pushed to %s for %d commit(s)\n", np.Remote, len(np.Pushed))
	}
	if np.Error != "" {
		pending := ""
		if len(np.Pending) > 0 {
			pending = " for " + strings.Join(np.Pending, ", ")
		}
		fmt.Fprintf(warn, "tally: warning: receipt notes%s not pushed to %s: %s (the next done or tally sync pushes them)\n", pending, np.Remote, np.Error)
	}
}

// mergeDefault is --merge given without a strategy: git config
// tally.worktree.merge, else a merge commit.
const mergeDefault = "default"
