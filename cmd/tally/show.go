package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show WAVE/CELL",
		Short: "a cell, its lease and its history",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			w, cell, err := cellArg(argv[0])
			if err != nil {
				return err
			}
			return a.withClient(false, func(c *tally.Client) error {
				v, err := c.Show(w, cell)
				if err != nil {
					return err
				}
				return a.emit(v, func(out io.Writer) {
					cl := v.Cell
					paint(out, bold, "%s/%s", cl.Wave, cl.ID)
					fmt.Fprintf(out, "  %s  epoch %d", cl.State, cl.Epoch)
					if cl.Title != "" {
						fmt.Fprintf(out, "  %q", cl.Title)
					}
					fmt.Fprintln(out)
					if len(cl.Deps) > 0 {
						fmt.Fprintf(out, "deps: %v\n", cl.Deps)
					}
					if len(cl.Paths) > 0 {
						fmt.Fprintf(out, "paths: %v\n", cl.Paths)
					}
					if l := cl.Lease; l != nil {
						fmt.Fprintf(out, "lease: %s (pid %d on %s) epoch %d, acquired %s, heartbeat %s, expires %s, max hold %s\n",
							inert(l.Actor), l.PID, inert(l.Host), l.Epoch, l.AcquiredAt, l.HeartbeatAt, l.ExpiresAt, l.MaxHoldUntil)
					}
					if cl.Reason != "" {
						paint(out, red, "failed")
						fmt.Fprintf(out, ": %s\n", inert(cl.Reason))
					}
					for _, h := range v.History {
						fmt.Fprintf(out, "  #%d %s ", h.Seq, h.TS)
						paint(out, kindStyle(h.Kind), "%-8s", h.Kind)
						fmt.Fprintf(out, " %s %s\n", inert(h.Actor), h.Body)
					}
				})
			})
		},
	}
}
