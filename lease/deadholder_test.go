package lease_test

import (
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/lease"
)

// Two boots of one machine and two PID namespaces of one boot.
const (
	bootA = "a5a5fd84-b994-4aa8-adf6-4af3ba861da1"
	bootB = "0b6c1e52-7d7e-4a0c-9d8e-1f2a3b4c5d6e"
	nsA   = 4026531836
	nsB   = 4026532179
)

// holderAt is the identity a claim records for a holder process.
type holderAt struct {
	host  string
	pid   int
	boot  string
	ns    uint64
	start uint64
}

func (h holderAt) claim(wave, cell, mode string) lease.ClaimBody {
	b := withMode(withHost(claimB(wave, cell), h.host, h.pid), mode)
	b.BootID, b.PIDNS, b.PIDStart = h.boot, h.ns, h.start
	return b
}

func (h holderAt) dead(actor string, epoch int64) *lease.DeadPeer {
	return &lease.DeadPeer{Actor: actor, Epoch: epoch, Host: h.host, PID: h.pid, BootID: h.boot, PIDNS: h.ns, PIDStart: h.start}
}

// TestReclaimDeadIdentity: a dead-holder takeover needs the claimant in the
// holder's process table (same host, boot id and PID namespace as the lease
// records) and evidence naming the lease's holder exactly, start time
// included. Anything else is LEASE-HELD, and a lease that records no boot id
// cannot be taken over by a claim that records one (fail closed).
func TestReclaimDeadIdentity(t *testing.T) {
	holder := holderAt{"h1", 4242, bootA, nsA, 90017}
	taker := holderAt{"h1", 777, bootA, nsA, 120345}
	legacy := holderAt{host: "h1", pid: 4242}
	with := func(h holderAt, f func(*holderAt)) holderAt { f(&h); return h }
	cases := []struct {
		name             string
		lease, by, names holderAt // the holder's claim, the taker, the holder the evidence names
		ok               bool
	}{
		{"same-boot-and-namespace", holder, taker, holder, true},
		// a lease that records no holder process (pid 0) has nothing that
		// could be seen gone, whatever the evidence says
		{"no-holder-process", holderAt{"h1", 0, bootA, nsA, 0}, taker, holderAt{"h1", 0, bootA, nsA, 0}, false},
		{"taker-without-a-process", holder, holderAt{"h1", 0, bootA, nsA, 0}, holder, true},
		{"taker-in-another-boot", holder, with(taker, func(h *holderAt) { h.boot = bootB }), holder, false},
		{"taker-in-another-pid-namespace", holder, with(taker, func(h *holderAt) { h.ns = nsB }), holder, false},
		{"taker-on-another-host", holder, with(taker, func(h *holderAt) { h.host = "h2" }), holder, false},
		{"taker-records-no-process-table", holder, holderAt{host: "h1", pid: 777}, holder, false},
		// evidence that does not name the recorded holder, even where the
		// claimant shares the process table it names
		{"evidence-names-another-boot", holder, with(taker, func(h *holderAt) { h.boot = bootB }), with(holder, func(h *holderAt) { h.boot = bootB }), false},
		{"evidence-names-another-namespace", holder, with(taker, func(h *holderAt) { h.ns = nsB }), with(holder, func(h *holderAt) { h.ns = nsB }), false},
		{"evidence-names-another-start", holder, taker, with(holder, func(h *holderAt) { h.start = 90018 }), false},
		{"evidence-omits-start", holder, taker, with(holder, func(h *holderAt) { h.start = 0 }), false},
		{"evidence-omits-process-table", holder, taker, legacy, false},
		// a holder recorded without its start time: any process at the pid is it
		{"holder-without-start", with(holder, func(h *holderAt) { h.start = 0 }), taker, with(holder, func(h *holderAt) { h.start = 0 }), true},
		// a lease written before boot ids were recorded: fail closed ...
		{"old-lease-new-taker", legacy, taker, legacy, false},
		// ... except for an entry written then, so that old ledgers still verify
		{"old-lease-old-taker", legacy, holderAt{host: "h1", pid: 777}, legacy, true},
		{"old-lease-old-taker-other-host", legacy, holderAt{host: "h2", pid: 777}, legacy, false},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			w := newWorld(t)
			w.plan("w", pc{ID: "c"})
			w.ok("claim", "A", tc.lease.claim("w", "c", lease.ModeClaim))
			w.set(time.Minute)
			b := tc.by.claim("w", "c", lease.ModeReclaimDead)
			b.Dead = tc.names.dead("A", 1)
			if !tc.ok {
				if e := w.refuse("LEASE-HELD", "claim", "B", b); e.Details["holder"] != "A" {
					t.Fatalf("details %v", e.Details)
				}
				return
			}
			g := granted(t, w.ok("claim", "B", b))
			if g.Takeover != lease.TakeoverDeadHolder || g.Prior.Holder() != (lease.HolderID{Host: tc.lease.host, PID: tc.lease.pid,
				BootID: tc.lease.boot, PIDNS: tc.lease.ns, PIDStart: tc.lease.start}) {
				t.Fatalf("takeover %q prior %+v", g.Takeover, g.Prior)
			}
			want := lease.HolderID{Host: tc.by.host, PID: tc.by.pid, BootID: tc.by.boot, PIDNS: tc.by.ns, PIDStart: tc.by.start}
			if got := w.cell("w", "c").Lease.Holder(); got != want || g.Lease.Epoch != 2 {
				t.Fatalf("new lease holder %+v epoch %d, want %+v", got, g.Lease.Epoch, want)
			}
		})
	}
}

// TestHolderIdentityStored: the lease stores the identity its claim records,
// under the keys FORMAT.md §6 names, and a lease without one is stored
// exactly as before those keys existed.
func TestHolderIdentityStored(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "new"}, pc{ID: "old"})
	w.ok("claim", "A", holderAt{"h1", 4242, bootA, nsA, 90017}.claim("w", "new", lease.ModeClaim))
	w.ok("claim", "A", claimB("w", "old"))
	for cell, want := range map[string][]string{
		"new": {`"boot_id":"` + bootA + `"`, fmt.Sprintf(`"pid_ns":%d`, nsA), `"pid_start":90017`, `"pid":4242`},
		"old": {`"pid":100`},
	} {
		raw := storedCell(t, w, "w", cell)
		for _, s := range want {
			if !strings.Contains(raw, s) {
				t.Fatalf("cell %s: %s lacks %s", cell, raw, s)
			}
		}
		if cell == "old" && (strings.Contains(raw, "boot_id") || strings.Contains(raw, "pid_ns") || strings.Contains(raw, "pid_start")) {
			t.Fatalf("a lease without identity must be stored as before: %s", raw)
		}
	}
}

// TestHolderIdentityForm: a claim records boot_id and pid_ns together (a
// boot id in the kernel's lowercase UUID form), and pid_start only with them.
func TestHolderIdentityForm(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "c"})
	for _, h := range []holderAt{
		{"h1", 1, bootA, 0, 0},
		{"h1", 1, "", nsA, 0},
		{"h1", 1, "", 0, 5},
		{"h1", 1, strings.ToUpper(bootA), nsA, 0},
		{"h1", 1, bootA[:35], nsA, 0},
		{"h1", 1, strings.Replace(bootA, "-", "x", 1), nsA, 0},
	} {
		w.refuse("USAGE", "claim", "A", h.claim("w", "c", lease.ModeClaim))
	}
	w.ok("claim", "A", holderAt{"h1", 1, bootA, nsA, 0}.claim("w", "c", lease.ModeClaim))
}

// storedCell returns the stored JSON of a cell: the one key
// waves/<w>/cells/<xx>/<c> of FORMAT.md §6.
func storedCell(t *testing.T, w *world, wave, cell string) string {
	t.Helper()
	var found []string
	for k, v := range w.kv {
		if strings.HasPrefix(k, "waves/"+wave+"/cells/") && strings.HasSuffix(k, "/"+cell) {
			found = append(found, string(v))
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d stored records for cell %s/%s", len(found), wave, cell)
	}
	return found[0]
}
