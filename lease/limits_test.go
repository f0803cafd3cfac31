package lease_test

// The cost limits of the rules (lease/limits.go): each one refused with
// LIMIT-EXCEEDED naming the limit, just past it, and accepted at it; and the
// key index of the conflict check agreeing with a plain scan of every hold.

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/pathspec"
)

func wantLimit(t *testing.T, e *errs.Error, limit string, value, max int64) {
	t.Helper()
	if e.Details["limit"] != limit || e.Details["value"] != value || e.Details["max"] != max {
		t.Fatalf("%v: details %v, want limit %s value %d max %d", e, e.Details, limit, value, max)
	}
	if e.Class() != errs.Refused {
		t.Fatalf("%v: class %d, want refused (2)", e, e.Class())
	}
}

// cellPaths returns n distinct literal paths under dir.
func cellPaths(dir string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/f%04d", dir, i)
	}
	sort.Strings(out)
	return out
}

func claim1h(wave, cell string) lease.ClaimBody { return withTTL(claimB(wave, cell), 3600) }

func TestLimitsPlan(t *testing.T) {
	w := newPL(t)
	one := func(id string, paths []string) lease.PlanCell { return lease.PlanCell{ID: id, Paths: paths} }

	e := w.refuse("LIMIT-EXCEEDED", "plan", "x", lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{one("c", cellPaths("d", 257))}})
	wantLimit(t, e, "cell-paths", 257, 256)
	w.ok("plan", "x", lease.PlanBody{Wave: "w1", Cells: []lease.PlanCell{one("c", cellPaths("d", 256))}})

	var cells []lease.PlanCell // 32 cells of 256 paths: 8,192, then one more path
	for i := range 32 {
		cells = append(cells, one(fmt.Sprintf("c%02d", i), cellPaths(fmt.Sprintf("d%02d", i), 256)))
	}
	w.ok("plan", "x", lease.PlanBody{Wave: "w2", Cells: cells})
	cells = append(cells, one("extra", []string{"e"}))
	e = w.refuse("LIMIT-EXCEEDED", "plan", "x", lease.PlanBody{Wave: "w3", Cells: cells})
	wantLimit(t, e, "wave-paths", 8193, 8192)

	long := strings.Repeat("a/", pathspec.MaxLen/2) + "b" // MaxLen+1 bytes, normalized
	e = w.refuse("LIMIT-EXCEEDED", "plan", "x", lease.PlanBody{Wave: "w4", Cells: []lease.PlanCell{one("c", []string{long})}})
	wantLimit(t, e, "pattern-bytes", int64(pathspec.MaxLen+1), pathspec.MaxLen)
	w.ok("plan", "x", lease.PlanBody{Wave: "w4", Cells: []lease.PlanCell{one("c", []string{long[2:]})}})

	// The writer's normalization refuses the same way, before any entry is built.
	for _, b := range []*lease.PlanBody{
		{Wave: "w5", Cells: []lease.PlanCell{one("c", cellPaths("d", 257))}},
		{Wave: "w5", Cells: []lease.PlanCell{one("c", []string{"./" + long[2:] + "/"})}},
	} {
		if err := lease.NormalizePlan(b); errs.CodeOf(err) != "LIMIT-EXCEEDED" {
			t.Fatalf("NormalizePlan: %v, want LIMIT-EXCEEDED", err)
		}
	}
}

func TestLimitsLock(t *testing.T) {
	w := newPL(t)
	pats := cellPaths("p", 33)
	e := w.refuse("LIMIT-EXCEEDED", "lock", "a", lockB(60, pats...))
	wantLimit(t, e, "lock-patterns", 33, 32)
	w.ok("lock", "a", lockB(60, pats[:32]...))
	long := strings.Repeat("a/", pathspec.MaxLen/2) + "b"
	e = w.refuse("LIMIT-EXCEEDED", "lock", "a", lockB(60, long))
	wantLimit(t, e, "pattern-bytes", int64(pathspec.MaxLen+1), pathspec.MaxLen)
	if err := lease.CheckLockCount(33); errs.CodeOf(err) != "LIMIT-EXCEEDED" {
		t.Fatalf("CheckLockCount(33): %v", err)
	}
}

// TestLimitsLiveHolds: claimed cells' paths and locks together may not pass
// MaxLiveHolds; renewing what one holds adds nothing.
func TestLimitsLiveHolds(t *testing.T) {
	w := newPL(t)
	n := lease.MaxLiveHolds / lease.MaxCellPaths // cells of 256 paths that fill the limit
	var cells []lease.PlanCell
	for i := range n {
		cells = append(cells, lease.PlanCell{ID: fmt.Sprintf("c%02d", i), Paths: cellPaths(fmt.Sprintf("d%02d", i), 256)})
	}
	w.ok("plan", "x", lease.PlanBody{Wave: "w", Cells: cells[:n/2]})
	w.ok("plan", "x", lease.PlanBody{Wave: "v", Cells: cells[n/2:]})
	wave := func(i int) string { return map[bool]string{true: "w", false: "v"}[i < n/2] }
	for i := range n - 1 {
		w.ok("claim", "a", claim1h(wave(i), cells[i].ID))
	}
	// (n-1)·256 held: 256 more locks fit, 257 do not
	for i := range 8 {
		w.mustLock("b", 3600, cellPaths(fmt.Sprintf("l%d", i), 32)...)
	}
	w.mustLock("b", 3600, cellPaths("l0", 32)...) // a renewal adds no hold
	e := w.refuse("LIMIT-EXCEEDED", "lock", "b", lockB(60, "z"))
	wantLimit(t, e, "live-holds", lease.MaxLiveHolds+1, lease.MaxLiveHolds)
	last := cells[n-1].ID
	e = w.refuse("LIMIT-EXCEEDED", "claim", "a", claim1h(wave(n-1), last))
	wantLimit(t, e, "live-holds", lease.MaxLiveHolds+256, lease.MaxLiveHolds)
	w.ok("release", "a", lease.EpochBody{CellRef: lease.CellRef{Wave: "w", Cell: "c00"}, Epoch: 1})
	w.ok("claim", "a", claim1h(wave(n-1), last)) // exactly at the limit
	w.ok("unlock", "b", lease.UnlockBody{Patterns: cellPaths("l0", 32), Epochs: slices.Repeat([]int64{1}, 32)})
	w.mustLock("b", 3600, "z")
}

// TestLimitsCheckCost: an entry whose conflict check would test pairs
// costing more than MaxCheckCost is refused before any pair is tested, even
// one that would otherwise be LEASE-HELD; holds the key index rules out and
// the actor's own holds cost nothing.
func TestLimitsCheckCost(t *testing.T) {
	w := newPL(t)
	big := func(prefix string) string { return prefix + strings.Repeat("x", pathspec.MaxLen-len(prefix)) }
	// each pair of two MaxLen patterns costs (1024+2)²+64, about 1.05M units
	req := big("**/")
	unit := pathspec.Cost(req, big("h0/"))
	fit := int(lease.MaxCheckCost / unit)
	for i := range fit + 1 {
		w.mustLock("b", 3600, big(fmt.Sprintf("h%d/", i)))
	}
	e := w.refuse("LIMIT-EXCEEDED", "lock", "a", lockB(60, req))
	wantLimit(t, e, "check-cost", int64(fit+1)*unit, lease.MaxCheckCost)
	if _, err := lease.PlanLock(w.kv, "a", []string{req}, w.now()); errs.CodeOf(err) != "LIMIT-EXCEEDED" {
		t.Fatalf("PlanLock: %v", err) // the writer refuses before building the entry
	}
	if _, err := lease.Blockers(w.kv, "a", req, w.now()); errs.CodeOf(err) != "LIMIT-EXCEEDED" {
		t.Fatalf("Blockers: %v", err)
	}
	// the holder's own holds are not candidates; disjoint keys are not either
	w.mustLock("b", 3600, req)
	w.ok("unlock", "b", lease.UnlockBody{Patterns: []string{req}, Epochs: []int64{1}})
	if _, err := w.lock("c", 60, big("elsewhere/")); err != nil {
		t.Fatalf("a pattern under another key: %v", err)
	}
	w.ok("unlock", "c", lease.UnlockBody{Patterns: []string{big("elsewhere/")}, Epochs: []int64{1}})
	// one candidate fewer fits: the check runs and finds the conflict
	w.ok("unlock", "b", lease.UnlockBody{Patterns: []string{big(fmt.Sprintf("h%d/", fit))}, Epochs: []int64{1}})
	if _, err := w.lock("a", 60, req); errs.CodeOf(err) != "LEASE-HELD" {
		t.Fatalf("within budget: %v, want LEASE-HELD", err)
	}
}

// TestHoldIndexAgreesWithScan: the actors Blockers finds through the key
// index are those a plain scan of every live hold with pathspec.Overlap
// finds, over random holds and requests built from a small alphabet of
// segments (literal, glob and "**") so that keys share prefixes often.
func TestHoldIndexAgreesWithScan(t *testing.T) {
	rng := rand.New(rand.NewPCG(17, 6))
	segs := []string{"a", "b", "ab", "a*", "*b", "?", "*", "**"}
	gen := func() string {
		var parts []string
		for n := 1 + rng.IntN(4); len(parts) < n; {
			parts = append(parts, segs[rng.IntN(len(segs))])
		}
		p, err := pathspec.Normalize(strings.Join(parts, "/"))
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	actors := []string{"a", "b", "c", "d"}
	for round := range 20 {
		w := newPL(t)
		for range 60 {
			// a lock is refused when it conflicts; the holds left are what counts
			w.lock(actors[rng.IntN(len(actors))], 3600, gen())
		}
		all, err := lease.PathHolds(w.kv, w.now())
		if err != nil {
			t.Fatal(err)
		}
		for range 100 {
			who, p := actors[rng.IntN(len(actors))], gen()
			var want []string
			for _, h := range all {
				if _, ok := pathspec.Overlap(p, h.Pattern); ok && h.Actor != who && !slices.Contains(want, h.Actor) {
					want = append(want, h.Actor)
				}
			}
			sort.Strings(want)
			got, err := lease.Blockers(w.kv, who, p, w.now())
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("round %d: Blockers(%s, %q) = %v, a scan of %d holds finds %v", round, who, p, got, len(all), want)
			}
		}
	}
}
