package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

func (a *app) claimCmd() *cobra.Command {
	var (
		ttl                      int
		pid                      int
		next, steal, reclaimDead bool
		wave                     string
	)
	cmd := &cobra.Command{
		Use:   "claim [WAVE/CELL | --next [--wave W]]",
		Short: "claim a cell: a lease with a TTL at a new epoch",
		Long: `claim takes a lease on a pending cell whose deps are done, at epoch = last
epoch + 1. A cell whose lease expired is reclaimed the same way.

  --next          claim the first ready cell (plan order), in one append
  --steal         take a live lease that is past its max-hold time
  --reclaim-dead  take a live lease whose holder process (same host) is gone

Refusals: LEASE-HELD (retryable; reports holder, epoch, expires_at),
CELL-STATE, STEAL-DENIED, WAVE-MISSING, CELL-MISSING, NO-READY-CELL.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if next == (len(argv) == 1) {
				return errs.New("USAGE", "give either WAVE/CELL or --next")
			}
			if steal && reclaimDead {
				return errs.New("USAGE", "--steal and --reclaim-dead exclude each other")
			}
			var target lease.CellRef
			if len(argv) == 1 {
				w, c, err := cellArg(argv[0])
				if err != nil {
					return err
				}
				target = lease.CellRef{Wave: w, Cell: c}
			}
			if !cmd.Flags().Changed("pid") {
				pid = os.Getppid() // the agent that ran tally
			}
			host, err := os.Hostname()
			if err != nil {
				return err
			}
			actor, err := a.actor()
			if err != nil {
				return err
			}
			l, err := a.open()
			if err != nil {
				return err
			}
			defer l.Close()
			base := ""
			if head, err := l.Repo.Head(); err == nil {
				base = head.String()
			}
			mode := lease.ModeClaim
			switch {
			case steal:
				mode = lease.ModeSteal
			case reclaimDead:
				mode = lease.ModeReclaimDead
			}
			ap, err := l.Append(actor, func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
				b := lease.ClaimBody{CellRef: target, TTL: ttl, PID: pid, Host: host, Base: base, Mode: mode, Next: next}
				if next {
					c, err := lease.Next(s, wave, now)
					if err != nil {
						return nil, err
					}
					if c == nil {
						return nil, errs.New("NO-READY-CELL", "no cell is claimable now")
					}
					b.CellRef = lease.CellRef{Wave: c.Wave, Cell: c.Cell}
				}
				if mode == lease.ModeReclaimDead {
					b.Dead = deadHolderEvidence(s, b)
				}
				return &ledger.Draft{Kind: "claim", Body: b}, nil
			})
			if err != nil {
				return err
			}
			g := ap.Result.Effect.(*lease.Granted)
			var body lease.ClaimBody
			if err := json.Unmarshal(ap.Entry.Body, &body); err != nil {
				return err
			}
			res := struct {
				appendedResult
				lease.CellRef
				*lease.Granted
			}{appended(ap), body.CellRef, g}
			return a.emit(res, func(w io.Writer) {
				printAppended(w, ap)
				fmt.Fprintf(w, "lease: epoch %d, expires %s, max hold %s\n", g.Lease.Epoch, g.Lease.ExpiresAt, g.Lease.MaxHoldUntil)
			})
		},
	}
	cmd.Flags().IntVar(&ttl, "ttl", lease.TTLDefault, "lease time to live in `SECONDS` (30..86400)")
	cmd.Flags().IntVar(&pid, "pid", 0, "holder process id recorded for dead-holder takeover (default: tally's parent)")
	cmd.Flags().BoolVar(&next, "next", false, "claim the first ready cell")
	cmd.Flags().StringVar(&wave, "wave", "", "with --next, only consider `WAVE`")
	cmd.Flags().BoolVar(&steal, "steal", false, "take a lease held past its max-hold time")
	cmd.Flags().BoolVar(&reclaimDead, "reclaim-dead", false, "take a lease whose holder process on this host is gone")
	return cmd
}

// deadHolderEvidence checks, on this host, whether the current holder of the
// cell is still running. It returns evidence only when it is not; the rules
// accept a reclaim-dead claim only with that evidence.
func deadHolderEvidence(s *ledger.Snapshot, b lease.ClaimBody) *lease.DeadPeer {
	c, err := lease.ReadCell(s, b.Wave, b.Cell)
	if err != nil || c.Lease == nil || c.Lease.Host != b.Host || processAlive(c.Lease.PID) {
		return nil
	}
	l := c.Lease
	return &lease.DeadPeer{Actor: l.Actor, Epoch: l.Epoch, Host: l.Host, PID: l.PID, Alive: false}
}

// processAlive reports whether pid names a running process on this host. A
// process we may not signal (EPERM) is alive; a zombie (exited, not yet
// reaped by its parent) is not.
func processAlive(pid int) bool {
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no procfs: trust the signal probe
	}
	// The state follows the parenthesized command name, which may contain spaces.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
