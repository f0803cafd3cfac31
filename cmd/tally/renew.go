package main

import (
	"fmt"
	"io"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

func (a *app) renewCmd() *cobra.Command {
	var epoch int64
	var ttl int
	cmd := &cobra.Command{
		Use:   "renew WAVE/CELL --epoch N [--ttl S]",
		Short: "heartbeat: extend your lease (not past its max-hold time)",
		Long: `renew refreshes heartbeat_at and expires_at of your live lease. Without --ttl
the lease keeps its current TTL. Refusals: ACTOR-MISMATCH, EPOCH-MISMATCH,
LEASE-EXPIRED, LEASE-MAX-HOLD.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			w, c, err := cellArg(argv[0])
			if err != nil {
				return err
			}
			if err := requireFlag(cmd, "epoch"); err != nil {
				return err
			}
			keepTTL := !cmd.Flags().Changed("ttl")
			return a.appendLease(func(s *ledger.Snapshot, _ time.Time) (*ledger.Draft, error) {
				b := lease.RenewBody{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: w, Cell: c}, Epoch: epoch}, TTL: ttl}
				if keepTTL {
					if cell, err := lease.ReadCell(s, w, c); err == nil && cell.Lease != nil {
						b.TTL = cell.Lease.TTLSeconds
					}
				}
				return &ledger.Draft{Kind: "renew", Body: b}, nil
			}, func(w io.Writer, g *lease.Granted) {
				fmt.Fprintf(w, "lease: epoch %d, expires %s, max hold %s\n", g.Lease.Epoch, g.Lease.ExpiresAt, g.Lease.MaxHoldUntil)
			})
		},
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch of your lease")
	cmd.Flags().IntVar(&ttl, "ttl", lease.TTLDefault, "new time to live in `SECONDS` (30..86400)")
	return cmd
}

// appendLease appends an entry built on the tip and reports it, with the
// granted lease when the rules return one.
func (a *app) appendLease(build ledger.BuildFunc, text func(io.Writer, *lease.Granted)) error {
	actor, err := a.actor()
	if err != nil {
		return err
	}
	l, err := a.open()
	if err != nil {
		return err
	}
	defer l.Close()
	ap, err := l.Append(actor, build)
	if err != nil {
		return err
	}
	g, _ := ap.Result.Effect.(*lease.Granted)
	res := struct {
		appendedResult
		*lease.Granted
	}{appended(ap), g}
	return a.emit(res, func(w io.Writer) {
		printAppended(w, ap)
		if g != nil && text != nil {
			text(w, g)
		}
	})
}
