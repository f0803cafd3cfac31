package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// lockTTLs maps each pattern of a lock result to its ttl_seconds.
func lockTTLs(t *testing.T, res map[string]any) map[string]float64 {
	t.Helper()
	out := map[string]float64{}
	for _, l := range arr(t, res, "locks") {
		m := l.(map[string]any)
		out[m["pattern"].(string)] = m["ttl_seconds"].(float64)
	}
	return out
}

// TestTTLFlags: --ttl takes a duration like --wait (10m) and still bare
// seconds, on claim, renew and lock; 0 and out-of-range values are USAGE
// (lock --ttl 0 no longer means 1800); a relock without --ttl keeps the
// lock's own TTL, and locks of different TTLs cannot be renewed together
// without one.
func TestTTLFlags(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("w.json", `{"wave":"w","cells":[{"id":"a"},{"id":"b"},{"id":"c"}]}`))
	l := obj(t, r.ok("A", "claim", "w/a", "--ttl", "10m"), "lease")
	if l["ttl_seconds"] != float64(600) || l["expires_at"] != tsAt(10*time.Minute) {
		t.Fatalf("claim --ttl 10m: %v", l)
	}
	if l := obj(t, r.ok("A", "claim", "w/b", "--ttl", "90"), "lease"); l["ttl_seconds"] != float64(90) {
		t.Fatalf("claim --ttl 90 (seconds): %v", l)
	}
	for _, bad := range []string{"0", "0s", "10x", "1.5s", "29s", "25h", "-1m"} {
		r.refuse(2, "USAGE", "A", "claim", "w/c", "--ttl", bad)
		r.refuse(2, "USAGE", "A", "lock", "docs/**", "--ttl", bad)
	}
	if l := obj(t, r.ok("A", "renew", "w/a", "--epoch", "1", "--ttl", "1h"), "lease"); l["ttl_seconds"] != float64(3600) {
		t.Fatalf("renew --ttl 1h: %v", l)
	}
	if l := obj(t, r.ok("A", "renew", "w/a", "--epoch", "1"), "lease"); l["ttl_seconds"] != float64(3600) {
		t.Fatalf("renew without --ttl must keep the lease's: %v", l)
	}

	if got := lockTTLs(t, r.ok("A", "lock", "docs/**", "--ttl", "5m")); got["docs/**"] != 300 {
		t.Fatalf("lock --ttl 5m: %v", got)
	}
	r.at(time.Minute)
	if got := lockTTLs(t, r.ok("A", "lock", "docs/**")); got["docs/**"] != 300 {
		t.Fatalf("relock without --ttl must keep the lock's 300s: %v", got)
	}
	if got := lockTTLs(t, r.ok("A", "lock", "docs/**", "--epoch", "1")); got["docs/**"] != 300 {
		t.Fatalf("lock --epoch without --ttl must keep the lock's 300s: %v", got)
	}
	if got := lockTTLs(t, r.ok("A", "lock", "src/**")); got["src/**"] != 1800 {
		t.Fatalf("a new lock without --ttl: %v, want the default 1800", got)
	}
	e := r.refuse(2, "USAGE", "A", "lock", "docs/**", "src/**")
	if msg := e["message"].(string); !strings.Contains(msg, "--ttl") {
		t.Fatalf("locks of different TTLs renewed together: %q must point to --ttl", msg)
	}
	if got := lockTTLs(t, r.ok("A", "lock", "docs/**", "src/**", "--ttl", "2m")); got["docs/**"] != 120 || got["src/**"] != 120 {
		t.Fatalf("lock both --ttl 2m: %v", got)
	}
}

// TestWaitTimeoutCode: a --wait that runs out is WAIT-TIMEOUT (retryable)
// for claim as for lock, with the last refusal's details, its code as
// "refusal", and "waited".
func TestWaitTimeoutCode(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("w.json", `{"wave":"w","cells":[{"id":"a"}]}`))
	r.ok("A", "claim", "w/a")
	r.ok("A", "lock", "docs/**")
	e := r.refuse(1, "WAIT-TIMEOUT", "B", "claim", "w/a", "--wait", "50ms")
	if e["refusal"] != "LEASE-HELD" || e["holder"] != "A" || e["epoch"] != float64(1) || e["waited"] != "50ms" {
		t.Fatalf("claim --wait ran out: %v", e)
	}
	res := r.run("B", "lock", "docs/**", "--wait", "50ms") // records and clears a wait: the ledger moves
	e = obj(t, res.JSON, "error")
	if res.Code != 1 || e["code"] != "WAIT-TIMEOUT" || e["refusal"] != "LEASE-HELD" || e["holder"] != "A" || e["waited"] != "50ms" {
		t.Fatalf("lock --wait ran out: exit %d %v", res.Code, e)
	}
}

// TestLockPathspecsRelative: lock and unlock resolve pathspecs as git does,
// against the directory tally runs in; ":/" names the root; climbing above
// the root is USAGE.
func TestLockPathspecsRelative(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	sub := filepath.Join(r.dir, "src", "api")
	if err := os.MkdirAll(sub, 0o755); err != nil {
		t.Fatal(err)
	}
	in := func(dir string, args ...string) testrepo.Result {
		return testrepo.Run(t, dir, "A", nil, append(args, "--json")...)
	}
	res := in(sub, "lock", "*.go", "../web/**", "./x", ":/go.mod", ".")
	if res.Code != 0 {
		t.Fatalf("lock from src/api: exit %d %s", res.Code, res.Stdout)
	}
	got := lockTTLs(t, res.JSON)
	for _, want := range []string{"src/api/*.go", "src/web/**", "src/api/x", "go.mod", "src/api"} {
		if _, ok := got[want]; !ok || len(got) != 5 {
			t.Fatalf("lock from src/api locked %v, want %s among 5", got, want)
		}
	}
	if res := in(sub, "lock", "../../../x"); res.Code != 2 || res.ErrorCode() != "USAGE" {
		t.Fatalf("a pathspec above the root: exit %d %s", res.Code, res.Stdout)
	}
	if res := in(filepath.Join(r.dir, "src"), "unlock", "api/*.go", ":/go.mod", "--epoch", "1"); res.Code != 0 {
		t.Fatalf("unlock from src: exit %d %s", res.Code, res.Stdout)
	}
	left := arr(t, r.ok("A", "locks"), "locks")
	if len(left) != 3 {
		t.Fatalf("after unlocking two of five from src/, locks: %v", left)
	}
	// ":/" alone is the whole tree, whatever the directory
	if res := in(sub, "lock", ":/"); res.Code != 0 || lockTTLs(t, res.JSON)["**"] == 0 {
		t.Fatalf("lock :/ from src/api: exit %d %s, want a lock on **", res.Code, res.Stdout)
	}
}

// TestWaveArgument: status and next take the wave either as their argument
// or as --wave; two different ones are USAGE.
func TestWaveArgument(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("w1.json", `{"wave":"w1","cells":[{"id":"a"}]}`))
	r.ok("A", "plan", r.file("w2.json", `{"wave":"w2","cells":[{"id":"b"}]}`))
	for _, args := range [][]string{{"status", "w2"}, {"status", "--wave", "w2"}, {"status", "w2", "--wave", "w2"}} {
		waves := arr(t, r.ok("A", args...), "waves")
		if len(waves) != 1 || waves[0].(map[string]any)["wave"] != "w2" {
			t.Fatalf("tally %v: %v", args, waves)
		}
	}
	for _, args := range [][]string{{"next", "w2"}, {"next", "--wave", "w2"}} {
		ready := arr(t, r.ok("A", args...), "ready")
		if len(ready) != 1 || ready[0].(map[string]any)["cell"] != "b" {
			t.Fatalf("tally %v: %v", args, ready)
		}
	}
	r.refuse(2, "USAGE", "A", "status", "w1", "--wave", "w2")
	r.refuse(2, "USAGE", "A", "next", "w1", "--wave", "w2")
}
