package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
)

func (a *app) statusCmd() *cobra.Command {
	var waveFlag string
	cmd := &cobra.Command{
		Use:   "status [WAVE | --wave WAVE]",
		Short: "cells by state, holders and time left (expiring soonest first), and the cells' worktrees",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			wave, err := waveArg(argv, waveFlag)
			if err != nil {
				return err
			}
			return a.withClient(false, func(c *tally.Client) error {
				waves, now, err := c.Status(wave)
				if err != nil {
					return err
				}
				trees, err := c.Worktrees()
				if err != nil {
					return err
				}
				result := map[string]any{"now": chain.FormatTime(now), "waves": waves, "worktrees": trees}
				if c.Remote() != "" {
					result["claims"] = c.ClaimPath()
				}
				return a.emitView(c, result, func(w io.Writer) {
					defer printWorktreesTotal(w, trees)
					for _, ws := range waves {
						paint(w, bold, "wave %s", ws.Wave)
						fmt.Fprintf(w, ": %d pending, %d claimed, %d done, %d failed\n",
							ws.Counts[lease.Pending], ws.Counts[lease.Claimed], ws.Counts[lease.Done], ws.Counts[lease.Failed])
						tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
						for _, c := range ws.Cells {
							left := ""
							if c.SecondsLeft != nil {
								left = (time.Duration(*c.SecondsLeft) * time.Second).String()
								if *c.SecondsLeft < 0 {
									left = "expired"
								}
							}
							state := c.State
							if c.Ready && c.State == lease.Pending {
								state += " (ready)"
							}
							fmt.Fprintf(tw, "  %s\t%s\tepoch %d\t%s\t%s\n", c.Cell, state, c.Epoch, inert(c.Holder), left)
						}
						tw.Flush()
					}
					if c.Remote() != "" {
						claimPathLine(w, c)
					}
				})
			})
		},
	}
	cmd.Flags().StringVar(&waveFlag, "wave", "", "only this `WAVE` (the same as giving it as the argument)")
	return cmd
}
