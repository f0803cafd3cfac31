package main

import (
	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

func (a *app) unlockCmd() *cobra.Command {
	var epochs []int64
	cmd := &cobra.Command{
		Use:   "unlock PATHSPEC... --epoch N[,N...]",
		Short: "release your path locks (one epoch for all, or one per pathspec)",
		Long: `unlock releases your locks on the pathspecs, each at its epoch; the epoch is
kept. Pathspecs are relative to the current directory, or to the root with
':/', as for lock. An expired lock may still be unlocked. Refusals: EPOCH-MISMATCH (the
lock moved on: preempted, broken or taken after expiry), ACTOR-MISMATCH,
LEASE-MISSING.`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if err := requireFlag(cmd, "epoch"); err != nil {
				return err
			}
			return a.withClient(true, func(c *tally.Client) error {
				specs, err := a.lockSpecs(argv)
				if err != nil {
					return err
				}
				return a.emitAppended(c.Unlock(specs, epochs))
			})
		},
	}
	cmd.Flags().Int64SliceVar(&epochs, "epoch", nil, "the epoch of your lock(s)")
	return cmd
}
