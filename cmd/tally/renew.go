package main

import (
	"github.com/tally-dev/tally"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) renewCmd() *cobra.Command {
	var epoch int64
	var ttl int
	cmd := &cobra.Command{
		Use:   "renew [WAVE/CELL --epoch N] [--ttl DURATION]",
		Short: "heartbeat: extend your lease (not past its max-hold time)",
		Long: `renew refreshes heartbeat_at and expires_at of your live lease. Without --ttl
the lease keeps its current TTL. Refusals: ACTOR-MISMATCH, EPOCH-MISMATCH,
LEASE-EXPIRED, LEASE-MAX-HOLD.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := ttlFlag(cmd, ttl); err != nil {
				return err
			}
			return a.withLeaseCell(cmd, argv, &epoch, func(c *tally.Client, w, cell string, _ *tally.Worktree) error {
				res, err := c.Renew(w, cell, epoch, ttl)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) { printLease(w, res) })
			})
		},
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch of your lease")
	ttlVar(cmd, &ttl, 0, "new time to live: a duration (20m, 1h) or seconds, 30s..24h (default: keep the lease's)")
	return cmd
}
