package main

import (
	"encoding/json"
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
)

// historyItem is one entry in a cell's history.
type historyItem struct {
	Seq   uint64          `json:"seq"`
	TS    string          `json:"ts"`
	Actor string          `json:"actor"`
	Kind  string          `json:"kind"`
	Body  json.RawMessage `json:"body"`
}

func (a *app) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show WAVE/CELL",
		Short: "a cell, its lease and its history",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			w, c, err := cellArg(argv[0])
			if err != nil {
				return err
			}
			l, err := a.open()
			if err != nil {
				return err
			}
			defer l.Close()
			s, err := l.Head()
			if err != nil {
				return err
			}
			cell, err := lease.ReadCell(s, w, c)
			if err != nil {
				return err
			}
			var hist []historyItem
			for _, seq := range cell.History {
				e, _, _, err := s.Entry(seq)
				if err != nil {
					return err
				}
				hist = append(hist, historyItem{Seq: e.Seq, TS: e.TS, Actor: e.Actor, Kind: e.Kind, Body: e.Body})
			}
			return a.emit(map[string]any{"cell": cell, "history": hist}, func(out io.Writer) {
				fmt.Fprintf(out, "%s/%s  %s  epoch %d", w, c, cell.State, cell.Epoch)
				if cell.Title != "" {
					fmt.Fprintf(out, "  %q", cell.Title)
				}
				fmt.Fprintln(out)
				if len(cell.Deps) > 0 {
					fmt.Fprintf(out, "deps: %v\n", cell.Deps)
				}
				if len(cell.Paths) > 0 {
					fmt.Fprintf(out, "paths: %v\n", cell.Paths)
				}
				if l := cell.Lease; l != nil {
					fmt.Fprintf(out, "lease: %s (pid %d on %s) epoch %d, acquired %s, heartbeat %s, expires %s, max hold %s\n",
						l.Actor, l.PID, l.Host, l.Epoch, l.AcquiredAt, l.HeartbeatAt, l.ExpiresAt, l.MaxHoldUntil)
				}
				if cell.Reason != "" {
					fmt.Fprintf(out, "failed: %s\n", cell.Reason)
				}
				for _, h := range hist {
					fmt.Fprintf(out, "  #%d %s %-10s %s %s\n", h.Seq, h.TS, h.Kind, h.Actor, h.Body)
				}
			})
		},
	}
}
