package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/hooks"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// TestSequencedOps: a new clone of a server whose offer lists the ops
// (FORMAT.md §9b) sends renew, release, lock, unlock, done and fail to the
// sequencer as it sends claim --next: no ledger update is pushed, the server's ledger
// holds each entry, by its actor, and a refusal comes back with the rule's
// code and details. Against an offer from before the list, claim --next
// alone is sequenced and the others push compare-and-swap.
func TestSequencedOps(t *testing.T) {
	t.Parallel()
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("ops", 4)
	a, b := c.clone("agent-a"), c.clone("agent-b")
	pushed := pushedLedgerUpdates(t, c.bare) // init and plan
	remote := func(args ...string) []string { return append([]string{"--remote", "origin"}, args...) }

	claim := c.ok(a, "A", nil, remote("claim", "--next")...)
	epoch := fmt.Sprint(obj(t, claim, "lease")["epoch"])
	c.ok(a, "A", nil, remote("renew", "ops/c000", "--epoch", epoch, "--ttl", "20m")...)
	c.refused(2, "EPOCH-MISMATCH", a, "A", nil, remote("renew", "ops/c000", "--epoch", "7")...)
	locked := c.ok(a, "A", nil, remote("lock", "src/x/**", "--ttl", "10m")...)
	lockEpoch := fmt.Sprint(arr(t, locked, "locks")[0].(map[string]any)["epoch"])
	held := c.refused(1, "LEASE-HELD", b, "B", nil, remote("lock", "src/x/**")...)
	if held.ErrorField("holder") != "A" || held.ErrorField("requested") != "src/x/**" {
		t.Fatalf("a sequenced lock's refusal lost its details: %s", held)
	}
	c.ok(a, "A", nil, remote("lock", "src/x/**", "--epoch", lockEpoch)...)
	c.ok(a, "A", nil, remote("unlock", "src/x/**", "--epoch", lockEpoch)...)
	c.ok(a, "A", nil, remote("release", "ops/c000", "--epoch", epoch)...)
	claim = c.ok(a, "A", nil, remote("claim", "--next")...)
	testrepo.Git(t, a, "commit", "-q", "--allow-empty", "-m", "work")
	c.ok(a, "A", nil, remote("done", fmt.Sprint(claim["wave"], "/", claim["cell"]), "--epoch", fmt.Sprint(obj(t, claim, "lease")["epoch"]))...)
	claim = c.ok(a, "A", nil, remote("claim", "--next")...)
	c.ok(a, "A", nil, remote("fail", fmt.Sprint(claim["wave"], "/", claim["cell"]), "--epoch", fmt.Sprint(obj(t, claim, "lease")["epoch"]), "--reason", "broken")...)
	if n := pushedLedgerUpdates(t, c.bare); n != pushed {
		t.Fatalf("%d ledger updates were pushed, want %d: an op went compare-and-swap", n, pushed)
	}
	var kinds []string
	for _, e := range netLedger(t, c.bare) {
		if e.Actor == "A" {
			kinds = append(kinds, e.Kind)
		}
	}
	if want := []string{"claim", "renew", "lock", "lock", "unlock", "release", "claim", "done", "claim", "fail"}; !slices.Equal(kinds, want) {
		t.Fatalf("the server's ledger holds %v, want %v", kinds, want)
	}
	ops := func(dir string) []any {
		claims, _ := c.ok(dir, "B", nil, remote("status")...)["claims"].(map[string]any)
		got, _ := claims["ops"].([]any)
		return got
	}
	if got := fmt.Sprint(ops(b)); got != fmt.Sprint(tally.SequencedOps) {
		t.Fatalf("status says the sequenced ops are %s, want %v", got, tally.SequencedOps)
	}
	if p := testrepo.Exec(c.bin, b, "B", nil, "--remote", "origin", "remote", "show"); p.Code != 0 ||
		!strings.Contains(p.Stdout, "\nsequenced: claim-next done fail lock release renew unlock\n") {
		t.Fatalf("remote show does not list the sequenced ops: %s", p)
	}

	// An offer without the list, as a server from before it wrote.
	tree := strings.TrimSpace(testrepo.Git(t, c.bare, "rev-parse", ledger.SequencerRef+"^{tree}"))
	old := strings.TrimSpace(testrepo.Git(t, c.bare, "commit-tree", tree, "-m", "tally sequencer"))
	testrepo.Git(t, c.bare, "update-ref", ledger.SequencerRef, old)
	if got := fmt.Sprint(ops(b)); got != "[claim-next]" {
		t.Fatalf("status after an offer without the list says the sequenced ops are %s", got)
	}
	claim = c.ok(b, "B", nil, remote("claim", "--next")...)
	if n := pushedLedgerUpdates(t, c.bare); n != pushed {
		t.Fatalf("claim --next was pushed (%d updates), want it sequenced", n)
	}
	c.ok(b, "B", nil, remote("renew", fmt.Sprint(claim["wave"], "/", claim["cell"]), "--epoch", fmt.Sprint(obj(t, claim, "lease")["epoch"]))...)
	if n := pushedLedgerUpdates(t, c.bare); n != pushed+1 {
		t.Fatalf("%d ledger updates were pushed, want %d: a server that did not list renew got it as a request", n, pushed+1)
	}
}

// TestSequencedBatch: requests that arrive while another server process
// holds the ledger's writer lock are handed to it and land as one batch
// (one pack), each judged by its own pusher, not by the holder's: the
// holder here is this test's process, which names no pusher at all.
// Through smart HTTP with basic auth (REMOTE_USER) and pushers bound,
// admin's request for alice and bob's own land; bob's for alice is
// PUSHER-DENIED, and the others of the batch land all the same.
func TestSequencedBatch(t *testing.T) {
	for _, v := range hooks.PusherVars {
		t.Setenv(v, "") // the holder names no pusher (an empty value names none)
	}
	c := newPusherCluster(t, map[string]string{"admin": "pw-admin", "bob": "pw-bob"})
	seed := c.as("admin").clone("seed")
	c.ok(seed, "admin", nil, "--remote", "origin", "init")
	c.ok(seed, "admin", nil, "--remote", "origin", "plan", netPlan(t, seed, "batch", 4, nil))
	c.ok(seed, "admin", nil, "--remote", "origin", "policy", "set-pushers", "admin=*", "bob=bob")
	requests := []struct{ who, actor, code string }{{"admin", "alice", ""}, {"bob", "bob", ""}, {"bob", "alice", "PUSHER-DENIED"}}
	dirs := make([]string, len(requests))
	for i, r := range requests {
		dirs[i] = c.as(r.who).clone(fmt.Sprintf("%s-as-%s", r.who, r.actor))
		c.ok(dirs[i], r.actor, nil, "--remote", "origin", "status") // fetched: the offer is known, the claim a request
	}

	holder, err := tally.Open(c.bare, tally.Options{Actor: "holder", Local: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.L.WaitMaintenance(); holder.Close() })
	holder.SetRequestGuard(func(pusher map[string]string) tally.Guard { return tally.Guard(hooks.PusherGuard(hooks.EnvOf(pusher))) })
	started, proceed, held := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	var own *ledger.Appended
	go func() {
		var err error
		own, err = holder.L.Append("holder", func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
			close(started)
			<-proceed // the lock is held and the socket bound: the requests are handed over
			return &ledger.Draft{Kind: chain.KindNote, Body: lease.NoteBody{Text: "holder's own"}}, nil
		})
		held <- err
	}()
	select {
	case <-started:
	case err := <-held:
		t.Fatalf("the holder's own append ended before it was held: %v", err)
	}
	socket := testrepo.HandoverSocket(c.bare)
	if _, err := os.Stat(socket); err != nil {
		close(proceed)
		t.Fatalf("the holder holds the writer lock but does not listen: %v (signs: %v)", err, holder.L.Signs())
	}
	testrepo.AwaitSockets(t, socket, 1)
	results := make([]chan testrepo.Result, len(requests))
	for i, r := range requests {
		results[i] = make(chan testrepo.Result, 1)
		go func() { results[i] <- netRun(c.bin, dirs[i], r.actor, nil, "--remote", "origin", "claim", "--next") }()
	}
	testrepo.AwaitSockets(t, socket, 1+len(requests))
	close(proceed)
	if err := <-held; err != nil {
		t.Fatal(err)
	}

	var granted []string
	for i, r := range requests {
		p := <-results[i]
		if r.code != "" {
			if p.Code != 2 || p.ErrorCode() != r.code {
				t.Fatalf("%s's request as %s: %s, want %s", r.who, r.actor, p, r.code)
			}
			continue
		}
		if p.Code != 0 {
			t.Fatalf("%s's request as %s: %s", r.who, r.actor, p)
		}
		granted = append(granted, p.JSON["commit"].(string))
	}
	packOf := packsOf(t, c.bare)
	batch := packOf[granted[0]]
	for _, commit := range granted {
		if packOf[commit] != batch || batch == "" {
			t.Fatalf("the granted entries %v lie in packs %s and %s, want one batch's (the holder's in %s)", granted, batch, packOf[commit], packOf[own.Commit.String()])
		}
	}
	if packOf[own.Commit.String()] == batch {
		t.Fatalf("the holder's own entry lies in the batch's pack %s: the requests were not handed over", batch)
	}
	if rep, err := holder.L.Verify(true); err != nil {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// packsOf maps each object of the packs of the repository at gitDir to
// its pack's name.
func packsOf(t *testing.T, gitDir string) map[string]string {
	t.Helper()
	idxs, err := filepath.Glob(filepath.Join(gitDir, "objects", "pack", "*.idx"))
	if err != nil {
		t.Fatal(err)
	}
	in := map[string]string{}
	for _, idx := range idxs {
		f, err := os.Open(idx)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "show-index")
		cmd.Stdin = f
		out, err := cmd.Output()
		f.Close()
		if err != nil {
			t.Fatalf("git show-index %s: %v", idx, err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
			if f := strings.Fields(line); len(f) >= 2 {
				in[f[1]] = filepath.Base(idx)
			}
		}
	}
	return in
}

// TestSequencedLockRace: agents in clones as a new user leaves them lock
// one pattern through the sequencer at once, round after round, and the
// winner unlocks it. Each round exactly one is told it won and the others
// LEASE-HELD naming it; the server's ledger holds, in order, each round's
// lock by the agent told it won and its unlock, no ledger update was
// pushed (every one was a request, batched as they came), and the ledger
// verifies.
func TestSequencedLockRace(t *testing.T) {
	t.Parallel()
	rounds, agents := 8, 6
	if netStress() {
		rounds = 40
	}
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.seeded("race", 1)
	dirs := c.agents(agents)
	pushed := pushedLedgerUpdates(t, c.bare)
	var winners []string
	for round := 0; round < rounds; round++ {
		out := netTogether(agents, func(i int) testrepo.Result {
			return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "lock", "shared/**", "--ttl", "1h")
		})
		winner, epoch := -1, ""
		for i, p := range out {
			switch {
			case p.Err != nil:
				t.Fatalf("round %d %s: %s: %v", round, netAgent(i), p, p.Err)
			case p.Code == 0 && winner >= 0:
				t.Fatalf("round %d: %s and %s were both told they hold shared/**", round, netAgent(winner), netAgent(i))
			case p.Code == 0:
				winner, epoch = i, fmt.Sprint(arr(t, p.JSON, "locks")[0].(map[string]any)["epoch"])
			case p.Code != 1 || p.ErrorCode() != "LEASE-HELD":
				t.Fatalf("round %d %s: %s", round, netAgent(i), p)
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: nobody won:\n%v", round, out)
		}
		for i, p := range out {
			if i != winner && p.ErrorField("holder") != netAgent(winner) {
				t.Fatalf("round %d: %s was told %v holds shared/**, the winner is %s", round, netAgent(i), p.ErrorField("holder"), netAgent(winner))
			}
		}
		winners = append(winners, netAgent(winner))
		c.ok(dirs[winner], netAgent(winner), nil, "--remote", "origin", "unlock", "shared/**", "--epoch", epoch)
	}
	var got []string
	for _, e := range netLedger(t, c.bare) {
		if e.Kind == "lock" || e.Kind == "unlock" {
			got = append(got, e.Kind+" "+e.Actor)
		}
	}
	var want []string
	for _, w := range winners {
		want = append(want, "lock "+w, "unlock "+w)
	}
	if !slices.Equal(got, want) {
		t.Fatalf("the server's ledger holds\n%v\nthe agents were told\n%v", got, want)
	}
	if n := pushedLedgerUpdates(t, c.bare); n != pushed {
		t.Fatalf("%d ledger updates were pushed, want %d: a lock or unlock went compare-and-swap", n, pushed)
	}
	c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
}

// TestSequencedDoneUnderClaims: 8 agents in clones as a new user leaves
// them claim, commit and finish cell after cell at once, 5 each. Every
// claim and every done succeeds at its first call: a done pushed by
// compare-and-swap raced the sequencer's stream of claims and gave up
// (CONFLICT after 32 attempts, 7 of 8 agents on their first cell, in one
// run of BenchmarkRemoteDrainDone), so done goes to the sequencer too, and
// none is pushed. The server's ledger holds each cell's receipt by the
// agent that was told so, and verifies.
func TestSequencedDoneUnderClaims(t *testing.T) {
	t.Parallel()
	agents, cycles := 8, 5
	c := newNetCluster(t, gitserver.GitDaemon)
	// More cells than are claimed: a claim then takes the server longer
	// (every ready cell is a candidate), and a compare-and-swap done's
	// window to lose in is wider.
	seed := c.seeded("drain", 400)
	dirs := c.agents(agents)
	done := make([][]string, agents)
	failures := make(chan error, agents)
	for i := range dirs {
		go func() {
			for range cycles {
				p := netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
				if p.Err != nil || p.Code != 0 {
					failures <- fmt.Errorf("%s: %v", p, p.Err)
					return
				}
				cell := fmt.Sprint(p.JSON["wave"], "/", p.JSON["cell"])
				if _, err := netGit(dirs[i], nil, "commit", "-q", "--allow-empty", "-m", "work on "+cell); err != nil {
					failures <- err
					return
				}
				d := netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "done", cell, "--epoch", fmt.Sprint(obj(t, p.JSON, "lease")["epoch"]))
				if d.Err != nil || d.Code != 0 {
					failures <- fmt.Errorf("%s: %v", d, d.Err)
					return
				}
				done[i] = append(done[i], cell)
			}
			failures <- nil
		}()
	}
	for range dirs {
		if err := <-failures; err != nil {
			t.Fatal(err)
		}
	}
	by := map[string]string{}
	for _, e := range netLedger(t, c.bare) {
		if e.Kind == "done" {
			by[e.cell()] = e.Actor
		}
	}
	for i, cells := range done {
		for _, cell := range cells {
			if by[cell] != netAgent(i) {
				t.Fatalf("%s: %s was told it finished it, the server's ledger says %q", cell, netAgent(i), by[cell])
			}
		}
	}
	if len(by) != agents*cycles {
		t.Fatalf("%d receipts in the server's ledger, want %d", len(by), agents*cycles)
	}
	if n := pushedLedgerUpdates(t, c.bare); n != 2 {
		t.Fatalf("%d ledger updates were pushed, want 2 (init and plan): a done raced the sequencer by compare-and-swap", n)
	}
	c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
}
