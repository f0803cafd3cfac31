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
			l, err := a.open()
			if err != nil {
				return err
			}
			defer l.Close()
			if err := l.Repack(); err != nil {
				return err
			}
			return a.emit(nil, func(w io.Writer) { fmt.Fprintln(w, "packed") })
		},
	}
}
