package lease_test

import (
	"fmt"
	"reflect"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

// TestPlanState checks everything a plan writes: the plan list, the wave
// summary (size, added seq, counts, ready and held bitmaps), the order
// chunks and each cell.
func TestPlanState(t *testing.T) {
	w := newWorld(t)
	w.plan("w1",
		pc{ID: "schema", Title: "define the schema", Paths: []string{"db/**"}, Role: "dba"},
		pc{ID: "api", Deps: []string{"schema"}, Paths: []string{"api/**"}},
		pc{ID: "docs", Deps: []string{"api", "schema"}},
		pc{ID: "lint"},
	)
	p, err := lease.ReadPlan(w.kv)
	if err != nil || !reflect.DeepEqual(p.Waves, []string{"w1"}) {
		t.Fatalf("plan %+v %v", p, err)
	}
	wv := w.wave("w1")
	if wv.ID != "w1" || wv.Size != 4 || wv.Added != 1 || !reflect.DeepEqual(wv.Counts, map[string]int{lease.Pending: 4}) {
		t.Fatalf("wave %+v", wv)
	}
	if got := bits(t, wv.Ready, 4); !reflect.DeepEqual(got, []bool{true, false, false, true}) {
		t.Fatalf("ready %v", got)
	}
	if got := bits(t, wv.Held, 4); !reflect.DeepEqual(got, []bool{false, false, false, false}) {
		t.Fatalf("held %v", got)
	}
	ids, err := lease.CellIDs(w.kv, wv)
	if err != nil || !reflect.DeepEqual(ids, []string{"schema", "api", "docs", "lint"}) {
		t.Fatalf("cell ids %v %v", ids, err)
	}
	want := &lease.Cell{ID: "schema", Wave: "w1", Index: 0, Title: "define the schema", Role: "dba",
		Deps: []string{}, Dependents: []string{"w1/api", "w1/docs"}, Paths: []string{"db/**"},
		State: lease.Pending, Epoch: 0, History: []uint64{1}}
	if got := w.cell("w1", "schema"); !reflect.DeepEqual(got, want) {
		t.Fatalf("cell\n got %+v\nwant %+v", got, want)
	}
	docs := w.cell("w1", "docs")
	if docs.Index != 2 || !reflect.DeepEqual(docs.Deps, []string{"api", "schema"}) || len(docs.Dependents) != 0 || len(docs.Paths) != 0 {
		t.Fatalf("docs %+v", docs)
	}
	// the state keys are those of FORMAT.md §6
	for _, k := range []string{"plan", "waves/w1/wave", "waves/w1/order/0"} {
		if _, ok := w.kv[k]; !ok {
			t.Errorf("missing state key %s", k)
		}
	}
	cellKeys := 0
	for k := range w.kv {
		if strings.HasPrefix(k, "waves/w1/cells/") {
			parts := strings.Split(k, "/")
			if len(parts) != 5 || len(parts[3]) != 2 {
				t.Errorf("cell key %s is not waves/<w>/cells/<xx>/<c>", k)
			}
			cellKeys++
		}
	}
	if cellKeys != 4 {
		t.Fatalf("%d cell keys, want 4", cellKeys)
	}
	// a second wave is appended to the plan list
	w.plan("w0", pc{ID: "x", Deps: []string{"w1/lint"}})
	if p, _ := lease.ReadPlan(w.kv); !reflect.DeepEqual(p.Waves, []string{"w1", "w0"}) {
		t.Fatalf("plan order %v (waves keep the order they were planned, not sorted)", p.Waves)
	}
	if got := w.cell("w1", "lint").Dependents; !reflect.DeepEqual(got, []string{"w0/x"}) {
		t.Fatalf("dependents of a cell of an earlier wave: %v", got)
	}
	if got := w.cell("w1", "lint").History; !reflect.DeepEqual(got, []uint64{1}) {
		t.Fatalf("gaining a dependent is not a state change of the cell's history: %v", got)
	}
}

// TestPlanLargeWave: more than one order chunk (256 ids each), plan order
// kept, bitmaps sized for the wave.
func TestPlanLargeWave(t *testing.T) {
	w := newWorld(t)
	var cells []pc
	for i := 0; i < 600; i++ {
		c := pc{ID: fmt.Sprintf("c%03d", 599-i)} // ids sort opposite to plan order
		if i%3 == 2 {
			c.Deps = []string{fmt.Sprintf("c%03d", 599-(i-1))}
		}
		cells = append(cells, c)
	}
	w.plan("big", cells...)
	wv := w.wave("big")
	ids, err := lease.CellIDs(w.kv, wv)
	if err != nil || len(ids) != 600 {
		t.Fatalf("%d ids, %v", len(ids), err)
	}
	for i, id := range ids {
		if id != cells[i].ID {
			t.Fatalf("id %d is %s, want %s", i, id, cells[i].ID)
		}
	}
	for _, k := range []string{"waves/big/order/0", "waves/big/order/1", "waves/big/order/2"} {
		if _, ok := w.kv[k]; !ok {
			t.Fatalf("missing %s", k)
		}
	}
	if _, ok := w.kv["waves/big/order/3"]; ok {
		t.Fatal("an empty order chunk was written")
	}
	rb := bits(t, wv.Ready, 600)
	for i := range rb {
		if rb[i] != (i%3 != 2) {
			t.Fatalf("ready bit %d = %v", i, rb[i])
		}
	}
	r, err := lease.Ready(w.kv, "big", t0, 0)
	if err != nil || len(r) != 400 || r[0].Cell != "c599" || r[399].Cell != cells[598].ID || r[399].Index != 598 {
		t.Fatalf("ready: %d, %v", len(r), err)
	}
}

// TestPlanRefusals: each refusal of a plan, with its code; nothing is written.
func TestPlanRefusals(t *testing.T) {
	long := strings.Repeat("a", 129)
	cases := []struct {
		name  string
		code  string
		body  any
		check func(t *testing.T, details map[string]any, msg string)
	}{
		{"wave-exists", "WAVE-EXISTS", planBody("w1", pc{ID: "new"}), nil},
		{"bad-wave-id", "USAGE", planBody("w 2", pc{ID: "a"}), nil},
		{"wave-id-slash", "USAGE", planBody("w/2", pc{ID: "a"}), nil},
		{"wave-id-leading-dot", "USAGE", planBody(".w", pc{ID: "a"}), nil},
		{"wave-id-too-long", "USAGE", planBody(long, pc{ID: "a"}), nil},
		{"empty-wave-id", "USAGE", planBody("", pc{ID: "a"}), nil},
		{"bad-cell-id", "USAGE", planBody("w2", pc{ID: "a:b"}), nil},
		{"cell-id-unicode", "USAGE", planBody("w2", pc{ID: "café"}), nil},
		{"cell-id-leading-dash", "USAGE", planBody("w2", pc{ID: "-a"}), nil},
		{"cell-id-too-long", "USAGE", planBody("w2", pc{ID: long}), nil},
		{"empty-cell-id", "USAGE", planBody("w2", pc{ID: ""}), nil},
		{"duplicate-cell", "USAGE", planBody("w2", pc{ID: "a"}, pc{ID: "a"}), nil},
		{"no-cells", "USAGE", planBody("w2"), nil},
		{"bad-role", "USAGE", planBody("w2", pc{ID: "a", Role: "a role"}), nil},
		{"title-newline", "USAGE", planBody("w2", pc{ID: "a", Title: "two\nlines"}), nil},
		{"title-too-long", "USAGE", planBody("w2", pc{ID: "a", Title: strings.Repeat("t", 257)}), nil},
		{"path-not-normalized", "USAGE", planBody("w2", pc{ID: "a", Paths: []string{"./src/"}}), nil},
		{"path-absolute", "USAGE", planBody("w2", pc{ID: "a", Paths: []string{"/etc"}}), nil},
		{"path-dotdot", "USAGE", planBody("w2", pc{ID: "a", Paths: []string{"src/../x"}}), nil},
		{"dep-twice", "USAGE", planBody("w2", pc{ID: "a"}, pc{ID: "b", Deps: []string{"a", "a"}}), nil},
		{"dep-bad-ref", "USAGE", planBody("w2", pc{ID: "b", Deps: []string{"w1/x/y"}}), nil},
		{"dep-bad-wave-ref", "USAGE", planBody("w2", pc{ID: "b", Deps: []string{"w 1/x"}}), nil},
		{"unknown-field", "USAGE", `{"wave":"w2","cells":[{"id":"a","prio":1}]}`, nil},
		{"cells-not-array", "USAGE", `{"wave":"w2","cells":{"id":"a"}}`, nil},
		{"dep-missing-same-wave", "DEP-MISSING", planBody("w2", pc{ID: "a", Deps: []string{"ghost"}}),
			func(t *testing.T, d map[string]any, msg string) {
				if d["cell"] != "a" || d["dep"] != "ghost" {
					t.Fatalf("details %v", d)
				}
			}},
		{"dep-missing-other-wave", "DEP-MISSING", planBody("w2", pc{ID: "a", Deps: []string{"w9/x"}}), nil},
		{"dep-missing-cell-of-earlier-wave", "DEP-MISSING", planBody("w2", pc{ID: "a", Deps: []string{"w1/ghost"}}),
			func(t *testing.T, d map[string]any, msg string) {
				if d["dep"] != "w1/ghost" {
					t.Fatalf("details %v", d)
				}
			}},
		{"self-dep", "DEP-CYCLE", planBody("w2", pc{ID: "a", Deps: []string{"a"}}), cycleIs("a", "a")},
		{"self-dep-qualified", "DEP-CYCLE", planBody("w2", pc{ID: "a", Deps: []string{"w2/a"}}), cycleIs("a", "a")},
		// a depends on c, c on b, b on a: the cycle is reported from the first
		// cell in plan order, following deps.
		{"three-cycle", "DEP-CYCLE", planBody("w2",
			pc{ID: "a", Deps: []string{"c"}}, pc{ID: "b", Deps: []string{"a"}}, pc{ID: "c", Deps: []string{"b"}}),
			cycleIs("a", "c", "b", "a")},
		// the cycle does not include the first cell: p -> q -> r -> q
		{"cycle-after-a-tail", "DEP-CYCLE", planBody("w2",
			pc{ID: "free"}, pc{ID: "p", Deps: []string{"free", "q"}}, pc{ID: "q", Deps: []string{"r"}}, pc{ID: "r", Deps: []string{"w1/a", "q"}}),
			cycleIs("q", "r", "q")},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.plan("w1", pc{ID: "a"})
			e := w.refuse(errs.Code(tc.code), "plan", "planner", tc.body)
			if tc.check != nil {
				tc.check(t, e.Details, e.Message)
			}
			if p, _ := lease.ReadPlan(w.kv); len(p.Waves) != 1 {
				t.Fatalf("plan list %v after a refusal", p.Waves)
			}
		})
	}
}

// cycleIs checks the DEP-CYCLE detail and message name exactly this cycle.
func cycleIs(ids ...string) func(t *testing.T, d map[string]any, msg string) {
	return func(t *testing.T, d map[string]any, msg string) {
		t.Helper()
		if !reflect.DeepEqual(d["cycle"], ids) {
			t.Fatalf("cycle %v, want %v", d["cycle"], ids)
		}
		if want := strings.Join(ids, " -> "); !strings.Contains(msg, want) {
			t.Fatalf("message %q does not name the cycle %q", msg, want)
		}
	}
}

// TestPlanAcceptsLimits: 128-byte ids and the id alphabet are accepted; a
// dep on a cell declared later in the same wave is fine (no forward-only rule).
func TestPlanAcceptsLimits(t *testing.T) {
	w := newWorld(t)
	id := "A" + strings.Repeat("z._-9", 25) + "xy" // 128 bytes
	if len(id) != 128 {
		t.Fatalf("test id is %d bytes", len(id))
	}
	w.plan(id, pc{ID: id, Deps: []string{"later"}, Role: "R.1", Title: strings.Repeat("t", 256)}, pc{ID: "later"})
	if c := w.cell(id, id); !reflect.DeepEqual(c.Deps, []string{"later"}) {
		t.Fatalf("%+v", c)
	}
	if got := w.cell(id, "later").Dependents; !reflect.DeepEqual(got, []string{id + "/" + id}) {
		t.Fatalf("dependents %v", got)
	}
	// a wave can be planned with a qualified dep on its own wave
	w.plan("w2", pc{ID: "a"}, pc{ID: "b", Deps: []string{"w2/a"}})
	if rb := bits(t, w.wave("w2").Ready, 2); !rb[0] || rb[1] {
		t.Fatalf("ready %v", rb)
	}
	w.ok("claim", "A", claimB("w2", "a"))
	w.ok("done", "A", doneB("w2", "a", 1))
	if rb := bits(t, w.wave("w2").Ready, 2); rb[0] || !rb[1] {
		t.Fatalf("a qualified same-wave dep must be resolved on done: ready %v", rb)
	}
	w.ok("claim", "A", claimB("w2", "b"))
}

// TestNormalizePlan: the writer normalizes path patterns before the rules,
// which accept only the normal form.
func TestNormalizePlan(t *testing.T) {
	b := planBody("w", pc{ID: "a", Paths: []string{"./src/", "docs//api"}})
	if err := lease.NormalizePlan(&b); err != nil {
		t.Fatal(err)
	}
	if got := b.Cells[0].Paths; !reflect.DeepEqual(got, []string{"src", "docs/api"}) {
		t.Fatalf("normalized %v", got)
	}
	w := newWorld(t)
	w.ok("plan", "p", b)
	bad := planBody("w2", pc{ID: "a", Paths: []string{"../x"}})
	if err := lease.NormalizePlan(&bad); err == nil {
		t.Fatal("NormalizePlan accepted ../x")
	}
}

// TestPlanDuplicateDepSpellings: "a" and "w2/a" name the same dep; listing
// both is listing a dep twice (USAGE), like listing "a" twice. Accepting it
// records the dependent twice in a's dependents, which FORMAT.md §6 defines
// as the sorted wave/cell names depending on it.
func TestPlanDuplicateDepSpellings(t *testing.T) {
	w := newWorld(t)
	_, err := w.try("plan", "p", planBody("w2", pc{ID: "a"}, pc{ID: "b", Deps: []string{"a", "w2/a"}}))
	if err == nil {
		t.Fatalf("regression: a plan listing dep a as both \"a\" and \"w2/a\" is accepted and w2/a's dependents become %v; "+
			"fix: in lease/plan.go key the seen map by the resolved w+\"/\"+id rather than the raw dep string",
			w.cell("w2", "a").Dependents)
	}
	if errs.CodeOf(err) != "USAGE" {
		t.Fatalf("got %v, want USAGE", err)
	}
}

// A dependency whose stored cell is damaged is CORRUPT, not DEP-MISSING: the
// cell exists, the state does not read.
func TestPlanDamagedDependency(t *testing.T) {
	w := newWorld(t)
	w.plan("w1", pc{ID: "a"})
	damaged := 0
	for k := range w.kv {
		if strings.HasPrefix(k, "waves/w1/cells/") && strings.HasSuffix(k, "/a") {
			w.kv[k] = []byte("{not json")
			damaged++
		}
	}
	if damaged != 1 {
		t.Fatalf("found %d stored cells w1/a", damaged)
	}
	w.refuse("CORRUPT", "plan", "planner", planBody("w2", pc{ID: "b", Deps: []string{"w1/a"}}))
}

// Summaries are cut at a character boundary, so commit subjects stay UTF-8.
func TestSummaryCutsWholeCharacters(t *testing.T) {
	w := newWorld(t)
	for pad := 55; pad <= 62; pad++ {
		res := w.ok("note", "a", lease.NoteBody{Text: strings.Repeat("x", pad) + strings.Repeat("é", 10)})
		if !utf8.ValidString(res.Summary) || !strings.HasSuffix(res.Summary, "…") {
			t.Fatalf("pad %d: summary %q", pad, res.Summary)
		}
	}
}
