package main

// Path leases through the real binary on real git repositories: lock,
// unlock, locks, deadlocks; racing processes; a deadlock among three waiting
// processes broken by a break entry that verify replays; and a push refused
// by a bare repository's pre-receive hook. The harness (newRepo, r.ok,
// r.refuse, forge, tsAt, obj, arr, num) is cli_test.go's.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/pathspec"
)

// pathProc is one tally process started from the test (safe to run from a
// goroutine: it never calls t.Fatal).
type pathProc struct {
	cmd            *exec.Cmd
	stdout, stderr bytes.Buffer
	Code           int
	JSON           map[string]any
	Err            error
}

func startTally(t *testing.T, dir, actor string, env []string, args ...string) *pathProc {
	t.Helper()
	p := &pathProc{cmd: exec.Command(testrepo.Tally(t), append([]string{"-C", dir, "--json"}, args...)...)}
	p.cmd.Env = testrepo.Env(append([]string{"TALLY_ACTOR=" + actor}, env...)...)
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	return p
}

// wait waits for the process and decodes its one JSON object.
func (p *pathProc) wait() *pathProc {
	err := p.cmd.Wait()
	if ee, ok := err.(*exec.ExitError); ok {
		p.Code = ee.ExitCode()
	} else if err != nil {
		p.Err = err
		return p
	}
	dec := json.NewDecoder(bytes.NewReader(p.stdout.Bytes()))
	if err := dec.Decode(&p.JSON); err != nil || dec.More() {
		p.Err = fmt.Errorf("stdout is not one JSON object: %q %q", p.stdout.String(), p.stderr.String())
	}
	return p
}

func (p *pathProc) errObj() map[string]any { e, _ := p.JSON["error"].(map[string]any); return e }

// TestCLILockRace: 8 processes lock 8 different, pairwise overlapping
// patterns at once, round after round on fresh patterns. Exactly one wins
// each round; the 7 others get LEASE-HELD naming the winner and a witness
// path that both patterns match. verify --full replays the lot.
func TestCLILockRace(t *testing.T) {
	rounds := 8
	if stress() {
		rounds = 80
	}
	r := newRepo(t)
	r.ok("setup", "init")
	patterns := func(k int) []string {
		p := fmt.Sprintf("r%d", k)
		return []string{p + "/**", p + "/a/*", p + "/a/x.go", p + "/*/x.go", p + "/a", p, p + "/?/x.go", p + "/a/x.*"}
	}
	ps := patterns(0)
	for i := range ps {
		for j := range ps {
			if _, ok := pathspec.Overlap(ps[i], ps[j]); !ok {
				t.Fatalf("test patterns %s and %s do not overlap", ps[i], ps[j])
			}
		}
	}
	var winners []string
	for round := range rounds {
		ps := patterns(round)
		out := make([]*pathProc, len(ps))
		for i, p := range ps {
			out[i] = startTally(t, r.dir, fmt.Sprintf("agent-%d", i), nil, "lock", p, "--ttl", "3600")
		}
		var wg sync.WaitGroup
		for _, p := range out {
			wg.Go(func() { p.wait() })
		}
		wg.Wait()
		winner := -1
		for i, p := range out {
			if p.Err != nil {
				t.Fatalf("round %d agent-%d: %v", round, i, p.Err)
			}
			if p.Code == 0 {
				if winner >= 0 {
					t.Fatalf("round %d: two winners, agent-%d and agent-%d", round, winner, i)
				}
				winner = i
			}
		}
		if winner < 0 {
			t.Fatalf("round %d: no winner", round)
		}
		who := fmt.Sprintf("agent-%d", winner)
		if l := arr(t, out[winner].JSON, "locks"); len(l) != 1 || l[0].(map[string]any)["pattern"] != ps[winner] || l[0].(map[string]any)["epoch"] != 1.0 {
			t.Fatalf("round %d: winner's locks %v", round, l)
		}
		for i, p := range out {
			if i == winner {
				continue
			}
			e := p.errObj()
			wit, _ := e["witness"].(string)
			if p.Code != 1 || e["code"] != "LEASE-HELD" || e["holder"] != who || e["pattern"] != ps[winner] ||
				e["requested"] != ps[i] || !pathspec.Match(ps[i], wit) || !pathspec.Match(ps[winner], wit) {
				t.Fatalf("round %d agent-%d: exit %d %v (winner %s)", round, i, p.Code, e, who)
			}
		}
		winners = append(winners, ps[winner]+"="+who)
	}
	var held []string
	for _, l := range arr(t, r.ok("x", "locks"), "locks") {
		m := l.(map[string]any)
		held = append(held, fmt.Sprintf("%s=%s", m["pattern"], m["actor"]))
	}
	locks := 0
	for _, le := range readLedger(t, r.dir) {
		if le.Entry.Kind == "lock" {
			locks++
		}
	}
	if len(held) != rounds || locks != rounds {
		t.Fatalf("%d live locks and %d lock entries for %d rounds: %v", len(held), locks, rounds, held)
	}
	slices.Sort(held)
	slices.Sort(winners)
	if !slices.Equal(held, winners) {
		t.Fatalf("the live locks %v are not the ones granted %v", held, winners)
	}
	r.ok("x", "verify", "--full")
}

// TestCLILocks drives one scenario through the commands: refusals of bad
// pathspecs, grant, conflict, renew, preemption by a higher role and the
// fenced holder, expiry, cell paths, and verify.
func TestCLILocks(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("admin", "init")
	for _, bad := range []string{"src/../x", "/etc/passwd", "", "a**"} {
		r.refuse(2, "USAGE", "alice", "lock", bad)
	}
	r.refuse(2, "USAGE", "alice", "lock")
	r.refuse(2, "USAGE", "alice", "unlock", "src")
	r.refuse(2, "USAGE", "alice", "lock", "a", "b", "--epoch", "1,2,3")

	res := r.at(time.Second).ok("alice", "lock", "./src//**/", "docs", "--ttl", "600", "--reason", "refactor")
	locks := arr(t, res, "locks")
	want := map[string]any{"pattern": "docs", "actor": "alice", "epoch": 1.0, "acquired_at": tsAt(time.Second),
		"heartbeat_at": tsAt(time.Second), "expires_at": tsAt(601 * time.Second), "ttl_seconds": 600.0, "reason": "refactor"}
	if len(locks) != 2 || !reflect.DeepEqual(locks[0], want) || locks[1].(map[string]any)["pattern"] != "src/**" {
		t.Fatalf("lock result %v", res)
	}
	if s, _ := res["summary"].(string); s != "lock docs epoch 1, src/** epoch 1" {
		t.Fatalf("summary %q", s)
	}

	e := r.refuse(1, "LEASE-HELD", "bob", "lock", "src/a/x.go")
	if e["holder"] != "alice" || e["epoch"] != 1.0 || e["expires_at"] != tsAt(601*time.Second) || e["pattern"] != "src/**" ||
		e["requested"] != "src/a/x.go" || e["witness"] != "src/a/x.go" {
		t.Fatalf("LEASE-HELD %v", e)
	}
	// renew by locking again
	res = r.at(100*time.Second).ok("alice", "lock", "src/**", "--ttl", "900")
	if l := arr(t, res, "locks")[0].(map[string]any); l["epoch"] != 1.0 || l["expires_at"] != tsAt(1000*time.Second) ||
		l["acquired_at"] != tsAt(time.Second) || !reflect.DeepEqual(res["renewed"], []any{"src/**"}) {
		t.Fatalf("renew %v", res)
	}

	// roles: a lead preempts a dev; devs do not preempt each other
	r.ok("admin", "policy", "set-roles", "lead=10", "dev=1")
	r.ok("admin", "policy", "set-actors", "lee=lead", "alice=dev", "bob=dev")
	r.refuse(1, "LEASE-HELD", "bob", "lock", "src/b")
	res = r.at(200*time.Second).ok("lee", "lock", "src/a")
	if !reflect.DeepEqual(res["preempted"], []any{map[string]any{"pattern": "src/**", "actor": "alice", "epoch": 1.0}}) {
		t.Fatalf("preempt %v", res)
	}
	e = r.refuse(2, "EPOCH-MISMATCH", "alice", "unlock", "src/**", "--epoch", "1")
	if e["epoch"] != 2.0 {
		t.Fatalf("fenced unlock %v", e)
	}
	r.refuse(2, "EPOCH-MISMATCH", "alice", "lock", "src/**", "--epoch", "1")
	r.ok("alice", "lock", "docs", "--epoch", "1") // her other lock is intact
	v := r.ok("x", "locks")
	var held []string
	for _, l := range arr(t, v, "locks") {
		m := l.(map[string]any)
		held = append(held, fmt.Sprintf("%s=%s@%v", m["pattern"], m["actor"], m["epoch"]))
	}
	if !reflect.DeepEqual(held, []string{"docs=alice@1", "src/a=lee@1"}) || v["now"] != tsAt(200*time.Second) {
		t.Fatalf("locks %v", v)
	}
	r.ok("lee", "unlock", "src/a", "--epoch", "1")
	r.ok("alice", "unlock", "docs", "--epoch", "1")
	if v := r.ok("x", "locks"); len(arr(t, v, "locks")) != 0 {
		t.Fatalf("locks after unlock %v", v)
	}

	// expiry: live through expires_at, free one second later
	r.at(300*time.Second).ok("alice", "lock", "lib", "--ttl", "30")
	r.at(330*time.Second).refuse(1, "LEASE-HELD", "bob", "lock", "lib/**")
	if l := arr(t, r.at(331*time.Second).ok("bob", "lock", "lib"), "locks")[0].(map[string]any); l["epoch"] != 2.0 {
		t.Fatalf("after expiry %v", l)
	}

	// a claimed cell's paths are held by its holder, even against a lead
	r.ok("admin", "plan", r.file("p.json", `{"wave":"w","cells":[{"id":"c","paths":["db/**"]}]}`))
	r.ok("carol", "claim", "w/c")
	e = r.refuse(1, "LEASE-HELD", "lee", "lock", "db/schema.sql")
	if e["source"] != "cell w/c" || e["holder"] != "carol" {
		t.Fatalf("cell hold %v", e)
	}
	if cells := arr(t, r.ok("x", "locks"), "cells"); len(cells) != 1 || cells[0].(map[string]any)["pattern"] != "db/**" {
		t.Fatalf("locks cells %v", cells)
	}
	r.ok("x", "verify", "--full")
}

// cycleSetup builds, with the real binary, the holds of a three-way
// deadlock across priorities: ann and cat are leads, ben a dev. ben claims
// cell w/c (paths b/**) and locks notes; ann locks a/**; cat locks c/**.
// Then ann waits for b/x (ben's cell: never preempted), ben for c/x (cat
// outranks him), cat for a/x (ann's equal). The rule's victim is ben, the
// one of lowest priority (by name alone it would be cat).
func cycleSetup(t *testing.T) *repo {
	r := newRepo(t).at(0)
	r.ok("admin", "init")
	r.ok("admin", "policy", "set-roles", "lead=10", "dev=1")
	r.ok("admin", "policy", "set-actors", "ann=lead", "cat=lead", "ben=dev")
	r.ok("admin", "plan", r.file("p.json", `{"wave":"w","cells":[{"id":"c","paths":["b/**"]}]}`))
	r.ok("ben", "claim", "w/c", "--ttl", "3600")
	r.ok("ben", "lock", "notes", "--ttl", "3600")
	r.ok("ann", "lock", "a/**", "--ttl", "3600")
	r.ok("cat", "lock", "c/**", "--ttl", "3600")
	return r
}

var cycleWaits = [][2]string{{"ann", "b/x"}, {"ben", "c/x"}, {"cat", "a/x"}}

// TestCLIDeadlockBreak: three real processes wait on each other with
// --wait. deadlocks finds the cycle; deadlocks --break appends one break
// entry whose victim is ben, which releases his path lock (epoch moves on)
// and clears his wait; ben's waiting process gives up (LEASE-HELD, victim).
// Then ben releases his cell and ann gets b/x; ann unlocks a/** and cat gets
// a/x. verify --full replays everything, the break included.
func TestCLIDeadlockBreak(t *testing.T) {
	r := cycleSetup(t)
	procs := map[string]*pathProc{}
	for _, w := range cycleWaits {
		procs[w[0]] = startTally(t, r.dir, w[0], r.env(), "lock", w[1], "--wait", "60s")
	}
	done := map[string]chan *pathProc{}
	for name, p := range procs {
		done[name] = make(chan *pathProc, 1)
		go func() { done[name] <- p.wait() }()
	}
	t.Cleanup(func() {
		for _, p := range procs {
			p.cmd.Process.Kill()
		}
	})
	var g map[string]any
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		g = r.ok("dan", "deadlocks")
		if len(arr(t, g, "cycles")) > 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no deadlock found: %v", g)
		}
	}
	wantCycles := []any{[]any{"ann", "ben", "cat"}}
	if !reflect.DeepEqual(g["cycles"], wantCycles) || !reflect.DeepEqual(g["victims"], []any{"ben"}) || g["break"] != nil {
		t.Fatalf("deadlocks %v", g)
	}
	if len(arr(t, r.ok("x", "locks"), "waits")) != 3 {
		t.Fatal("three waits expected")
	}
	b := r.ok("dan", "deadlocks", "--break")
	brk := obj(t, b, "break")
	if !reflect.DeepEqual(b["cycles"], wantCycles) || !reflect.DeepEqual(b["victims"], []any{"ben"}) ||
		!reflect.DeepEqual(brk["released"], []any{map[string]any{"pattern": "notes", "actor": "ben", "epoch": 1.0}}) {
		t.Fatalf("break %v", b)
	}
	p := <-done["ben"]
	if e := p.errObj(); p.Code != 1 || e["code"] != "LEASE-HELD" || e["victim"] != true {
		t.Fatalf("ben's wait: exit %d %s %s", p.Code, p.stdout.String(), p.stderr.String())
	}
	r.refuse(2, "EPOCH-MISMATCH", "ben", "unlock", "notes", "--epoch", "1")
	if g := r.ok("dan", "deadlocks"); len(arr(t, g, "cycles")) != 0 {
		t.Fatalf("cycle after break %v", g)
	}
	r.ok("ben", "release", "w/c", "--epoch", "1")
	if p := <-done["ann"]; p.Code != 0 || arr(t, p.JSON, "locks")[0].(map[string]any)["pattern"] != "b/x" {
		t.Fatalf("ann: exit %d %s", p.Code, p.stdout.String())
	}
	r.ok("ann", "unlock", "a/**", "--epoch", "1")
	if p := <-done["cat"]; p.Code != 0 {
		t.Fatalf("cat: exit %d %s", p.Code, p.stdout.String())
	}
	if w := arr(t, r.ok("x", "locks"), "waits"); len(w) != 0 {
		t.Fatalf("waits left %v", w)
	}
	r.ok("x", "verify", "--full")
}

// TestCLIForgedBreak: a break entry naming another victim than the rule's,
// well chained but illegal, fails verify with RULE-VIOLATION at its seq; the
// same ledger with the real `deadlocks --break` verifies.
func TestCLIForgedBreak(t *testing.T) {
	setup := func(t *testing.T) *repo {
		r := cycleSetup(t)
		for _, w := range cycleWaits { // the waits the --wait processes would record
			pat := w[1]
			holders := map[string][]string{"ann": {"ben"}, "ben": {"cat"}, "cat": {"ann"}}[w[0]]
			forge(t, r.dir, "wait", w[0], tsAt(0), lease.WaitBody{Pattern: pat, Holders: holders}, true)
		}
		return r
	}
	t.Run("control", func(t *testing.T) {
		r := setup(t)
		if b := r.ok("dan", "deadlocks", "--break"); !reflect.DeepEqual(b["victims"], []any{"ben"}) {
			t.Fatalf("break %v", b)
		}
		r.ok("x", "verify", "--full")
	})
	for _, victim := range []string{"cat", "ann"} {
		t.Run("victim-"+victim, func(t *testing.T) {
			r := setup(t)
			seq := forge(t, r.dir, "break", "dan", tsAt(time.Second),
				lease.BreakBody{Cycles: [][]string{{"ann", "ben", "cat"}}, Victims: []string{victim}}, false).Seq
			res := r.run("x", "verify", "--full")
			e := obj(t, res.JSON, "error")
			if res.Code != 3 || res.ErrorCode() != "RULE-VIOLATION" || num(t, e, "seq") != int64(seq) || e["rule"] != "USAGE" ||
				!strings.Contains(e["message"].(string), "victims [ben]") {
				t.Fatalf("verify: exit %d %s", res.Code, res.Stdout)
			}
		})
	}
}

// TestPreReceiveRefusesLockedPath: with path_leases enforce, a bare
// repository's pre-receive hook (served as a file path remote) refuses a
// push whose commit changes a path under another actor's lock, naming the
// holder and the path; the holder's own push and other paths pass, and once
// the lock is released the refused commit goes through.
func TestPreReceiveRefusesLockedPath(t *testing.T) {
	r := newRepo(t) // the wall clock: the hook judges liveness by the server's time
	r.ok("admin", "init")
	r.ok("admin", "policy", "set", "--path-leases", "enforce")
	r.ok("bob@example.com", "lock", "src/**", "--reason", "refactor")
	srv := filepath.Join(t.TempDir(), "srv.git")
	testrepo.Git(t, r.dir, "init", "-q", "--bare", srv)
	testrepo.Git(t, r.dir, "push", "-q", srv, "main", "refs/tally/ledger:refs/tally/ledger")
	if res := testrepo.Run(t, srv, "admin", nil, "hooks", "install", "--server", "--json"); res.Code != 0 {
		t.Fatalf("hooks install: %s %s", res.Stdout, res.Stderr)
	}
	gitAs := func(email string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = r.dir
		cmd.Env = testrepo.Env("GIT_AUTHOR_EMAIL="+email, "GIT_COMMITTER_EMAIL="+email)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	commit := func(email, path string) {
		r.file(path, email+"\n")
		r.git("add", path)
		if out, err := gitAs(email, "commit", "-q", "-m", "change "+path); err != nil {
			t.Fatalf("commit: %v %s", err, out)
		}
	}
	serverMain := func() string { return testrepo.Git(t, srv, "rev-parse", "main") }

	commit("alice@example.com", "src/a.go")
	before := serverMain()
	out, err := gitAs("alice@example.com", "push", srv, "main")
	if err == nil || !strings.Contains(out, "PATH-HELD") || !strings.Contains(out, "src/a.go") ||
		!strings.Contains(out, "leased to bob@example.com") || !strings.Contains(out, "pre-receive hook declined") {
		t.Fatalf("push under bob's lock: %v\n%s", err, out)
	}
	if serverMain() != before {
		t.Fatal("the refused push moved the server's main")
	}
	// another path passes; so does the holder's own change
	r.git("reset", "-q", "--hard", "HEAD~1")
	commit("alice@example.com", "docs/readme")
	commit("bob@example.com", "src/b.go")
	if out, err := gitAs("alice@example.com", "push", srv, "main"); err != nil {
		t.Fatalf("push outside the lock: %v\n%s", err, out)
	}
	// released (and the ledger pushed): alice's change to src goes through
	r.ok("bob@example.com", "unlock", "src/**", "--epoch", "1")
	commit("alice@example.com", "src/a.go")
	if out, err := gitAs("alice@example.com", "push", srv, "main", "refs/tally/ledger:refs/tally/ledger"); err != nil {
		t.Fatalf("push after unlock: %v\n%s", err, out)
	}
	if serverMain() != r.git("rev-parse", "HEAD") {
		t.Fatal("server main not updated")
	}
}
