package receipt_test

// The readers of the receipts index (receipt show and verify, by commit and
// by tree, receipt repair and the notes push rule) on commits whose
// receipts fill a head and chunks (FORMAT.md §6, "The receipts index"): a
// ledger made by init, and one made without the switch that turns it on
// after a head of 100 receipts. Each ledger is built in-process through the
// library, and verified in full.

import (
	"encoding/json"
	"fmt"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// busyLedger makes a ledger in a new repository and finishes total cells
// on its HEAD commit, and returns the client, the repository and the dones'
// seqs. switchAt < 0: the ledger comes from Init (chunked from its
// genesis); otherwise its genesis has no switch, and a policy entry turns
// the chunked index on before the done of cell switchAt.
func busyLedger(t *testing.T, total, switchAt int) (*tally.Client, string, []uint64) {
	t.Helper()
	dir := testrepo.New(t)
	c, err := tally.Open(dir, tally.Options{Actor: "agent-1", Local: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.L.WaitMaintenance(); c.Close() })
	if switchAt < 0 {
		_, err = c.Init("busy", true)
	} else {
		_, err = c.L.Append("agent-1", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "busy"}}, nil
		})
	}
	if err != nil {
		t.Fatal(err)
	}
	cells := make([]lease.PlanCell, total)
	for i := range cells {
		cells[i] = lease.PlanCell{ID: fmt.Sprintf("c%03d", i)}
	}
	if _, err := c.Plan(&lease.PlanBody{Wave: "w", Cells: cells}); err != nil {
		t.Fatal(err)
	}
	var seqs []uint64
	for i, cell := range cells {
		if i == switchAt {
			on := lease.ReceiptIndexChunked
			if _, err := c.SetPolicy(lease.PolicySet{ReceiptIndex: &on}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := c.Claim(tally.ClaimOptions{Wave: "w", Cell: cell.ID, PID: os.Getpid()}); err != nil {
			t.Fatal(err)
		}
		d, err := c.Done(receipt.Request{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: "w", Cell: cell.ID}, Epoch: 1}})
		if err != nil {
			t.Fatal(err)
		}
		seqs = append(seqs, d.Entry.Seq)
	}
	if _, err := c.L.Verify(true); err != nil {
		t.Fatalf("verify --full: %v", err)
	}
	return c, dir, seqs
}

// blobReceipts is the number of receipts in a head or chunk blob at key of
// state s (-1 when absent).
func blobReceipts(t *testing.T, s *ledger.Snapshot, key string) int {
	t.Helper()
	b, ok, err := s.Get(key)
	if err != nil || !ok {
		return -1
	}
	var ix lease.ReceiptIndex
	if err := json.Unmarshal(b, &ix); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
	return len(ix.Receipts)
}

// TestReceiptReadersSeeChunks: 200 receipts of one commit under a ledger
// made by init (a head of 16, twelve chunks) and 140 under a ledger
// switched after a 100-receipt head (the head as it was, then three
// chunks). Show and verify, by the commit and by another commit of its
// tree, list every receipt in seq order with every check passed; receipt
// repair rewrites every note line after the notes are lost, and the notes
// push rule accepts every line.
func TestReceiptReadersSeeChunks(t *testing.T) {
	for _, tc := range []struct {
		name                          string
		total, switchAt, head, chunks int
	}{
		{"init", 200, -1, 16, 12},
		{"switched", 140, 100, 100, 3},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			c, dir, seqs := busyLedger(t, tc.total, tc.switchAt)
			head := testrepo.Git(t, dir, "rev-parse", "HEAD")
			s, err := c.L.Head()
			if err != nil {
				t.Fatal(err)
			}
			key := lease.ReceiptKey(head)
			if n := blobReceipts(t, s, key); n != tc.head {
				t.Fatalf("the head holds %d receipts, want %d", n, tc.head)
			}
			if b, _, _ := s.Get(key + ".chunks/count"); string(b) != fmt.Sprintf(`{"chunks":%d}`, tc.chunks) {
				t.Fatalf("chunk count %q, want %d", b, tc.chunks)
			}
			if n := blobReceipts(t, s, fmt.Sprintf("%s.chunks/%x", key, tc.chunks)); n < 1 || n > 16 {
				t.Fatalf("the last chunk holds %d receipts", n)
			}

			// the same tree in another commit: found by the tree's index
			twin := testrepo.Git(t, dir, "commit-tree", head+"^{tree}", "-p", head, "-m", "same tree")
			for rev, match := range map[string]string{head: receipt.MatchCommit, twin: receipt.MatchTree} {
				show, err := c.ReceiptShow(rev)
				if err != nil || show.Match != match {
					t.Fatalf("receipt show %s: match %v, %v", rev, show, err)
				}
				var got []uint64
				for _, r := range show.Receipts {
					got = append(got, r.Seq)
				}
				if !slices.Equal(got, seqs) {
					t.Fatalf("receipt show %s: seqs %v, want %v", rev, got, seqs)
				}
			}
			verifyAll := func(wantNotes bool) {
				t.Helper()
				v, err := c.ReceiptVerify(head)
				if err != nil || len(v.Receipts) != tc.total {
					t.Fatalf("receipt verify: %+v, %v", v, err)
				}
				for i, r := range v.Receipts {
					if r.Seq != seqs[i] || r.Checks.Note != wantNotes || !r.Checks.Index || !r.Checks.CellState {
						t.Fatalf("receipt verify: receipt %d is seq %d with checks %+v", i, r.Seq, r.Checks)
					}
				}
			}
			verifyAll(true)

			testrepo.Git(t, dir, "update-ref", "-d", receipt.NotesRef)
			verifyAll(false)
			if rep, err := c.ReceiptRepair(); err != nil || len(rep.Written) != tc.total {
				t.Fatalf("receipt repair wrote %+v, %v", rep, err)
			}
			if rep, err := c.ReceiptRepair(); err != nil || len(rep.Written) != 0 {
				t.Fatalf("a second receipt repair wrote %v, %v", rep, err)
			}
			verifyAll(true)

			notes, err := gitstore.ParseObjectID(testrepo.Git(t, dir, "rev-parse", receipt.NotesRef))
			if err != nil {
				t.Fatal(err)
			}
			db, err := c.L.Repo.Objects()
			if err != nil {
				t.Fatal(err)
			}
			if err := receipt.CheckNotesPush(db, s, gitstore.ObjectID{}, notes); err != nil {
				t.Fatalf("the notes push rule refuses the notes of the ledger's receipts: %v", err)
			}
			if note, _ := receipt.ReadNote(c.L.Repo, mustID(t, head)); strings.Count(note, "tally-receipt ") != tc.total {
				t.Fatalf("the note of %s has %d lines", head, strings.Count(note, "tally-receipt "))
			}
		})
	}
}

func mustID(t *testing.T, s string) gitstore.ObjectID {
	t.Helper()
	id, err := gitstore.ParseObjectID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}
