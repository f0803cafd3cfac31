package main

import (
	"context"
	"fmt"
	"io"
	"os"
	"strconv"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/lease"
)

func (a *app) claimCmd() *cobra.Command {
	var f nextFlags
	var worktree string
	o := &f.o
	cmd := &cobra.Command{
		Use:   "claim [WAVE/CELL | --next [--wave W]] [--worktree[=DIR]]",
		Short: "claim a cell: a lease with a TTL at a new epoch",
		Long: `claim takes a lease on a pending cell whose deps are done, at epoch = last
epoch + 1. A cell whose lease expired is reclaimed the same way.

  --next          claim the first ready cell, in one append: pending cells
                  with their deps done first (waves and cells in plan
                  order), then cells whose lease expired
  --steal         take a live lease that is past its max-hold time
  --reclaim-dead  take a live lease whose holder process is gone, seen
                  from the boot and PID namespace its lease was claimed
                  in (local ledgers only: refused through a remote)
  --wait D        on NO-READY-CELL or LEASE-HELD, wait for the ledger to
                  change and try again, for up to D (in remote mode too);
                  then WAIT-TIMEOUT (retryable) with the last refusal's
                  details and its code as "refusal", as lock --wait

Refusals: LEASE-HELD (retryable; reports holder, epoch, expires_at),
LEASE-OWNED (exit 2: you hold the cell already; extend it with renew),
NO-READY-CELL (retryable; "open" cells may still become claimable),
PLAN-COMPLETE (exit 2: every cell is done or failed, "open": 0),
CELL-STATE, STEAL-DENIED, WAVE-MISSING, CELL-MISSING,
DEAD-HOLDER-REMOTE (--reclaim-dead with a remote),
DEAD-HOLDER-UNCHECKED (--reclaim-dead where tally cannot name this
system's process table: a FreeBSD jail, another unix, -tags portable),
LIMIT-EXCEEDED (the cell's paths would pass 4,096 live path holds, or cost
too much to check against them).

  --worktree[=DIR]  also make the cell's worktree: a linked git worktree
                  at DIR (default <repo>.tally/WAVE/CELL beside the
                  repository, or under git config tally.worktree.root) on
                  a new branch (git config tally.worktree.branch, default
                  tally/{wave}/{cell}; -EPOCH is added when a kept one has
                  the name) from the tip of the branch checked out here,
                  which must contain the receipts' commits of the cell's
                  dependencies (else WORKTREE-BASE, exit 2). It prints the
                  path, branch and base. The claim and the worktree stand
                  or fall together: a refused claim makes nothing, and a
                  worktree that cannot be made gives the lease back. In
                  the worktree, done, renew, release, fail, run and show
                  need no WAVE/CELL nor --epoch; done --merge lands the
                  work; tally worktree prune removes it once merged.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if o.Next == (len(argv) == 1) {
				return usageErr("give either WAVE/CELL or --next")
			}
			if err := f.check(cmd); err != nil {
				return err
			}
			if len(argv) == 1 {
				var err error
				if o.Wave, o.Cell, err = cellArg(argv[0]); err != nil {
					return err
				}
			}
			return a.withClient(true, func(c *tally.Client) error {
				if cmd.Flags().Changed("worktree") {
					if worktree == worktreeDefault {
						worktree = ""
					}
					res, err := c.ClaimWorktree(context.Background(), *o, f.wait, f.onWait(cmd), worktree)
					if err != nil {
						return err
					}
					return a.emit(res, func(w io.Writer) {
						printLease(w, res.LeaseResult)
						wt := res.Worktree
						fmt.Fprintf(w, "worktree: %s\nbranch: %s (from %s at %s)\n", wt.Path, wt.Branch, wt.Target, wt.Base)
					})
				}
				res, err := c.ClaimWait(context.Background(), *o, f.wait, f.onWait(cmd))
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) { printLease(w, res) })
			})
		},
	}
	f.add(cmd, "")
	cmd.Flags().BoolVar(&o.Next, "next", false, "claim the first ready cell")
	cmd.Flags().BoolVar(&o.Steal, "steal", false, "take a lease held past its max-hold time")
	cmd.Flags().StringVar(&worktree, "worktree", "", "also make the cell's worktree, at `DIR` (default: <repo>.tally/WAVE/CELL)")
	cmd.Flags().Lookup("worktree").NoOptDefVal = worktreeDefault
	cmd.Flags().BoolVar(&o.ReclaimDead, "reclaim-dead", false, "take a lease whose holder process, in this boot and PID namespace, is gone (not through a remote)")
	return cmd
}

// nextFlags are the flags of a claim that claim and done --next share:
// --ttl, --pid, --wave (with --next) and --wait.
type nextFlags struct {
	o    tally.ClaimOptions
	wait time.Duration
}

// add registers the flags on cmd; their help names the claim as what
// (empty: the command's own).
func (f *nextFlags) add(cmd *cobra.Command, what string) {
	ttlVar(cmd, &f.o.TTL, lease.TTLDefault, what+"lease time to live: a duration (20m, 1h) or seconds, 30s..24h")
	cmd.Flags().IntVar(&f.o.PID, "pid", 0, what+"holder process id recorded for dead-holder takeover (default: $TALLY_PID, else none: the lease then ends only by expiry or steal)")
	cmd.Flags().StringVar(&f.o.NextWave, "wave", "", "with --next, only consider `WAVE`")
	cmd.Flags().DurationVar(&f.wait, "wait", 0, what+"on NO-READY-CELL or LEASE-HELD, keep trying for up to `DURATION` (e.g. 10m)")
}

// check refuses what the flags cannot mean and fills the holder process in
// from $TALLY_PID when --pid is not given.
func (f *nextFlags) check(cmd *cobra.Command) error {
	if f.o.NextWave != "" && !f.o.Next {
		return usageErr("--wave goes with --next")
	}
	if err := ttlFlag(cmd, f.o.TTL); err != nil {
		return err
	}
	if f.wait < 0 {
		return usageErr("--wait must not be negative")
	}
	if !cmd.Flags().Changed("pid") {
		// tally's parent is often a shell or make that exits at once,
		// which would let anyone reclaim the live lease: the holder
		// process is only what the agent's harness names.
		var err error
		if f.o.PID, err = pidFromEnv(); err != nil {
			return err
		}
	}
	return nil
}

// onWait says on stderr that the claim waits, and for how long at most.
func (f *nextFlags) onWait(cmd *cobra.Command) func(error) {
	return func(refusal error) {
		fmt.Fprintf(newHumanOut(cmd.ErrOrStderr()), "tally: waiting up to %v: %v\n", f.wait, refusal)
	}
}

// pidFromEnv is the holder process named by $TALLY_PID (an agent harness
// sets it to the agent's pid), or 0 for none: such a lease cannot be
// reclaimed as dead, only by expiry or steal.
func pidFromEnv() (int, error) {
	v := os.Getenv("TALLY_PID")
	if v == "" {
		return 0, nil
	}
	pid, err := strconv.Atoi(v)
	if err != nil || pid <= 0 {
		return 0, usageErr("TALLY_PID=%q is not a process id", v)
	}
	return pid, nil
}

// worktreeDefault is --worktree given without a directory: the default place.
const worktreeDefault = "default"
