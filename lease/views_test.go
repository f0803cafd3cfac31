package lease_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

// TestReadyAndNext: Ready lists pending cells whose deps are done and
// claimed cells whose lease expired (ts > expires_at), in plan order; Next is
// the first of them, waves in plan order.
func TestReadyAndNext(t *testing.T) {
	const ms = time.Millisecond
	w := newWorld(t)
	// plan order differs from id order on purpose
	w.plan("wb", pc{ID: "z"}, pc{ID: "y", Deps: []string{"z"}}, pc{ID: "x"})
	w.plan("wa", pc{ID: "a", Deps: []string{"wb/y"}}, pc{ID: "b"})
	checkReady(t, w, "wb", []string{"z", "x"})
	checkReady(t, w, "wa", []string{"b"})
	checkNext(t, w, "", "wb/z")
	checkNext(t, w, "wa", "wa/b")

	w.ok("claim", "A", withTTL(claimB("wb", "z"), 60))
	checkReady(t, w, "wb", []string{"x"})
	checkNext(t, w, "", "wb/x")
	w.ok("claim", "A", withTTL(claimB("wb", "x"), 120))
	checkNext(t, w, "", "wa/b")
	w.ok("claim", "A", withTTL(claimB("wa", "b"), 30))
	checkNext(t, w, "", "")
	checkNext(t, w, "wa", "")

	// at expires_at the lease is live; one ms later it is claimable again
	w.set(60 * time.Second)
	checkReady(t, w, "wb", nil)
	checkReady(t, w, "wa", []string{"b"}) // expired at 30 s
	checkNext(t, w, "", "wa/b")
	w.set(60*time.Second + ms)
	checkReady(t, w, "wb", []string{"z"})
	checkNext(t, w, "", "wb/z")
	r, _ := lease.Ready(w.kv, "wb", w.now, 0)
	if !r[0].Expired || r[0].Index != 0 || r[0].Wave != "wb" {
		t.Fatalf("candidate %+v must be marked expired", r[0])
	}
	w.set(120*time.Second + ms)
	checkReady(t, w, "wb", []string{"z", "x"})
	if r, _ := lease.Ready(w.kv, "wb", w.now, 1); len(r) != 1 || r[0].Cell != "z" {
		t.Fatalf("limit 1: %+v", r)
	}

	// an expired lease, once reclaimed, is no longer ready
	w.ok("claim", "B", claimB("wb", "z"))
	checkReady(t, w, "wb", []string{"x"})
	w.ok("done", "B", doneB("wb", "z", 2))
	checkReady(t, w, "wb", []string{"y", "x"})
	if _, err := lease.Next(w.kv, "nope", w.now); errs.CodeOf(err) != "WAVE-MISSING" {
		t.Fatalf("Next on a missing wave: %v", err)
	}
	if _, err := lease.Ready(w.kv, "nope", w.now, 0); errs.CodeOf(err) != "WAVE-MISSING" {
		t.Fatalf("Ready on a missing wave: %v", err)
	}
	empty := newWorld(t)
	if c, err := lease.Next(empty.kv, "", t0); c != nil || err != nil {
		t.Fatalf("Next on an empty ledger: %v %v", c, err)
	}
}

func checkReady(t *testing.T, w *world, wave string, want []string) {
	t.Helper()
	r, err := lease.Ready(w.kv, wave, w.now, 0)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, c := range r {
		got = append(got, c.Cell)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("Ready(%s) at %s = %v, want %v", wave, stamp(w.now), got, want)
	}
}

func checkNext(t *testing.T, w *world, wave, want string) {
	t.Helper()
	c, err := lease.Next(w.kv, wave, w.now)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	if c != nil {
		got = c.Wave + "/" + c.Cell
	}
	if got != want {
		t.Fatalf("Next(%q) at %s = %q, want %q", wave, stamp(w.now), got, want)
	}
}

// ---------------------------------------------------------------- model

// The randomized test drives lease.Apply with a long random sequence of
// entries over a random DAG and checks, after every step, that
//   - the outcome (accepted, or the refusal code) is what an independent
//     model of the rules in FORMAT.md §5 predicts, and so is every cell;
//   - the stored wave summaries agree with the cells (counts; ready bit ⟺
//     pending with all deps done; held bit ⟺ claimed), and dependents agree
//     with deps;
//   - lease.Ready lists exactly the claimable cells: pending cells with
//     their deps done in plan order, then expired leases in plan order, and
//     lease.Next returns the first of them; across waves, the first pending
//     cell of any wave (waves in plan order) comes before any expired lease;
//   - no (cell, epoch) is ever granted twice.

type mLease struct {
	actor, host  string
	pid          int
	epoch        int64
	acq, hb, exp time.Time
	maxHold      time.Time
	ttl          int
}

type mCell struct {
	wave, id string
	index    int
	deps     []string // qualified "wave/cell"
	state    string
	epoch    int64
	lease    *mLease
	reason   string
}

type model struct {
	waves []string
	order map[string][]string // wave -> ids in plan order
	cells map[string]*mCell   // "wave/cell"
}

func (m *model) depsDone(c *mCell) bool {
	for _, d := range c.deps {
		if m.cells[d].state != lease.Done {
			return false
		}
	}
	return true
}

// claimable is what Ready should list at now: fresh work (pending, deps
// done) in plan order, then expired leases in plan order.
func (m *model) claimable(wave string, now time.Time) (fresh, expired []string) {
	for _, id := range m.order[wave] {
		c := m.cells[wave+"/"+id]
		switch {
		case c.state == lease.Pending && m.depsDone(c):
			fresh = append(fresh, id)
		case c.state == lease.Claimed && now.After(c.lease.exp):
			expired = append(expired, id)
		}
	}
	return fresh, expired
}

type op struct {
	kind  string
	actor string
	body  any
	want  errs.Code // "" accepted, else the refusal code
	apply func()    // the model's change, run if accepted
}

func maxDur(a, b time.Duration) time.Duration {
	if a > b {
		return a
	}
	return b
}

// holderCheck is the model of FORMAT.md §5's "actor and epoch must match the
// lease; renew, fail and done also need it unexpired", with the fencing rule
// that an epoch older than the cell's last grant is EPOCH-MISMATCH first,
// whatever the cell's state and holder.
func holderCheck(c *mCell, actor string, epoch int64, live bool, now time.Time) errs.Code {
	switch {
	case epoch < c.epoch:
		return "EPOCH-MISMATCH"
	case c.state != lease.Claimed:
		return "CELL-STATE"
	case c.lease.actor != actor:
		return "ACTOR-MISMATCH"
	case c.lease.epoch != epoch:
		return "EPOCH-MISMATCH"
	case live && now.After(c.lease.exp):
		return "LEASE-EXPIRED"
	}
	return ""
}

func TestRandomizedInvariants(t *testing.T) {
	seeds, steps := 24, 300
	if os.Getenv("TALLY_STRESS") != "" {
		seeds, steps = 200, 1000
	}
	for s := 0; s < seeds; s++ {
		seed := uint64(s)
		t.Run(fmt.Sprint(seed), func(t *testing.T) { runRandomized(t, seed, steps) })
	}
}

func runRandomized(t *testing.T, seed uint64, steps int) {
	rng := rand.New(rand.NewPCG(seed, 0x7a11))
	w := newWorld(t)
	m := &model{order: map[string][]string{}, cells: map[string]*mCell{}}

	// a random DAG over 1..3 waves: a random topological order decides which
	// deps are allowed, a different random permutation is the plan order
	nWaves := 1 + rng.IntN(3)
	for wi := 0; wi < nWaves; wi++ {
		wave := fmt.Sprintf("w%d", wi)
		n := 1 + rng.IntN(30)
		topo := rng.Perm(n)
		ids := make([]string, n)
		for i := range ids {
			ids[i] = fmt.Sprintf("c%02d", i)
		}
		deps := make([][]string, n)
		for rank, i := range topo {
			for k := rng.IntN(4); k > 0; k-- {
				var d string
				if wi > 0 && rng.IntN(4) == 0 {
					prev := m.waves[rng.IntN(len(m.waves))]
					d = prev + "/" + m.order[prev][rng.IntN(len(m.order[prev]))]
				} else if rank > 0 {
					d = ids[topo[rng.IntN(rank)]]
				} else {
					continue
				}
				if !contains(deps[i], d) {
					deps[i] = append(deps[i], d)
				}
			}
		}
		planOrder := rng.Perm(n)
		var cells []pc
		for idx, i := range planOrder {
			cells = append(cells, pc{ID: ids[i], Deps: deps[i]})
			mc := &mCell{wave: wave, id: ids[i], index: idx, state: lease.Pending}
			for _, d := range deps[i] {
				if !strings.Contains(d, "/") {
					d = wave + "/" + d
				}
				mc.deps = append(mc.deps, d)
			}
			m.cells[wave+"/"+ids[i]] = mc
			m.order[wave] = append(m.order[wave], ids[i])
		}
		m.waves = append(m.waves, wave)
		w.plan(wave, cells...)
	}
	checkAll(t, w, m, -1, nil)

	actors := []string{"A", "B", "C"}
	ttls := []int{30, 60, 600, 1800, 3600, 3600, 7200}
	small := []time.Duration{0, time.Millisecond, time.Second, 10 * time.Second}
	medium := []time.Duration{30 * time.Second, 2 * time.Minute, 5 * time.Minute}
	large := []time.Duration{20 * time.Minute, 45 * time.Minute, 2 * time.Hour}
	granted := map[string]bool{} // "wave/cell#epoch"
	keys := make([]string, 0, len(m.cells))
	for k := range m.cells {
		keys = append(keys, k)
	}
	sort.Strings(keys)

	var focus *mCell
	for step := 0; step < steps; step++ {
		// advance the clock, sometimes exactly onto a lease boundary
		if rng.IntN(5) == 0 {
			var held, pastHold []*mCell
			for _, k := range keys {
				if c := m.cells[k]; c.lease != nil {
					held = append(held, c)
					if c.lease.exp.After(c.lease.maxHold) && c.lease.maxHold.After(w.now) {
						pastHold = append(pastHold, c) // renewed beyond its max hold
					}
				}
			}
			if len(pastHold) > 0 && rng.IntN(2) == 0 {
				focus = pastHold[rng.IntN(len(pastHold))]
				w.now = focus.lease.maxHold.Add(time.Duration(rng.IntN(2)) * time.Millisecond)
			} else if len(held) > 0 {
				l := held[rng.IntN(len(held))].lease
				target := []time.Time{l.exp, l.exp.Add(time.Millisecond), l.maxHold, l.maxHold.Add(time.Millisecond)}[rng.IntN(4)]
				if target.After(w.now) {
					w.now = target
				}
			}
		} else {
			switch k := rng.IntN(20); {
			case k < 11:
				w.now = w.now.Add(small[rng.IntN(len(small))])
			case k < 18:
				w.now = w.now.Add(medium[rng.IntN(len(medium))])
			default:
				w.now = w.now.Add(large[rng.IntN(len(large))])
			}
		}
		now := w.now

		kind := rng.IntN(100)
		// most of the time, pick a cell the operation can apply to
		var fits func(c *mCell) bool
		switch {
		case kind < 30:
			fits = func(c *mCell) bool { return c.state == lease.Claimed || c.state == lease.Pending && m.depsDone(c) }
		case kind < 40:
		case kind < 66 || kind >= 74:
			fits = func(c *mCell) bool { return c.state == lease.Claimed && !now.After(c.lease.exp) }
		default:
			fits = func(c *mCell) bool { return c.state == lease.Failed }
		}
		c := m.cells[keys[rng.IntN(len(keys))]]
		if fits != nil && rng.IntN(4) != 0 {
			var pool []*mCell
			for _, k := range keys {
				if fits(m.cells[k]) {
					pool = append(pool, m.cells[k])
				}
			}
			if len(pool) > 0 {
				c = pool[rng.IntN(len(pool))]
			}
		}
		forceSteal := false
		if focus != nil && rng.IntN(4) != 0 {
			// a live lease at its max-hold boundary: steal it or renew it
			c = focus
			if rng.IntN(2) == 0 {
				kind, forceSteal = 0, true
			} else {
				kind = 45
			}
		}
		focus = nil
		actor := actors[rng.IntN(len(actors))]
		epoch := c.epoch
		if c.lease != nil && rng.IntN(8) != 0 {
			actor = c.lease.actor
		}
		if rng.IntN(8) == 0 {
			epoch += int64(rng.IntN(3)) - 1
		}
		ttl := ttls[rng.IntN(len(ttls))]
		var o op
		switch k := kind; {
		case k < 30: // claim, steal or reclaim-dead
			mode := []string{lease.ModeClaim, lease.ModeClaim, lease.ModeSteal, lease.ModeReclaimDead}[rng.IntN(4)]
			if forceSteal {
				mode = lease.ModeSteal
			}
			host := []string{"h1", "h2"}[rng.IntN(2)]
			pid := 1 + rng.IntN(3)
			b := withMode(withHost(withTTL(claimB(c.wave, c.id), ttl), host, pid), mode)
			if mode == lease.ModeReclaimDead && c.lease != nil && rng.IntN(3) != 0 {
				d := &lease.DeadPeer{Actor: c.lease.actor, Epoch: c.lease.epoch, Host: c.lease.host, PID: c.lease.pid}
				switch rng.IntN(6) {
				case 0:
					d.Alive = true
				case 1:
					d.PID++
				case 2:
					d.Epoch--
				}
				b.Dead = d
			}
			o = op{kind: "claim", actor: actor, body: b}
			switch {
			case c.state == lease.Done || c.state == lease.Failed:
				o.want = "CELL-STATE"
			case c.state == lease.Pending && !m.depsDone(c):
				o.want = "CELL-STATE"
			case c.state == lease.Claimed && !now.After(c.lease.exp):
				l := c.lease
				switch {
				case mode == lease.ModeSteal && now.After(l.maxHold):
				case l.actor == actor:
					o.want = "LEASE-OWNED" // the holder's own live lease, whatever the mode
				case mode == lease.ModeSteal:
					o.want = "STEAL-DENIED"
				case mode == lease.ModeReclaimDead && b.Dead != nil && !b.Dead.Alive && host == l.host &&
					b.Dead.Host == l.host && b.Dead.PID == l.pid && b.Dead.Actor == l.actor && b.Dead.Epoch == l.epoch:
				default:
					o.want = "LEASE-HELD"
				}
			}
			o.apply = func() {
				c.epoch++
				d := time.Duration(ttl) * time.Second
				c.lease = &mLease{actor: actor, host: host, pid: pid, epoch: c.epoch, acq: now, hb: now,
					exp: now.Add(d), maxHold: now.Add(maxDur(2*d, 30*time.Minute)), ttl: ttl}
				c.state = lease.Claimed
			}
		case k < 40: // claim the cell Next picks, as claim --next does
			cand, err := lease.Next(w.kv, "", now)
			if err != nil {
				t.Fatal(err)
			}
			if cand == nil {
				continue
			}
			c = m.cells[cand.Wave+"/"+cand.Cell]
			b := withTTL(claimB(c.wave, c.id), ttl)
			o = op{kind: "claim", actor: actor, body: b}
			o.apply = func() {
				c.epoch++
				d := time.Duration(ttl) * time.Second
				c.lease = &mLease{actor: actor, host: "h1", pid: 100, epoch: c.epoch, acq: now, hb: now,
					exp: now.Add(d), maxHold: now.Add(maxDur(2*d, 30*time.Minute)), ttl: ttl}
				c.state = lease.Claimed
			}
		case k < 50:
			if rng.IntN(2) == 0 {
				ttl = 7200 // usually carries expires_at past max_hold_until: opens the steal window
			}
			o = op{kind: "renew", actor: actor, body: renewB(c.wave, c.id, epoch, ttl)}
			o.want = holderCheck(c, actor, epoch, true, now)
			if o.want == "" && now.After(c.lease.maxHold) {
				o.want = "LEASE-MAX-HOLD"
			}
			o.apply = func() {
				c.lease.hb, c.lease.exp, c.lease.ttl = now, now.Add(time.Duration(ttl)*time.Second), ttl
			}
		case k < 58:
			o = op{kind: "release", actor: actor, body: epochB(c.wave, c.id, epoch)}
			o.want = holderCheck(c, actor, epoch, false, now)
			o.apply = func() { c.state, c.lease = lease.Pending, nil }
		case k < 66:
			reason := fmt.Sprintf("step %d", step)
			o = op{kind: "fail", actor: actor, body: failB(c.wave, c.id, epoch, reason)}
			o.want = holderCheck(c, actor, epoch, true, now)
			o.apply = func() { c.state, c.lease, c.reason = lease.Failed, nil, reason }
		case k < 74:
			o = op{kind: "requeue", actor: actor, body: requeueB(c.wave, c.id)}
			if c.state != lease.Failed {
				o.want = "CELL-STATE"
			}
			o.apply = func() { c.state, c.reason = lease.Pending, "" }
		default:
			o = op{kind: "done", actor: actor, body: doneB(c.wave, c.id, epoch)}
			o.want = holderCheck(c, actor, epoch, true, now)
			o.apply = func() { c.state, c.lease = lease.Done, nil }
		}

		res, err := w.try(chain.Kind(o.kind), o.actor, o.body)
		if got := errs.CodeOf(err); got != o.want {
			t.Fatalf("seed %d step %d: %s %s by %s at %s: got %q (%v), model says %q",
				seed, step, o.kind, c.wave+"/"+c.id, o.actor, stamp(now), got, err, o.want)
		}
		if err == nil {
			o.apply()
			if o.kind == "claim" {
				g := res.Effect.(*lease.Granted)
				k := fmt.Sprintf("%s/%s#%d", c.wave, c.id, g.Lease.Epoch)
				if granted[k] {
					t.Fatalf("seed %d step %d: %s granted twice", seed, step, k)
				}
				granted[k] = true
			}
		}
		checkAll(t, w, m, step, o.body)
	}
}

func contains(s []string, x string) bool {
	for _, y := range s {
		if y == x {
			return true
		}
	}
	return false
}

// checkAll compares the stored state with the model and checks the
// summary, dependents, Ready and Next invariants.
func checkAll(t *testing.T, w *world, m *model, step int, last any) {
	t.Helper()
	fail := func(format string, args ...any) {
		t.Helper()
		t.Fatalf("step %d (after %+v): %s", step, last, fmt.Sprintf(format, args...))
	}
	dependents := map[string][]string{}
	for _, k := range sortedKeys(m.cells) {
		for _, d := range m.cells[k].deps {
			dependents[d] = append(dependents[d], k)
		}
	}
	var firstFresh, firstExpired string
	for _, wave := range m.waves {
		wv := w.wave(wave)
		ids, err := lease.CellIDs(w.kv, wv)
		if err != nil {
			t.Fatal(err)
		}
		var cells []*lease.Cell
		for _, id := range ids {
			cells = append(cells, w.cell(wave, id))
		}
		if wv.Size != len(cells) {
			fail("wave %s size %d, %d cells", wave, wv.Size, len(cells))
		}
		rb, hb := bits(t, wv.Ready, wv.Size), bits(t, wv.Held, wv.Size)
		counts := map[string]int{}
		for i, c := range cells {
			mc := m.cells[wave+"/"+c.ID]
			if mc == nil || mc.index != i || c.Index != i {
				fail("cell %s/%s at index %d (stored %d)", wave, c.ID, i, c.Index)
			}
			counts[c.State]++
			// the cell agrees with the model
			if c.State != mc.state || c.Epoch != mc.epoch || c.Reason != mc.reason {
				fail("cell %s: state %s epoch %d reason %q, model %s epoch %d reason %q",
					c.ID, c.State, c.Epoch, c.Reason, mc.state, mc.epoch, mc.reason)
			}
			if (c.Lease == nil) != (mc.lease == nil) {
				fail("cell %s: lease %+v, model %+v", c.ID, c.Lease, mc.lease)
			}
			if l, ml := c.Lease, mc.lease; l != nil {
				want := lease.Lease{Actor: ml.actor, PID: ml.pid, Host: ml.host, Epoch: ml.epoch,
					AcquiredAt: stamp(ml.acq), HeartbeatAt: stamp(ml.hb), ExpiresAt: stamp(ml.exp),
					MaxHoldUntil: stamp(ml.maxHold), TTLSeconds: ml.ttl}
				if *l != want {
					fail("cell %s lease\n got %+v\nwant %+v", c.ID, *l, want)
				}
			}
			// state-only invariants
			if (c.State == lease.Claimed) != (c.Lease != nil) {
				fail("cell %s is %s with lease %+v", c.ID, c.State, c.Lease)
			}
			if c.Lease != nil && c.Lease.Epoch != c.Epoch {
				fail("cell %s epoch %d, lease epoch %d", c.ID, c.Epoch, c.Lease.Epoch)
			}
			depsDone := true
			for _, d := range c.Deps {
				dw, did := wave, d
				if i := strings.IndexByte(d, '/'); i >= 0 {
					dw, did = d[:i], d[i+1:]
				}
				if w.cell(dw, did).State != lease.Done {
					depsDone = false
				}
			}
			if rb[i] != (c.State == lease.Pending && depsDone) {
				fail("cell %s: ready bit %v, state %s, deps done %v", c.ID, rb[i], c.State, depsDone)
			}
			if hb[i] != (c.State == lease.Claimed) {
				fail("cell %s: held bit %v, state %s", c.ID, hb[i], c.State)
			}
			wantDeps := sortedCopy(dependents[wave+"/"+c.ID])
			if !reflect.DeepEqual(sortedCopy(c.Dependents), wantDeps) || !sort.StringsAreSorted(c.Dependents) {
				fail("cell %s dependents %v, want %v", c.ID, c.Dependents, wantDeps)
			}
		}
		if !reflect.DeepEqual(wv.Counts, counts) {
			fail("wave %s counts %v, cells say %v", wave, wv.Counts, counts)
		}
		// Ready and Next
		fresh, expired := m.claimable(wave, w.now)
		want := append(append([]string{}, fresh...), expired...)
		r, err := lease.Ready(w.kv, wave, w.now, 0)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, cand := range r {
			got = append(got, cand.Cell)
			mc := m.cells[wave+"/"+cand.Cell]
			if cand.Wave != wave || cand.Index != mc.index || cand.Expired != (mc.state == lease.Claimed) {
				fail("candidate %+v (model cell %s, index %d)", cand, mc.state, mc.index)
			}
		}
		if !slices.Equal(got, want) {
			fail("Ready(%s) = %v, model %v", wave, got, want)
		}
		// The status view: every cell as read whole, ready as Ready says.
		swv, status, err := lease.WaveCells(w.kv, wave, w.now)
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(swv, wv) || len(status) != len(cells) {
			fail("WaveCells(%s): summary %+v and %d cells, want %+v and %d", wave, swv, len(status), wv, len(cells))
		}
		for i, sc := range status {
			c := cells[i]
			if sc.ID != c.ID || sc.State != c.State || sc.Epoch != c.Epoch || !reflect.DeepEqual(sc.Lease, c.Lease) ||
				sc.Ready != slices.Contains(want, c.ID) {
				fail("WaveCells(%s)[%d] = %+v, cell %+v, ready %v", wave, i, sc, c, slices.Contains(want, c.ID))
			}
		}
		next, err := lease.Next(w.kv, wave, w.now)
		if err != nil {
			t.Fatal(err)
		}
		switch {
		case len(want) == 0 && next != nil:
			fail("Next(%s) = %+v, nothing is claimable", wave, next)
		case len(want) > 0 && (next == nil || next.Cell != want[0] || next.Wave != wave || *next != r[0]):
			fail("Next(%s) = %+v, want the first candidate %+v", wave, next, r[0])
		}
		if firstFresh == "" && len(fresh) > 0 {
			firstFresh = wave + "/" + fresh[0]
		}
		if firstExpired == "" && len(expired) > 0 {
			firstExpired = wave + "/" + expired[0]
		}
	}
	next, err := lease.Next(w.kv, "", w.now)
	if err != nil {
		t.Fatal(err)
	}
	got := ""
	if next != nil {
		got = next.Wave + "/" + next.Cell
	}
	firstAll := firstFresh
	if firstAll == "" {
		firstAll = firstExpired
	}
	if got != firstAll {
		fail("Next() = %q, want %q", got, firstAll)
	}
}

func sortedKeys[V any](m map[string]V) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

func sortedCopy(s []string) []string {
	out := append([]string{}, s...)
	sort.Strings(out)
	return out
}

// countingKV counts the reads of each key.
type countingKV struct {
	memKV
	reads map[string]int
}

func (c countingKV) Get(key string) ([]byte, bool, error) {
	c.reads[key]++
	return c.memKV.Get(key)
}

// thirdsClaimed is a world with a wave "big" of n cells c0000, c0001, …,
// every third from the first claimed by actor a (TTL 1800 s).
func thirdsClaimed(t *testing.T, n int) *world {
	w := newWorld(t)
	cells := make([]pc, n)
	for i := range cells {
		cells[i] = pc{ID: fmt.Sprintf("c%04d", i)}
	}
	w.plan("big", cells...)
	for i := 0; i < n; i += 3 {
		w.ok("claim", "a", claimB("big", fmt.Sprintf("c%04d", i)))
	}
	return w
}

// Ready and the views over a wave read each order chunk once, however many
// of its cells they list: a status of a 20k-cell wave decoded one chunk of
// 256 ids per cell (3 s and 395 MB for a view).
func TestReadyReadsEachOrderChunkOnce(t *testing.T) {
	const n = 1000 // four chunks of 256
	w := thirdsClaimed(t, n)
	kv := countingKV{w.kv, map[string]int{}}
	w.set(time.Hour) // every claim (TTL 1800 s) expired: Ready lists pending and expired cells
	ready, err := lease.Ready(kv, "big", w.now, 0)
	if err != nil {
		t.Fatal(err)
	}
	if len(ready) != n {
		t.Fatalf("ready: %d cells, want all %d (pending or expired)", len(ready), n)
	}
	for key, reads := range kv.reads {
		if strings.Contains(key, "/order/") && reads > 2 {
			t.Errorf("%s read %d times listing %d cells (once for the pending, once for the expired)", key, reads, n)
		}
	}
}

// The status view of a wave reads its summary, each order chunk and each
// cell once, held cells included: Cells and Ready composed read the summary
// three times, every order chunk twice and each claimed cell twice.
func TestWaveCellsReadsEachKeyOnce(t *testing.T) {
	const n = 1000 // four chunks of 256
	w := thirdsClaimed(t, n)
	w.set(time.Hour) // the claims so far (TTL 1800 s) expired
	for i := 1; i < n; i += 3 {
		w.ok("claim", "b", claimB("big", fmt.Sprintf("c%04d", i)))
	}
	kv := countingKV{w.kv, map[string]int{}}
	_, status, err := lease.WaveCells(kv, "big", w.now)
	if err != nil {
		t.Fatal(err)
	}
	ready, held := 0, 0
	for _, c := range status {
		if c.Ready {
			ready++
		}
		if c.Lease != nil {
			held++
		}
	}
	// c0000, c0003, …: expired (ready); c0001, c0004, …: live; the rest pending.
	if want := (n+2)/3 + n/3; ready != want || held != (n+2)/3+(n+1)/3 {
		t.Fatalf("%d ready and %d held of %d, want %d ready and %d held", ready, held, n, want, (n+2)/3+(n+1)/3)
	}
	for key, reads := range kv.reads {
		if reads != 1 {
			t.Errorf("%s read %d times for one status of the wave", key, reads)
		}
	}
	if cellReads := len(kv.reads) - 1 - (n+255)/256; cellReads != n {
		t.Errorf("%d keys read besides the summary and the order chunks, want the %d cells", cellReads, n)
	}
}

// soloKV is a reader that fails a test used by two goroutines at once, as
// a snapshot's tree would break.
type soloKV struct {
	memKV
	t     *testing.T
	inUse *atomic.Bool
	reads *atomic.Int64
}

func (s soloKV) Get(key string) ([]byte, bool, error) {
	if !s.inUse.CompareAndSwap(false, true) {
		s.t.Errorf("a reader used by two goroutines at once (reading %s)", key)
		return s.memKV.Get(key)
	}
	defer s.inUse.Store(false)
	s.reads.Add(1)
	return s.memKV.Get(key)
}

func newSoloKV(t *testing.T, kv memKV) soloKV {
	return soloKV{kv, t, new(atomic.Bool), new(atomic.Int64)}
}

// A big wave's status read in parts by several readers is the status one
// reader gives: the same cells in the same order, each reader used by one
// goroutine at a time and each doing a share of the reads. A cell missing
// from two parts is CELL-MISSING for the first in plan order, as with one
// reader.
func TestWaveCellsInPartsIsOneReader(t *testing.T) {
	w := newWorld(t)
	const n = 3*2048 + 100 // three parts of at least 2048 cells
	cells := make([]pc, n)
	for i := range cells {
		cells[i] = pc{ID: fmt.Sprintf("c%05d", i)}
		if i%97 > 1 && i%89 > 1 && i%9 == 8 { // not among the claimed below
			cells[i].Deps = []string{fmt.Sprintf("c%05d", i-1)}
		}
	}
	w.plan("big", cells...)
	for i := 0; i < n; i += 97 {
		w.ok("claim", "a", claimB("big", fmt.Sprintf("c%05d", i)))
	}
	w.set(time.Hour)
	for i := 1; i < n; i += 89 {
		w.ok("claim", "b", claimB("big", fmt.Sprintf("c%05d", i)))
	}
	wantWave, want, err := lease.WaveCells(w.kv, "big", w.now)
	if err != nil {
		t.Fatal(err)
	}
	readers := []soloKV{newSoloKV(t, w.kv), newSoloKV(t, w.kv), newSoloKV(t, w.kv), newSoloKV(t, w.kv)}
	gotWave, got, err := lease.WaveCells(readers[0], "big", w.now, readers[1], readers[2], readers[3])
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(gotWave, wantWave) || !reflect.DeepEqual(got, want) {
		t.Fatalf("in parts: %d cells differ from one reader's %d", len(got), len(want))
	}
	for k, r := range readers[:3] {
		if reads := r.reads.Load(); reads < 2048 {
			t.Errorf("reader %d read %d keys, want a part of at least 2048 cells", k, reads)
		}
	}
	if reads := readers[3].reads.Load(); reads != 0 {
		t.Errorf("a fourth reader read %d keys of a wave of three parts", reads)
	}

	damaged := w.kv.clone()
	for key := range damaged {
		if strings.HasSuffix(key, "/c05000") || strings.HasSuffix(key, "/c03000") {
			delete(damaged, key)
		}
	}
	_, _, err = lease.WaveCells(newSoloKV(t, damaged), "big", w.now, newSoloKV(t, damaged), newSoloKV(t, damaged))
	if e := errs.From(err); e == nil || e.Code != errs.CellMissing || !strings.Contains(e.Message, "big/c03000") {
		t.Fatalf("two cells missing: %v, want CELL-MISSING for big/c03000, the first", err)
	}
}
