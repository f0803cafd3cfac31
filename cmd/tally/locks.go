package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"
)

func (a *app) locksCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "locks",
		Short: "live path locks, paths held through claimed cells, and waits",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				v, err := c.Locks()
				if err != nil {
					return err
				}
				return a.emitView(c, v, func(w io.Writer) {
					tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
					for _, l := range v.Locks {
						fmt.Fprintf(tw, "%s\t%s\tepoch %d\tuntil %s\t%s\n", inert(l.Pattern), inert(l.Actor), l.Epoch, l.ExpiresAt, inert(l.Reason))
					}
					for _, h := range v.Cells {
						fmt.Fprintf(tw, "%s\t%s\tepoch %d\tuntil %s\t(%s)\n", inert(h.Pattern), inert(h.Actor), h.Epoch, h.ExpiresAt, h.Source)
					}
					tw.Flush()
					for _, wt := range v.Waits {
						fmt.Fprintf(w, "%s waits for %s (held by %s) until %s\n", inert(wt.Waiter), inert(wt.Pattern), inert(strings.Join(wt.Holders, ", ")), wt.ExpiresAt)
					}
					if len(v.Locks)+len(v.Cells)+len(v.Waits) == 0 {
						fmt.Fprintln(w, "no path is held")
					}
				})
			})
		},
	}
}
