package main

// Distributed mode over real git servers. Every test starts its own server on
// the loopback interface (git daemon, and git http-backend behind
// net/http/cgi) serving a bare repository whose pre-receive hook is tally's,
// installed with the real binary; agents are real tally processes working in
// separate clones. The server's ledger is read back with git from the bare
// repository itself. Nothing sleeps to wait for another process: races are
// released together and invariants are checked afterwards. TALLY_STRESS=1
// runs the long versions.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// ---------------------------------------------------------------- harness

// netStress reports whether the long versions were asked for.
func netStress() bool { return os.Getenv("TALLY_STRESS") == "1" }

// netCluster is one bare repository with tally's pre-receive hook, served by a
// real git server of one kind, and the clones the test's agents work in.
type netCluster struct {
	t    testing.TB
	kind gitserver.Kind
	bare string // the server's repository, read directly to see what it holds
	url  string // how clients reach it
	bin  string
}

// newNetCluster starts a server of kind for a fresh bare repository; env is
// the server's extra environment (TALLY_NOW for its clock).
func newNetCluster(t testing.TB, kind gitserver.Kind, serverEnv ...string) *netCluster {
	t.Helper()
	root := t.TempDir()
	bare := gitserver.NewBare(t, root, "shared.git")
	// The server's sequencer appends like a local writer, and so may start a
	// background compaction there: it ends before the directory goes.
	t.Cleanup(func() { testrepo.WaitCompaction(t, bare) })
	base := gitserver.Start(t, kind, root, serverEnv...)
	return &netCluster{t: t, kind: kind, bare: bare, url: base + "/shared.git", bin: testrepo.Tally(t)}
}

// clone clones the shared repository (origin = the server) into a new
// directory. The first clone of an empty server makes the root commit of
// main and pushes it, so every clone has a HEAD for receipts.
func (c *netCluster) clone(name string) string {
	c.t.Helper()
	dir := filepath.Join(c.t.TempDir(), name)
	testrepo.Git(c.t, filepath.Dir(dir), "clone", "-q", c.url, dir)
	testrepo.CheckObjects(c.t, dir) // fetches of what the server wrote, under testrepo.FsckVar
	netWaitMaintenance(c.t, dir)
	if _, err := netGit(dir, nil, "rev-parse", "-q", "--verify", "HEAD"); err != nil {
		testrepo.Git(c.t, dir, "symbolic-ref", "HEAD", "refs/heads/main")
		testrepo.Git(c.t, dir, "commit", "-q", "--allow-empty", "-m", "root")
		testrepo.Git(c.t, dir, "push", "-q", "origin", "main")
	}
	return dir
}

// netWaitMaintenance registers a cleanup, run before dir is removed, that
// waits for background maintenance to end: a compaction tally started and a
// gc --auto that git commit detached (marked by gc.pid while it runs).
func netWaitMaintenance(t testing.TB, dir string) {
	t.Cleanup(func() {
		testrepo.WaitCompaction(t, filepath.Join(dir, ".git"))
		gcPid := filepath.Join(dir, ".git", "gc.pid")
		for deadline := time.Now().Add(2 * time.Minute); time.Now().Before(deadline); time.Sleep(20 * time.Millisecond) {
			if _, err := os.Stat(gcPid); os.IsNotExist(err) {
				break
			}
		}
	})
}

// seeded clones the seed, initializes the server's ledger from it and plans
// a wave of cells c000.. there (netPlan), all through the remote.
func (c *netCluster) seeded(wave string, cells int) string {
	c.t.Helper()
	seed := c.clone("seed")
	c.ok(seed, "planner", nil, "--remote", "origin", "init")
	c.ok(seed, "planner", nil, "--remote", "origin", "plan", netPlan(c.t, seed, wave, cells, nil))
	return seed
}

// agents clones one work tree per agent (agent-0, agent-1, ...). An agent's
// git commit may start a background gc --auto once packs pile up.
func (c *netCluster) agents(n int) []string {
	c.t.Helper()
	dirs := make([]string, n)
	for i := range dirs {
		dirs[i] = c.clone(netAgent(i))
	}
	return dirs
}

// netRun runs `tally -C dir --json args...` as actor with env added to the
// test environment (testrepo.Exec, which touches no t: goroutines call it).
func netRun(bin, dir, actor string, env []string, args ...string) testrepo.Result {
	return testrepo.Exec(bin, dir, actor, env, append([]string{"--json"}, args...)...)
}

// run runs tally and fails the test if it could not run.
func (c *netCluster) run(dir, actor string, env []string, args ...string) testrepo.Result {
	c.t.Helper()
	p := netRun(c.bin, dir, actor, env, args...)
	if p.Err != nil {
		c.t.Fatalf("%s: %v", p, p.Err)
	}
	return p
}

// ok runs tally and requires success.
func (c *netCluster) ok(dir, actor string, env []string, args ...string) map[string]any {
	c.t.Helper()
	p := c.run(dir, actor, env, args...)
	if p.Code != 0 || p.JSON["ok"] != true {
		c.t.Fatalf("%s", p)
	}
	return p.JSON
}

// refused runs tally and requires exit code exit with error code code; it
// returns the outcome.
func (c *netCluster) refused(exit int, code, dir, actor string, env []string, args ...string) testrepo.Result {
	c.t.Helper()
	p := c.run(dir, actor, env, args...)
	if p.Code != exit || p.ErrorCode() != code || p.JSON["ok"] != false {
		c.t.Fatalf("%s\nwant exit %d %s", p, exit, code)
	}
	if p.ErrorField("retryable") != (exit == 1) {
		c.t.Fatalf("%s: retryable %v with exit %d", p, p.ErrorField("retryable"), exit)
	}
	if msg, _ := p.ErrorField("message").(string); msg == "" {
		c.t.Fatalf("%s: no message", p)
	}
	return p
}

// netGit runs git in dir with the test environment plus env; it returns
// stdout and an error carrying stderr.
func netGit(dir string, env []string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testrepo.Env(env...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), nil
}

// push runs a plain git push in dir and returns its exit code and stderr.
func (c *netCluster) push(dir string, args ...string) (int, string) {
	c.t.Helper()
	cmd := exec.Command("git", append([]string{"push"}, args...)...)
	cmd.Dir, cmd.Env = dir, testrepo.Env()
	var stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	err := cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok {
		return ee.ExitCode(), stderr.String()
	} else if err != nil {
		c.t.Fatalf("git push %v: %v", args, err)
	}
	return 0, stderr.String()
}

// pushRefused pushes the clone's ledger with plain git and requires the
// server to refuse it with code, the message containing each of details,
// and its refs not to move.
func (c *netCluster) pushRefused(dir, what, code string, details ...string) {
	c.t.Helper()
	before := c.lsRemote()
	exit, stderr := c.push(dir, "origin", "refs/tally/ledger")
	line := netFirstLine(stderr, "tally: refused refs/tally/ledger: "+code+":")
	if exit == 0 || line == "" {
		c.t.Fatalf("%s: git push: exit %d, want a refusal with %s:\n%s", what, exit, code, stderr)
	}
	for _, d := range details {
		if !strings.Contains(line, d) {
			c.t.Fatalf("%s: refusal %q does not say %q", what, line, d)
		}
	}
	if after := c.lsRemote(); after != before {
		c.t.Fatalf("%s: refused push moved the server's refs:\n%s\n->\n%s", what, before, after)
	}
	c.t.Logf("%s: %s", what, line)
}

// lsRemote lists the server's refs through the server (git ls-remote URL).
func (c *netCluster) lsRemote() string {
	c.t.Helper()
	return testrepo.Git(c.t, c.t.TempDir(), "ls-remote", c.url)
}

// serverTip is the server's ledger ref, read in the bare repository ("" if none).
func (c *netCluster) serverTip() string {
	c.t.Helper()
	out, _ := netGit(c.bare, nil, "rev-parse", "-q", "--verify", "refs/tally/ledger")
	return out
}

// plan writes a plan of n cells c000... of wave (with paths, if given) in dir
// and returns its path.
func netPlan(t testing.TB, dir, wave string, n int, paths []string) string {
	t.Helper()
	type cell struct {
		ID    string   `json:"id"`
		Paths []string `json:"paths,omitempty"`
	}
	p := struct {
		Wave  string `json:"wave"`
		Cells []cell `json:"cells"`
	}{Wave: wave}
	for i := 0; i < n; i++ {
		p.Cells = append(p.Cells, cell{ID: fmt.Sprintf("c%03d", i), Paths: paths})
	}
	b, _ := json.Marshal(p)
	f := filepath.Join(t.TempDir(), wave+".json")
	if err := os.WriteFile(f, b, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

// netTogether runs f(0..n-1) in n goroutines released at the same moment.
func netTogether(n int, f func(i int) testrepo.Result) []testrepo.Result {
	out := make([]testrepo.Result, n)
	start := make(chan struct{})
	var wg sync.WaitGroup
	for i := 0; i < n; i++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			<-start
			out[i] = f(i)
		}()
	}
	close(start)
	wg.Wait()
	return out
}

// netEntry is one ledger entry as read with git.
type netEntry struct {
	Commit  string
	Subject string
	Seq     uint64
	Kind    string
	Actor   string
	TS      string
	Body    map[string]any
}

func (e netEntry) cell() string {
	w, _ := e.Body["wave"].(string)
	c, _ := e.Body["cell"].(string)
	return w + "/" + c
}

// netLedger reads the ledger of the repository at gitDir (a bare repository
// or a work tree) with git alone (readLedger), bodies decoded for matching.
func netLedger(t testing.TB, gitDir string) []netEntry {
	t.Helper()
	var entries []netEntry
	for _, le := range readLedger(t, gitDir) {
		e := le.Entry
		var body map[string]any
		if err := json.Unmarshal(e.Body, &body); err != nil {
			t.Fatalf("body of %s: %v", le.Commit, err)
		}
		entries = append(entries, netEntry{Commit: le.Commit, Subject: le.Subject, Seq: e.Seq, Kind: string(e.Kind), Actor: e.Actor, TS: e.TS, Body: body})
	}
	return entries
}

func netAgent(i int) string { return fmt.Sprintf("agent-%d", i) }

func netNowTS(d time.Duration) string { return chain.FormatTime(time.Now().Add(d)) }

func netClaimBody(wave, cell string) lease.ClaimBody {
	return lease.ClaimBody{CellRef: lease.CellRef{Wave: wave, Cell: cell}, TTL: 3600, PID: 1, Host: "forger", Mode: lease.ModeClaim}
}

// ---------------------------------------------------------------- races

// TestRemoteClaimRace: 8 agents in 8 clones claim the same cell through the
// server at once, round after round. Exactly one wins each round; every other
// one gets LEASE-HELD naming the winner (or, after its retries ran out,
// CONFLICT); the server's ledger holds exactly one claim per cell, by the
// agent that was told it won, and verifies.
func TestRemoteClaimRace(t *testing.T) {
	rounds, agents := 8, 8
	if netStress() {
		rounds = 60
	}
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.seeded("race", rounds)
			dirs := c.agents(agents)
			winners := map[string]string{}
			conflicts := 0
			var walls []time.Duration
			for round := 0; round < rounds; round++ {
				cell := fmt.Sprintf("race/c%03d", round)
				out := netTogether(agents, func(i int) testrepo.Result {
					return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", cell, "--ttl", "3600")
				})
				for i, p := range out {
					walls = append(walls, p.Wall)
					if p.Err != nil {
						t.Fatalf("round %d %s: %s: %v", round, netAgent(i), p, p.Err)
					}
					if p.Code != 0 {
						continue
					}
					if w, ok := winners[cell]; ok {
						t.Fatalf("round %d: two winners for %s: %s and %s", round, cell, w, netAgent(i))
					}
					winners[cell] = netAgent(i)
					l, _ := p.JSON["lease"].(map[string]any)
					if l["actor"] != netAgent(i) || l["epoch"] != 1.0 {
						t.Fatalf("round %d: winner's lease %v", round, l)
					}
				}
				if winners[cell] == "" {
					t.Fatalf("round %d: no winner:\n%v", round, out)
				}
				for _, p := range out {
					switch {
					case p.Code == 0:
					case p.Code == 1 && p.ErrorCode() == "LEASE-HELD":
						if p.ErrorField("holder") != winners[cell] || p.ErrorField("epoch") != 1.0 {
							t.Fatalf("round %d: loser told %v holds epoch %v, winner is %s", round, p.ErrorField("holder"), p.ErrorField("epoch"), winners[cell])
						}
					case p.Code == 1 && p.ErrorCode() == "CONFLICT":
						conflicts++
					default:
						t.Fatalf("round %d: %s", round, p)
					}
				}
			}
			// What the server holds, read with git in the bare repository.
			entries := netLedger(t, c.bare)
			if len(entries) != 2+rounds {
				t.Fatalf("server ledger has %d entries, want %d", len(entries), 2+rounds)
			}
			claims := map[string][]netEntry{}
			for _, e := range entries {
				if e.Kind == "claim" {
					claims[e.cell()] = append(claims[e.cell()], e)
				}
			}
			for cell, w := range winners {
				if got := claims[cell]; len(got) != 1 || got[0].Actor != w || !strings.HasSuffix(got[0].Subject, "epoch 1") {
					t.Fatalf("%s: server ledger has claims %+v, winner %s", cell, got, w)
				}
			}
			res := c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
			if res["entries"] != float64(2+rounds) {
				t.Fatalf("remote verify: %v", res)
			}
			p50, p99 := netPercentile(walls, 50).Round(time.Millisecond), netPercentile(walls, 99).Round(time.Millisecond)
			t.Logf("%s: %d rounds x %d agents: %d winners, 0 double grants, %d CONFLICT; claim wall p50 %v p99 %v",
				kind, rounds, agents, len(winners), conflicts, p50, p99)
		})
	}
}

func netPercentile(d []time.Duration, p int) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	i := (len(s)*p + 99) / 100
	return s[max(0, min(len(s)-1, i-1))]
}

// netDrainAgent is one agent's record of a drain.
type netDrainAgent struct {
	grants    []string // "wave/cell@epoch" the agent was told it won
	dones     []string // "wave/cell@epoch" the agent was told are done
	conflicts int
	err       error
}

// netDrainLoop is an agent: claim --next, commit in its clone, done; until no
// cell is ready. Cells are never released or expired here, so a cell that is
// not ready is held by a live agent that will finish it.
func netDrainLoop(bin, dir, actor string, limit int) (a netDrainAgent) {
	remote := []string{"--remote", "origin"}
	for iter := 0; iter < limit; iter++ {
		p := netRun(bin, dir, actor, nil, append(remote, "claim", "--next", "--ttl", "3600")...)
		switch {
		case p.Err != nil:
			a.err = fmt.Errorf("%s: %v", p, p.Err)
			return
		case p.Code == 1 && p.ErrorCode() == "NO-READY-CELL", p.Code == 2 && p.ErrorCode() == "PLAN-COMPLETE":
			return
		case p.Code == 1 && p.ErrorCode() == "CONFLICT":
			a.conflicts++
			continue
		case p.Code != 0:
			a.err = fmt.Errorf("%s", p)
			return
		}
		wave, _ := p.JSON["wave"].(string)
		cell, _ := p.JSON["cell"].(string)
		l, _ := p.JSON["lease"].(map[string]any)
		epoch, _ := l["epoch"].(float64)
		if l["actor"] != actor || epoch < 1 {
			a.err = fmt.Errorf("claim --next: lease %v", l)
			return
		}
		key := fmt.Sprintf("%s/%s@%d", wave, cell, int(epoch))
		a.grants = append(a.grants, key)
		if _, err := netGit(dir, nil, "commit", "-q", "--allow-empty", "-m", "work on "+key); err != nil {
			a.err = err
			return
		}
		for {
			d := netRun(bin, dir, actor, nil, append(remote, "done", wave+"/"+cell, "--epoch", strconv.Itoa(int(epoch)))...)
			if d.Err == nil && d.Code == 1 && d.ErrorCode() == "CONFLICT" {
				a.conflicts++
				continue
			}
			if d.Err != nil || d.Code != 0 {
				a.err = fmt.Errorf("%s: %v", d, d.Err)
				return
			}
			break
		}
		a.dones = append(a.dones, key)
	}
	a.err = fmt.Errorf("still claiming after %d iterations", limit)
	return
}

var netSummaryRE = regexp.MustCompile(`^(claim|done) (\S+) epoch (\d+)`)

// TestRemoteDrain: 8 agents in 8 clones drain a wave through the server with
// claim --next and done. Afterwards every cell is done exactly once, no
// (cell, epoch) was granted twice, what each agent was told matches the
// server's ledger, and the ledger verifies both through the remote and in a
// fresh clone.
func TestRemoteDrain(t *testing.T) {
	cells, agents := 16, 8
	if netStress() {
		cells = 200
	}
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.seeded("drain", cells)
			dirs := c.agents(agents)
			logs := make([]netDrainAgent, agents)
			var wg sync.WaitGroup
			start := time.Now()
			for i := 0; i < agents; i++ {
				wg.Add(1)
				go func() {
					defer wg.Done()
					logs[i] = netDrainLoop(c.bin, dirs[i], netAgent(i), 4*cells)
				}()
			}
			wg.Wait()
			elapsed := time.Since(start)
			told := map[string]string{} // "cell@epoch" -> agent told it won
			doneBy := map[string]int{}
			conflicts := 0
			for i, a := range logs {
				if a.err != nil {
					t.Fatalf("%s: %v\nserver's ledger updates, newest first:\n%s", netAgent(i), a.err,
						gitserver.ServerLog(t, c.bare, "refs/tally/ledger", 30))
				}
				for _, g := range a.grants {
					if prev, ok := told[g]; ok {
						t.Fatalf("%s granted to both %s and %s", g, prev, netAgent(i))
					}
					told[g] = netAgent(i)
				}
				for _, d := range a.dones {
					doneBy[d]++
				}
				conflicts += a.conflicts
			}
			// The remote ledger through tally log.
			res := c.ok(seed, "auditor", nil, "--remote", "origin", "log")
			list, _ := res["entries"].([]any)
			if len(list) != 2+2*cells {
				t.Fatalf("tally log lists %d entries, want %d", len(list), 2+2*cells)
			}
			claimed, done := map[string]string{}, map[string]int{}
			for _, x := range list {
				e, _ := x.(map[string]any)
				kind, _ := e["kind"].(string)
				summary, _ := e["summary"].(string)
				if kind != "claim" && kind != "done" {
					continue
				}
				m := netSummaryRE.FindStringSubmatch(summary)
				if m == nil || m[1] != kind {
					t.Fatalf("log entry %v: unexpected summary", e)
				}
				key := m[2] + "@" + m[3]
				if kind == "claim" {
					if prev, ok := claimed[key]; ok {
						t.Fatalf("%s granted twice in the ledger: to %s and %v", key, prev, e["actor"])
					}
					claimed[key], _ = e["actor"].(string)
				} else {
					done[m[2]]++
				}
			}
			for i := 0; i < cells; i++ {
				cell := fmt.Sprintf("drain/c%03d", i)
				if done[cell] != 1 {
					t.Fatalf("%s done %d times in the ledger", cell, done[cell])
				}
				key := cell + "@1"
				if claimed[key] == "" || claimed[key] != told[key] || doneBy[key] != 1 {
					t.Fatalf("%s: ledger says claimed by %q, agents were told %q, done reported %d times",
						key, claimed[key], told[key], doneBy[key])
				}
			}
			if len(claimed) != cells || len(told) != cells {
				t.Fatalf("%d grants in the ledger, %d reported to agents, want %d", len(claimed), len(told), cells)
			}
			// The same, read with git in the server's repository.
			kinds := map[string]int{}
			for _, e := range netLedger(t, c.bare) {
				kinds[e.Kind]++
			}
			if kinds["claim"] != cells || kinds["done"] != cells {
				t.Fatalf("server ledger holds %v", kinds)
			}
			v := c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
			if v["entries"] != float64(2+2*cells) {
				t.Fatalf("remote verify: %v", v)
			}
			fresh := filepath.Join(t.TempDir(), "fresh")
			testrepo.Git(t, filepath.Dir(fresh), "clone", "-q", c.url, fresh)
			testrepo.Git(t, fresh, "fetch", "-q", "origin", "+refs/tally/*:refs/tally/*")
			fv := c.ok(fresh, "auditor", nil, "verify", "--full")
			if fv["entries"] != v["entries"] || fmt.Sprint(fv["head"]) != fmt.Sprint(v["head"]) {
				t.Fatalf("fresh clone verifies %v, remote %v", fv, v)
			}
			t.Logf("%s: %d agents drained %d cells in %v (%.0f ms per cell), %d CONFLICT retries",
				kind, agents, cells, elapsed.Round(time.Millisecond), float64(elapsed.Milliseconds())/float64(cells), conflicts)
		})
	}
}

// ---------------------------------------------------------------- the server hook

// TestRemoteForgedPushesRefused: plain git pushes that would put an illegal
// ledger on the server are refused by its pre-receive hook with a clear
// message, and the server's refs do not move: a hand-built claim over a live
// lease, a rolled-back and a forked (rewritten) history pushed with -f, an
// entry dated far ahead of the server's clock, and deleting the ledger. A
// hand-built but legal entry pushed the same way is accepted, so what the
// hook refuses is the rule, not the way the entry was made.
func TestRemoteForgedPushesRefused(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.seeded("w", 2)
			c.ok(seed, "A", nil, "--remote", "origin", "claim", "w/c000", "--ttl", "3600")
			tip := c.serverTip()
			x := c.clone("forger")
			reset := func(to string) {
				testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
				testrepo.Git(t, x, "update-ref", "refs/tally/ledger", to)
			}
			refused := func(what, code, detail string, args ...string) {
				t.Helper()
				before := c.lsRemote()
				exit, stderr := c.push(x, args...)
				want := "tally: refused refs/tally/ledger: " + code
				if exit == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, detail) {
					t.Fatalf("%s: git push %v: exit %d, want a refusal with %q and %q:\n%s", what, args, exit, want, detail, stderr)
				}
				if after := c.lsRemote(); after != before {
					t.Fatalf("%s: refused push moved the server's refs:\n%s\n->\n%s", what, before, after)
				}
				t.Logf("%s: %s", what, netFirstLine(stderr, "tally: refused"))
			}

			reset(tip)
			forge(t, x, "claim", "B", netNowTS(0), netClaimBody("w", "c000"), false)
			refused("claim over a live lease", "RULE-VIOLATION", "LEASE-HELD", "origin", "refs/tally/ledger")

			parent := testrepo.Git(t, x, "rev-parse", tip+"^")
			reset(parent)
			refused("rolled-back history", "", "not a fast-forward of the current ledger", "-f", "origin", "refs/tally/ledger")

			reset(parent)
			forge(t, x, "note", "B", netNowTS(0), lease.NoteBody{Text: "another history"}, true)
			refused("forked history", "FORK-DETECTED", "not a fast-forward of the current ledger", "-f", "origin", "refs/tally/ledger")

			reset(tip)
			future := []string{"TALLY_NOW=" + time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}
			c.ok(x, "B", future, "--local", "note", "from the future")
			refused("entry an hour ahead of the server", "POLICY", "ahead of the server clock", "origin", "refs/tally/ledger")

			refused("ledger deleted", "POLICY", "deleting the ledger is not allowed", "origin", ":refs/tally/ledger")

			// Control: the same kind of hand-built entry, legal this time, is accepted.
			reset(tip)
			forged := forge(t, x, "claim", "B", netNowTS(0), netClaimBody("w", "c001"), true).Commit
			if exit, stderr := c.push(x, "origin", "refs/tally/ledger"); exit != 0 {
				t.Fatalf("legal hand-built entry refused: %s", stderr)
			}
			if got := c.serverTip(); got != forged {
				t.Fatalf("server ledger at %s, pushed %s", got, forged)
			}
			v := c.ok(seed, "auditor", nil, "--remote", "origin", "verify", "--full")
			if v["entries"] != 4.0 {
				t.Fatalf("remote verify after the refusals: %v", v)
			}
		})
	}
}

// netFirstLine returns the first line of s containing sub.
func netFirstLine(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return strings.TrimSpace(l)
		}
	}
	return ""
}

// ---------------------------------------------------------------- remote mode errors

// netDeadAddr returns a loopback address where connections are refused for the
// rest of the test: a TCP socket bound there but not listening holds the
// port, so no server started meanwhile can take it.
func netDeadAddr(t testing.TB) string {
	t.Helper()
	syscall.ForkLock.RLock() // no child started meanwhile inherits it
	fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM, 0)
	if err == nil {
		syscall.CloseOnExec(fd)
	}
	syscall.ForkLock.RUnlock()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { syscall.Close(fd) })
	if err := syscall.Bind(fd, &syscall.SockaddrInet4{Addr: [4]byte{127, 0, 0, 1}}); err != nil {
		t.Fatal(err)
	}
	sa, err := syscall.Getsockname(fd)
	if err != nil {
		t.Fatal(err)
	}
	return fmt.Sprintf("127.0.0.1:%d", sa.(*syscall.SockaddrInet4).Port)
}

// TestRemoteUnreachable: a remote nobody listens on is REMOTE-UNREACHABLE
// (exit 1, retryable), whether given as a URL or as a configured remote, for
// appends and for views alike, and nothing changes locally.
func TestRemoteUnreachable(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			addr := netDeadAddr(t)
			scheme := map[gitserver.Kind]string{gitserver.GitDaemon: "git", gitserver.SmartHTTP: "http"}[kind]
			url := scheme + "://" + addr + "/shared.git"
			c := &netCluster{t: t, kind: kind, bin: testrepo.Tally(t)}
			dir := testrepo.New(t)
			netWaitMaintenance(t, dir)
			c.ok(dir, "A", nil, "init")
			c.ok(dir, "A", nil, "plan", netPlan(t, dir, "w", 1, nil))
			testrepo.Git(t, dir, "remote", "add", "dead", url)
			before := testrepo.Git(t, dir, "rev-parse", "refs/tally/ledger")
			for _, args := range [][]string{
				{"--remote", url, "claim", "w/c000"},
				{"--remote", "dead", "claim", "w/c000"},
				{"--remote", "dead", "status"},
				{"--remote", "dead", "verify"},
				{"sync", "dead"},
			} {
				p := c.refused(1, "REMOTE-UNREACHABLE", dir, "A", nil, args...)
				t.Logf("%v: %v", args, p.ErrorField("message"))
			}
			// A name that is no remote is a usage error, not a transient one.
			for _, args := range [][]string{{"--remote", "nope", "claim", "w/c000"}, {"sync", "nope"}} {
				c.refused(2, "USAGE", dir, "A", nil, args...)
			}
			if after := testrepo.Git(t, dir, "rev-parse", "refs/tally/ledger"); after != before {
				t.Fatalf("local ledger moved from %s to %s", before, after)
			}
		})
	}
}

// TestRemoteRejected: the server judges entry times by its own clock (its
// TALLY_NOW, which the clients do not share). An entry further ahead than the
// policy's skew tolerance is REMOTE-REJECTED (exit 2, not retryable) carrying
// the server's reason, and neither the server's ledger nor the client's moves;
// within the tolerance it is accepted. The tolerance is the ledger's policy:
// with --skew 0 a client one second ahead is refused.
func TestRemoteRejected(t *testing.T) {
	t0 := time.Date(2031, 3, 4, 5, 6, 7, 0, time.UTC)
	at := func(d time.Duration) []string { return []string{"TALLY_NOW=" + t0.Add(d).Format(time.RFC3339Nano)} }
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind, at(0)...)
			a := c.clone("a")
			c.ok(a, "A", at(0), "--remote", "origin", "init")
			c.ok(a, "A", at(0), "--remote", "origin", "plan", netPlan(t, a, "w", 2, nil))
			rejected := func(d time.Duration, args ...string) {
				t.Helper()
				before, local := c.serverTip(), testrepo.Git(t, a, "rev-parse", "refs/tally/ledger")
				p := c.refused(2, "REMOTE-REJECTED", a, "A", at(d), append([]string{"--remote", "origin"}, args...)...)
				msg, _ := p.ErrorField("message").(string)
				if !strings.Contains(msg, "POLICY") || !strings.Contains(msg, "ahead of the server clock") {
					t.Fatalf("%s: message does not carry the server's reason", p)
				}
				if c.serverTip() != before || testrepo.Git(t, a, "rev-parse", "refs/tally/ledger") != local {
					t.Fatalf("%s: a rejected append moved a ledger", p)
				}
				t.Logf("%v at +%v: %s", args, d, msg)
			}
			rejected(time.Hour, "claim", "w/c000")
			c.ok(a, "A", at(100*time.Second), "--remote", "origin", "claim", "w/c000") // within the default 120 s
			rejected(121*time.Second, "note", "too early")
			c.ok(a, "A", at(100*time.Second), "--remote", "origin", "policy", "set", "--skew", "0")
			rejected(101*time.Second, "claim", "w/c001")
			// The server's clock catches up: a new server process on the same
			// repository, 100 s later, accepts what the old one refused.
			base := gitserver.Start(t, kind, filepath.Dir(c.bare), at(101*time.Second)...)
			testrepo.Git(t, a, "remote", "set-url", "origin", base+"/shared.git")
			c.ok(a, "A", at(101*time.Second), "--remote", "origin", "claim", "w/c001")
		})
	}
}

// ---------------------------------------------------------------- client hooks

// TestRemoteClientHooks: `tally hooks install` in a clone that already has a
// pre-push hook chains it: a push runs both (the old hook sees the same
// arguments and input), a locally forged ledger is refused by the client
// before anything reaches the server, and `tally hooks uninstall` puts the
// old hook back byte for byte. The same with core.hooksPath.
func TestRemoteClientHooks(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.seeded("w", 2)
			c.ok(seed, "A", nil, "--remote", "origin", "claim", "w/c000", "--ttl", "3600")
			for _, hooksPath := range []string{"", ".githooks"} {
				name := "default"
				if hooksPath != "" {
					name = "core.hooksPath"
				}
				t.Run(name, func(t *testing.T) {
					x := c.clone("hooked-" + name)
					hookDir := filepath.Join(x, ".git", "hooks")
					if hooksPath != "" {
						testrepo.Git(t, x, "config", "core.hooksPath", hooksPath)
						hookDir = filepath.Join(x, hooksPath)
					}
					if err := os.MkdirAll(hookDir, 0o755); err != nil {
						t.Fatal(err)
					}
					logFile := filepath.Join(t.TempDir(), "pre-push.log")
					orig := fmt.Sprintf("#!/bin/sh\n# the project's own pre-push hook\necho \"args: $1 $2\" >>'%s'\ncat >>'%s'\nexit 0\n", logFile, logFile)
					hook := filepath.Join(hookDir, "pre-push")
					if err := os.WriteFile(hook, []byte(orig), 0o755); err != nil {
						t.Fatal(err)
					}
					logLines := func() []string {
						b, _ := os.ReadFile(logFile)
						return strings.Split(strings.TrimSpace(string(b)), "\n")
					}
					res := c.ok(x, "B", nil, "hooks", "install")
					if got := fmt.Sprint(res["installed"]); got != fmt.Sprint([]any{hook}) {
						t.Fatalf("installed %s, want [%s]", got, hook)
					}
					if hooksPath != "" {
						if _, err := os.Stat(filepath.Join(x, ".git", "hooks", "pre-push")); err == nil {
							t.Fatalf("install wrote .git/hooks/pre-push although core.hooksPath is set")
						}
					}

					// A push of a branch runs the old hook, then tally's check (which passes).
					testrepo.Git(t, x, "commit", "-q", "--allow-empty", "-m", "work")
					head := testrepo.Git(t, x, "rev-parse", "HEAD")
					if exit, stderr := c.push(x, "origin", "main"); exit != 0 {
						t.Fatalf("git push origin main: %s", stderr)
					}
					lines := logLines()
					if len(lines) != 2 || lines[0] != "args: origin "+c.url || !strings.HasPrefix(lines[1], "refs/heads/main "+head+" refs/heads/main ") {
						t.Fatalf("the chained hook saw %q", lines)
					}

					// A legal local entry is pushed through both hooks.
					testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
					c.ok(x, "B", nil, "--local", "note", "hello")
					if exit, stderr := c.push(x, "origin", "refs/tally/ledger"); exit != 0 {
						t.Fatalf("push of a legal ledger: %s", stderr)
					}
					if len(logLines()) != 4 {
						t.Fatalf("the chained hook did not run for the ledger push: %q", logLines())
					}

					// A forged, illegal entry: the client hook refuses; the server is not asked.
					before := c.lsRemote()
					forge(t, x, "claim", "B", netNowTS(0), netClaimBody("w", "c000"), false)
					exit, stderr := c.push(x, "origin", "refs/tally/ledger")
					if exit == 0 || !strings.Contains(stderr, "tally: refused refs/tally/ledger: RULE-VIOLATION") ||
						strings.Contains(stderr, "remote: tally") || strings.Contains(stderr, "pre-receive") {
						t.Fatalf("client hook: exit %d\n%s", exit, stderr)
					}
					if !strings.Contains(stderr, "pre-push") && !strings.Contains(stderr, "failed to push") {
						t.Fatalf("the refusal does not come from the pre-push hook:\n%s", stderr)
					}
					if after := c.lsRemote(); after != before {
						t.Fatalf("refused push moved the server:\n%s\n->\n%s", before, after)
					}
					if len(logLines()) != 6 {
						t.Fatalf("the chained hook did not run first: %q", logLines())
					}
					// Without the client hook the server refuses the same push.
					exit, stderr = c.push(x, "--no-verify", "origin", "refs/tally/ledger")
					if exit == 0 || !strings.Contains(stderr, "remote: tally: refused refs/tally/ledger: RULE-VIOLATION") {
						t.Fatalf("server hook: exit %d\n%s", exit, stderr)
					}
					if len(logLines()) != 6 {
						t.Fatalf("--no-verify ran the hook: %q", logLines())
					}

					res = c.ok(x, "B", nil, "hooks", "uninstall")
					if got := fmt.Sprint(res["removed"]); got != fmt.Sprint([]any{hook}) {
						t.Fatalf("removed %s, want [%s]", got, hook)
					}
					b, err := os.ReadFile(hook)
					if err != nil || string(b) != orig {
						t.Fatalf("uninstall left %q (%v), want the original hook back", b, err)
					}
					if st, err := os.Stat(hook); err != nil || st.Mode().Perm() != 0o755 {
						t.Fatalf("restored hook mode: %v %v", st.Mode(), err)
					}
					if m, _ := filepath.Glob(filepath.Join(hookDir, "*tally*")); len(m) != 0 {
						t.Fatalf("uninstall left %v", m)
					}
				})
			}
		})
	}
}

// ---------------------------------------------------------------- push policies

// TestRemotePushPolicies: the server's push policies, read from the ledger.
// With receipts enforced on main, a commit without a receipt is refused
// (RECEIPT-MISSING) and the same commit is accepted once its receipt is in
// the ledger; warn mode accepts with a warning. With path leases enforced, a
// commit by someone else touching a path of a claimed cell is refused naming
// the holder (PATH-HELD); the holder's own commit and a commit elsewhere are
// accepted; warn mode accepts with a warning.
func TestRemotePushPolicies(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.clone("seed")
			remote := []string{"--remote", "origin"}
			admin := func(args ...string) map[string]any {
				t.Helper()
				return c.ok(seed, "admin", nil, append(remote, args...)...)
			}
			admin("init")
			admin("plan", netPlan(t, seed, "w", 1, nil))
			admin("plan", netPlan(t, seed, "p", 1, []string{"src/**"}))

			a := c.clone("a") // works as a@example.com
			b := c.clone("b") // works as b@example.com
			commit := func(dir, email, file string) string {
				t.Helper()
				if err := os.MkdirAll(filepath.Dir(filepath.Join(dir, file)), 0o755); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(dir, file), []byte(email+" "+file+"\n"), 0o644); err != nil {
					t.Fatal(err)
				}
				who := []string{"GIT_AUTHOR_EMAIL=" + email, "GIT_COMMITTER_EMAIL=" + email}
				for _, args := range [][]string{{"pull", "-q", "--rebase", "origin", "main"}, {"add", file}, {"commit", "-q", "-m", file}} {
					if _, err := netGit(dir, who, args...); err != nil {
						t.Fatal(err)
					}
				}
				return testrepo.Git(t, dir, "rev-parse", "HEAD")
			}
			pushMain := func(dir string) (int, string) {
				t.Helper()
				return c.push(dir, "origin", "main")
			}
			refusedMain := func(what, dir, code, detail string) {
				t.Helper()
				before := c.lsRemote()
				exit, stderr := pushMain(dir)
				want := "tally: refused refs/heads/main: " + code
				if exit == 0 || !strings.Contains(stderr, want) || !strings.Contains(stderr, detail) {
					t.Fatalf("%s: exit %d, want %q and %q:\n%s", what, exit, want, detail, stderr)
				}
				if after := c.lsRemote(); after != before {
					t.Fatalf("%s: refused push moved the server", what)
				}
				t.Logf("%s: %s", what, netFirstLine(stderr, want))
			}
			acceptedMain := func(what, dir, warning string) {
				t.Helper()
				exit, stderr := pushMain(dir)
				if exit != 0 {
					t.Fatalf("%s: refused:\n%s", what, stderr)
				}
				if warning == "" && strings.Contains(stderr, "tally:") || warning != "" && !strings.Contains(stderr, "tally: warning refs/heads/main: "+warning) {
					t.Fatalf("%s: want warning %q:\n%s", what, warning, stderr)
				}
				if got := testrepo.Git(t, c.bare, "rev-parse", "refs/heads/main"); got != testrepo.Git(t, dir, "rev-parse", "HEAD") {
					t.Fatalf("%s: server main at %s", what, got)
				}
			}

			// Receipts on the protected branch.
			admin("policy", "set", "--receipts", "enforce", "--protected", "refs/heads/main")
			work := commit(a, "a@example.com", "README")
			refusedMain("commit without a receipt", a, "RECEIPT-MISSING", work)
			c.ok(a, "a@example.com", nil, append(remote, "claim", "w/c000")...)
			c.ok(a, "a@example.com", nil, append(remote, "done", "w/c000", "--epoch", "1")...)
			acceptedMain("the same commit with its receipt", a, "")
			admin("policy", "set", "--receipts", "warn")
			commit(a, "a@example.com", "NOTES")
			acceptedMain("commit without a receipt, warn mode", a, "RECEIPT-MISSING")

			// Path leases.
			admin("policy", "set", "--receipts", "off", "--path-leases", "enforce")
			c.ok(a, "a@example.com", nil, append(remote, "claim", "p/c000", "--ttl", "3600")...)
			commit(b, "b@example.com", "src/main.go")
			refusedMain("someone else's commit under a leased path", b, "PATH-HELD", "leased to a@example.com")
			testrepo.Git(t, b, "reset", "-q", "--hard", "HEAD^")
			commit(b, "b@example.com", "docs/guide.md")
			acceptedMain("commit outside the leased paths", b, "")
			commit(a, "a@example.com", "src/main.go")
			acceptedMain("the holder's own commit", a, "")
			admin("policy", "set", "--path-leases", "warn")
			commit(b, "b@example.com", "src/util.go")
			acceptedMain("someone else's commit, warn mode", b, "PATH-HELD")
		})
	}
}

// TestRemoteByURL: --remote also takes a URL instead of a configured remote's
// name (the flag's documentation says so), for appends, views and verify.
func TestRemoteByURL(t *testing.T) {
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			seed := c.clone("seed")
			c.ok(seed, "A", nil, "--remote", c.url, "init")
			c.ok(seed, "A", nil, "--remote", c.url, "plan", netPlan(t, seed, "w", 1, nil))
			c.ok(seed, "A", nil, "--remote", c.url, "claim", "w/c000")
			c.refused(1, "LEASE-HELD", seed, "B", nil, "--remote", c.url, "claim", "w/c000")
			c.ok(seed, "A", nil, "--remote", c.url, "status")
			if v := c.ok(seed, "A", nil, "--remote", c.url, "verify", "--full"); v["entries"] != 3.0 {
				t.Fatalf("verify: %v", v)
			}
			if got := len(netLedger(t, c.bare)); got != 3 {
				t.Fatalf("server ledger has %d entries", got)
			}
			// A dead URL says why.
			dead := strings.Replace(c.url, c.url[strings.Index(c.url, "//")+2:strings.LastIndex(c.url, "/")], netDeadAddr(t), 1)
			p := c.refused(1, "REMOTE-UNREACHABLE", seed, "A", nil, "--remote", dead, "claim", "w/c000")
			if msg, _ := p.ErrorField("message").(string); !strings.Contains(msg, "connection refused") {
				t.Fatalf("%s: the message does not say why", p)
			}
		})
	}
}

// TestRemoteAppendBesideGC: an agent's clone is repacked while the agent
// works — what `git gc --auto` does after the agent's own `git commit` once
// tally's packs pile up. Every append tally acknowledges must be on the
// server: its commit is the server's ledger tip right after (nobody else
// writes here), and the next append still works.
func TestRemoteAppendBesideGC(t *testing.T) {
	appends := 20 // the race is narrow: TALLY_STRESS=1 runs 500
	if netStress() {
		appends = 500
	}
	for _, kind := range gitserver.Kinds {
		t.Run(string(kind), func(t *testing.T) {
			t.Parallel()
			c := newNetCluster(t, kind)
			a := c.clone("a")
			c.ok(a, "A", nil, "--remote", "origin", "init")
			stop := make(chan struct{})
			var wg sync.WaitGroup
			var repacks atomic.Int64
			blob := filepath.Join(t.TempDir(), "blob")
			wg.Add(1)
			go func() {
				// Packs pile up (as tally's and fetches' do), then git gc
				// folds them into one and deletes them; again and again.
				defer wg.Done()
				for n := 0; ; n++ {
					select {
					case <-stop:
						return
					default:
					}
					for k := 0; k < 20; k++ {
						os.WriteFile(blob, []byte(fmt.Sprintf("filler %d %d\n", n, k)), 0o644)
						netGit(a, nil, "hash-object", "-w", blob)
						netGit(a, nil, "repack", "-d", "-q")
					}
					// git gc as gc --auto runs it: pack-refs, reflog expire,
					// repack -d -l -A, prune; every other time repack alone.
					args := []string{"gc", "--quiet"}
					if n%2 == 1 {
						args = []string{"repack", "-d", "-l", "-A", "-q"}
					}
					if _, err := netGit(a, nil, args...); err == nil {
						repacks.Add(1)
					}
				}
			}()
			defer func() { close(stop); wg.Wait() }()
			for i := 0; i < appends; i++ {
				p := netRun(c.bin, a, "A", nil, "--remote", "origin", "note", fmt.Sprintf("n%d", i))
				if p.Err != nil || p.Code != 0 {
					t.Fatalf("append %d (after %d repacks): %s %v\nserver's ledger updates:\n%s", i, repacks.Load(), p, p.Err,
						gitserver.ServerLog(t, c.bare, "refs/tally/ledger", 5))
				}
				if acked, server := p.JSON["commit"], c.serverTip(); acked != server {
					t.Fatalf("append %d (after %d repacks) acknowledged as %v, the server's ledger is at %s", i, repacks.Load(), acked, server)
				}
			}
			t.Logf("%d appends beside %d repacks", appends, repacks.Load())
		})
	}
}
