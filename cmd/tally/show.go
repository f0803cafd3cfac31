package main

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
)

func (a *app) showCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show [WAVE/CELL]",
		Short: "a cell, its lease and its history",
		Long:  "show prints a cell, its lease and its history; in a cell's worktree (claim --worktree), that cell's by default.",
		Args:  args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				w, cell, _, err := worktreeCellArg(c, argv)
				if err != nil {
					return err
				}
				v, err := c.Show(w, cell)
				if err != nil {
					return err
				}
				return a.emitView(c, v, func(out io.Writer) {
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
						fmt.Fprintf(out, "  #%d %s %-20s ", h.Seq, h.TS, inert(h.Actor))
						paint(out, kindStyle(h.Kind), "%-8s", h.Kind)
						fmt.Fprintf(out, " %s\n", historyText(h.Kind, h.Body))
					}
				})
			})
		},
	}
}

// historyText is the essentials of one entry of a cell's history, on one
// line: what the rules took from its body (the wave's cells for a plan; the
// mode, TTL and holder process for a claim; the epoch, and the reason, TTL or
// commit with its changes and evidence). Ledger text is made inert, line
// feeds included, so no entry can forge a line. A body that does not decode
// as its kind (verify would have refused it) is shown as its JSON, inert.
func historyText(kind chain.Kind, body json.RawMessage) string {
	var parts []string
	var err error
	switch kind {
	case chain.KindPlan:
		var b lease.PlanBody
		if err = json.Unmarshal(body, &b); err == nil {
			parts = append(parts, fmt.Sprintf("wave %s, %d cells", inert(b.Wave), len(b.Cells)))
		}
	case chain.KindClaim:
		var b lease.ClaimBody
		if err = json.Unmarshal(body, &b); err == nil {
			parts = append(parts, "mode "+inert(b.Mode), "ttl "+ttlText(b.TTL))
			if b.PID > 0 {
				parts = append(parts, fmt.Sprintf("pid %d on %s", b.PID, inert(b.Host)))
			} else {
				parts = append(parts, "no process, on "+inert(b.Host))
			}
			if b.Dead != nil {
				parts = append(parts, fmt.Sprintf("holder %s epoch %d gone", inert(b.Dead.Actor), b.Dead.Epoch))
			}
		}
	case chain.KindRenew:
		var b lease.RenewBody
		if err = json.Unmarshal(body, &b); err == nil {
			parts = append(parts, fmt.Sprintf("epoch %d", b.Epoch), "ttl "+ttlText(b.TTL))
		}
	case chain.KindRelease:
		var b lease.EpochBody
		if err = json.Unmarshal(body, &b); err == nil {
			parts = append(parts, fmt.Sprintf("epoch %d", b.Epoch))
		}
	case chain.KindFail:
		var b lease.FailBody
		if err = json.Unmarshal(body, &b); err == nil {
			parts = append(parts, fmt.Sprintf("epoch %d", b.Epoch))
			if b.Reason != "" {
				parts = append(parts, "reason: "+inert(b.Reason))
			}
		}
	case chain.KindDone:
		var b lease.DoneBody
		if err = json.Unmarshal(body, &b); err == nil {
			parts = append(parts, fmt.Sprintf("epoch %d", b.Epoch), fmt.Sprintf("at %.12s", inert(b.Commit)),
				fmt.Sprintf("%d changed", len(b.Changed)), evidenceText(b.Evidence))
		}
	case chain.KindRequeue:
		return "back to pending"
	}
	if err != nil || parts == nil {
		return inert(string(body))
	}
	return strings.Join(parts, ", ")
}

// ttlText is a TTL in seconds as a duration (1800 → 30m0s).
func ttlText(seconds int) string { return (time.Duration(seconds) * time.Second).String() }

// evidenceText counts a receipt's evidence and the commands that failed.
func evidenceText(ev []lease.Evidence) string {
	failed := 0
	for _, e := range ev {
		if e.ExitCode != 0 {
			failed++
		}
	}
	if failed > 0 {
		return fmt.Sprintf("%d evidence (%d failed)", len(ev), failed)
	}
	return fmt.Sprintf("%d evidence", len(ev))
}
