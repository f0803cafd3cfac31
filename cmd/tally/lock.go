package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

func (a *app) lockCmd() *cobra.Command {
	var (
		ttl    int
		reason string
		wait   time.Duration
		epochs []int64
	)
	cmd := &cobra.Command{
		Use:   "lock PATHSPEC... [--ttl DURATION] [--reason T] [--wait DURATION | --epoch N,...]",
		Short: "lease repository paths: a lock per pattern, at a new epoch",
		Long: `lock takes a lease on each pathspec (a glob; quote it from the shell:
'src/**'), all or none. As in git, a pathspec is relative to the current
directory (from src/, 'api/**' is src/api/**; '../docs' climbs) and one
starting with ':/' to the repository root (':/' alone is the whole tree).
Without --ttl a pattern you hold live keeps its TTL; a new one gets 30m. Two patterns conflict when some path
matches both (see package pathspec). Your own locks and cells never conflict
with yours; a pattern you hold live is renewed at its epoch.

A conflicting lock of an actor whose role has a lower priority is preempted:
its epoch moves on, so its holder's unlock and renew fail with EPOCH-MISMATCH.
Any other conflict (equal or higher priority, or a claimed cell's declared
paths, which locks never preempt) is LEASE-HELD (retryable; reports holder,
epoch, expires_at, pattern, requested and a witness path matching both).
LIMIT-EXCEEDED (exit 2, naming the limit): more than 32 pathspecs, one longer
than 1,024 bytes, more than 4,096 live path holds, or a check that would cost
more than its budget (docs/FORMAT.md §5).

  --wait D     on LEASE-HELD record a wait and retry until granted, or until D
               has passed: WAIT-TIMEOUT (exit 1)
  --epoch N    only renew: each pattern must be your live lock at epoch N
               (one epoch for all, or one per pathspec in order)`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := ttlFlag(cmd, ttl); err != nil {
				return err
			}
			if wait < 0 {
				return usageErr("--wait must not be negative")
			}
			if cmd.Flags().Changed("epoch") && wait > 0 {
				return usageErr("--epoch renews; it does not wait")
			}
			return a.withClient(true, func(c *tally.Client) error {
				var err error
				if argv, err = a.lockSpecs(argv); err != nil {
					return err
				}
				var res *tally.LockResult
				if cmd.Flags().Changed("epoch") {
					res, err = c.RenewLocks(argv, epochs, ttl, reason)
				} else {
					res, err = c.Lock(argv, ttl, reason, wait)
				}
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) {
					printAppended(w, &res.Appended)
					for _, l := range res.Locks {
						fmt.Fprintf(w, "lock: %s epoch %d, expires %s\n", l.Pattern, l.Epoch, l.ExpiresAt)
					}
					for _, p := range res.Preempted {
						fmt.Fprintf(w, "preempted: %s epoch %d on %s\n", p.Actor, p.Epoch, p.Pattern)
					}
				})
			})
		},
	}
	ttlVar(cmd, &ttl, 0, "lock time to live: a duration (15m, 1h) or seconds, 30s..24h (default: a relocked pattern keeps its TTL, a new one 30m)")
	cmd.Flags().StringVar(&reason, "reason", "", "why, for the others (`TEXT`)")
	cmd.Flags().DurationVar(&wait, "wait", 0, "on LEASE-HELD, wait up to `DURATION` (e.g. 5m)")
	cmd.Flags().Int64SliceVar(&epochs, "epoch", nil, "renew only, at `N` (one, or one per pathspec)")
	return cmd
}
