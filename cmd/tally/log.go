package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) logCmd() *cobra.Command {
	var n int
	cmd := &cobra.Command{
		Use:   "log",
		Short: "list ledger entries, newest first",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			entries, err := c.Log(n)
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"entries": entries}, func(w io.Writer) {
				for _, e := range entries {
					paint(w, dim, "%6d", e.Seq)
					fmt.Fprintf(w, "  %s  %-20s ", e.TS, inert(e.Actor))
					paint(w, kindStyle(e.Kind), "%-8s", e.Kind)
					fmt.Fprintf(w, " %s\n", inert(e.Summary))
				}
			})
		},
	}
	cmd.Flags().IntVarP(&n, "max-count", "n", 0, "show at most `N` entries (0: all)")
	return cmd
}
