package lease_test

// Pure tests of the lease rules: a map-backed chain.KV, entries built by hand
// and lease.Apply called directly, its Changes applied to the map between
// steps. No git, no clock: time is the entry's ts, set by each test.

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

// ---------------------------------------------------------------- harness

// memKV is the state: key -> canonical JSON.
type memKV map[string][]byte

func (m memKV) Get(key string) ([]byte, bool, error) {
	v, ok := m[key]
	return v, ok, nil
}

func (m memKV) clone() memKV {
	out := make(memKV, len(m))
	for k, v := range m {
		out[k] = append([]byte(nil), v...)
	}
	return out
}

// t0 is the start of every test's clock.
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

// stamp formats an instant the way the format prescribes (FORMAT.md §2):
// RFC 3339 UTC with exactly three fractional digits. Written here rather than
// taken from chain, so the expected values do not come from the code under test.
func stamp(t time.Time) string { return t.UTC().Format("2006-01-02T15:04:05.000Z") }

// at is t0 + d, formatted.
func at(d time.Duration) string { return stamp(t0.Add(d)) }

// world is a ledger state plus a clock and the next seq.
type world struct {
	t   testing.TB
	kv  memKV
	seq uint64
	now time.Time
}

func newWorld(t testing.TB) *world {
	return &world{t: t, kv: memKV{}, seq: 1, now: t0} // seq 0 would be the genesis entry
}

// set moves the clock to t0 + d.
func (w *world) set(d time.Duration) *world { w.now = t0.Add(d); return w }

func (w *world) entry(kind chain.Kind, actor string, body any) *chain.Entry {
	w.t.Helper()
	var raw []byte
	switch b := body.(type) {
	case string:
		raw = []byte(b)
	default:
		var err error
		if raw, err = json.Marshal(body); err != nil {
			w.t.Fatal(err)
		}
	}
	return &chain.Entry{V: 1, Seq: w.seq, Kind: kind, TS: stamp(w.now), Actor: actor,
		Nonce: "00112233445566778899aabbccddeeff", Body: json.RawMessage(raw)}
}

// try applies an entry; on success its changes are written to the state.
func (w *world) try(kind chain.Kind, actor string, body any) (*lease.Result, error) {
	w.t.Helper()
	before := w.kv.clone()
	res, err := lease.Apply(w.kv, w.entry(kind, actor, body))
	if !reflect.DeepEqual(before, w.kv) {
		w.t.Fatalf("Apply modified the state it was given")
	}
	if err != nil {
		if res != nil {
			w.t.Fatalf("Apply returned both a result and an error")
		}
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

// ok applies an entry that must be legal.
func (w *world) ok(kind chain.Kind, actor string, body any) *lease.Result {
	w.t.Helper()
	res, err := w.try(kind, actor, body)
	if err != nil {
		w.t.Fatalf("%s by %s at %s: unexpected refusal %v", kind, actor, stamp(w.now), err)
	}
	return res
}

// refuse applies an entry that must be refused with code; it returns the error.
func (w *world) refuse(code errs.Code, kind chain.Kind, actor string, body any) *errs.Error {
	w.t.Helper()
	before := w.kv.clone()
	res, err := w.try(kind, actor, body)
	if err == nil {
		w.t.Fatalf("%s by %s at %s: accepted (%q), want %s", kind, actor, stamp(w.now), res.Summary, code)
	}
	e := errs.From(err)
	if e.Code != code {
		w.t.Fatalf("%s by %s at %s: got %s (%s), want %s", kind, actor, stamp(w.now), e.Code, e.Message, code)
	}
	if !reflect.DeepEqual(before, w.kv) {
		w.t.Fatalf("refused %s changed the state", kind)
	}
	return e
}

func (w *world) cell(wave, id string) *lease.Cell {
	w.t.Helper()
	c, err := lease.ReadCell(w.kv, wave, id)
	if err != nil {
		w.t.Fatalf("read cell %s/%s: %v", wave, id, err)
	}
	return c
}

func (w *world) wave(id string) *lease.Wave {
	w.t.Helper()
	wv, err := lease.ReadWave(w.kv, id)
	if err != nil {
		w.t.Fatalf("read wave %s: %v", id, err)
	}
	return wv
}

// ---------------------------------------------------------------- bodies

type pc = lease.PlanCell

func planBody(wave string, cells ...pc) lease.PlanBody {
	return lease.PlanBody{Wave: wave, Cells: cells}
}

// plan adds a wave that must be accepted.
func (w *world) plan(wave string, cells ...pc) {
	w.t.Helper()
	w.ok("plan", "planner", planBody(wave, cells...))
}

func claimB(wave, cell string) lease.ClaimBody {
	return lease.ClaimBody{CellRef: lease.CellRef{Wave: wave, Cell: cell}, TTL: 1800, PID: 100, Host: "h1", Mode: lease.ModeClaim}
}

func withTTL(b lease.ClaimBody, ttl int) lease.ClaimBody   { b.TTL = ttl; return b }
func withMode(b lease.ClaimBody, m string) lease.ClaimBody { b.Mode = m; return b }
func withHost(b lease.ClaimBody, host string, pid int) lease.ClaimBody {
	b.Host, b.PID = host, pid
	return b
}

func epochB(wave, cell string, epoch int64) lease.EpochBody {
	return lease.EpochBody{CellRef: lease.CellRef{Wave: wave, Cell: cell}, Epoch: epoch}
}

func renewB(wave, cell string, epoch int64, ttl int) lease.RenewBody {
	return lease.RenewBody{EpochBody: epochB(wave, cell, epoch), TTL: ttl}
}

func failB(wave, cell string, epoch int64, reason string) lease.FailBody {
	return lease.FailBody{EpochBody: epochB(wave, cell, epoch), Reason: reason}
}

func requeueB(wave, cell string) lease.CellRef { return lease.CellRef{Wave: wave, Cell: cell} }

const (
	commitA = "1111111111111111111111111111111111111111"
	treeA   = "2222222222222222222222222222222222222222"
	baseA   = "3333333333333333333333333333333333333333"
)

func doneB(wave, cell string, epoch int64, changed ...string) lease.DoneBody {
	if changed == nil {
		changed = []string{}
	}
	return lease.DoneBody{EpochBody: epochB(wave, cell, epoch), Commit: commitA, Tree: treeA, Base: baseA,
		Changed: changed, Evidence: []lease.Evidence{}}
}

// granted returns the lease a claim or renew result carries.
func granted(t testing.TB, r *lease.Result) *lease.Granted {
	t.Helper()
	g, ok := r.Effect.(*lease.Granted)
	if !ok || g.Lease == nil {
		t.Fatalf("effect %T is not a granted lease", r.Effect)
	}
	return g
}

// ---------------------------------------------------------------- bitmaps

// bits decodes a wave bitmap as FORMAT.md §6 defines it (base64url without
// padding; bit i is byte i/8, bit i%8, least significant first).
func bits(t testing.TB, s string, size int) []bool {
	t.Helper()
	b, err := base64.RawURLEncoding.DecodeString(s)
	if err != nil {
		t.Fatalf("bitmap %q: %v", s, err)
	}
	if len(b) != (size+7)/8 {
		t.Fatalf("bitmap %q: %d bytes for %d cells", s, len(b), size)
	}
	out := make([]bool, size)
	for i := range out {
		out[i] = b[i/8]&(1<<(i%8)) != 0
	}
	for i := size; i < len(b)*8; i++ {
		if b[i/8]&(1<<(i%8)) != 0 {
			t.Fatalf("bitmap %q has bit %d set past the wave's %d cells", s, i, size)
		}
	}
	return out
}

// ---------------------------------------------------------------- tests

// TestEpochArithmetic walks one cell through every way of getting a new
// lease and checks the epoch after each: first claim 1, reclaim after expiry
// +1, release keeps it and the next claim +1, steal +1, requeue keeps it and
// the next claim +1, reclaim-dead +1. Epochs are never reused.
func TestEpochArithmetic(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "c"})
	type step struct {
		at     time.Duration
		kind   string
		actor  string
		body   any
		state  string
		epoch  int64
		holder string
	}
	m := time.Minute
	steps := []step{
		{0, "claim", "A", withTTL(claimB("w", "c"), 60), lease.Claimed, 1, "A"},
		// expired at 60s: reclaimed at 60s+1ms by B, epoch 2
		{60*time.Second + time.Millisecond, "claim", "B", withTTL(claimB("w", "c"), 60), lease.Claimed, 2, "B"},
		// release keeps the epoch
		{2 * m, "release", "B", epochB("w", "c", 2), lease.Pending, 2, ""},
		// the next claim takes 3, even by the same actor
		{3 * m, "claim", "B", claimB("w", "c"), lease.Claimed, 3, "B"},
		// B renews twice (the second exactly at expires_at, still live) so the
		// lease is live beyond its max_hold_until (3m+60m)
		{3*m + 29*m, "renew", "B", renewB("w", "c", 3, 1800), lease.Claimed, 3, "B"},
		{3*m + 59*m, "renew", "B", renewB("w", "c", 3, 1800), lease.Claimed, 3, "B"},
		// steal right after max_hold_until: epoch 4
		{3*m + 60*m + time.Millisecond, "claim", "C", withMode(claimB("w", "c"), lease.ModeSteal), lease.Claimed, 4, "C"},
		{64 * m, "fail", "C", failB("w", "c", 4, "broke"), lease.Failed, 4, ""},
		{65 * m, "requeue", "ops", requeueB("w", "c"), lease.Pending, 4, ""},
		{66 * m, "claim", "A", withHost(claimB("w", "c"), "h1", 4242), lease.Claimed, 5, "A"},
		// a dead holder is taken over at epoch 6
		{67 * m, "claim", "B", func() lease.ClaimBody {
			b := withMode(claimB("w", "c"), lease.ModeReclaimDead)
			b.Dead = &lease.DeadPeer{Actor: "A", Epoch: 5, Host: "h1", PID: 4242, Alive: false}
			return b
		}(), lease.Claimed, 6, "B"},
		{68 * m, "release", "B", epochB("w", "c", 6), lease.Pending, 6, ""},
		{69 * m, "claim", "A", claimB("w", "c"), lease.Claimed, 7, "A"},
	}
	seen := map[int64]bool{}
	for i, s := range steps {
		w.set(s.at)
		res := w.ok(chain.Kind(s.kind), s.actor, s.body)
		c := w.cell("w", "c")
		if c.State != s.state || c.Epoch != s.epoch {
			t.Fatalf("step %d (%s by %s): state %s epoch %d, want %s epoch %d", i, s.kind, s.actor, c.State, c.Epoch, s.state, s.epoch)
		}
		if s.holder == "" {
			if c.Lease != nil {
				t.Fatalf("step %d: %s cell still has a lease %+v", i, c.State, c.Lease)
			}
		} else {
			if c.Lease == nil || c.Lease.Actor != s.holder || c.Lease.Epoch != s.epoch {
				t.Fatalf("step %d: lease %+v, want holder %s epoch %d", i, c.Lease, s.holder, s.epoch)
			}
		}
		if s.kind == "claim" {
			g := granted(t, res)
			if g.Lease.Epoch != s.epoch {
				t.Fatalf("step %d: granted epoch %d, want %d", i, g.Lease.Epoch, s.epoch)
			}
			if seen[s.epoch] {
				t.Fatalf("step %d: epoch %d granted twice", i, s.epoch)
			}
			seen[s.epoch] = true
		}
	}
	// history lists every entry that touched the cell: the plan (seq 1) and
	// each step (seq 2...).
	want := []uint64{1}
	for i := range steps {
		want = append(want, uint64(2+i))
	}
	if got := w.cell("w", "c").History; !reflect.DeepEqual(got, want) {
		t.Fatalf("history %v, want %v", got, want)
	}
}

// TestClaimLeaseTimes checks expires_at = ts + ttl and
// max_hold_until = ts + max(2·ttl, 30 min), including TTLs where 2·ttl is
// below, equal to and above 30 minutes, and the other lease fields.
func TestClaimLeaseTimes(t *testing.T) {
	const ms = time.Millisecond
	cases := []struct {
		ttl     int
		maxHold time.Duration // from acquisition, computed by hand
	}{
		{30, 30 * time.Minute},                // the minimum: 2·30 s = 1 min < 30 min
		{899, 30 * time.Minute},               // 2·ttl = 29 min 58 s < 30 min
		{900, 30 * time.Minute},               // 2·ttl = 30 min exactly
		{901, 30*time.Minute + 2*time.Second}, // 2·ttl wins by 2 s
		{1800, time.Hour},                     // the default
		{1801, time.Hour + 2*time.Second},     // 2·ttl > 30 min
		{4000, 8000 * time.Second},            // arbitrary
		{86400, 48 * time.Hour},               // the maximum
	}
	for _, tc := range cases {
		t.Run(fmt.Sprint(tc.ttl), func(t *testing.T) {
			w := newWorld(t)
			w.plan("w", pc{ID: "c"})
			start := 7*time.Second + 123*ms // a timestamp with milliseconds
			w.set(start)
			b := withTTL(claimB("w", "c"), tc.ttl)
			b.Base = baseA
			b.PID, b.Host = 31337, "build-7"
			g := granted(t, w.ok("claim", "agent-1", b))
			want := lease.Lease{Actor: "agent-1", PID: 31337, Host: "build-7", Epoch: 1,
				AcquiredAt: at(start), HeartbeatAt: at(start),
				ExpiresAt:    at(start + time.Duration(tc.ttl)*time.Second),
				MaxHoldUntil: at(start + tc.maxHold), TTLSeconds: tc.ttl, Base: baseA}
			if *g.Lease != want {
				t.Fatalf("granted lease\n got %+v\nwant %+v", *g.Lease, want)
			}
			if c := w.cell("w", "c"); c.Lease == nil || *c.Lease != want {
				t.Fatalf("stored lease\n got %+v\nwant %+v", c.Lease, want)
			}
			if g.Takeover != "" || g.Prior != nil {
				t.Fatalf("fresh claim reported a takeover %q %+v", g.Takeover, g.Prior)
			}
		})
	}
}

// TestExpiryBoundary: a lease whose expires_at equals the entry time is still
// live; one millisecond later it is expired. Checked for claim (LEASE-HELD vs
// reclaim), renew, fail and done (accepted vs LEASE-EXPIRED).
func TestExpiryBoundary(t *testing.T) {
	const ttl = 60
	exp := ttl * time.Second
	const ms = time.Millisecond
	setup := func(t *testing.T) *world {
		w := newWorld(t)
		w.plan("w", pc{ID: "c"})
		w.ok("claim", "A", withTTL(claimB("w", "c"), ttl))
		return w
	}
	t.Run("claim", func(t *testing.T) {
		w := setup(t)
		w.set(exp)
		e := w.refuse("LEASE-HELD", "claim", "B", withTTL(claimB("w", "c"), ttl))
		if e.Class() != errs.Retryable || !e.Retryable() {
			t.Fatalf("LEASE-HELD class %d, want retryable", e.Class())
		}
		wantDetails := map[string]any{"holder": "A", "epoch": int64(1), "expires_at": at(exp)}
		if !reflect.DeepEqual(e.Details, wantDetails) {
			t.Fatalf("LEASE-HELD details %#v, want %#v", e.Details, wantDetails)
		}
		w.set(exp + ms)
		g := granted(t, w.ok("claim", "B", withTTL(claimB("w", "c"), ttl)))
		if g.Lease.Epoch != 2 || g.Takeover != "expired" || g.Prior == nil || g.Prior.Actor != "A" || g.Prior.Epoch != 1 {
			t.Fatalf("reclaim: %+v (prior %+v)", g, g.Prior)
		}
		if g.Lease.AcquiredAt != at(exp+ms) || g.Lease.ExpiresAt != at(exp+ms+exp) {
			t.Fatalf("reclaimed lease times %+v", g.Lease)
		}
	})
	t.Run("renew", func(t *testing.T) {
		w := setup(t)
		w.set(exp + ms)
		e := w.refuse("LEASE-EXPIRED", "renew", "A", renewB("w", "c", 1, ttl))
		if e.Details["expires_at"] != at(exp) {
			t.Fatalf("LEASE-EXPIRED details %v", e.Details)
		}
		w.set(exp)
		g := granted(t, w.ok("renew", "A", renewB("w", "c", 1, ttl)))
		if g.Lease.ExpiresAt != at(2*exp) || g.Lease.HeartbeatAt != at(exp) {
			t.Fatalf("renewed at the boundary: %+v", g.Lease)
		}
	})
	t.Run("fail", func(t *testing.T) {
		w := setup(t)
		w.set(exp + ms)
		w.refuse("LEASE-EXPIRED", "fail", "A", failB("w", "c", 1, ""))
		w.set(exp)
		w.ok("fail", "A", failB("w", "c", 1, ""))
	})
	t.Run("done", func(t *testing.T) {
		w := setup(t)
		w.set(exp + ms)
		w.refuse("LEASE-EXPIRED", "done", "A", doneB("w", "c", 1))
		w.set(exp)
		w.ok("done", "A", doneB("w", "c", 1))
	})
	t.Run("release-after-expiry", func(t *testing.T) {
		// release needs the lease to be the actor's, not to be live (FORMAT.md §5)
		w := setup(t)
		w.set(exp + time.Hour)
		w.ok("release", "A", epochB("w", "c", 1))
		if c := w.cell("w", "c"); c.State != lease.Pending || c.Epoch != 1 || c.Lease != nil {
			t.Fatalf("after release: %+v", c)
		}
	})
	t.Run("release-after-takeover", func(t *testing.T) {
		// once someone else reclaimed the expired lease, the old holder is
		// fenced off: its epoch is stale (EPOCH-MISMATCH, naming the new
		// epoch and holder); the current epoch from the wrong actor is
		// ACTOR-MISMATCH
		w := setup(t)
		w.set(exp + ms)
		w.ok("claim", "B", claimB("w", "c"))
		e := w.refuse("EPOCH-MISMATCH", "release", "A", epochB("w", "c", 1))
		if e.Details["epoch"] != int64(2) || e.Details["holder"] != "B" {
			t.Fatalf("EPOCH-MISMATCH details %v", e.Details)
		}
		w.refuse("ACTOR-MISMATCH", "release", "A", epochB("w", "c", 2))
		w.ok("release", "B", epochB("w", "c", 2))
		// the same actor reclaiming its own expired lease fences its old epoch
		w.set(exp + ms + 31*time.Minute)
		w.ok("claim", "A", claimB("w", "c"))
		w.refuse("EPOCH-MISMATCH", "release", "A", epochB("w", "c", 2))
		w.refuse("EPOCH-MISMATCH", "renew", "A", renewB("w", "c", 2, ttl))
		w.refuse("EPOCH-MISMATCH", "done", "A", doneB("w", "c", 1))
		w.ok("done", "A", doneB("w", "c", 3))
		// a stale epoch stays EPOCH-MISMATCH after the cell moved on
		w.refuse("EPOCH-MISMATCH", "release", "B", epochB("w", "c", 2))
		w.refuse("CELL-STATE", "release", "A", epochB("w", "c", 3))
	})
}

// TestStealWindow: steal takes a live lease only strictly after
// max_hold_until; before (and at) it is STEAL-DENIED. An expired lease is
// reclaimed by any claim, steal included. A plain claim of a live lease past
// max hold is still LEASE-HELD, and its holder can no longer renew.
func TestStealWindow(t *testing.T) {
	const ms = time.Millisecond
	setup := func(t *testing.T) *world {
		w := newWorld(t)
		w.plan("w", pc{ID: "c"})
		w.ok("claim", "A", claimB("w", "c")) // ttl 1800: expires +30m, max hold +60m
		w.set(29 * time.Minute)
		w.ok("renew", "A", renewB("w", "c", 1, 1800)) // expires +59m
		w.set(59 * time.Minute)
		w.ok("renew", "A", renewB("w", "c", 1, 1800)) // expires +89m, max hold still +60m
		return w
	}
	t.Run("denied-before-and-at-max-hold", func(t *testing.T) {
		w := setup(t)
		for _, d := range []time.Duration{59 * time.Minute, 60*time.Minute - ms, 60 * time.Minute} {
			w.set(d)
			e := w.refuse("STEAL-DENIED", "claim", "B", withMode(claimB("w", "c"), lease.ModeSteal))
			want := map[string]any{"holder": "A", "epoch": int64(1), "max_hold_until": at(time.Hour)}
			if !reflect.DeepEqual(e.Details, want) {
				t.Fatalf("STEAL-DENIED details %#v, want %#v", e.Details, want)
			}
			if !e.Retryable() {
				t.Fatalf("STEAL-DENIED must be retryable (README exit table)")
			}
		}
	})
	t.Run("granted-after-max-hold", func(t *testing.T) {
		w := setup(t)
		w.set(time.Hour + ms)
		w.refuse("LEASE-HELD", "claim", "B", claimB("w", "c"))
		w.refuse("LEASE-HELD", "claim", "B", withMode(claimB("w", "c"), lease.ModeReclaimDead))
		w.refuse("LEASE-MAX-HOLD", "renew", "A", renewB("w", "c", 1, 1800))
		res := w.ok("claim", "B", withMode(claimB("w", "c"), lease.ModeSteal))
		g := granted(t, res)
		if g.Lease.Epoch != 2 || g.Lease.Actor != "B" || g.Takeover != "steal" {
			t.Fatalf("steal: %+v takeover %q", g.Lease, g.Takeover)
		}
		if g.Prior == nil || g.Prior.Actor != "A" || g.Prior.Epoch != 1 || g.Prior.MaxHoldUntil != at(time.Hour) {
			t.Fatalf("steal must record the prior holder: %+v", g.Prior)
		}
		if !strings.Contains(res.Summary, "steal") || !strings.Contains(res.Summary, "A") {
			t.Fatalf("summary %q does not name the steal and the prior holder", res.Summary)
		}
		// the new lease gets a fresh max hold
		if g.Lease.MaxHoldUntil != at(2*time.Hour+ms) {
			t.Fatalf("new max hold %s", g.Lease.MaxHoldUntil)
		}
		// the displaced holder is fenced off
		w.refuse("EPOCH-MISMATCH", "renew", "A", renewB("w", "c", 1, 1800))
		w.refuse("EPOCH-MISMATCH", "done", "A", doneB("w", "c", 1))
		w.refuse("ACTOR-MISMATCH", "done", "A", doneB("w", "c", 2))
	})
	t.Run("steal-of-expired-is-a-reclaim", func(t *testing.T) {
		w := newWorld(t)
		w.plan("w", pc{ID: "c"})
		w.ok("claim", "A", withTTL(claimB("w", "c"), 60)) // max hold +30m
		w.set(61 * time.Second)                           // expired, well before max hold
		g := granted(t, w.ok("claim", "B", withMode(claimB("w", "c"), lease.ModeSteal)))
		if g.Lease.Epoch != 2 || g.Takeover != "expired" {
			t.Fatalf("steal of an expired lease: %+v takeover %q", g.Lease, g.Takeover)
		}
	})
	t.Run("steal-of-pending-is-a-claim", func(t *testing.T) {
		w := newWorld(t)
		w.plan("w", pc{ID: "c"})
		g := granted(t, w.ok("claim", "B", withMode(claimB("w", "c"), lease.ModeSteal)))
		if g.Lease.Epoch != 1 || g.Takeover != "" {
			t.Fatalf("steal of a pending cell: %+v takeover %q", g.Lease, g.Takeover)
		}
	})
}

// TestRenew: renew refreshes heartbeat_at, expires_at and ttl_seconds and
// nothing else; it is refused to another actor, a wrong epoch, an expired
// lease, a lease past max hold, a cell that is not claimed, and a bad ttl.
func TestRenew(t *testing.T) {
	const ms = time.Millisecond
	w := newWorld(t)
	w.plan("w", pc{ID: "c"}, pc{ID: "p"})
	first := granted(t, w.ok("claim", "A", withTTL(claimB("w", "c"), 600))).Lease // max hold +30m
	w.set(5*time.Minute + 250*ms)
	g := granted(t, w.ok("renew", "A", renewB("w", "c", 1, 1200)))
	want := *first
	want.HeartbeatAt = at(5*time.Minute + 250*ms)
	want.ExpiresAt = at(25*time.Minute + 250*ms)
	want.TTLSeconds = 1200
	if *g.Lease != want {
		t.Fatalf("renewed lease\n got %+v\nwant %+v", *g.Lease, want)
	}
	if c := w.cell("w", "c"); *c.Lease != want || c.Epoch != 1 || c.State != lease.Claimed {
		t.Fatalf("stored after renew: %+v lease %+v", c, c.Lease)
	}
	if got := w.wave("w").Counts; !reflect.DeepEqual(got, map[string]int{lease.Claimed: 1, lease.Pending: 1}) {
		t.Fatalf("counts after renew %v", got)
	}

	w.refuse("ACTOR-MISMATCH", "renew", "B", renewB("w", "c", 1, 600))
	e := w.refuse("EPOCH-MISMATCH", "renew", "A", renewB("w", "c", 2, 600))
	if e.Details["epoch"] != int64(1) || e.Details["holder"] != "A" {
		t.Fatalf("EPOCH-MISMATCH details %v", e.Details)
	}
	w.refuse("EPOCH-MISMATCH", "renew", "A", renewB("w", "c", 0, 600))
	// actor is checked before epoch (reference order: state, actor, epoch, expiry)
	w.refuse("ACTOR-MISMATCH", "renew", "B", renewB("w", "c", 7, 600))
	w.refuse("CELL-STATE", "renew", "A", renewB("w", "p", 1, 600))
	w.refuse("USAGE", "renew", "A", renewB("w", "c", 1, 29))
	w.refuse("USAGE", "renew", "A", renewB("w", "c", 1, 86401))
	w.refuse("WAVE-MISSING", "renew", "A", renewB("nowave", "c", 1, 600))
	w.refuse("CELL-MISSING", "renew", "A", renewB("w", "nocell", 1, 600))

	// renewing at exactly max_hold_until is allowed; a millisecond later is not
	w.set(25 * time.Minute)
	w.ok("renew", "A", renewB("w", "c", 1, 1800)) // expires +55m, max hold +30m
	w.set(30 * time.Minute)
	g = granted(t, w.ok("renew", "A", renewB("w", "c", 1, 1800)))
	if g.Lease.MaxHoldUntil != at(30*time.Minute) || g.Lease.ExpiresAt != at(60*time.Minute) {
		t.Fatalf("renew must not move max_hold_until: %+v", g.Lease)
	}
	w.set(30*time.Minute + ms)
	e = w.refuse("LEASE-MAX-HOLD", "renew", "A", renewB("w", "c", 1, 1800))
	if e.Details["max_hold_until"] != at(30*time.Minute) {
		t.Fatalf("LEASE-MAX-HOLD details %v", e.Details)
	}
	// the live lease past max hold is still the holder's: done is accepted
	w.ok("done", "A", doneB("w", "c", 1))
}

// TestReleaseFailRequeue covers the holder checks of release and fail, the
// state they leave, and requeue's "only from failed".
func TestReleaseFailRequeue(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "a"}, pc{ID: "b", Deps: []string{"a"}}, pc{ID: "c"})
	// nothing to release or fail on a pending cell
	w.refuse("CELL-STATE", "release", "A", epochB("w", "a", 0))
	w.refuse("CELL-STATE", "fail", "A", failB("w", "a", 0, ""))
	w.refuse("CELL-STATE", "requeue", "ops", requeueB("w", "a"))
	w.ok("claim", "A", claimB("w", "a"))
	w.refuse("CELL-STATE", "requeue", "ops", requeueB("w", "a"))
	w.refuse("ACTOR-MISMATCH", "release", "B", epochB("w", "a", 1))
	w.refuse("EPOCH-MISMATCH", "release", "A", epochB("w", "a", 2))
	w.refuse("ACTOR-MISMATCH", "fail", "B", failB("w", "a", 1, ""))
	w.refuse("EPOCH-MISMATCH", "fail", "A", failB("w", "a", 0, ""))
	w.refuse("USAGE", "fail", "A", failB("w", "a", 1, strings.Repeat("x", 4097)))
	w.refuse("WAVE-MISSING", "release", "A", epochB("x", "a", 1))
	w.refuse("CELL-MISSING", "fail", "A", failB("w", "zz", 1, ""))
	w.refuse("WAVE-MISSING", "requeue", "A", requeueB("x", "a"))
	w.refuse("CELL-MISSING", "requeue", "A", requeueB("w", "zz"))

	w.set(time.Minute)
	w.ok("release", "A", epochB("w", "a", 1))
	c := w.cell("w", "a")
	if c.State != lease.Pending || c.Epoch != 1 || c.Lease != nil {
		t.Fatalf("after release: %+v", c)
	}
	if rb := bits(t, w.wave("w").Ready, 3); !rb[0] || rb[1] || !rb[2] {
		t.Fatalf("ready after release: %v", rb)
	}
	// released twice: the lease is gone
	w.refuse("CELL-STATE", "release", "A", epochB("w", "a", 1))

	w.ok("claim", "B", claimB("w", "a"))
	w.set(2 * time.Minute)
	w.ok("fail", "B", failB("w", "a", 2, "tests are red"))
	c = w.cell("w", "a")
	if c.State != lease.Failed || c.Epoch != 2 || c.Lease != nil || c.Reason != "tests are red" {
		t.Fatalf("after fail: %+v", c)
	}
	w.refuse("CELL-STATE", "claim", "C", claimB("w", "a"))
	w.refuse("CELL-STATE", "fail", "B", failB("w", "a", 2, ""))
	w.refuse("CELL-STATE", "release", "B", epochB("w", "a", 2))
	w.refuse("CELL-STATE", "done", "B", doneB("w", "a", 2))
	// b depends on a failed cell
	w.refuse("CELL-STATE", "claim", "C", claimB("w", "b"))

	w.ok("requeue", "ops", requeueB("w", "a"))
	c = w.cell("w", "a")
	if c.State != lease.Pending || c.Epoch != 2 || c.Reason != "" {
		t.Fatalf("after requeue: %+v", c)
	}
	w.refuse("CELL-STATE", "requeue", "ops", requeueB("w", "a"))
	g := granted(t, w.ok("claim", "C", claimB("w", "a")))
	if g.Lease.Epoch != 3 {
		t.Fatalf("claim after requeue: epoch %d, want 3", g.Lease.Epoch)
	}
	w.ok("done", "C", doneB("w", "a", 3))
	w.refuse("CELL-STATE", "requeue", "ops", requeueB("w", "a"))
	w.refuse("CELL-STATE", "claim", "C", claimB("w", "a"))
}

// TestRequeueKeepsDepsGate: a failed cell whose deps are done is requeued
// ready; a requeued cell is ready only if its deps are done.
func TestRequeueKeepsDepsGate(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "a"}, pc{ID: "b", Deps: []string{"a"}})
	w.ok("claim", "A", claimB("w", "a"))
	w.ok("done", "A", doneB("w", "a", 1))
	w.ok("claim", "A", claimB("w", "b"))
	w.ok("fail", "A", failB("w", "b", 1, ""))
	if rb := bits(t, w.wave("w").Ready, 2); rb[1] {
		t.Fatal("a failed cell is not ready")
	}
	w.ok("requeue", "ops", requeueB("w", "b"))
	if rb := bits(t, w.wave("w").Ready, 2); !rb[1] {
		t.Fatal("a requeued cell whose deps are done must be ready")
	}
}

// TestReclaimDead: reclaim-dead takes a live lease only with evidence that
// is consistent with it (same host for claimant, evidence and lease; the
// lease's actor, epoch and pid; alive=false). Anything else is LEASE-HELD.
func TestReclaimDead(t *testing.T) {
	good := lease.DeadPeer{Actor: "A", Epoch: 1, Host: "h1", PID: 4242, Alive: false}
	cases := []struct {
		name      string
		claimHost string
		dead      *lease.DeadPeer
		mode      string
		ok        bool
	}{
		{"consistent", "h1", &good, lease.ModeReclaimDead, true},
		{"no-evidence", "h1", nil, lease.ModeReclaimDead, false},
		{"alive", "h1", func() *lease.DeadPeer { d := good; d.Alive = true; return &d }(), lease.ModeReclaimDead, false},
		{"claimant-on-other-host", "h2", &good, lease.ModeReclaimDead, false},
		{"evidence-from-other-host", "h2", func() *lease.DeadPeer { d := good; d.Host = "h2"; return &d }(), lease.ModeReclaimDead, false},
		{"evidence-host-differs", "h1", func() *lease.DeadPeer { d := good; d.Host = "h2"; return &d }(), lease.ModeReclaimDead, false},
		{"other-pid", "h1", func() *lease.DeadPeer { d := good; d.PID = 4243; return &d }(), lease.ModeReclaimDead, false},
		{"other-actor", "h1", func() *lease.DeadPeer { d := good; d.Actor = "Z"; return &d }(), lease.ModeReclaimDead, false},
		{"old-epoch", "h1", func() *lease.DeadPeer { d := good; d.Epoch = 0; return &d }(), lease.ModeReclaimDead, false},
		{"future-epoch", "h1", func() *lease.DeadPeer { d := good; d.Epoch = 2; return &d }(), lease.ModeReclaimDead, false},
		{"evidence-with-plain-claim", "h1", &good, lease.ModeClaim, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.plan("w", pc{ID: "c"})
			w.ok("claim", "A", withHost(claimB("w", "c"), "h1", 4242))
			w.set(time.Minute)
			b := withMode(withHost(claimB("w", "c"), tc.claimHost, 777), tc.mode)
			b.Dead = tc.dead
			if !tc.ok {
				e := w.refuse("LEASE-HELD", "claim", "B", b)
				if e.Details["holder"] != "A" {
					t.Fatalf("details %v", e.Details)
				}
				return
			}
			g := granted(t, w.ok("claim", "B", b))
			if g.Lease.Epoch != 2 || g.Takeover != "dead-holder" || g.Prior == nil || g.Prior.PID != 4242 {
				t.Fatalf("reclaim-dead: %+v takeover %q prior %+v", g.Lease, g.Takeover, g.Prior)
			}
			if g.Lease.Host != "h1" || g.Lease.PID != 777 || g.Lease.Actor != "B" {
				t.Fatalf("new lease must record the new holder: %+v", g.Lease)
			}
		})
	}
	t.Run("expired-needs-no-evidence", func(t *testing.T) {
		w := newWorld(t)
		w.plan("w", pc{ID: "c"})
		w.ok("claim", "A", withTTL(claimB("w", "c"), 60))
		w.set(61 * time.Second)
		g := granted(t, w.ok("claim", "B", withMode(withHost(claimB("w", "c"), "h9", 1), lease.ModeReclaimDead)))
		if g.Lease.Epoch != 2 || g.Takeover != "expired" {
			t.Fatalf("%+v %q", g.Lease, g.Takeover)
		}
	})
	t.Run("pending-is-a-plain-claim", func(t *testing.T) {
		w := newWorld(t)
		w.plan("w", pc{ID: "a"}, pc{ID: "b", Deps: []string{"a"}})
		g := granted(t, w.ok("claim", "B", withMode(claimB("w", "a"), lease.ModeReclaimDead)))
		if g.Lease.Epoch != 1 || g.Takeover != "" {
			t.Fatalf("%+v %q", g.Lease, g.Takeover)
		}
		// the deps gate still applies
		w.refuse("CELL-STATE", "claim", "B", withMode(claimB("w", "b"), lease.ModeReclaimDead))
	})
}

// TestClaimRefusals: every refusal of claim, with its details.
func TestClaimRefusals(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "a"}, pc{ID: "b"}, pc{ID: "c", Deps: []string{"a", "b"}})
	w.refuse("WAVE-MISSING", "claim", "A", claimB("nope", "a"))
	w.refuse("CELL-MISSING", "claim", "A", claimB("w", "nope"))
	e := w.refuse("CELL-STATE", "claim", "A", claimB("w", "c"))
	if got := e.Details["blocked_by"]; !reflect.DeepEqual(got, []string{"w/a(pending)", "w/b(pending)"}) {
		t.Fatalf("blocked_by %v", got)
	}
	w.ok("claim", "A", claimB("w", "a"))
	w.ok("done", "A", doneB("w", "a", 1))
	w.ok("claim", "A", claimB("w", "b"))
	e = w.refuse("CELL-STATE", "claim", "A", claimB("w", "c"))
	if got := e.Details["blocked_by"]; !reflect.DeepEqual(got, []string{"w/b(claimed)"}) {
		t.Fatalf("blocked_by %v (only the unfinished dep, with its state)", got)
	}
	if !strings.Contains(e.Message, "w/b") || strings.Contains(e.Message, "w/a") {
		t.Fatalf("message must name the unfinished deps only: %q", e.Message)
	}
	e = w.refuse("CELL-STATE", "claim", "B", claimB("w", "a"))
	if e.Details["state"] != lease.Done {
		t.Fatalf("details %v", e.Details)
	}
	// the holder itself is told it holds the cell, finally (retrying cannot
	// help), and pointed to renew, whatever the mode
	for _, b := range []lease.ClaimBody{claimB("w", "b"), withMode(claimB("w", "b"), lease.ModeSteal),
		withMode(withHost(claimB("w", "b"), "h1", 9), lease.ModeReclaimDead)} {
		e = w.refuse("LEASE-OWNED", "claim", "A", b)
		if e.Class() != errs.Refused || e.Details["yours"] != true || e.Details["epoch"] != int64(1) ||
			!strings.Contains(e.Message, "tally renew w/b --epoch 1") {
			t.Fatalf("own live cell: class %d details %v message %q", e.Class(), e.Details, e.Message)
		}
	}
	// usage errors come before any state lookup
	for _, b := range []lease.ClaimBody{
		withTTL(claimB("w", "b"), 29), withTTL(claimB("w", "b"), 86401), withTTL(claimB("w", "b"), 0),
		withTTL(claimB("w", "b"), -1), withHost(claimB("w", "b"), "", 1), withHost(claimB("w", "b"), "h", -1),
		withHost(claimB("w", "b"), "h", -5), withMode(claimB("w", "b"), "borrow"), withMode(claimB("w", "b"), ""),
		claimB("w/x", "b"), claimB("w", "b/c"), claimB("", "b"), claimB("w", ""), claimB("-w", "b"), claimB("w", ".b"),
	} {
		w.refuse("USAGE", "claim", "A", b)
	}
	// the TTL limits themselves are accepted
	w.ok("done", "A", doneB("w", "b", 1))
	w.ok("claim", "A", withTTL(claimB("w", "c"), 30))
	w.ok("release", "A", epochB("w", "c", 1))
	w.ok("claim", "A", withTTL(claimB("w", "c"), 86400))
}

// TestStrictBodies: unknown members in any body, wrong types, an unknown
// kind and a bad timestamp are USAGE, and nothing is written.
func TestStrictBodies(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "a"})
	w.ok("claim", "A", claimB("w", "a"))
	cases := []struct{ kind, body string }{
		{"claim", `{"wave":"w","cell":"a","ttl":60,"pid":1,"host":"h","mode":"claim","extra":1}`},
		{"claim", `{"wave":"w","cell":"a","ttl":"60","pid":1,"host":"h","mode":"claim"}`},
		{"claim", `{"wave":"w","cell":"a","ttl":60,"pid":1,"host":"h","mode":"claim","dead":{"actor":"A","epoch":1,"host":"h","pid":1,"alive":false,"why":"x"}}`},
		{"renew", `{"wave":"w","cell":"a","epoch":1,"ttl":60,"force":true}`},
		{"release", `{"wave":"w","cell":"a","epoch":1,"ttl":60}`},
		{"fail", `{"wave":"w","cell":"a","epoch":1,"reason":"x","code":3}`},
		{"requeue", `{"wave":"w","cell":"a","epoch":1}`},
		{"done", `{"wave":"w","cell":"a","epoch":1,"commit":"` + commitA + `","tree":"` + treeA + `","base":"","changed":[],"evidence":[],"signed":true}`},
		{"plan", `{"wave":"w2","cells":[{"id":"x","owner":"me"}]}`},
		{"plan", `{"wave":"w2","cells":[{"id":"x"}],"note":"hi"}`},
		{"note", `{"text":"hi","by":"me"}`},
		{"note", `{"text":""}`},
		{"frobnicate", `{}`},
		{"release", `[]`},
	}
	for _, tc := range cases {
		w.refuse("USAGE", chain.Kind(tc.kind), "A", tc.body)
	}
	e := w.entry("note", "A", `{"text":"x"}`)
	for _, ts := range []string{"2030-01-02T03:04:05Z", "2030-01-02T03:04:05.000+00:00", "yesterday"} {
		e.TS = ts
		if _, err := lease.Apply(w.kv, e); errs.CodeOf(err) != "USAGE" {
			t.Fatalf("ts %q: got %v, want USAGE", ts, err)
		}
	}
	// done body checks
	d := doneB("w", "a", 1, "b.go", "a.go")
	w.refuse("USAGE", "done", "A", d) // changed not sorted
	d = doneB("w", "a", 1)
	d.Commit = "ABCDEF" + commitA[6:] // upper case is not a full lowercase id
	w.refuse("USAGE", "done", "A", d)
	d = doneB("w", "a", 1)
	d.Tree = treeA[:39]
	w.refuse("USAGE", "done", "A", d)
	d = doneB("w", "a", 1)
	d.Evidence = []lease.Evidence{{Argv: []string{"go", "test"}, Epoch: 2}}
	w.refuse("USAGE", "done", "A", d)
	d = doneB("w", "a", 1)
	d.Base = ""
	d.Evidence = []lease.Evidence{{Argv: []string{"go", "test"}, Epoch: 1}}
	w.ok("done", "A", d) // base may be empty; evidence under the lease's epoch
}

// TestDepsGating: a cell is claimable only when every dep, in its own wave
// or an earlier one ("wave/cell"), is done; done makes dependents ready,
// across waves too, and only once all their deps are done.
func TestDepsGating(t *testing.T) {
	w := newWorld(t)
	w.plan("w1", pc{ID: "a"}, pc{ID: "b"})
	w.plan("w2", pc{ID: "x", Deps: []string{"w1/a"}}, pc{ID: "y", Deps: []string{"x", "w1/b"}}, pc{ID: "z"})
	readyOf := func(wave string, n int) []bool { return bits(t, w.wave(wave).Ready, n) }
	if got := readyOf("w2", 3); !reflect.DeepEqual(got, []bool{false, false, true}) {
		t.Fatalf("w2 ready at plan time %v", got)
	}
	if got := w.cell("w1", "a").Dependents; !reflect.DeepEqual(got, []string{"w2/x"}) {
		t.Fatalf("w1/a dependents %v", got)
	}
	if got := w.cell("w1", "b").Dependents; !reflect.DeepEqual(got, []string{"w2/y"}) {
		t.Fatalf("w1/b dependents %v", got)
	}
	if got := w.cell("w2", "x").Dependents; !reflect.DeepEqual(got, []string{"w2/y"}) {
		t.Fatalf("w2/x dependents %v", got)
	}
	e := w.refuse("CELL-STATE", "claim", "A", claimB("w2", "x"))
	if got := e.Details["blocked_by"]; !reflect.DeepEqual(got, []string{"w1/a(pending)"}) {
		t.Fatalf("blocked_by %v", got)
	}
	w.ok("claim", "A", claimB("w1", "a"))
	w.refuse("CELL-STATE", "claim", "A", claimB("w2", "x"))
	w.ok("done", "A", doneB("w1", "a", 1))
	if got := readyOf("w2", 3); !reflect.DeepEqual(got, []bool{true, false, true}) {
		t.Fatalf("w2 ready after w1/a done %v", got)
	}
	w.ok("claim", "A", claimB("w2", "x"))
	w.ok("done", "A", doneB("w2", "x", 1))
	// y still waits for w1/b
	if got := readyOf("w2", 3); !reflect.DeepEqual(got, []bool{false, false, true}) {
		t.Fatalf("w2 ready with w1/b pending %v", got)
	}
	e = w.refuse("CELL-STATE", "claim", "A", claimB("w2", "y"))
	if got := e.Details["blocked_by"]; !reflect.DeepEqual(got, []string{"w1/b(pending)"}) {
		t.Fatalf("blocked_by %v", got)
	}
	w.ok("claim", "B", claimB("w1", "b"))
	w.ok("done", "B", doneB("w1", "b", 1))
	if got := readyOf("w2", 3); !reflect.DeepEqual(got, []bool{false, true, true}) {
		t.Fatalf("w2 ready after both deps done %v", got)
	}
	if got := readyOf("w1", 2); !reflect.DeepEqual(got, []bool{false, false}) {
		t.Fatalf("w1 ready %v", got)
	}
	w.ok("claim", "B", claimB("w2", "y"))
	// a later wave may depend on a cell that is already done: ready at once
	w.plan("w3", pc{ID: "q", Deps: []string{"w1/a", "w2/x"}}, pc{ID: "r", Deps: []string{"w2/y"}})
	if got := readyOf("w3", 2); !reflect.DeepEqual(got, []bool{true, false}) {
		t.Fatalf("w3 ready at plan time %v", got)
	}
	if got := w.cell("w1", "a").Dependents; !reflect.DeepEqual(got, []string{"w2/x", "w3/q"}) {
		t.Fatalf("w1/a dependents after w3 %v", got)
	}
	w.ok("done", "B", doneB("w2", "y", 1))
	if got := readyOf("w3", 2); !reflect.DeepEqual(got, []bool{true, true}) {
		t.Fatalf("w3 ready after w2/y done %v", got)
	}
}

// TestDoneScope: a cell with paths refuses a receipt changing anything
// outside them (RECEIPT-SCOPE lists exactly those paths); a cell without
// paths accepts any change. done records the receipt and indexes it.
func TestDoneScope(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "api", Paths: []string{"api/**", "docs/api.md"}}, pc{ID: "free"}, pc{ID: "leaf", Deps: []string{"api"}})
	w.ok("claim", "A", claimB("w", "api"))
	w.ok("claim", "B", claimB("w", "free"))
	e := w.refuse("RECEIPT-SCOPE", "done", "A", doneB("w", "api", 1, "api/x.go", "db/schema.sql", "docs/api.md", "docs/other.md"))
	if got := e.Details["paths"]; !reflect.DeepEqual(got, []string{"db/schema.sql", "docs/other.md"}) {
		t.Fatalf("out-of-scope paths %v", got)
	}
	if got := e.Details["scope"]; !reflect.DeepEqual(got, []string{"api/**", "docs/api.md"}) {
		t.Fatalf("scope %v", got)
	}
	if e.Class() != errs.Refused {
		t.Fatalf("RECEIPT-SCOPE class %d", e.Class())
	}
	// a path that only looks inside
	w.refuse("RECEIPT-SCOPE", "done", "A", doneB("w", "api", 1, "apix/y.go"))
	w.refuse("RECEIPT-SCOPE", "done", "A", doneB("w", "api", 1, "api/../secret"))
	if rb := bits(t, w.wave("w").Ready, 3); rb[2] {
		t.Fatal("a refused done must not make dependents ready")
	}
	w.set(time.Second)
	res := w.ok("done", "A", doneB("w", "api", 1, "api/sub/x.go", "docs/api.md"))
	ref, ok := res.Effect.(*lease.ReceiptRef)
	// seq: plan 1, claims 2 and 3, this done 4 (refusals take no seq)
	want := lease.ReceiptRef{Seq: 4, Wave: "w", Cell: "api", Epoch: 1, Commit: commitA, Tree: treeA}
	if !ok || *ref != want {
		t.Fatalf("receipt %+v, want %+v", res.Effect, want)
	}
	c := w.cell("w", "api")
	if c.State != lease.Done || c.Lease != nil || c.Receipt == nil || c.Receipt.Seq != 4 || c.Receipt.Commit != commitA || c.Epoch != 1 {
		t.Fatalf("done cell %+v", c)
	}
	for _, key := range []string{"receipts/11/" + commitA, "trees/22/" + treeA} {
		ix, err := lease.ReadReceipts(w.kv, key)
		if err != nil || len(ix.Receipts) != 1 || ix.Receipts[0] != want {
			t.Fatalf("receipt index %s: %+v %v", key, ix, err)
		}
	}
	if rb := bits(t, w.wave("w").Ready, 3); !rb[2] {
		t.Fatal("done must make its dependent ready")
	}
	// no paths: anything goes, and a second receipt on the same commit is indexed too
	w.ok("done", "B", doneB("w", "free", 1, ".github/ci.yml", "a/b/c", "zzz"))
	ix, _ := lease.ReadReceipts(w.kv, "receipts/11/"+commitA)
	if len(ix.Receipts) != 2 || ix.Receipts[1].Cell != "free" {
		t.Fatalf("receipt index after two receipts: %+v", ix)
	}
	if got := w.wave("w").Counts; !reflect.DeepEqual(got, map[string]int{lease.Done: 2, lease.Pending: 1}) {
		t.Fatalf("counts %v", got)
	}
}

// TestOutOfScope is the scope function on its own.
func TestOutOfScope(t *testing.T) {
	cases := []struct {
		patterns, changed, want []string
	}{
		{nil, []string{"a", "b/c"}, nil},
		{[]string{}, []string{"x"}, nil},
		{[]string{"src/**"}, []string{"src", "src/a.go", "srcx/a.go", "x/src/a.go"}, []string{"srcx/a.go", "x/src/a.go"}},
		{[]string{"src/*.go"}, []string{"src/a.go", "src/sub/a.go"}, []string{"src/sub/a.go"}},
		{[]string{"a", "b"}, []string{"a/x", "b", "c"}, []string{"c"}},
		{[]string{"**"}, []string{"anything/at/all"}, nil},
	}
	for _, tc := range cases {
		got := lease.OutOfScope(tc.patterns, tc.changed)
		sort.Strings(got)
		if len(got) == 0 && len(tc.want) == 0 {
			continue
		}
		if !reflect.DeepEqual(got, tc.want) {
			t.Errorf("OutOfScope(%v, %v) = %v, want %v", tc.patterns, tc.changed, got, tc.want)
		}
	}
}

// TestErrorClasses pins the exit class of every code the lease rules emit
// (README: 1 retryable, 2 refused, 3 integrity).
func TestErrorClasses(t *testing.T) {
	want := map[string]errs.Class{
		"LEASE-HELD": 1, "STEAL-DENIED": 1, "NO-READY-CELL": 1, "CONFLICT": 1,
		"USAGE": 2, "WAVE-EXISTS": 2, "WAVE-MISSING": 2, "CELL-MISSING": 2, "DEP-MISSING": 2, "DEP-CYCLE": 2,
		"CELL-STATE": 2, "ACTOR-MISMATCH": 2, "EPOCH-MISMATCH": 2, "LEASE-EXPIRED": 2, "LEASE-MAX-HOLD": 2,
		"RECEIPT-SCOPE":  2,
		"RULE-VIOLATION": 3, "CORRUPT": 3, "HASH-MISMATCH": 3, "STATE-MISMATCH": 3,
	}
	for code, class := range want {
		code := errs.Code(code)
		if got := errs.ClassOfCode(code); got != class {
			t.Errorf("%s: class %d, want %d", code, got, class)
		}
	}
}
