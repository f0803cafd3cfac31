package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/ledger"
)

func (a *app) logCmd() *cobra.Command {
	var n int
	var f ledger.LogFilter
	var since string
	cmd := &cobra.Command{
		Use:   "log [-n N] [--actor A] [--kind K] [--cell W/C] [--since T]",
		Short: "list ledger entries, newest first",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if f.Cell != "" {
				if _, _, err := cellArg(f.Cell); err != nil {
					return err
				}
			}
			if since != "" {
				t, err := time.Parse(time.RFC3339Nano, since)
				if err != nil {
					return usageErr("--since must be RFC 3339 (2026-12-01T09:00:00Z): %v", err)
				}
				f.Since = t
			}
			return a.withClient(false, func(c *tally.Client) error {
				entries, err := c.Log(n, f)
				if err != nil {
					return err
				}
				return a.emitView(c, map[string]any{"entries": entries}, func(w io.Writer) {
					for _, e := range entries {
						paint(w, dim, "%6d", e.Seq)
						fmt.Fprintf(w, "  %s  %-20s ", e.TS, inert(e.Actor))
						paint(w, kindStyle(e.Kind), "%-8s", e.Kind)
						fmt.Fprintf(w, " %s\n", inert(e.Summary))
					}
				})
			})
		},
	}
	cmd.Flags().IntVarP(&n, "max-count", "n", 0, "show at most `N` entries (0: all)")
	cmd.Flags().StringVar(&f.Actor, "actor", "", "only entries by actor `A` (here --actor filters: log appends nothing)")
	cmd.Flags().StringVar((*string)(&f.Kind), "kind", "", "only entries of kind `K` (claim, done, lock, ...)")
	cmd.Flags().StringVar(&f.Cell, "cell", "", "only entries about cell `W/C`")
	cmd.Flags().StringVar(&since, "since", "", "only entries dated at or after `T` (RFC 3339)")
	return cmd
}
