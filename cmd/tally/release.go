package main

import (
	"github.com/spf13/cobra"
	"github.com/tally-dev/tally"
)

func (a *app) releaseCmd() *cobra.Command {
	var epoch int64
	cmd := &cobra.Command{
		Use:   "release [WAVE/CELL --epoch N]",
		Short: "give a cell back: pending again, epoch kept",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withLeaseCell(cmd, argv, &epoch, func(c *tally.Client, w, cell string, _ *tally.Worktree) error {
				return a.emitAppended(c.Release(w, cell, epoch))
			})
		},
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch of your lease")
	return cmd
}

// ttlFlag refuses a --ttl given outside the rules' range (the facade reads
// 0 as "default", so 0 must not slip through as a value).
// requireFlag refuses a command whose required flag was not given.
func requireFlag(cmd *cobra.Command, name string) error {
	if !cmd.Flags().Changed(name) {
		return usageErr("--%s is required", name)
	}
	return nil
}
