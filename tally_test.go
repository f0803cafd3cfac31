package tally_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// clock is a test's injected clock, shared by its clients: time moves only
// when the test says so, so expiry is exact and nothing sleeps.
type clock struct{ t time.Time }

func (c *clock) now() time.Time          { return c.t }
func (c *clock) advance(d time.Duration) { c.t = c.t.Add(d) }

// open opens the repository at dir as actor on the injected clock.
func open(t *testing.T, dir, actor string, clk *clock) *tally.Client {
	t.Helper()
	c, err := tally.Open(dir, tally.Options{Actor: actor, Local: true, Now: clk.now})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.L.WaitMaintenance(); c.Close() })
	return c
}

// must(f())(t) is f's value, failing the test if f failed.
func must[T any](v T, err error) func(*testing.T) T {
	return func(t *testing.T) T {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
}

// code is err's tally error code ("" for success).
func code(err error) string {
	if err == nil {
		return ""
	}
	return string(errs.From(err).Code)
}

// The facade judges time only by the clock it is given: entries carry the
// injected time, and a lease expires exactly when that clock passes it.
func TestInjectedClock(t *testing.T) {
	dir := testrepo.New(t)
	clk := &clock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	alice := open(t, dir, "alice", clk)
	must(alice.Init("test/clock", false))(t)
	must(alice.Plan(&lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{{ID: "a"}}}))(t)
	g := must(alice.Claim(tally.ClaimOptions{Wave: "w", Cell: "a", TTL: 60}))(t)
	if want := "2031-05-06T07:09:09.000Z"; g.Lease.ExpiresAt != want {
		t.Fatalf("claimed at the injected time: expires %s, want %s", g.Lease.ExpiresAt, want)
	}
	clk.advance(60 * time.Second) // at the expiry instant the lease is still live
	must(alice.LiveLease("w", "a", 1))(t)
	clk.advance(time.Millisecond)
	if _, err := alice.LiveLease("w", "a", 1); code(err) != "LEASE-EXPIRED" {
		t.Fatalf("a millisecond past expiry: %v, want LEASE-EXPIRED", err)
	}
}

// tally run and tally renew answer alike for the same lease: both apply
// lease.CheckHolder, so a stale epoch is EPOCH-MISMATCH for both (the fencing
// token is checked before the holder) and a released cell is CELL-STATE for
// both. Each state is on its own cell; run goes first, since a renew that
// succeeds changes the lease.
func TestRunAndRenewAgree(t *testing.T) {
	dir := testrepo.New(t)
	clk := &clock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	alice, bob := open(t, dir, "alice", clk), open(t, dir, "bob", clk)
	must(alice.Init("test/agree", false))(t)
	var cells []lease.PlanCell
	for _, id := range []string{"live", "expired", "stale", "others", "released"} {
		cells = append(cells, lease.PlanCell{ID: id})
	}
	must(alice.Plan(&lease.PlanBody{Wave: "w", Cells: cells}))(t)
	claim := func(c *tally.Client, cell string, ttl int) {
		t.Helper()
		must(c.Claim(tally.ClaimOptions{Wave: "w", Cell: cell, TTL: ttl}))(t)
	}
	claim(alice, "expired", lease.TTLMin)
	claim(alice, "stale", lease.TTLMin)
	clk.advance(lease.TTLMin*time.Second + time.Millisecond)
	claim(bob, "stale", 600) // epoch 2: alice's epoch 1 is fenced off
	claim(alice, "live", 600)
	claim(bob, "others", 600)
	claim(alice, "released", 600)
	must(alice.Release("w", "released", 1))(t)

	for _, tc := range []struct {
		cell, want string
	}{
		{"live", ""},
		{"expired", "LEASE-EXPIRED"},
		{"stale", "EPOCH-MISMATCH"},
		{"others", "ACTOR-MISMATCH"},
		{"released", "CELL-STATE"},
	} {
		_, runErr := alice.Run("w", tc.cell, 1, exec.Command("true"), nil)
		_, renewErr := alice.Renew("w", tc.cell, 1, 0)
		if code(runErr) != tc.want || code(renewErr) != tc.want {
			t.Errorf("%s: run answers %q (%v), renew %q (%v); want %q from both", tc.cell, code(runErr), runErr, code(renewErr), renewErr, tc.want)
		}
	}
}

// The default actor is git's user.email, through include.path and includeIf
// "gitdir:" as git resolves them.
func TestDefaultActorFollowsIncludes(t *testing.T) {
	dir := testrepo.New(t)
	home := t.TempDir()
	global := filepath.Join(home, ".gitconfig")
	files := map[string]string{
		global: "[user]\n\temail = global@example.com\n[include]\n\tpath = base.inc\n" +
			"[includeIf \"gitdir:" + filepath.Dir(dir) + "/\"]\n\tpath = ~/work.inc\n",
		filepath.Join(home, "base.inc"): "[user]\n\temail = base@example.com\n",
		filepath.Join(home, "work.inc"): "[user]\n\temail = work@example.com\n",
	}
	for p, text := range files {
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	vars := []string{"HOME=" + home, "GIT_CONFIG_GLOBAL=" + global, "GIT_CONFIG_NOSYSTEM=1"}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	cmd := exec.Command("git", "config", "user.email")
	cmd.Dir, cmd.Env = dir, testrepo.Env(vars...)
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	c, err := tally.Open(dir, tally.Options{Local: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if want := strings.TrimSpace(string(out)); c.Actor != want {
		t.Fatalf("default actor %q, git config user.email %q", c.Actor, want)
	}
}

// A cancelled ClaimWait stops waiting: cancelled as the waiting starts
// (onWait), with 20 s left to wait, it returns the refusal it had
// (NO-READY-CELL, not WAIT-TIMEOUT) within a second or two. An MCP client that gave up on
// the call (its request timeout, or the agent cancelled) is not granted a
// lease it will never hear of.
func TestClaimWaitStopsWhenCancelled(t *testing.T) {
	dir := testrepo.New(t)
	clk := &clock{time.Date(2031, 5, 6, 7, 8, 9, 0, time.UTC)}
	alice, bob := open(t, dir, "alice", clk), open(t, dir, "bob", clk)
	must(alice.Init("test/cancel", false))(t)
	must(alice.Plan(&lease.PlanBody{Wave: "w", Cells: []lease.PlanCell{{ID: "only"}}}))(t)
	must(alice.Claim(tally.ClaimOptions{Wave: "w", Cell: "only", TTL: 600}))(t)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	start := time.Now()
	_, err := bob.ClaimWait(ctx, tally.ClaimOptions{Next: true, TTL: 600}, 20*time.Second, func(error) { cancel() })
	if code(err) != "NO-READY-CELL" {
		t.Fatalf("cancelled wait: %v (%s), want NO-READY-CELL", err, code(err))
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the cancelled wait took %v of its 20 s", took)
	}
}
