package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) gcCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "gc",
		Short: "roll the ledger's small packs together now (appends also do this in the background)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			if err := c.L.Repack(); err != nil {
				return err
			}
			return a.emit(nil, func(w io.Writer) { fmt.Fprintln(w, "packed") })
		},
	}
}
