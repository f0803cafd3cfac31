package lease_test

import (
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
)

// end is the last instant FORMAT.md's timestamps can write (four year digits,
// milliseconds), computed by hand.
var end = time.Date(9999, time.December, 31, 23, 59, 59, int(999*time.Millisecond), time.UTC)

// TestDerivedTimesInRange: an entry whose rule would store a time after
// 9999-12-31T23:59:59.999Z (expires_at, max_hold_until, a lock's or a wait's
// expiry) is refused with USAGE, naming the limit, and changes nothing; the
// same entry ending exactly at the limit is accepted, and an entry that
// derives no time is accepted at the very last instant.
func TestDerivedTimesInRange(t *testing.T) {
	const ms = time.Millisecond
	refuse := func(w *world, kind, actor string, body any) {
		t.Helper()
		e := w.refuse("USAGE", chain.Kind(kind), actor, body)
		if e.Details["limit"] != "9999-12-31T23:59:59.999Z" {
			t.Errorf("%s refusal: details %v, want the limit", kind, e.Details)
		}
	}
	t.Run("claim", func(t *testing.T) {
		w := newWorld(t)
		w.plan("w", pc{ID: "a"}, pc{ID: "b"})
		w.now = end.Add(-30*time.Minute + ms) // max_hold_until = ts + 30 min (ttl 30) is 1 ms too late
		refuse(w, "claim", "alice", withTTL(claimB("w", "a"), 30))
		w.now = end.Add(-30 * time.Minute)
		g := granted(t, w.ok("claim", "alice", withTTL(claimB("w", "a"), 30)))
		if g.Lease.MaxHoldUntil != stamp(end) {
			t.Fatalf("max_hold_until %s, want %s", g.Lease.MaxHoldUntil, stamp(end))
		}
		w.now = end.Add(-48*time.Hour + ms) // ttl 86400: max hold 48 h
		refuse(w, "claim", "bob", withTTL(claimB("w", "b"), 86400))
	})
	t.Run("renew", func(t *testing.T) {
		w := newWorld(t)
		w.plan("w", pc{ID: "a"})
		start := end.Add(-48 * time.Hour)
		w.now = start
		w.ok("claim", "alice", withTTL(claimB("w", "a"), 86400)) // expires start+24h, max hold = end
		w.now = start.Add(24 * time.Hour)
		w.ok("renew", "alice", renewB("w", "a", 1, 86400)) // expires exactly at end
		w.now = end                                        // live (ts = expires_at) and not past max hold
		refuse(w, "renew", "alice", renewB("w", "a", 1, 30))
		w.ok("release", "alice", epochB("w", "a", 1)) // no derived time: accepted at the last instant
	})
	t.Run("lock", func(t *testing.T) {
		w := newWorld(t)
		w.now = end.Add(-30*time.Second + ms)
		refuse(w, "lock", "alice", lease.LockBody{Patterns: []string{"src"}, TTL: 30})
		w.now = end.Add(-30 * time.Second)
		w.ok("lock", "alice", lease.LockBody{Patterns: []string{"src"}, TTL: 30})
		w.now = end
		refuse(w, "lock", "alice", lease.LockBody{Patterns: []string{"src"}, TTL: 30, Epochs: []int64{1}}) // renew
	})
	t.Run("wait", func(t *testing.T) {
		w := newWorld(t)
		w.now = end.Add(-20 * time.Minute)
		w.ok("lock", "alice", lease.LockBody{Patterns: []string{"src"}, TTL: 1200})
		w.now = end.Add(-lease.WaitTTL + ms)
		refuse(w, "wait", "bob", lease.WaitBody{Pattern: "src", Holders: []string{"alice"}})
		w.now = end.Add(-lease.WaitTTL)
		w.ok("wait", "bob", lease.WaitBody{Pattern: "src", Holders: []string{"alice"}})
	})
	t.Run("note", func(t *testing.T) {
		w := newWorld(t)
		w.now = end
		w.ok("note", "alice", lease.NoteBody{Text: "the last instant"})
	})
}
