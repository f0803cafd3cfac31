package main

import (
	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

func (a *app) requeueCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "requeue WAVE/CELL",
		Short: "put a failed cell back to pending",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			w, cell, err := cellArg(argv[0])
			if err != nil {
				return err
			}
			return a.withClient(true, func(c *tally.Client) error {
				return a.emitAppended(c.Requeue(w, cell))
			})
		},
	}
}
