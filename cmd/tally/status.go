package main

import (
	"fmt"
	"io"
	"sort"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
)

// cellStatus is one cell in status output.
type cellStatus struct {
	Cell        string `json:"cell"`
	State       string `json:"state"`
	Epoch       int64  `json:"epoch"`
	Holder      string `json:"holder,omitempty"`
	ExpiresAt   string `json:"expires_at,omitempty"`
	SecondsLeft *int64 `json:"seconds_left,omitempty"`
	Ready       bool   `json:"ready"`
}

type waveStatus struct {
	Wave   string         `json:"wave"`
	Counts map[string]int `json:"counts"`
	Cells  []cellStatus   `json:"cells"`
}

func (a *app) statusCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "status [WAVE]",
		Short: "cells by state, holders and time left (expiring soonest first)",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			l, err := a.open()
			if err != nil {
				return err
			}
			defer l.Close()
			s, err := l.Head()
			if err != nil {
				return err
			}
			now := l.Now()
			waves := argv
			if len(waves) == 0 {
				p, err := lease.ReadPlan(s)
				if err != nil {
					return err
				}
				waves = p.Waves
			}
			var out []waveStatus
			for _, w := range waves {
				wv, err := lease.ReadWave(s, w)
				if err != nil {
					return err
				}
				cells, err := lease.Cells(s, w)
				if err != nil {
					return err
				}
				ready, err := lease.Ready(s, w, now, 0)
				if err != nil {
					return err
				}
				isReady := map[string]bool{}
				for _, r := range ready {
					isReady[r.Cell] = true
				}
				ws := waveStatus{Wave: w, Counts: wv.Counts}
				for _, c := range cells {
					cs := cellStatus{Cell: c.ID, State: c.State, Epoch: c.Epoch, Ready: isReady[c.ID]}
					if c.Lease != nil {
						cs.Holder, cs.ExpiresAt = c.Lease.Actor, c.Lease.ExpiresAt
						if t, err := chain.ParseTime(c.Lease.ExpiresAt); err == nil {
							left := int64(t.Sub(now) / time.Second)
							cs.SecondsLeft = &left
						}
					}
					ws.Cells = append(ws.Cells, cs)
				}
				// Claimed cells first, the soonest to expire at the top.
				sort.SliceStable(ws.Cells, func(i, j int) bool {
					ci, cj := ws.Cells[i], ws.Cells[j]
					if (ci.Holder != "") != (cj.Holder != "") {
						return ci.Holder != ""
					}
					return ci.ExpiresAt < cj.ExpiresAt
				})
				out = append(out, ws)
			}
			return a.emit(map[string]any{"now": chain.FormatTime(now), "waves": out}, func(w io.Writer) {
				for _, ws := range out {
					fmt.Fprintf(w, "wave %s: %d pending, %d claimed, %d done, %d failed\n", ws.Wave,
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
						fmt.Fprintf(tw, "  %s\t%s\tepoch %d\t%s\t%s\n", c.Cell, state, c.Epoch, c.Holder, left)
					}
					tw.Flush()
				}
			})
		},
	}
}
