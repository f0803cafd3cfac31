package main

import (
	"encoding/json"
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/receipt"
)

func (a *app) receiptCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "receipt",
		Short: "show, verify and export the receipts of a commit; repair missing notes",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usageErr("receipt needs a subcommand: show, verify, export or repair")
		},
	}
	cmd.AddCommand(a.receiptShowCmd(), a.receiptVerifyCmd(), a.receiptExportCmd(), a.receiptRepairCmd())
	return cmd
}

func (a *app) receiptRepairCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "repair",
		Short: "write the git note of every receipt whose note is missing",
		Long: `repair writes, for every receipt in the ledger, the line done puts in the
receipted commit's git note (refs/notes/tally) when the note lacks it — as
after a remote-mode done killed between its append and its note (a local
done killed between its two ref moves has its note finished by the next
writer) — in one notes commit, under the writer lock. In remote mode it reads the remote's ledger and then
pushes the notes the remote lacks, as done does. It is idempotent: run again,
it writes nothing.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			res, err := c.ReceiptRepair()
			if err != nil {
				return err
			}
			return a.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "%d missing receipt note line(s) written\n", len(res.Written))
				for _, n := range res.Written {
					fmt.Fprintf(w, "  %s: %s\n", n.Commit, n.Line)
				}
				printNotesPush(w, a.stderr, res.NotesPush)
			})
		},
	}
}

func (a *app) receiptShowCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "show REV",
		Short: "the receipts of a commit (or of other commits with its tree) and their done entries",
		Long: `show finds the receipts of the commit REV names in the ledger's receipts index
and prints their done entries: cell, actor, epoch, commit, tree, base, changed
paths, evidence, entry seq, hash and time. If the commit has none, it reports
the receipts of other commits with the same tree (rebased or squashed work).
No receipt at all is RECEIPT-MISSING. show reads; receipt verify checks.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				res, err := c.ReceiptShow(argv[0])
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) {
					printMatch(w, res.Commit, res.Tree, res.Match, res.Receipts)
					for _, r := range res.Receipts {
						printReceipt(w, &r)
					}
				})
			})
		},
	}
}

func (a *app) receiptVerifyCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "verify REV",
		Short: "check that a commit's receipts hold: in the verified ledger, at a live epoch, in scope",
		Long: `verify first verifies the ledger (incrementally, like tally verify), then checks
each receipt of the commit REV names: its done entry matches its hash and is
proved included under the verified Merkle root; it names this commit and its
tree; the receipts index agrees; the epoch was live (the verified replay of the
lease rules admits a done only at the live epoch) and the cell records the
receipt; the paths changed from base to commit, recomputed from the
repository, are the recorded ones and within the cell's paths; and the
commit's git note (refs/notes/tally) names no other entry. A missing note is a
warning. A commit without receipts whose tree is receipted (rebased or squashed
work) verifies with match "tree". Exit 0 valid, 2 RECEIPT-MISSING, 3
RECEIPT-INVALID or the ledger's own integrity code.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				res, err := c.ReceiptVerify(argv[0])
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) {
					rs := make([]receipt.Receipt, len(res.Receipts))
					for i, r := range res.Receipts {
						rs[i] = r.Receipt
					}
					fmt.Fprint(w, "ok: ")
					printMatch(w, res.Commit, res.Tree, res.Match, rs)
					lg := res.Ledger
					for _, r := range res.Receipts {
						ck := r.Checks
						fmt.Fprintf(w, "#%d %s/%s epoch %d by %s at %s: commit %s\n", r.Seq, r.Wave, r.Cell, r.Epoch, r.Actor, r.TS, r.DoneBody.Commit)
						fmt.Fprintf(w, "  entry %s: hash ok, included in %s (%d entries, root %.12s; proof of %d hashes)\n",
							r.Hash, lg.Ref, lg.Size, lg.Root, len(r.Proof))
						fmt.Fprintf(w, "  done entry for this commit and tree, index agrees; epoch live (rules replayed by verify); cell records it\n")
						fmt.Fprintf(w, "  changed: %d paths, as recomputed from %s, within scope; note: %s\n",
							len(r.Changed), orRoot(r.Base), map[bool]string{true: "ok", false: "missing"}[ck.Note])
					}
					for _, m := range res.Warnings {
						fmt.Fprintf(w, "warning: %s\n", m)
					}
				})
			})
		},
	}
}

func (a *app) receiptExportCmd() *cobra.Command {
	var format, cell string
	cmd := &cobra.Command{
		Use:   "export REV [--format in-toto] [--cell WAVE/CELL]",
		Short: "an in-toto statement of a verified receipt",
		Long: `export verifies the receipts of the commit REV names like receipt verify (and
fails as it does), then prints an in-toto Statement v1 with predicate type
https://tally.dev/receipt/v1: the subjects are the receipted commit
(digest gitCommit) and its tree (gitTree); the predicate holds the cell,
actor, epoch, time, base, changed paths, evidence, and where the done entry is
in the ledger (origin, ref, seq, entry hash, size and root of the verified
head, inclusion proof). A commit with several receipts needs --cell.
With --json the statement is printed as {"ok":true,"statement":{...}}.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if format != "in-toto" {
				return usageErr("--format must be in-toto, not %q", format)
			}
			return a.withClient(false, func(c *tally.Client) error {
				st, err := c.ReceiptExport(argv[0], cell)
				if err != nil {
					return err
				}
				if a.jsonOut {
					return a.emit(map[string]any{"statement": st}, nil)
				}
				enc := json.NewEncoder(a.stdout)
				enc.SetEscapeHTML(false)
				enc.SetIndent("", "  ")
				return enc.Encode(st)
			})
		},
	}
	cmd.Flags().StringVar(&format, "format", "in-toto", "statement format (only in-toto)")
	cmd.Flags().StringVar(&cell, "cell", "", "the receipt of `WAVE/CELL`, if the commit has several")
	return cmd
}

// printMatch says which commit's receipts follow.
func printMatch(w io.Writer, commit, tree, match string, rs []receipt.Receipt) {
	if match == receipt.MatchCommit {
		fmt.Fprintf(w, "%d receipt(s) for %s (tree %s)\n", len(rs), commit, tree)
		return
	}
	var others []string
	for _, r := range rs {
		if !slices.Contains(others, r.DoneBody.Commit) {
			others = append(others, r.DoneBody.Commit)
		}
	}
	fmt.Fprintf(w, "no receipt for %s; its tree equals the receipted tree of %s (rebased or squashed)\n", commit, strings.Join(others, ", "))
}

// printReceipt renders one receipt as its done entry records it.
func printReceipt(w io.Writer, r *receipt.Receipt) {
	fmt.Fprintf(w, "#%d %s %s/%s epoch %d by %s, entry %s\n", r.Seq, r.TS, r.Wave, r.Cell, r.Epoch, r.Actor, r.Hash)
	fmt.Fprintf(w, "  commit %s tree %s base %s\n", r.DoneBody.Commit, r.Tree, orRoot(r.Base))
	fmt.Fprintf(w, "  changed (%d): %s\n", len(r.Changed), strings.Join(r.Changed, " "))
	for _, ev := range r.Evidence {
		fmt.Fprintf(w, "  evidence: %q exit %d at %s (%d ms), stdout %d bytes blake3 %.12s\n",
			strings.Join(ev.Argv, " "), ev.ExitCode, ev.StartedAt, ev.DurationMS, ev.Stdout.Size, ev.Stdout.BLAKE3)
	}
}

// orRoot names an empty base.
func orRoot(base string) string {
	if base == "" {
		return "(none: from the empty tree)"
	}
	return base
}
