package lease_test

// Pure tests of the path-lease rules (lock, unlock, wait, break): a
// map-backed state, entries built by hand, lease.Apply called directly.
// Expected values (times, keys, witnesses) are worked out here, not taken
// from the code under test.

import (
	"encoding/hex"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"reflect"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/pathspec"
)

// ---------------------------------------------------------------- harness

type plKV map[string][]byte

func (m plKV) Get(key string) ([]byte, bool, error) { v, ok := m[key]; return v, ok, nil }

var plT0 = time.Date(2032, 5, 6, 7, 8, 9, 0, time.UTC)

func plStamp(d time.Duration) string { return plT0.Add(d).UTC().Format("2006-01-02T15:04:05.000Z") }

type plWorld struct {
	t   testing.TB
	kv  plKV
	seq uint64
	d   time.Duration // the clock: plT0 + d
}

func newPL(t testing.TB) *plWorld { return &plWorld{t: t, kv: plKV{}, seq: 1} }

func (w *plWorld) at(d time.Duration) *plWorld { w.d = d; return w }
func (w *plWorld) now() time.Time              { return plT0.Add(w.d) }

func (w *plWorld) try(kind chain.Kind, actor string, body any) (*lease.Result, error) {
	w.t.Helper()
	raw, err := json.Marshal(body)
	if err != nil {
		w.t.Fatal(err)
	}
	e := &chain.Entry{V: 1, Seq: w.seq, Kind: kind, TS: plStamp(w.d), Actor: actor,
		Nonce: "00112233445566778899aabbccddeeff", Body: raw}
	res, err := lease.Apply(w.kv, e)
	if err != nil {
		return nil, err
	}
	for k, v := range res.Changes {
		if v == nil {
			delete(w.kv, k)
		} else {
			w.kv[k] = v
		}
	}
	w.seq++
	return res, nil
}

func (w *plWorld) ok(kind chain.Kind, actor string, body any) *lease.Result {
	w.t.Helper()
	res, err := w.try(kind, actor, body)
	if err != nil {
		w.t.Fatalf("%s by %s at +%v: %v", kind, actor, w.d, err)
	}
	return res
}

func (w *plWorld) refuse(code errs.Code, kind chain.Kind, actor string, body any) *errs.Error {
	w.t.Helper()
	before := len(w.kv)
	res, err := w.try(kind, actor, body)
	if err == nil {
		w.t.Fatalf("%s by %s at +%v: accepted (%s), want %s", kind, actor, w.d, res.Summary, code)
	}
	e := errs.From(err)
	if e.Code != code {
		w.t.Fatalf("%s by %s: %v, want %s", kind, actor, err, code)
	}
	if len(w.kv) != before {
		w.t.Fatalf("a refused entry changed the state")
	}
	return e
}

func lockB(ttl int, patterns ...string) lease.LockBody {
	return lease.LockBody{Patterns: patterns, TTL: ttl}
}

// lock locks through PlanLock, the way the writer builds the entry, so the
// body names the leases it preempts.
func (w *plWorld) lock(actor string, ttl int, patterns ...string) (*lease.LockGrant, error) {
	w.t.Helper()
	pre, err := lease.PlanLock(w.kv, actor, patterns, w.now())
	if err != nil {
		return nil, err
	}
	b := lockB(ttl, patterns...)
	b.Preempts = pre
	res, err := w.try("lock", actor, b)
	if err != nil {
		w.t.Fatalf("PlanLock accepted what the rule refused: %v", err)
	}
	return res.Effect.(*lease.LockGrant), nil
}

func (w *plWorld) mustLock(actor string, ttl int, patterns ...string) *lease.LockGrant {
	w.t.Helper()
	g, err := w.lock(actor, ttl, patterns...)
	if err != nil {
		w.t.Fatalf("lock %v by %s at +%v: %v", patterns, actor, w.d, err)
	}
	return g
}

func (w *plWorld) roles(roles map[string]int, actors map[string]string) {
	w.t.Helper()
	w.ok("policy", "admin", lease.PolicySet{Roles: &roles})
	w.ok("policy", "admin", lease.PolicySet{ActorRoles: &actors})
}

func (w *plWorld) holds() []string {
	w.t.Helper()
	hs, err := lease.PathHolds(w.kv, w.now())
	if err != nil {
		w.t.Fatal(err)
	}
	out := []string{}
	for _, h := range hs {
		out = append(out, fmt.Sprintf("%s:%s@%d(%s)", h.Pattern, h.Actor, h.Epoch, h.Source))
	}
	return out
}

func (w *plWorld) record(pattern string) lease.PathLock {
	w.t.Helper()
	sum := blake3.Sum256([]byte(pattern))
	h := hex.EncodeToString(sum[:])
	raw, ok := w.kv["locks/"+h[:2]+"/"+h]
	if !ok {
		w.t.Fatalf("no state key for lock %s", pattern)
	}
	var pl lease.PathLock
	if err := json.Unmarshal(raw, &pl); err != nil {
		w.t.Fatal(err)
	}
	return pl
}

// ---------------------------------------------------------------- overlap property

// randPattern draws a normalized pattern from a small alphabet, so that
// overlaps and near misses are both common.
func randPattern(r *rand.Rand) string {
	segs := []string{"a", "b", "ab", "*", "?", "a*", "*b", "**", "?b", "a?", "x"}
	for {
		n := 1 + r.IntN(4)
		var parts []string
		for range n {
			parts = append(parts, segs[r.IntN(len(segs))])
		}
		if p, err := pathspec.Normalize(strings.Join(parts, "/")); err == nil {
			return p
		}
	}
}

// instance draws a path that pattern matches (directory semantics included).
func instance(r *rand.Rand, pattern string) string {
	fill := []string{"", "a", "b", "x", "ab", "ba"}
	var out []string
	for _, s := range strings.Split(pattern, "/") {
		if s == "**" {
			for range r.IntN(3) {
				out = append(out, []string{"a", "b", "ab", "x"}[r.IntN(4)])
			}
			continue
		}
		var seg strings.Builder
		for _, c := range s {
			switch c {
			case '*':
				seg.WriteString(fill[r.IntN(len(fill))])
			case '?':
				seg.WriteByte("abx"[r.IntN(3)])
			default:
				seg.WriteRune(c)
			}
		}
		out = append(out, seg.String())
	}
	for range r.IntN(2) {
		out = append(out, "z") // below a matched directory
	}
	return strings.Join(out, "/")
}

// TestLockOverlapProperty: with random patterns and paths, a second lock by
// another actor of equal priority is refused exactly when the patterns can
// match a common path. When some sampled path matches both, the lock must be
// refused; when it is refused, the reported witness must match both; and a
// higher-priority actor preempts exactly in the same cases.
func TestLockOverlapProperty(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	iters := 3000
	if testing.Short() {
		iters = 500
	}
	var refused, granted, sampledBoth int
	for i := range iters {
		p1, p2 := randPattern(r), randPattern(r)
		var samples []string
		for range 24 {
			samples = append(samples, instance(r, p1), instance(r, p2))
		}
		both := ""
		for _, s := range samples {
			if pathspec.Match(p1, s) && pathspec.Match(p2, s) {
				both = s
				break
			}
		}
		w := newPL(t)
		w.mustLock("alice", 600, p1)
		_, err := w.lock("bob", 600, p2)
		switch {
		case err == nil:
			granted++
			if both != "" {
				t.Fatalf("#%d: bob locked %q over alice's %q, but %q matches both", i, p2, p1, both)
			}
		default:
			refused++
			e := errs.From(err)
			wit, _ := e.Details["witness"].(string)
			if e.Code != "LEASE-HELD" || e.Details["pattern"] != p1 || e.Details["requested"] != p2 || e.Details["holder"] != "alice" {
				t.Fatalf("#%d: %v %v", i, err, e.Details)
			}
			if !pathspec.Match(p1, wit) || !pathspec.Match(p2, wit) {
				t.Fatalf("#%d: witness %q does not match both %q and %q", i, wit, p1, p2)
			}
		}
		if both != "" {
			sampledBoth++
		}
		// The same pair, the other way round, and with a lead preempting.
		w2 := newPL(t)
		w2.roles(map[string]int{"lead": 5}, map[string]string{"carol": "lead"})
		w2.mustLock("bob", 600, p2)
		g := w2.mustLock("carol", 600, p1)
		if preempted := len(g.Preempted) == 1; preempted != (err != nil) {
			t.Fatalf("#%d: %q then %q: refused=%v but preempted=%v", i, p1, p2, err != nil, g.Preempted)
		}
	}
	if refused < iters/10 || granted < iters/10 || sampledBoth < iters/10 {
		t.Fatalf("weak sample: %d refused, %d granted, %d with a common sampled path", refused, granted, sampledBoth)
	}
}

// ---------------------------------------------------------------- lock table

func TestLockRules(t *testing.T) {
	t.Run("grant", func(t *testing.T) {
		w := newPL(t).at(time.Second)
		g := w.mustLock("alice", 120, "docs", "src/**")
		want := []lease.Lock{
			{Pattern: "docs", LockLease: lease.LockLease{Actor: "alice", Epoch: 1, AcquiredAt: plStamp(time.Second),
				HeartbeatAt: plStamp(time.Second), ExpiresAt: plStamp(121 * time.Second), TTLSeconds: 120}},
			{Pattern: "src/**", LockLease: lease.LockLease{Actor: "alice", Epoch: 1, AcquiredAt: plStamp(time.Second),
				HeartbeatAt: plStamp(time.Second), ExpiresAt: plStamp(121 * time.Second), TTLSeconds: 120}},
		}
		if !reflect.DeepEqual(g.Locks, want) || len(g.Renewed) != 0 || len(g.Preempted) != 0 {
			t.Fatalf("grant %+v", g)
		}
		if pl := w.record("src/**"); pl.Epoch != 1 || pl.Lease == nil || !reflect.DeepEqual(pl.History, []uint64{1}) {
			t.Fatalf("record %+v", pl)
		}
		var ix struct {
			Locks []map[string]any `json:"locks"`
		}
		if err := json.Unmarshal(w.kv["locks/index"], &ix); err != nil || len(ix.Locks) != 2 || ix.Locks[0]["pattern"] != "docs" ||
			ix.Locks[1]["expires_at"] != plStamp(121*time.Second) {
			t.Fatalf("locks/index %s", w.kv["locks/index"])
		}
	})
	t.Run("renew-by-same-actor", func(t *testing.T) {
		w := newPL(t)
		w.mustLock("alice", 60, "src/**")
		g := w.at(50*time.Second).mustLock("alice", 300, "src/**")
		l := g.Locks[0]
		if l.Epoch != 1 || l.AcquiredAt != plStamp(0) || l.HeartbeatAt != plStamp(50*time.Second) ||
			l.ExpiresAt != plStamp(350*time.Second) || !slices.Equal(g.Renewed, []string{"src/**"}) {
			t.Fatalf("renew %+v", g)
		}
		// renewing with an explicit epoch, too
		res := w.at(60*time.Second).ok("lock", "alice", lease.LockBody{Patterns: []string{"src/**"}, TTL: 30, Epochs: []int64{1}})
		if l := res.Effect.(*lease.LockGrant).Locks[0]; l.Epoch != 1 || l.ExpiresAt != plStamp(90*time.Second) {
			t.Fatalf("renew with epoch %+v", l)
		}
		w.refuse("EPOCH-MISMATCH", "lock", "alice", lease.LockBody{Patterns: []string{"src/**"}, TTL: 30, Epochs: []int64{2}})
		w.refuse("ACTOR-MISMATCH", "lock", "bob", lease.LockBody{Patterns: []string{"src/**"}, TTL: 30, Epochs: []int64{1}})
		w.refuse("LEASE-MISSING", "lock", "alice", lease.LockBody{Patterns: []string{"docs"}, TTL: 30, Epochs: []int64{1}})
		w.at(91*time.Second).refuse("LEASE-EXPIRED", "lock", "alice", lease.LockBody{Patterns: []string{"src/**"}, TTL: 30, Epochs: []int64{1}})
	})
	t.Run("expiry-and-epochs", func(t *testing.T) {
		w := newPL(t)
		w.mustLock("alice", 60, "src/a")
		// live through expires_at itself, expired one millisecond later
		w.at(60 * time.Second)
		if _, err := w.lock("bob", 60, "src/**"); !errs.Is(err, "LEASE-HELD") {
			t.Fatalf("at expires_at: %v", err)
		}
		if h := w.holds(); !slices.Equal(h, []string{"src/a:alice@1(lock)"}) {
			t.Fatalf("holds %v", h)
		}
		w.at(60*time.Second + time.Millisecond)
		if h := w.holds(); len(h) != 0 {
			t.Fatalf("holds after expiry %v", h)
		}
		w.mustLock("bob", 60, "src/**")
		// the same pattern after expiry: a new epoch, even for the old holder
		if g := w.at(200*time.Second).mustLock("alice", 60, "src/a"); g.Locks[0].Epoch != 2 || len(g.Renewed) != 0 {
			t.Fatalf("relock after expiry %+v", g)
		}
		w.ok("unlock", "alice", lease.UnlockBody{Patterns: []string{"src/a"}, Epochs: []int64{2}})
		if g := w.mustLock("carol", 60, "src/a"); g.Locks[0].Epoch != 3 {
			t.Fatalf("epoch after unlock %+v", g)
		}
		if pl := w.record("src/a"); !slices.Equal(pl.History, []uint64{1, 3, 4, 5}) {
			t.Fatalf("history %v", pl.History)
		}
	})
	t.Run("unlock", func(t *testing.T) {
		w := newPL(t)
		w.mustLock("alice", 60, "a", "b")
		w.refuse("EPOCH-MISMATCH", "unlock", "alice", lease.UnlockBody{Patterns: []string{"a"}, Epochs: []int64{2}})
		w.refuse("ACTOR-MISMATCH", "unlock", "bob", lease.UnlockBody{Patterns: []string{"a"}, Epochs: []int64{1}})
		w.refuse("LEASE-MISSING", "unlock", "alice", lease.UnlockBody{Patterns: []string{"c"}, Epochs: []int64{1}})
		w.refuse("USAGE", "unlock", "alice", lease.UnlockBody{Patterns: []string{"a", "b"}, Epochs: []int64{1}})
		// all or nothing: b is fine, c is not
		w.refuse("LEASE-MISSING", "unlock", "alice", lease.UnlockBody{Patterns: []string{"b", "c"}, Epochs: []int64{1, 1}})
		// an expired lock may still be unlocked by its holder
		w.at(time.Hour).ok("unlock", "alice", lease.UnlockBody{Patterns: []string{"a", "b"}, Epochs: []int64{1, 1}})
		w.refuse("LEASE-MISSING", "unlock", "alice", lease.UnlockBody{Patterns: []string{"a"}, Epochs: []int64{1}})
		if _, ok := w.kv["locks/index"]; ok {
			t.Fatalf("empty locks/index not deleted")
		}
	})
	t.Run("preemption-by-higher-role", func(t *testing.T) {
		w := newPL(t)
		w.roles(map[string]int{"lead": 10, "dev": 1}, map[string]string{"lee": "lead", "dana": "dev"})
		w.mustLock("dana", 600, "src/a/*")
		w.mustLock("dana", 600, "docs")
		// the entry must name what it preempts
		w.refuse("USAGE", "lock", "lee", lockB(600, "src/**"))
		g := w.at(time.Second).mustLock("lee", 600, "src/**")
		if !reflect.DeepEqual(g.Preempted, []lease.Preempted{{Pattern: "src/a/*", Actor: "dana", Epoch: 1}}) || g.Locks[0].Epoch != 1 {
			t.Fatalf("preempt %+v", g)
		}
		if pl := w.record("src/a/*"); pl.Epoch != 2 || pl.Lease != nil {
			t.Fatalf("preempted lock %+v", pl)
		}
		// the preempted holder is fenced: its epoch is stale
		w.refuse("EPOCH-MISMATCH", "unlock", "dana", lease.UnlockBody{Patterns: []string{"src/a/*"}, Epochs: []int64{1}})
		w.refuse("EPOCH-MISMATCH", "lock", "dana", lease.LockBody{Patterns: []string{"src/a/*"}, TTL: 60, Epochs: []int64{1}})
		if _, err := w.lock("dana", 600, "src/a/*"); !errs.Is(err, "LEASE-HELD") {
			t.Fatalf("dana relocks under lee: %v", err)
		}
		if h := w.holds(); !slices.Equal(h, []string{"docs:dana@1(lock)", "src/**:lee@1(lock)"}) {
			t.Fatalf("holds %v", h)
		}
		// preempting the very same pattern: one new epoch
		w.mustLock("dana", 600, "api")
		if g := w.mustLock("lee", 600, "api"); g.Locks[0].Epoch != 2 || g.Preempted[0].Epoch != 1 {
			t.Fatalf("same-pattern preempt %+v", g)
		}
	})
	t.Run("equal-or-lower-priority-denied", func(t *testing.T) {
		w := newPL(t)
		w.roles(map[string]int{"lead": 10, "dev": 1}, map[string]string{"lee": "lead", "dana": "dev", "dave": "dev"})
		w.mustLock("dana", 600, "src/a/x.go")
		for _, who := range []string{"dave", "nobody"} { // equal; no role (priority 0)
			_, err := w.lock(who, 600, "src/*/x.go")
			e := errs.From(err)
			if e.Code != "LEASE-HELD" || e.Class() != errs.Retryable || e.Details["holder"] != "dana" || e.Details["epoch"] != int64(1) ||
				e.Details["expires_at"] != plStamp(600*time.Second) || e.Details["pattern"] != "src/a/x.go" || e.Details["witness"] != "src/a/x.go" {
				t.Fatalf("%s: %v %v", who, err, e.Details)
			}
		}
		w.mustLock("lee", 600, "lib")
		if _, err := w.lock("dana", 600, "lib/**"); !errs.Is(err, "LEASE-HELD") {
			t.Fatalf("lower over higher: %v", err)
		}
	})
	t.Run("cell-paths-are-held", func(t *testing.T) {
		w := newPL(t)
		w.roles(map[string]int{"lead": 10}, map[string]string{"lee": "lead"})
		w.ok("plan", "x", lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{{ID: "c", Paths: []string{"db/**"}}, {ID: "d"}}})
		w.ok("claim", "xena", lease.ClaimBody{CellRef: lease.CellRef{Wave: "w", Cell: "c"}, TTL: 60, PID: 1, Host: "h", Mode: lease.ModeClaim})
		for _, who := range []string{"bob", "lee"} { // never preempted, whatever the priority
			_, err := w.lock(who, 60, "db/schema.sql")
			if e := errs.From(err); e.Code != "LEASE-HELD" || e.Details["source"] != "cell w/c" || e.Details["holder"] != "xena" {
				t.Fatalf("%s: %v", who, err)
			}
		}
		w.mustLock("xena", 60, "db/**") // the holder's own cell does not conflict
		if h := w.holds(); !slices.Equal(h, []string{"db/**:xena@1(lock)", "db/**:xena@1(cell w/c)"}) {
			t.Fatalf("holds %v", h)
		}
		w.ok("release", "xena", lease.EpochBody{CellRef: lease.CellRef{Wave: "w", Cell: "c"}, Epoch: 1})
		w.ok("unlock", "xena", lease.UnlockBody{Patterns: []string{"db/**"}, Epochs: []int64{1}})
		w.mustLock("bob", 60, "db/schema.sql")
	})
	t.Run("own-locks-and-atomicity", func(t *testing.T) {
		w := newPL(t)
		w.mustLock("alice", 60, "src/**")
		w.mustLock("alice", 60, "src/a") // overlapping own locks are fine
		w.mustLock("bob", 60, "docs")
		if _, err := w.lock("bob", 60, "lib", "src/b"); !errs.Is(err, "LEASE-HELD") {
			t.Fatalf("%v", err)
		}
		if pl, _ := lease.ReadLock(w.kv, "lib"); pl != nil {
			t.Fatalf("a refused lock entry locked lib")
		}
	})
	t.Run("malformed", func(t *testing.T) {
		w := newPL(t)
		for _, b := range []lease.LockBody{
			lockB(60), lockB(60, "src/../x"), lockB(60, "/etc"), lockB(60, ""), lockB(60, "./src"), lockB(60, "b", "a"),
			lockB(60, "a", "a"), lockB(29, "a"), lockB(86401, "a"),
			{Patterns: []string{"a", "b"}, TTL: 60, Epochs: []int64{1}},
		} {
			w.refuse("USAGE", "lock", "alice", b)
		}
		w.refuse("USAGE", "lock", "alice", `{"patterns":["a"],"ttl":60,"extra":1}`)
	})
}

// ---------------------------------------------------------------- waits and deadlocks

func (w *plWorld) wait(actor, pattern string) {
	w.t.Helper()
	hs, err := lease.Blockers(w.kv, actor, pattern, w.now())
	if err != nil {
		w.t.Fatal(err)
	}
	w.ok("wait", actor, lease.WaitBody{Pattern: pattern, Holders: hs})
}

func (w *plWorld) graph() *lease.WaitGraph {
	w.t.Helper()
	g, err := lease.WaitCycles(w.kv, w.now())
	if err != nil {
		w.t.Fatal(err)
	}
	return g
}

func TestWaitRules(t *testing.T) {
	w := newPL(t)
	w.mustLock("alice", 3600, "src/**")
	w.refuse("USAGE", "wait", "bob", lease.WaitBody{Pattern: "src/a"})                                // holders missing
	w.refuse("USAGE", "wait", "bob", lease.WaitBody{Pattern: "src/a", Holders: []string{"carol"}})    // wrong holders
	w.refuse("USAGE", "wait", "bob", lease.WaitBody{Pattern: "docs", Holders: []string{"alice"}})     // not blocked
	w.refuse("USAGE", "wait", "bob", lease.WaitBody{Clear: true})                                     // nothing to clear
	w.refuse("USAGE", "wait", "bob", lease.WaitBody{Pattern: "src/../a", Holders: []string{"alice"}}) // not normalized
	w.ok("wait", "bob", lease.WaitBody{Pattern: "src/a", Holders: []string{"alice"}})
	ws, err := lease.Waits(w.kv, w.now())
	if err != nil || len(ws) != 1 || ws[0].Waiter != "bob" || ws[0].ExpiresAt != plStamp(10*time.Minute) || ws[0].Seq != 2 {
		t.Fatalf("waits %+v %v", ws, err)
	}
	// waits expire ten minutes after they were recorded
	if ws, _ := lease.Waits(w.at(10*time.Minute+time.Millisecond).kv, w.now()); len(ws) != 0 {
		t.Fatalf("expired wait listed %+v", ws)
	}
	w.at(0).ok("wait", "bob", lease.WaitBody{Clear: true})
	if _, ok := w.kv["waits/index"]; ok {
		t.Fatal("waits/index kept after the last wait was cleared")
	}
	// a grant clears the grantee's wait
	w.wait("bob", "src/a")
	w.ok("unlock", "alice", lease.UnlockBody{Patterns: []string{"src/**"}, Epochs: []int64{1}})
	w.mustLock("bob", 60, "src/a")
	if wt, _ := lease.ReadWait(w.kv, "bob"); wt != nil {
		t.Fatalf("wait survived the grant: %+v", wt)
	}
}

// threeCycle builds alice -> bob -> carol -> alice: actor i holds p<i>/**
// (a path lock, or with cells the paths of a claimed cell) and a lock on
// own<i>, and waits for p<i+1>/x. order permutes the order of the waits.
// Among path locks alone every member of a cycle has the same priority (a
// waiter that outranks a lock's holder preempts it instead of waiting);
// cells, which locks never preempt, make cycles across priorities.
func threeCycle(t *testing.T, roles map[string]string, cells bool, order []int) *plWorld {
	w := newPL(t)
	if roles != nil {
		w.roles(map[string]int{"lead": 10, "dev": 1}, roles)
	}
	actors := []string{"alice", "bob", "carol"}
	if cells {
		w.ok("plan", "x", lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{
			{ID: "c0", Paths: []string{"p0/**"}}, {ID: "c1", Paths: []string{"p1/**"}}, {ID: "c2", Paths: []string{"p2/**"}}}})
	}
	for i, a := range actors {
		if cells {
			w.ok("claim", a, lease.ClaimBody{CellRef: lease.CellRef{Wave: "w", Cell: fmt.Sprintf("c%d", i)}, TTL: 3600, PID: 1, Host: "h", Mode: lease.ModeClaim})
		} else {
			w.mustLock(a, 3600, fmt.Sprintf("p%d/**", i))
		}
		w.mustLock(a, 3600, fmt.Sprintf("own%d", i))
	}
	for _, i := range order {
		w.wait(actors[i], fmt.Sprintf("p%d/x", (i+1)%3))
	}
	return w
}

func TestDeadlockVictims(t *testing.T) {
	cases := []struct {
		name   string
		roles  map[string]string
		cells  bool
		victim string
	}{
		{"locks-equal-priority-last-name", nil, false, "carol"},
		{"locks-equal-roles-last-name", map[string]string{"alice": "lead", "bob": "lead", "carol": "lead"}, false, "carol"},
		{"cells-no-roles-last-name", nil, true, "carol"},
		{"cells-lowest-priority", map[string]string{"alice": "lead", "bob": "dev", "carol": "lead"}, true, "bob"},
		{"cells-tie-among-lowest", map[string]string{"alice": "dev", "bob": "lead", "carol": "dev"}, true, "carol"},
		{"cells-tie-among-lowest-2", map[string]string{"alice": "dev", "bob": "dev", "carol": "lead"}, true, "bob"},
		{"cells-no-role-is-priority-0", map[string]string{"alice": "dev", "carol": "dev"}, true, "bob"},
	}
	perms := [][]int{{0, 1, 2}, {0, 2, 1}, {1, 0, 2}, {1, 2, 0}, {2, 0, 1}, {2, 1, 0}}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			for _, order := range perms {
				w := threeCycle(t, tc.roles, tc.cells, order)
				g := w.graph()
				if !reflect.DeepEqual(g.Cycles, [][]string{{"alice", "bob", "carol"}}) || !slices.Equal(g.Victims, []string{tc.victim}) || len(g.Edges) != 3 {
					t.Fatalf("order %v: %+v", order, g)
				}
				// a break naming anyone else is refused
				for _, wrong := range []string{"alice", "bob", "carol"} {
					if wrong != tc.victim {
						w.refuse("USAGE", "break", "dan", lease.BreakBody{Cycles: g.Cycles, Victims: []string{wrong}})
					}
				}
				w.refuse("USAGE", "break", "dan", lease.BreakBody{Cycles: [][]string{{"alice", "bob"}}, Victims: g.Victims})
				res := w.ok("break", "dan", lease.BreakBody{Cycles: g.Cycles, Victims: g.Victims}).Effect.(*lease.BreakResult)
				vi := map[string]int{"alice": 0, "bob": 1, "carol": 2}[tc.victim]
				want := []lease.Preempted{{Pattern: fmt.Sprintf("own%d", vi), Actor: tc.victim, Epoch: 1}}
				if !tc.cells {
					want = append(want, lease.Preempted{Pattern: fmt.Sprintf("p%d/**", vi), Actor: tc.victim, Epoch: 1})
				}
				if !reflect.DeepEqual(res.Released, want) {
					t.Fatalf("released %+v, want %+v", res.Released, want)
				}
				for _, p := range want {
					if pl := w.record(p.Pattern); pl.Epoch != 2 || pl.Lease != nil {
						t.Fatalf("victim's lock %+v", pl)
					}
				}
				if wt, _ := lease.ReadWait(w.kv, tc.victim); wt != nil {
					t.Fatalf("victim's wait kept")
				}
				if g := w.graph(); len(g.Cycles) != 0 {
					t.Fatalf("cycle left %+v", g)
				}
				w.refuse("USAGE", "break", "dan", lease.BreakBody{Cycles: [][]string{}, Victims: []string{}})
				if !tc.cells { // the victim's predecessor can now take the victim's pattern
					pred := []string{"alice", "bob", "carol"}[(vi+2)%3]
					w.mustLock(pred, 60, fmt.Sprintf("p%d/x", vi))
				}
			}
		})
	}
}

// TestDeadlockRounds: one component holding two cycles (alice <-> bob <->
// carol, bob waiting on a pattern both others hold) needs two victims: the
// first round takes carol (equal priorities: last name), which leaves
// alice <-> bob, whose victim is bob.
func TestDeadlockRounds(t *testing.T) {
	w := newPL(t)
	w.mustLock("alice", 3600, "x/a")
	w.mustLock("bob", 3600, "y")
	w.mustLock("carol", 3600, "x/c")
	w.wait("alice", "y")
	w.wait("carol", "y")
	w.wait("bob", "x/**")
	g := w.graph()
	wantEdges := []lease.WaitEdge{{"alice", "bob", "y"}, {"bob", "alice", "x/**"}, {"bob", "carol", "x/**"}, {"carol", "bob", "y"}}
	if !reflect.DeepEqual(g.Edges, wantEdges) || !reflect.DeepEqual(g.Cycles, [][]string{{"alice", "bob", "carol"}}) ||
		!slices.Equal(g.Victims, []string{"bob", "carol"}) {
		t.Fatalf("%+v", g)
	}
	w.ok("break", "dan", lease.BreakBody{Cycles: g.Cycles, Victims: g.Victims})
	if g := w.graph(); len(g.Cycles) != 0 || len(g.Edges) != 0 {
		t.Fatalf("after break %+v", g)
	}
}

// TestWaitGraphEdges: edges are recomputed from the live holds, so a chain
// is no cycle, a released holder drops its edges, and a holder the waiter
// could preempt is no edge at all.
func TestWaitGraphEdges(t *testing.T) {
	w := newPL(t)
	w.roles(map[string]int{"lead": 10}, map[string]string{"lee": "lead"})
	w.mustLock("alice", 3600, "a")
	w.mustLock("bob", 3600, "b")
	w.mustLock("lee", 3600, "l")
	w.wait("alice", "b")
	w.wait("bob", "l")
	if g := w.graph(); len(g.Cycles) != 0 || len(g.Edges) != 2 {
		t.Fatalf("chain %+v", g)
	}
	// lee waits for a: alice holds it, but lee outranks alice, so lee is not
	// blocked and may not record a wait
	w.refuse("USAGE", "wait", "lee", lease.WaitBody{Pattern: "a", Holders: []string{"alice"}})
	w.ok("unlock", "bob", lease.UnlockBody{Patterns: []string{"b"}, Epochs: []int64{1}})
	g := w.graph()
	if !reflect.DeepEqual(g.Edges, []lease.WaitEdge{{"bob", "lee", "l"}}) {
		t.Fatalf("stale edge kept %+v", g.Edges)
	}
	// a cycle through a cell's paths: lee outranks bob but may not preempt a
	// cell, so lee waits for bob's cell while bob waits for lee's lock
	w.ok("plan", "x", lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{{ID: "c", Paths: []string{"c/**"}}}})
	w.ok("claim", "bob", lease.ClaimBody{CellRef: lease.CellRef{Wave: "w", Cell: "c"}, TTL: 3600, PID: 1, Host: "h", Mode: lease.ModeClaim})
	w.mustLock("bob", 3600, "b") // (a grant clears the grantee's wait)
	w.wait("bob", "l")
	w.wait("lee", "c/x")
	g = w.graph()
	if !reflect.DeepEqual(g.Cycles, [][]string{{"bob", "lee"}}) || !slices.Equal(g.Victims, []string{"bob"}) {
		t.Fatalf("%+v", g)
	}
	res := w.ok("break", "dan", lease.BreakBody{Cycles: g.Cycles, Victims: g.Victims}).Effect.(*lease.BreakResult)
	if len(res.Released) != 1 || res.Released[0].Pattern != "b" {
		t.Fatalf("released %+v", res.Released)
	}
	if g := w.graph(); len(g.Cycles) != 0 {
		t.Fatalf("%+v", g)
	}
}
