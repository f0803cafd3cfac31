package main

import (
	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

func (a *app) noteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "note TEXT",
		Short: "append an annotation entry",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withClient(true, func(c *tally.Client) error {
				return a.emitAppended(c.Note(argv[0]))
			})
		},
	}
}
