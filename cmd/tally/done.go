package main

import (
	"fmt"
	"io"
	"path/filepath"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
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
the commit under refs/notes/tally points at the receipt.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			w, c, err := cellArg(argv[0])
			if err != nil {
				return err
			}
			if err := requireFlag(cmd, "epoch"); err != nil {
				return err
			}
			req.CellRef = lease.CellRef{Wave: w, Cell: c}
			actor, err := a.actor()
			if err != nil {
				return err
			}
			l, err := a.open()
			if err != nil {
				return err
			}
			defer l.Close()
			ap, err := l.Append(actor, func(s *ledger.Snapshot, _ time.Time) (*ledger.Draft, error) {
				body, err := receipt.Build(l, s, req)
				if err != nil {
					return nil, err
				}
				return &ledger.Draft{Kind: "done", Body: body}, nil
			})
			if err != nil {
				return err
			}
			ref := ap.Result.Effect.(*lease.ReceiptRef)
			receipt.ClearEvidence(l.LocalDir, w, c, req.Epoch)
			commit, _ := gitstore.ParseObjectID(ref.Commit)
			ts, _ := chain.ParseTime(ap.Entry.TS)
			who := gitstore.Ident{Name: actor, Email: actor, When: ts.Unix(), TZ: "+0000"}
			line := receipt.NoteLine(ap.Meta.Origin, ap.Entry.Seq, ap.Hash.String(), ref.Wave+"/"+ref.Cell, ref.Epoch)
			noteErr := receipt.AddNote(l.Repo, filepath.Join(l.LocalDir, "notes.lock"), commit, line, who)
			res := struct {
				appendedResult
				Receipt *lease.ReceiptRef `json:"receipt"`
				Note    string            `json:"note"`
			}{appended(ap), ref, receipt.NotesRef}
			if noteErr != nil {
				// The receipt is in the ledger; the note is a convenience that can be rewritten.
				res.Note = "not written: " + noteErr.Error()
			}
			return a.emit(res, func(w io.Writer) {
				printAppended(w, ap)
				fmt.Fprintf(w, "receipt: %s/%s epoch %d -> commit %s (note: %s)\n", ref.Wave, ref.Cell, ref.Epoch, ref.Commit, res.Note)
			})
		},
	}
	cmd.Flags().Int64Var(&req.Epoch, "epoch", 0, "the epoch of your lease")
	cmd.Flags().StringVar(&req.Commit, "commit", "", "the commit holding the work (default HEAD)")
	cmd.Flags().StringVar(&req.Base, "base", "", "where the work started (default: HEAD when claimed)")
	cmd.Flags().StringVar(&req.EvidenceFile, "evidence", "", "extra evidence `FILE` (JSON)")
	return cmd
}
