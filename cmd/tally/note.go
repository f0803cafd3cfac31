package main

import "github.com/spf13/cobra"

func (a *app) noteCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "note TEXT",
		Short: "append an annotation entry",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			c, err := a.client(true)
			if err != nil {
				return err
			}
			defer c.Close()
			return a.emitAppended(c.Note(argv[0]))
		},
	}
}
