package main

// Bounded cost at the push boundary (issue 17, hole 6): the lease rules'
// limits refused at write by the CLI (exit 2, LIMIT-EXCEEDED naming the
// limit) and by the server's pre-receive hook for entries forged by hand and
// pushed with plain git; and the hook's own time bound (tally.hookTimeout in
// the server repository's git config), past which a push is refused with the
// retryable HOOK-TIMEOUT and no ref moves.

import (
	"fmt"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/pathspec"
)

// costPaths returns n distinct literal paths under dir.
func costPaths(dir string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s/f%04d.go", dir, i)
	}
	return out
}

// TestPushCostLimits: a plan with too many paths in a cell or a wave, a lock
// with too many or too long patterns, and a lock whose conflict check would
// cost more than the budget are refused by the CLI before anything is
// written, and the same entries, forged with git plumbing and pushed with
// plain git, are refused by the server's hook. A forged entry at the limits
// is accepted, so the hook refuses the limit, not the way the entry was made.
func TestPushCostLimits(t *testing.T) {
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.seeded("w", 1)
	x := c.clone("forger")
	testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	tip := c.serverTip()
	reset := func() { testrepo.Git(t, x, "update-ref", "refs/tally/ledger", tip) }

	// at write: the CLI refuses with exit 2 and the limit named
	plan := func(name string, cells int, paths []string) string { return netPlan(t, seed, name, cells, paths) }
	for _, tc := range []struct {
		limit string
		args  []string
	}{
		{"cell-paths", []string{"plan", plan("p1", 1, costPaths("d", lease.MaxCellPaths+1))}},
		{"wave-paths", []string{"plan", plan("p2", lease.MaxWavePaths/lease.MaxCellPaths+1, costPaths("d", lease.MaxCellPaths))}},
		{"pattern-bytes", []string{"plan", plan("p3", 1, []string{strings.Repeat("d/", pathspec.MaxLen/2) + "x"})}},
		{"lock-patterns", append([]string{"lock", "--ttl", "60"}, costPaths("d", lease.MaxLockPatterns+1)...)},
		{"pattern-bytes", []string{"lock", "--ttl", "60", strings.Repeat("d/", pathspec.MaxLen/2) + "x"}},
	} {
		p := c.refused(2, "LIMIT-EXCEEDED", seed, "planner", nil, append([]string{"--remote", "origin"}, tc.args...)...)
		if p.ErrorField("limit") != tc.limit {
			t.Fatalf("%s: limit %v, want %s", p, p.ErrorField("limit"), tc.limit)
		}
	}
	if got := c.serverTip(); got != tip {
		t.Fatalf("refused writes moved the server's ledger: %s -> %s", tip, got)
	}

	// at the hook: the same entries forged and pushed with plain git
	forgeRefused := func(what, limit, kind string, body any) {
		t.Helper()
		reset()
		forge(t, x, kind, "A", netNowTS(0), body, false)
		c.pushRefused(x, what, "RULE-VIOLATION", "LIMIT-EXCEEDED", "limit "+limit)
	}
	cell := func(id string, paths []string) lease.PlanCell { return lease.PlanCell{ID: id, Paths: paths} }
	forgeRefused("cell of 257 paths", "cell-paths", "plan",
		lease.PlanBody{Wave: "f", Cells: []lease.PlanCell{cell("c", costPaths("d", lease.MaxCellPaths+1))}})
	var cells []lease.PlanCell
	for i := 0; i <= lease.MaxWavePaths/lease.MaxCellPaths; i++ {
		cells = append(cells, cell(fmt.Sprintf("c%02d", i), costPaths(fmt.Sprintf("d%02d", i), lease.MaxCellPaths)))
	}
	forgeRefused("wave of 8,448 paths", "wave-paths", "plan", lease.PlanBody{Wave: "f", Cells: cells})
	forgeRefused("lock of 33 patterns", "lock-patterns", "lock", lease.LockBody{Patterns: costPaths("d", lease.MaxLockPatterns+1), TTL: 60})
	forgeRefused("pattern of 1,025 bytes", "pattern-bytes", "lock",
		lease.LockBody{Patterns: []string{strings.Repeat("d/", pathspec.MaxLen/2) + "x"}, TTL: 60})

	// the check budget: B holds locks of 1 KiB patterns, one more than the
	// budget allows testing against another 1 KiB pattern; a lock by A whose
	// key ("") makes all of them candidates is over budget
	big := func(prefix string) string { return prefix + strings.Repeat("x", pathspec.MaxLen-len(prefix)) }
	held := []string{"--remote", "origin", "lock", "--ttl", "3600"}
	for i := range lease.MaxCheckCost/pathspec.Cost(big(""), big("")) + 1 {
		held = append(held, big(fmt.Sprintf("h%d/", i)))
	}
	c.ok(x, "B", nil, held...)
	tip = c.serverTip()
	p := c.refused(2, "LIMIT-EXCEEDED", seed, "A", nil, "--remote", "origin", "lock", "--ttl", "60", big("**/"))
	if p.ErrorField("limit") != "check-cost" {
		t.Fatalf("%s: want limit check-cost", p)
	}
	testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	forgeRefused("lock over the check budget", "check-cost", "lock", lease.LockBody{Patterns: []string{big("**/")}, TTL: 60})

	// control: forged entries at the limits are accepted
	reset()
	cells = cells[:lease.MaxWavePaths/lease.MaxCellPaths]
	forge(t, x, "plan", "B", netNowTS(0), lease.PlanBody{Wave: "f", Cells: cells}, true)
	forge(t, x, "lock", "B", netNowTS(0), lease.LockBody{Patterns: costPaths("e", lease.MaxLockPatterns), TTL: 60}, true)
	if exit, stderr := c.push(x, "origin", "refs/tally/ledger"); exit != 0 {
		t.Fatalf("entries at the limits refused: %s", stderr)
	}
}

// TestPushHookTimeout: with tally.hookTimeout set tiny in the server
// repository, a legal push is refused with HOOK-TIMEOUT and the server's refs
// do not move; tally's remote mode reports it as retryable (exit 1). An
// unreadable value refuses every push, saying why (fail closed). With the
// bound back at a sane value the same push is accepted.
func TestPushHookTimeout(t *testing.T) {
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.seeded("w", 1)
	x := c.clone("forger")
	testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	forge(t, x, "note", "B", netNowTS(0), lease.NoteBody{Text: "legal"}, true)

	testrepo.Git(t, c.bare, "config", "tally.hookTimeout", "1ns")
	c.pushRefused(x, "push past the time bound", "HOOK-TIMEOUT", "tally.hookTimeout", "push again later")
	c.refused(1, "HOOK-TIMEOUT", seed, "A", nil, "--remote", "origin", "note", "in time?")

	testrepo.Git(t, c.bare, "config", "tally.hookTimeout", "soon")
	before := c.lsRemote()
	if exit, stderr := c.push(x, "origin", "refs/tally/ledger"); exit == 0 || !strings.Contains(stderr, "USAGE: tally.hookTimeout") {
		t.Fatalf("push with an unreadable bound: exit %d:\n%s", exit, stderr)
	}
	if after := c.lsRemote(); after != before {
		t.Fatalf("refused push moved the server's refs")
	}

	testrepo.Git(t, c.bare, "config", "tally.hookTimeout", "60")
	if exit, stderr := c.push(x, "origin", "refs/tally/ledger"); exit != 0 {
		t.Fatalf("push within the bound refused: %s", stderr)
	}
}
