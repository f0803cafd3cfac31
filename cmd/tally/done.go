package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/receipt"
)

func (a *app) doneCmd() *cobra.Command {
	var req receipt.Request
	cmd := &cobra.Command{
		Use:   "done WAVE/CELL --epoch N [--commit REV] [--base REV] [--evidence FILE]",
		Short: "finish your cell with a receipt binding it to a commit",
		Long: `done appends a receipt: the cell, your epoch, the commit (default HEAD) and its
tree, the base (default: HEAD when the lease was claimed), the paths changed
from base to commit, and the evidence recorded by tally run. The lease must be
yours and live (a fenced-off holder gets EPOCH-MISMATCH); if the cell declares
paths, every changed path must match them (else RECEIPT-SCOPE). A git note on
the commit under refs/notes/tally points at the receipt. In remote mode the
note is then pushed to the remote's refs/notes/tally (merged with the notes
other clones pushed); if that push fails, done still succeeds, warns, and
the next done or tally sync pushes the pending note.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withLeaseCell(cmd, argv[0], func(c *tally.Client, w, cell string) error {
				req.CellRef = lease.CellRef{Wave: w, Cell: cell}
				res, err := c.Done(req)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) {
					printAppended(w, &res.Appended)
					r := res.Receipt
					fmt.Fprintf(w, "receipt: %s/%s epoch %d -> commit %s (note: %s)\n", r.Wave, r.Cell, r.Epoch, r.Commit, res.Note)
					printNotesPush(w, a.stderr, res.NotesPush)
					for _, warning := range res.Warnings {
						fmt.Fprintf(a.stderr, "tally: warning: %s\n", warning)
					}
				})
			})
		},
	}
	cmd.Flags().Int64Var(&req.Epoch, "epoch", 0, "the epoch of your lease")
	cmd.Flags().StringVar(&req.Commit, "commit", "", "the commit holding the work (default HEAD)")
	cmd.Flags().StringVar(&req.Base, "base", "", "where the work started (default: HEAD when claimed)")
	cmd.Flags().StringVar(&req.EvidenceFile, "evidence", "", "extra evidence `FILE` (JSON)")
	return cmd
}

// printNotesPush reports a notes push (nil: none was made): what reached the
// remote on w, and on warn what is still pending and why.
func printNotesPush(w, warn io.Writer, np *receipt.NotesPush) {
	if np == nil {
		return
	}
	if len(np.Pushed) > 0 {
		fmt.Fprintf(w, "notes pushed to %s for %d commit(s)\n", np.Remote, len(np.Pushed))
	}
	if np.Error != "" {
		pending := ""
		if len(np.Pending) > 0 {
			pending = " for " + strings.Join(np.Pending, ", ")
		}
		fmt.Fprintf(warn, "tally: warning: receipt notes%s not pushed to %s: %s (the next done or tally sync pushes them)\n", pending, np.Remote, np.Error)
	}
}
