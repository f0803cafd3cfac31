package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) initCmd() *cobra.Command {
	var origin string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "create the ledger (its genesis entry)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(true)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.Init(origin)
			if err != nil {
				return err
			}
			return a.emit(res, func(w io.Writer) { fmt.Fprintf(w, "initialized %s (origin %s)\n", res.Ref, res.Origin) })
		},
	}
	cmd.Flags().StringVar(&origin, "origin", "", "the log's origin name, used in checkpoints (default tally/<repo>/<random>)")
	return cmd
}
