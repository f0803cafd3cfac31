package main

import (
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// rulesIfLegal forges an entry as the writer would write it if the rules
// accept it, else with the state unchanged: either way the hook's answer is
// the rules' answer, not a forgery's other flaws.
func rulesIfLegal(state chain.KV, e *chain.Entry) (*lease.Result, error) {
	if res, err := lease.Apply(state, e); err == nil {
		return res, nil
	}
	return &lease.Result{Summary: string(e.Kind) + " (forged)"}, nil
}

// TestHolderAnswersAgree: for the same lease states, `tally run`, `tally
// renew` and the server's pre-receive hook answer alike, since all three
// apply lease.CheckHolder: run and renew through the remote, and the hook
// to a renew that an attacker forged (well chained, rules not run) and
// pushed with plain git, which it refuses as RULE-VIOLATION naming the rule's
// code. A stale epoch is EPOCH-MISMATCH everywhere, however the cell moved on,
// and a released cell CELL-STATE.
func TestHolderAnswersAgree(t *testing.T) {
	t0 := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	at := func(d time.Duration) []string { return []string{"TALLY_NOW=" + t0.Add(d).Format(time.RFC3339Nano)} }
	later := lease.TTLMin*time.Second + time.Second // past the first claims' expiry
	c := newNetCluster(t, gitserver.GitDaemon, at(later+time.Minute)...)
	alice, bob := c.clone("alice"), c.clone("bob")
	for _, d := range []string{alice, bob} {
		// Compare-and-swap: each entry carries its clone's clock, which this
		// test moves (and forges a renew at); a sequenced one carries the
		// server's.
		testrepo.Git(t, d, "config", "tally.sequencer", "false")
	}
	remote := func(args ...string) []string { return append([]string{"--remote", "origin"}, args...) }
	c.ok(alice, "alice", at(0), remote("init")...)
	states := []struct{ cell, want string }{
		{"c000", ""},               // alice's, live
		{"c001", "LEASE-EXPIRED"},  // alice's, expired
		{"c002", "EPOCH-MISMATCH"}, // alice's epoch 1, taken over by bob at epoch 2
		{"c003", "ACTOR-MISMATCH"}, // bob's
		{"c004", "CELL-STATE"},     // alice's, released
	}
	c.ok(alice, "alice", at(0), remote("plan", netPlan(t, alice, "w", len(states), nil))...)
	c.ok(alice, "alice", at(0), remote("claim", "w/c001", "--ttl", "30s")...)
	c.ok(alice, "alice", at(0), remote("claim", "w/c002", "--ttl", "30s")...)
	c.ok(bob, "bob", at(later), remote("claim", "w/c002")...)
	c.ok(alice, "alice", at(later), remote("claim", "w/c000")...)
	c.ok(bob, "bob", at(later), remote("claim", "w/c003")...)
	c.ok(alice, "alice", at(later), remote("claim", "w/c004")...)
	c.ok(alice, "alice", at(later), remote("release", "w/c004", "--epoch", "1")...)

	answer := func(p testrepo.Result) string {
		if p.Code == 0 {
			return ""
		}
		return p.ErrorCode()
	}
	for _, s := range states {
		run := c.run(alice, "alice", at(later), remote("run", "w/"+s.cell, "--epoch", "1", "--", "true")...)
		// The hook judges a forged renew on the server's tip.
		testrepo.Git(t, alice, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
		forgeBy(t, alice, "renew", "alice", chain.FormatTime(t0.Add(later)), lease.RenewBody{
			EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: "w", Cell: s.cell}, Epoch: 1}, TTL: 600}, rulesIfLegal)
		hook := ""
		if exit, stderr := c.push(alice, "origin", "refs/tally/ledger"); exit != 0 {
			line := netFirstLine(stderr, "tally: refused refs/tally/ledger: RULE-VIOLATION:")
			_, rest, ok := strings.Cut(line, "breaks rule ")
			if !ok {
				t.Fatalf("%s: push refused, but not for breaking a rule:\n%s", s.cell, stderr)
			}
			hook, _, _ = strings.Cut(rest, ":")
		}
		testrepo.Git(t, alice, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger") // drop the forgery
		renew := c.run(alice, "alice", at(later), remote("renew", "w/"+s.cell, "--epoch", "1")...)
		if answer(run) != s.want || answer(renew) != s.want || hook != s.want {
			t.Errorf("%s: run answers %q, renew %q, the server hook %q; want %q from all three\nrun: %s\nrenew: %s",
				s.cell, answer(run), answer(renew), hook, s.want, run, renew)
		}
	}
}
