package receipt_test

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// BenchmarkReceipt measures receipt verification on ledgers of 1k entries
// and (with TALLY_BIG_BENCH=1) 100k entries, the receipt being the last
// entry: "check" is receipt.Check alone (the receipt checks on a verified
// head), "verify" is receipt.Verify (an incremental ledger verify with
// nothing new to replay, then the checks). Neither should grow with the
// ledger's length beyond its logarithm.
func BenchmarkReceipt(b *testing.B) {
	sizes := []int{1_000}
	if os.Getenv("TALLY_BIG_BENCH") == "1" {
		sizes = append(sizes, 100_000)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			l, commit := benchLedger(b, n)
			rep, err := l.Verify(false) // the first verify replays everything
			if err != nil {
				b.Fatal(err)
			}
			b.Run("check", func(b *testing.B) {
				for b.Loop() {
					if _, err := receipt.Check(l, rep, commit); err != nil {
						b.Fatal(err)
					}
				}
			})
			b.Run("verify", func(b *testing.B) {
				for b.Loop() {
					if _, err := receipt.Verify(l, commit); err != nil {
						b.Fatal(err)
					}
				}
			})
		})
	}
}

// benchLedger builds a ledger of n entries: genesis, notes appended in
// batches of 2,000, then a plan, a claim and a done receipting a commit of
// 20 new files, which it returns.
func benchLedger(b *testing.B, n int) (*ledger.Ledger, string) {
	dir := testrepo.New(b)
	c, err := tally.Open(dir, tally.Options{Actor: "agent-1", Local: true})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.L.WaitMaintenance(); c.Close() })
	if _, err := c.Init("bench", true); err != nil {
		b.Fatal(err)
	}
	note := func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: "x"}}, nil
	}
	for left := n - 4; left > 0; left -= 2000 {
		batch := make([]ledger.BuildFunc, min(left, 2000))
		for i := range batch {
			batch[i] = note
		}
		if _, err := c.L.AppendBatch("bench", batch); err != nil {
			b.Fatal(err)
		}
	}
	if _, err := c.Plan(&lease.PlanBody{Wave: "w1", Cells: []lease.PlanCell{{ID: "a", Paths: []string{"src/a/**"}}}}); err != nil {
		b.Fatal(err)
	}
	if _, err := c.Claim(tally.ClaimOptions{Wave: "w1", Cell: "a", PID: os.Getpid()}); err != nil {
		b.Fatal(err)
	}
	os.MkdirAll(filepath.Join(dir, "src/a"), 0o755)
	for i := range 20 {
		os.WriteFile(filepath.Join(dir, "src/a", fmt.Sprintf("f%d.go", i)), []byte("package a\n"), 0o644)
	}
	testrepo.Git(b, dir, "add", "-A")
	testrepo.Git(b, dir, "commit", "-q", "-m", "work")
	done, err := c.Done(receipt.Request{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: "w1", Cell: "a"}, Epoch: 1}})
	if err != nil {
		b.Fatal(err)
	}
	// Roll the packs together, as tally gc does, so that every size is
	// measured on the same layout.
	c.L.WaitMaintenance()
	if _, err := c.L.Compact(); err != nil {
		b.Fatal(err)
	}
	s, err := c.L.Head()
	if err != nil || s.Meta.Size != uint64(n) {
		b.Fatalf("ledger of %v entries, want %d (%v)", s.Meta.Size, n, err)
	}
	return c.L, done.Receipt.Commit
}

// BenchmarkDoneAppendOnBusyCommit times the whole local append of a done
// (the rules, the state tree, the pack, the ref update and its fsyncs; its
// CPU as cpu-ms/op, the wall time depending on the disk and its sharers)
// whose commit already has n receipts, under both layouts of the receipts
// index (FORMAT.md §6): BenchmarkDoneOnBusyCommit (lease) times the rules
// alone. The wave holds n+500 cells, all claimed up front, so each
// iteration finishes one more: run it with -benchtime 40x (at most 500).
// Its setup appends the n dones in batches; under the single layout that
// takes about half a minute at 3,000.
//
//	go test ./receipt -run '^$' -bench DoneAppendOnBusyCommit -benchtime 40x
func BenchmarkDoneAppendOnBusyCommit(b *testing.B) {
	for _, layout := range []string{lease.ReceiptIndexSingle, lease.ReceiptIndexChunked} {
		sizes := []int{0, 1000, 3000}
		if layout == lease.ReceiptIndexChunked {
			sizes = append(sizes, 10000)
		}
		for _, n := range sizes {
			b.Run(fmt.Sprintf("layout=%s/receipts=%d", layout, n), func(b *testing.B) {
				l, done := busyCommitLedger(b, layout == lease.ReceiptIndexChunked, n, 500)
				cpu := testrepo.StartCPU()
				i := n
				for b.Loop() {
					if _, err := l.Append("agent-1", done(i)); err != nil {
						b.Fatal(err)
					}
					i++
				}
				cpu.Report(b, i-n)
			})
		}
	}
}

// busyCommitLedger makes a ledger (chunked: from a genesis that switches)
// with a wave of n+spare cells, all claimed, the first n done on one
// commit; done(i) builds the done of cell i on that commit.
func busyCommitLedger(b *testing.B, chunked bool, n, spare int) (*ledger.Ledger, func(i int) ledger.BuildFunc) {
	dir := testrepo.New(b)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { l.WaitMaintenance(); l.Close() })
	static := func(kind chain.Kind, body any) ledger.BuildFunc {
		return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: kind, Body: body}, nil
		}
	}
	g := chain.GenesisBody{Origin: "bench"}
	if chunked {
		on := lease.ReceiptIndexChunked
		g.ReceiptIndex = &on
	}
	cells := make([]lease.PlanCell, n+spare)
	for i := range cells {
		cells[i] = lease.PlanCell{ID: fmt.Sprintf("c%05d", i)}
	}
	builds := []ledger.BuildFunc{static(chain.KindGenesis, g), static(chain.KindPlan, lease.PlanBody{Wave: "w", Cells: cells})}
	for _, c := range cells {
		builds = append(builds, static(chain.KindClaim, lease.ClaimBody{CellRef: lease.CellRef{Wave: "w", Cell: c.ID}, TTL: lease.TTLMax, Host: "h", Mode: lease.ModeClaim}))
	}
	commit := testrepo.Git(b, dir, "rev-parse", "HEAD")
	tree := testrepo.Git(b, dir, "rev-parse", "HEAD^{tree}")
	done := func(i int) ledger.BuildFunc {
		return static(chain.KindDone, lease.DoneBody{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: "w", Cell: cells[i].ID}, Epoch: 1},
			Commit: commit, Tree: tree, Base: commit, Changed: []string{}, Evidence: []lease.Evidence{}})
	}
	for i := range n {
		builds = append(builds, done(i))
	}
	for len(builds) > 0 {
		k := min(len(builds), 2000)
		if _, err := l.AppendBatch("agent-1", builds[:k]); err != nil {
			b.Fatal(err)
		}
		builds = builds[k:]
	}
	// Merge the setup's packs, as tally gc does, so that no compaction of
	// them runs in the timed appends.
	if _, err := l.CompactNow(); err != nil {
		b.Fatal(err)
	}
	return l, done
}
