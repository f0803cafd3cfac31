package lease_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/binary"
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
// and `admins` are sorted bytewise. The TestFormatFacts* tests below, and
// those of packages ledger and anchor, pin the rest: each answers a
// question the document once left to the code (issue #34).
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

// blobUnder is the one state blob whose key starts with prefix and is not
// skip (the sharded paths of §6 hash their names).
func blobUnder(t *testing.T, w *world, prefix, skip string) string {
	t.Helper()
	found := ""
	for k, v := range w.kv {
		if strings.HasPrefix(k, prefix) && k != skip {
			if found != "" {
				t.Fatalf("two blobs under %s", prefix)
			}
			found = string(v)
		}
	}
	if found == "" {
		t.Fatalf("no blob under %s", prefix)
	}
	return found
}

// TestFormatFactsEmptyOptional pins FORMAT.md §5: an optional member given
// as "" or 0 (a cell's title, a claim's base, boot_id, pid_ns and
// pid_start, next false, a fail's or lock's reason) is read as absent and
// stores nothing, while an empty id — a cell's "role":"" — is USAGE.
func TestFormatFactsEmptyOptional(t *testing.T) {
	w := newWorld(t)
	w.refuse("USAGE", "plan", "planner", `{"cells":[{"id":"a","role":""}],"wave":"w"}`)
	w.ok("plan", "planner", `{"cells":[{"id":"a","role":"r","title":""},{"id":"b"}],"wave":"w"}`)
	if c := string(w.kv[cellKeyOf(t, w, "w", "a")]); strings.Contains(c, `"title"`) || !strings.Contains(c, `"role":"r"`) {
		t.Fatalf("cell planned with an empty title: %s", c)
	}
	w.ok("claim", "A", `{"base":"","boot_id":"","cell":"a","host":"h1","mode":"claim","next":false,"pid":100,"pid_ns":0,"pid_start":0,"ttl":1800,"wave":"w"}`)
	lease := string(w.kv[cellKeyOf(t, w, "w", "a")])
	for _, m := range []string{"base", "boot_id", "pid_ns", "pid_start", "next"} {
		if strings.Contains(lease, `"`+m+`"`) {
			t.Fatalf("a claim with %s empty stored it: %s", m, lease)
		}
	}
	w.ok("fail", "A", `{"cell":"a","epoch":1,"reason":"","wave":"w"}`)
	if c := string(w.kv[cellKeyOf(t, w, "w", "a")]); strings.Contains(c, `"reason"`) {
		t.Fatalf("a fail with an empty reason stored one: %s", c)
	}
	w.ok("lock", "A", `{"patterns":["src"],"reason":"","ttl":60}`)
	if l := blobUnder(t, w, "locks/", "locks/index"); strings.Contains(l, `"reason"`) {
		t.Fatalf("a lock with an empty reason stored one: %s", l)
	}
}

// TestFormatFactsTakeoverWord pins FORMAT.md §5 "Summaries": a claim that
// takes a lease already expired at its ts is the takeover `expired`,
// whatever its mode, a steal past max_hold_until included.
func TestFormatFactsTakeoverWord(t *testing.T) {
	w := newWorld(t)
	w.plan("w", pc{ID: "a"}, pc{ID: "b"})
	w.ok("claim", "A", withTTL(claimB("w", "a"), 30)) // expires at +30s, max hold at +30m
	w.ok("claim", "A", withTTL(claimB("w", "b"), 30))
	w.set(31 * time.Minute) // past both expires_at and max_hold_until
	for _, c := range []struct{ cell, mode string }{{"a", lease.ModeSteal}, {"b", lease.ModeReclaimDead}} {
		r := w.ok("claim", "B", withMode(claimB("w", c.cell), c.mode))
		if want := "claim w/" + c.cell + " epoch 2 (expired from A epoch 1)"; r.Summary != want {
			t.Fatalf("mode %s on an expired lease: summary %q, want %q", c.mode, r.Summary, want)
		}
	}
}

// edKey is the ssh-ed25519 public key line of the key of seed, its wire
// encoding written out here (string "ssh-ed25519", string key) rather than
// taken from package identity.
func edKey(seed byte) string {
	pub := ed25519.NewKeyFromSeed(bytes.Repeat([]byte{seed}, ed25519.SeedSize)).Public().(ed25519.PublicKey)
	var wire []byte
	for _, s := range [][]byte{[]byte("ssh-ed25519"), pub} {
		wire = binary.BigEndian.AppendUint32(wire, uint32(len(s)))
		wire = append(wire, s...)
	}
	return "ssh-ed25519 " + base64.StdEncoding.EncodeToString(wire)
}

// TestFormatFactsPolicyLists pins FORMAT.md §7: each pattern list of
// `pushers` and `authors` is stored sorted bytewise with duplicates kept, as
// `protected` and `admins` are; re-adding a revoked key appends a new record
// (added at its seq, revoked null) after the revoked one, which stays.
func TestFormatFactsPolicyLists(t *testing.T) {
	w := newWorld(t)
	pushers := map[string][]string{"ci": {"bot-*", "Ann", "bot-*"}}
	authors := map[string][]string{"agent-1": {"z@x", "a@x", "z@x"}}
	w.ok("policy", "admin", lease.PolicySet{Pushers: &pushers, Authors: &authors})
	p := string(w.kv["policy"])
	if !strings.Contains(p, `"pushers":{"ci":["Ann","bot-*","bot-*"]}`) || !strings.Contains(p, `"authors":{"agent-1":["a@x","z@x","z@x"]}`) {
		t.Fatalf("stored pattern lists are not sorted bytewise with duplicates kept: %s", p)
	}

	k := edKey(7)
	w.ok("keys", "A", lease.KeysBody{Op: "add", Actor: "A", Key: k})    // seq 2
	w.ok("keys", "A", lease.KeysBody{Op: "revoke", Actor: "A", Key: k}) // seq 3
	w.ok("keys", "A", lease.KeysBody{Op: "add", Actor: "A", Key: k})    // seq 4
	ks, err := lease.ReadKeys(w.kv, "A")
	if err != nil {
		t.Fatal(err)
	}
	three := uint64(3)
	if len(ks.Keys) != 2 || ks.Keys[0].Key != k || ks.Keys[0].Added != 2 || !reflect.DeepEqual(ks.Keys[0].Revoked, &three) ||
		ks.Keys[1].Key != k || ks.Keys[1].Added != 4 || ks.Keys[1].Revoked != nil {
		t.Fatalf("keys after add, revoke, add: %+v", ks.Keys)
	}
	if blob := blobUnder(t, w, "keys/", ""); !strings.Contains(blob, `"added":4`) || !strings.Contains(blob, `"revoked":null`) {
		t.Fatalf("keys blob %s", blob)
	}
}
