package main

import (
	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

func (a *app) failCmd() *cobra.Command {
	var epoch int64
	var reason string
	cmd := &cobra.Command{
		Use:   "fail [WAVE/CELL --epoch N] [--reason T]",
		Short: "mark your claimed cell failed",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withLeaseCell(cmd, argv, &epoch, func(c *tally.Client, w, cell string, _ *tally.Worktree) error {
				return a.emitAppended(c.Fail(w, cell, epoch, reason))
			})
		},
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch of your lease")
	cmd.Flags().StringVar(&reason, "reason", "", "why it failed")
	return cmd
}
