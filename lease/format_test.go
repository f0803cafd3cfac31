package lease_test

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/lease"
)

// TestFormatFacts pins facts of FORMAT.md §5–§7 that a verifier written
// from the document alone must reproduce, read from the stored blobs: the
// `plan` blob appears with the first plan; a wave's `added` is its plan's
// seq and `counts` lists only non-zero states; a later plan that adds
// dependents to a cell does not add its seq to the cell's history; `receipt`
// is {seq, commit}; requeue drops `reason` and keeps the epoch; a cell renew
// changes heartbeat_at, expires_at and ttl_seconds only; stored `protected`
// and `admins` are sorted bytewise.
func TestFormatFacts(t *testing.T) {
	w := newWorld(t)
	if _, ok := w.kv["plan"]; ok {
		t.Fatal("a plan blob before any plan")
	}
	w.plan("w", pc{ID: "b"}, pc{ID: "a"})
	if got := string(w.kv["plan"]); got != `{"waves":["w"]}` {
		t.Fatalf("plan blob %s", got)
	}
	if wv := w.wave("w"); wv.Added != 1 || !reflect.DeepEqual(wv.Counts, map[string]int{"pending": 2}) {
		t.Fatalf("wave added %d counts %v", wv.Added, wv.Counts)
	}
	w.ok("plan", "planner", planBody("v", pc{ID: "x", Deps: []string{"w/a"}})) // seq 2
	if c := w.cell("w", "a"); !reflect.DeepEqual(c.Dependents, []string{"v/x"}) || !reflect.DeepEqual(c.History, []uint64{1}) {
		t.Fatalf("after a plan adding a dependent: dependents %v history %v", c.Dependents, c.History)
	}

	w.set(time.Second).ok("claim", "A", claimB("w", "a")) // seq 3
	before := *w.cell("w", "a").Lease
	w.set(2*time.Second).ok("renew", "A", renewB("w", "a", 1, 600)) // seq 4
	after := *w.cell("w", "a").Lease
	want := before
	want.HeartbeatAt, want.ExpiresAt, want.TTLSeconds = at(2*time.Second), at(602*time.Second), 600
	if after != want {
		t.Fatalf("renew changed the lease to %+v, want %+v", after, want)
	}
	if wv := w.wave("w"); !reflect.DeepEqual(wv.Counts, map[string]int{"pending": 1, "claimed": 1}) {
		t.Fatalf("counts %v", wv.Counts)
	}
	w.ok("fail", "A", failB("w", "a", 1, "flaky")) // seq 5
	w.ok("requeue", "A", requeueB("w", "a"))       // seq 6
	c := w.cell("w", "a")
	if c.Reason != "" || c.Epoch != 1 || strings.Contains(string(w.kv[cellKeyOf(t, w, "w", "a")]), "reason") {
		t.Fatalf("after requeue: %+v", c)
	}
	w.ok("claim", "A", claimB("w", "a"))       // seq 7, epoch 2
	w.ok("done", "A", doneB("w", "a", 2, "x")) // seq 8
	if c := w.cell("w", "a"); !reflect.DeepEqual(c.Receipt, &lease.Ref{Seq: 8, Commit: commitA}) ||
		!reflect.DeepEqual(c.History, []uint64{1, 3, 4, 5, 6, 7, 8}) {
		t.Fatalf("done cell receipt %+v history %v", c.Receipt, c.History)
	}
	if wv := w.wave("w"); !reflect.DeepEqual(wv.Counts, map[string]int{"pending": 1, "done": 1}) {
		t.Fatalf("counts %v", wv.Counts)
	}

	protected := []string{"refs/heads/z", "refs/heads/B", "refs/heads/a"}
	admins := []string{"zed", "Ann", "bob"}
	w.ok("policy", "admin", lease.PolicySet{Protected: &protected, Admins: &admins})
	p := string(w.kv["policy"])
	if !strings.Contains(p, `"protected":["refs/heads/B","refs/heads/a","refs/heads/z"]`) || !strings.Contains(p, `"admins":["Ann","bob","zed"]`) {
		t.Fatalf("stored policy lists are not sorted bytewise: %s", p)
	}
}

// cellKeyOf finds the state key of a cell's blob (the sharded path of §6).
func cellKeyOf(t *testing.T, w *world, wave, cell string) string {
	t.Helper()
	for k := range w.kv {
		if strings.HasPrefix(k, "waves/"+wave+"/cells/") && strings.HasSuffix(k, "/"+cell) {
			return k
		}
	}
	t.Fatalf("no blob for cell %s/%s", wave, cell)
	return ""
}
