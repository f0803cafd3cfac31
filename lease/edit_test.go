package lease_test

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/tally-dev/tally/lease"
)

// verdicts renders an EditDecision as "path: others/own" lines, holds as
// "pattern:actor(source)".
func verdicts(d *lease.EditDecision) []string {
	var out []string
	for _, p := range d.Paths {
		var o, m []string
		for _, h := range p.Others {
			o = append(o, h.Pattern+":"+h.Actor+"("+h.Source+")")
		}
		for _, h := range p.Own {
			m = append(m, h.Pattern+":"+h.Actor+"("+h.Source+")")
		}
		out = append(out, fmt.Sprintf("%s: %v/%v", p.Path, o, m))
	}
	return out
}

func TestEditCheck(t *testing.T) {
	w := newPL(t)
	w.ok("plan", "x", lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{{ID: "c", Paths: []string{"db/**"}}}})
	w.ok("claim", "xena", lease.ClaimBody{CellRef: lease.CellRef{Wave: "w", Cell: "c"}, TTL: 600, PID: 1, Host: "h", Mode: lease.ModeClaim})
	w.mustLock("bob", 60, "src/API/**")
	w.mustLock("alice", 90, "docs")

	check := func(actor string, ignoreCase bool, paths ...string) *lease.EditDecision {
		t.Helper()
		d, err := lease.EditCheck(w.kv, actor, paths, w.now(), ignoreCase)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	d := check("alice", false, "src/API/x.go", "docs/a.md", "db/s.sql", "README", "src/api/x.go")
	want := []string{
		"src/API/x.go: [src/API/**:bob(lock)]/[]",
		"docs/a.md: []/[docs:alice(lock)]",
		"db/s.sql: [db/**:xena(cell w/c)]/[]",
		"README: []/[]",
		"src/api/x.go: []/[]", // case matters where the file system's does
	}
	if got := verdicts(d); !slices.Equal(got, want) || !d.Refused() || d.Unleased != lease.Off || d.Warned() != nil {
		t.Fatalf("verdicts %q refused %v unleased %s", got, d.Refused(), d.Unleased)
	}
	if d := check("alice", false, "docs/a.md", "README"); d.Refused() {
		t.Fatalf("own and unheld paths refused: %q", verdicts(d))
	}
	// core.ignorecase: src/api/x.go is the file src/API/** covers.
	if d := check("alice", true, "src/api/x.go", "SRC/Api"); !slices.Equal(verdicts(d),
		[]string{"src/api/x.go: [src/API/**:bob(lock)]/[]", "SRC/Api: [src/API/**:bob(lock)]/[]"}) {
		t.Fatalf("ignorecase: %q", verdicts(d))
	}
	if d := check("bob", true, "src/api/x.go"); d.Refused() {
		t.Fatalf("the holder refused its own path: %q", verdicts(d))
	}

	// edit_leases: a path nobody holds is warned about, then refused.
	for _, mode := range []string{lease.Warn, lease.Enforce} {
		w.ok("policy", "admin", lease.PolicySet{EditLeases: &mode})
		d := check("alice", false, "README", "docs/a.md")
		if d.Unleased != mode || d.Refused() != (mode == lease.Enforce) || !slices.Equal(d.Warned(), map[bool][]string{true: {"README"}}[mode == lease.Warn]) {
			t.Fatalf("edit_leases %s: refused %v warned %v", mode, d.Refused(), d.Warned())
		}
	}
	off := lease.Off
	w.ok("policy", "admin", lease.PolicySet{EditLeases: &off})
	if p, err := lease.ReadPolicy(w.kv); err != nil || p.EditLeases != "" {
		t.Fatalf("edit_leases off is stored as the default (left out): %+v %v", p, err)
	}

	// Aging: past a third of its TTL a hold is renewed, not before.
	aging := func(actor string) []string {
		var out []string
		for _, h := range check(actor, false).Aging {
			out = append(out, fmt.Sprintf("%s:%d", h.Pattern, h.TTLSeconds))
		}
		return out
	}
	if a := aging("alice"); a != nil {
		t.Fatalf("fresh lock aging: %v", a)
	}
	w.at(31 * time.Second) // alice's 90 s lock has 59 s left: under 60, two thirds
	if a := aging("alice"); !slices.Equal(a, []string{"docs:90"}) {
		t.Fatalf("aging at +31s: %v", a)
	}
	if a := aging("xena"); a != nil {
		t.Fatalf("xena's 600 s cell aging at +31s: %v", a)
	}
	w.at(201 * time.Second)
	if a := aging("xena"); !slices.Equal(a, []string{"db/**:600"}) {
		t.Fatalf("xena's cell at +201s: %v", a)
	}
	// Expired holds are no holds.
	if d := check("alice", false, "src/API/x.go"); d.Refused() {
		t.Fatalf("bob's expired lock still refuses: %q", verdicts(d))
	}
}

func TestHoldsOnKeyFilter(t *testing.T) {
	holds := []lease.PathHold{{Pattern: "src/*.go", Actor: "a"}, {Pattern: "**", Actor: "b"}, {Pattern: "src/a", Actor: "c"}, {Pattern: "srcx", Actor: "d"}}
	var got []string
	for _, h := range lease.HoldsOn(holds, "src/a/b.go", false) {
		got = append(got, h.Actor)
	}
	if !slices.Equal(got, []string{"b", "c"}) {
		t.Fatalf("holds on src/a/b.go: %v", got)
	}
}

// BenchmarkEditCheck times the edit guard's decision in process: one path
// against 1,000 live path locks of 32 other actors (the state issue 29's
// guard benchmark reads; bench/guard.sh times the whole process).
//
//	go test ./lease -run '^$' -bench EditCheck
func BenchmarkEditCheck(b *testing.B) {
	w := newPL(b)
	for a := 0; a*32 < 1000; a++ {
		var pats []string
		for i := a * 32; i < min(1000, (a+1)*32); i++ {
			pats = append(pats, fmt.Sprintf("area/%04d/**", i))
		}
		w.mustLock(fmt.Sprintf("holder-%d", a), 86400, pats...)
	}
	for b.Loop() {
		d, err := lease.EditCheck(w.kv, "agent", []string{"src/main.go"}, w.now(), false)
		if err != nil || d.Refused() {
			b.Fatal(d, err)
		}
	}
}
