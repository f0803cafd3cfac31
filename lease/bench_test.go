package lease_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/pathspec"
)

// BenchmarkCheckAtLimits times lease.Apply of one entry against a state at
// the limits: 3,840 live holds (15 claimed cells of 256 paths, actor h), the
// entry a claim of a 16th cell whose 256 paths would bring the holds to
// MaxLiveHolds. Apply includes reading the holds and building the key index.
//
//	typical:     the cell's paths are literal, in directories of their own
//	wild:        its 256 paths are globs ("r/*/qNNN"), and 44 of the holds start
//	             with a glob ("*/hNNNN/z"), so each of those is a candidate for
//	             each path: 11,264 pairs tested, 1.96M of the 2M budget, none
//	             overlapping
//	over-budget: the same with 50 such holds: refused LIMIT-EXCEEDED
//	big-pair:    a lock of one 1 KiB pattern of stars against one such hold
//	             (1.05M of the 2M budget in one pair, no overlap)
//
//	go test ./lease -run '^$' -bench CheckAtLimits -benchtime 20x
func BenchmarkCheckAtLimits(b *testing.B) {
	for _, sc := range []struct {
		name  string
		wild  int // holds whose key is ""
		paths func(i int) string
		want  errs.Code // error code, "" for accepted
	}{
		{"typical", 0, func(i int) string { return fmt.Sprintf("src/new%02d/**", i%8) }, ""},
		{"wild", 44, func(i int) string { return fmt.Sprintf("r/*/q%03d", i) }, ""},
		{"over-budget", 50, func(i int) string { return fmt.Sprintf("r/*/q%03d", i) }, "LIMIT-EXCEEDED"},
	} {
		b.Run(sc.name, func(b *testing.B) {
			w := newPL(b)
			var cells []lease.PlanCell
			for c := range 16 {
				var paths []string
				for p := range 256 {
					switch n := c*256 + p; {
					case c == 15:
						paths = append(paths, sc.paths(p))
					case n < sc.wild:
						paths = append(paths, fmt.Sprintf("*/h%04d/z", n))
					default:
						paths = append(paths, fmt.Sprintf("d%02d/f%04d.go", c, p))
					}
				}
				cells = append(cells, lease.PlanCell{ID: fmt.Sprintf("c%02d", c), Paths: dedupSorted(paths)})
			}
			w.ok("plan", "x", lease.PlanBody{Wave: "w", Cells: cells})
			for c := range 15 {
				w.ok("claim", "h", withTTL(claimB("w", fmt.Sprintf("c%02d", c)), 3600))
			}
			benchApply(b, w, "claim", "a", withTTL(claimB("w", "c15"), 3600), sc.want)
		})
	}
	b.Run("big-pair", func(b *testing.B) {
		w := newPL(b)
		star := func(c string) string { return strings.Repeat("*"+c, pathspec.MaxLen/2) }
		w.mustLock("h", 3600, star("a"))
		benchApply(b, w, "lock", "a", lockB(60, star("d")), "")
	})
}

// dedupSorted sorts paths and drops repeats (the typical cell's paths repeat).
func dedupSorted(paths []string) []string {
	seen := map[string]bool{}
	var out []string
	for _, p := range paths {
		if !seen[p] {
			seen[p] = true
			out = append(out, p)
		}
	}
	return out
}

func benchApply(b *testing.B, w *plWorld, kind chain.Kind, actor string, body any, want errs.Code) {
	raw, err := json.Marshal(body)
	if err != nil {
		b.Fatal(err)
	}
	e := &chain.Entry{V: 1, Seq: w.seq, Kind: kind, TS: plStamp(w.d), Actor: actor,
		Nonce: "00112233445566778899aabbccddeeff", Body: raw}
	cpu := testrepo.StartCPU()
	n := 0
	for b.Loop() {
		_, err := lease.Apply(w.kv, e)
		if errs.CodeOf(err) != want {
			b.Fatalf("%s: %v, want %q", kind, err, want)
		}
		n++
	}
	cpu.Report(b, n)
}

// BenchmarkDoneOnBusyCommit times lease.Apply of a done whose commit (and
// tree) already carry n receipts, under both layouts of the receipts index
// (FORMAT.md §6). Without the switch (layout=single) the receipts naming
// one commit are one blob, which a done decodes and writes again whole, so
// its cost grows with the receipts the commit has and n dones of one commit
// cost O(n²) (its setup alone takes about a minute at 3,000, so it stops
// there). Under the chunked layout a done reads the count and one head or
// chunk of at most 16 receipts (lease.ReceiptChunk), whatever n.
//
//	go test ./lease -run '^$' -bench DoneOnBusyCommit -benchtime 20x
func BenchmarkDoneOnBusyCommit(b *testing.B) {
	for _, layout := range []string{lease.ReceiptIndexSingle, lease.ReceiptIndexChunked} {
		sizes := []int{0, 100, 1000, 3000}
		if layout == lease.ReceiptIndexChunked {
			sizes = append(sizes, 10000)
		}
		for _, n := range sizes {
			b.Run(fmt.Sprintf("layout=%s/receipts=%d", layout, n), func(b *testing.B) {
				w := newPL(b)
				if layout == lease.ReceiptIndexChunked {
					w.ok(chain.KindPolicy, "x", lease.PolicySet{ReceiptIndex: &layout})
				}
				cells := make([]lease.PlanCell, n+1)
				for i := range cells {
					cells[i] = lease.PlanCell{ID: fmt.Sprintf("c%05d", i)}
				}
				w.ok(chain.KindPlan, "x", lease.PlanBody{Wave: "w", Cells: cells})
				for _, c := range cells {
					w.ok(chain.KindClaim, "a", claimB("w", c.ID))
				}
				for _, c := range cells[:n] {
					w.ok(chain.KindDone, "a", doneB("w", c.ID, 1))
				}
				benchApply(b, w, chain.KindDone, "a", doneB("w", cells[n].ID, 1), "")
			})
		}
	}
}
