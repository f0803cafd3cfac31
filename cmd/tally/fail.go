package main

import (
	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
)

func (a *app) failCmd() *cobra.Command {
	var epoch int64
	var reason string
	cmd := &cobra.Command{
		Use:   "fail WAVE/CELL --epoch N [--reason T]",
		Short: "mark your claimed cell failed",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			w, c, err := cellArg(argv[0])
			if err != nil {
				return err
			}
			if err := requireFlag(cmd, "epoch"); err != nil {
				return err
			}
			b := lease.FailBody{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: w, Cell: c}, Epoch: epoch}, Reason: reason}
			return a.appendSimple("fail", b, nil)
		},
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch of your lease")
	cmd.Flags().StringVar(&reason, "reason", "", "why it failed")
	return cmd
}
