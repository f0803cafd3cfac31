package main

// Benchmarks of the distributed mode over real loopback servers. They are
// slow to set up, so they run only when asked:
//
//	TMPDIR=/work/tmp TALLY_BENCH_REMOTE=1 go test ./cmd/tally -run '^$' -bench Remote -benchtime 20x
//	TMPDIR=/work/tmp TALLY_BENCH_REMOTE=1 TALLY_BIG_BENCH=1 go test ./cmd/tally -run '^$' -bench PreReceive -benchtime 20x
//
// Times are whole processes: what an agent waits for.

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

func benchRemoteOn(b *testing.B) {
	if os.Getenv("TALLY_BENCH_REMOTE") != "1" {
		b.Skip("set TALLY_BENCH_REMOTE=1 (and TMPDIR=/work/tmp)")
	}
}

// BenchmarkRemoteClaim: each iteration, every one of N agents (each in its
// own clone) runs `tally --remote origin claim --next` at the same moment
// against git daemon on loopback; the reported percentiles are of each
// process's wall time, retries included, over the claims that succeeded
// (CONFLICT: retries ran out; unreachable: the daemon dropped the connection,
// past its 32 connections). Afterwards the server's ledger must hold exactly
// the grants the agents were told about, none twice.
func BenchmarkRemoteClaim(b *testing.B) {
	benchRemoteOn(b)
	for _, agents := range []int{1, 8, 16} {
		b.Run(fmt.Sprintf("agents=%d", agents), func(b *testing.B) {
			c := newNetCluster(b, gitserver.GitDaemon)
			c.seeded("bench", b.N*agents)
			dirs := c.agents(agents)
			var walls []time.Duration
			told := map[string]string{}
			conflicts, unreachable := 0, 0
			b.ResetTimer()
			start := time.Now()
			for n := 0; n < b.N; n++ {
				out := netTogether(agents, func(i int) testrepo.Result {
					return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
				})
				for i, p := range out {
					switch {
					case p.Err != nil:
						b.Fatalf("%s: %v", p, p.Err)
					case p.Code == 1 && p.ErrorCode() == "CONFLICT":
						conflicts++
						continue
					case p.Code == 1 && p.ErrorCode() == "REMOTE-UNREACHABLE":
						// git daemon drops connections past --max-connections (32)
						unreachable++
						continue
					case p.Code != 0:
						b.Fatalf("%s", p)
					}
					walls = append(walls, p.Wall)
					key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
					if prev, ok := told[key]; ok {
						b.Fatalf("%s granted to %s and %s", key, prev, netAgent(i))
					}
					told[key] = netAgent(i)
				}
			}
			elapsed := time.Since(start)
			b.StopTimer()
			double := 0
			claims := map[string]string{}
			for _, e := range netLedger(b, c.bare) {
				if e.Kind != "claim" {
					continue
				}
				if _, ok := claims[e.cell()]; ok {
					double++
				}
				claims[e.cell()] = e.Actor
			}
			for cell, who := range told {
				if claims[cell] != who {
					b.Fatalf("%s: agents were told %s, the ledger says %q", cell, who, claims[cell])
				}
			}
			if double != 0 || len(claims) != len(told) {
				b.Fatalf("%d double grants; %d claims in the ledger, %d reported", double, len(claims), len(told))
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(netPercentile(walls, 50)), "p50-ms")
			b.ReportMetric(ms(netPercentile(walls, 99)), "p99-ms")
			b.ReportMetric(ms(netPercentile(walls, 100)), "max-ms")
			b.ReportMetric(float64(len(told))/elapsed.Seconds(), "claims/s")
			b.ReportMetric(float64(conflicts), "conflicts")
			b.ReportMetric(float64(unreachable), "unreachable")
			b.ReportMetric(float64(double), "double-grants")
		})
	}
}

// BenchmarkPreReceive: the server hook's cost for a push of 1 and of 1,000
// new entries onto a ledger of 1k entries, and (TALLY_BIG_BENCH=1) of 100k.
// It times `tally hook pre-receive` run the way receive-pack runs it: in the
// bare repository, GIT_DIR set, "<old> <new> refs/tally/ledger" on stdin,
// with the new objects already in the repository. "none" is the same process
// with no ledger update (its start-up cost).
func BenchmarkPreReceive(b *testing.B) {
	benchRemoteOn(b)
	sizes := []int{1_000}
	if os.Getenv("TALLY_BIG_BENCH") == "1" {
		sizes = append(sizes, 100_000)
	}
	bin := testrepo.Tally(b)
	for _, size := range sizes {
		bare := b.TempDir()
		testrepo.Git(b, bare, "init", "-q", "--bare")
		l, err := ledger.Open(bare, ledger.Options{})
		if err != nil {
			b.Fatal(err)
		}
		note := func(text string) ledger.BuildFunc {
			return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
				return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: text}}, nil
			}
		}
		genesis := func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "bench/pre-receive"}}, nil
		}
		t0 := time.Now()
		if _, err := l.Append("bench", genesis); err != nil {
			b.Fatal(err)
		}
		appendN := func(n int) {
			for done := 0; done < n; {
				k := min(2000, n-done)
				builds := make([]ledger.BuildFunc, k)
				for i := range builds {
					builds[i] = note(fmt.Sprintf("n%d", done+i))
				}
				if _, err := l.AppendBatch(fmt.Sprintf("actor-%d", done%7), builds); err != nil {
					b.Fatal(err)
				}
				done += k
			}
		}
		appendN(size - 1)
		b.Logf("built a %d-entry ledger in %v", size, time.Since(t0).Round(time.Millisecond))
		old := testrepo.Git(b, bare, "rev-parse", "refs/tally/ledger")
		news := map[string]string{"none": ""}
		for _, k := range []int{1, 1000} {
			appendN(k)
			news[fmt.Sprint(k)] = testrepo.Git(b, bare, "rev-parse", "refs/tally/ledger")
			testrepo.Git(b, bare, "update-ref", "refs/tally/ledger", old) // the push has not happened yet
		}
		l.WaitMaintenance()
		l.Close()
		// The hook really checks: the same updates backwards (a rollback) are refused.
		for _, k := range []string{"1", "1000"} {
			cmd := exec.Command(bin, "hook", "pre-receive")
			cmd.Dir, cmd.Env = bare, testrepo.Env("GIT_DIR="+bare)
			cmd.Stdin = strings.NewReader(news[k] + " " + old + " refs/tally/ledger\n")
			out, err := cmd.CombinedOutput()
			if err == nil || !strings.Contains(string(out), "tally: refused refs/tally/ledger: ROLLBACK-DETECTED") {
				b.Fatalf("pre-receive of a rollback: %v %s", err, out)
			}
		}
		for _, push := range []string{"none", "1", "1000"} {
			b.Run(fmt.Sprintf("ledger=%d/push=%s", size, push), func(b *testing.B) {
				stdin := ""
				if news[push] != "" {
					stdin = old + " " + news[push] + " refs/tally/ledger\n"
				}
				var walls []time.Duration
				b.ResetTimer()
				for n := 0; n < b.N; n++ {
					wall, _ := timedPreReceive(b, bin, bare, stdin)
					walls = append(walls, wall)
				}
				b.StopTimer()
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(ms(netPercentile(walls, 50)), "p50-ms")
				b.ReportMetric(ms(netPercentile(walls, 99)), "p99-ms")
			})
		}
	}
}

// timedPreReceive runs the server hook of the bare repository on one push's
// input, as receive-pack would, and returns its wall and CPU time; a refusal
// fails the benchmark.
func timedPreReceive(b *testing.B, bin, bare, stdin string) (wall, cpu time.Duration) {
	b.Helper()
	cmd := exec.Command(bin, "hook", "pre-receive")
	cmd.Dir, cmd.Env = bare, testrepo.Env("GIT_DIR="+bare)
	cmd.Stdin = strings.NewReader(stdin)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		b.Fatalf("tally hook pre-receive: %v\n%s", err, out.String())
	}
	return time.Since(start), cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
}

// BenchmarkRemoteTransport: one remote claim (`tally --remote origin claim
// --next`, a whole process) per transport — git daemon, smart HTTP, ssh (a
// real sshd) — beside what git alone needs for the same compare-and-swap on
// the same server: `git push --force-with-lease=<ref>:<old>` of a one-commit
// ref, and a `git fetch` of the ledger followed by that push. "steady": the
// claimer is the only writer of its repository, so its cached tip is current
// and the claim is one push. "moved": another clone appended just before
// (untimed), so the claim's first push finds the ref moved and the claim
// fetches, verifies, rebuilds and pushes again. With TALLY_BENCH_GOGIT set to
// a tally binary built from before the git CLI transport (go-git's), it runs
// too, in the same iterations (over ssh with an ssh-agent and
// SSH_KNOWN_HOSTS, all go-git can use):
//
//	git -C /work/main worktree add --detach /tmp/gogit cd5838d && (cd /tmp/gogit && go build -o /tmp/tally-gogit ./cmd/tally)
//	TMPDIR=/work/tmp TALLY_BENCH_REMOTE=1 TALLY_BENCH_GOGIT=/tmp/tally-gogit go test ./cmd/tally -run '^$' -bench RemoteTransport -benchtime 20x
func BenchmarkRemoteTransport(b *testing.B) {
	benchRemoteOn(b)
	gogit := os.Getenv("TALLY_BENCH_GOGIT")
	for _, kind := range []string{"daemon", "http", "ssh"} {
		for _, mode := range []string{"steady", "moved"} {
			b.Run(kind+"/"+mode, func(b *testing.B) { benchTransport(b, kind, mode == "moved", gogit) })
		}
	}
}

func benchTransport(b *testing.B, kind string, moved bool, gogit string) {
	root := b.TempDir()
	daemon := gitserver.Daemon(b, root)
	var base string
	var env, gogitEnv []string
	switch kind {
	case "daemon":
		base = daemon
	case "http":
		base = gitserver.HTTP(b, root)
	case "ssh":
		srv := gitserver.SSH(b, root)
		base = srv.URL
		env = []string{"GIT_SSH_COMMAND=" + srv.Command(srv.Key), "SSH_AUTH_SOCK="}
		if gogit != "" {
			gogitEnv = benchSSHAgent(b, srv)
		}
	}
	// repo seeds a repository through the daemon and returns a clone of it
	// reaching it through the server under test, and a second one.
	repo := func(name string) (*netCluster, string, string) {
		bare := gitserver.NewBare(b, root, name)
		c := &netCluster{t: b, kind: gitserver.GitDaemon, bare: bare, url: daemon + "/" + name, bin: testrepo.Tally(b)}
		c.seeded("bench", b.N+2)
		clone := func(who string) string {
			dir := c.clone(who)
			testrepo.Git(b, dir, "remote", "set-url", "origin", base+"/"+name)
			if _, err := netGit(dir, env, "fetch", "-q", "origin"); err != nil {
				b.Fatal(err)
			}
			return dir
		}
		return c, clone("claimer"), clone("other")
	}
	type variant struct {
		name, bin string
		env       []string
		c         *netCluster
		dir       string
		other     string
	}
	c, dir, other := repo("cli.git")
	variants := []*variant{{name: "tally-cli", bin: c.bin, env: env, c: c, dir: dir, other: other}}
	if gogit != "" {
		c, dir, other := repo("gogit.git")
		variants = append(variants, &variant{name: "tally-gogit", bin: gogit, env: gogitEnv, c: c, dir: dir, other: other})
	}
	plain := variants[0].other
	run := func(bin, dir string, env []string, args ...string) time.Duration {
		p := netRun(bin, dir, "bench", env, append([]string{"--remote", "origin"}, args...)...)
		if p.Err != nil || p.Code != 0 {
			b.Fatalf("%s: %v", p, p.Err)
		}
		return p.Wall
	}
	tip := ""
	push := func() time.Duration {
		next, err := netGit(plain, nil, append([]string{"commit-tree", "-m", "cas"}, append(benchParent(tip), "HEAD^{tree}")...)...)
		if err != nil {
			b.Fatal(err)
		}
		start := time.Now()
		if _, err := netGit(plain, env, "push", "-q", "--porcelain", "--force-with-lease=refs/heads/cas:"+tip, "origin", next+":refs/heads/cas"); err != nil {
			b.Fatal(err)
		}
		tip = next
		return time.Since(start)
	}
	fetch := func() time.Duration {
		start := time.Now()
		if _, err := netGit(plain, env, "fetch", "-q", "origin", "+refs/tally/ledger:refs/remotes/origin/tally/ledger"); err != nil {
			b.Fatal(err)
		}
		return time.Since(start)
	}
	for _, v := range variants { // the first claim fetches: not what is measured
		run(v.bin, v.dir, v.env, "note", "warm-up")
	}
	walls := map[string][]time.Duration{}
	b.ResetTimer()
	for n := 0; n < b.N; n++ {
		for _, v := range variants {
			if moved {
				b.StopTimer()
				run(c.bin, v.other, env, "note", "moved")
				b.StartTimer()
			}
			walls[v.name] = append(walls[v.name], run(v.bin, v.dir, v.env, "claim", "--next", "--ttl", "3600"))
		}
		walls["git-push"] = append(walls["git-push"], push())
		f := fetch()
		walls["git-fetch+push"] = append(walls["git-fetch+push"], f+push())
	}
	b.StopTimer()
	for name, w := range walls {
		b.ReportMetric(float64(netPercentile(w, 50))/float64(time.Millisecond), name+"-p50-ms")
	}
}

func benchParent(tip string) []string {
	if tip == "" {
		return nil
	}
	return []string{"-p", tip}
}

// benchSSHAgent starts an ssh-agent holding the server's user key and
// returns the environment go-git's ssh transport needs to use it:
// SSH_AUTH_SOCK and SSH_KNOWN_HOSTS (it reads no ssh command or config).
func benchSSHAgent(b *testing.B, srv *gitserver.SSHServer) []string {
	sock := filepath.Join(b.TempDir(), "agent.sock")
	agent := exec.Command("ssh-agent", "-D", "-a", sock)
	if err := agent.Start(); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { agent.Process.Kill(); agent.Wait() })
	for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) { // startup polling only
		if _, err := os.Stat(sock); err == nil {
			break
		}
		if time.Now().After(deadline) {
			b.Fatal("ssh-agent did not start")
		}
	}
	add := exec.Command("ssh-add", srv.Key)
	add.Env = append(os.Environ(), "SSH_AUTH_SOCK="+sock)
	if out, err := add.CombinedOutput(); err != nil {
		b.Fatalf("ssh-add: %v: %s", err, out)
	}
	return []string{"SSH_AUTH_SOCK=" + sock, "SSH_KNOWN_HOSTS=" + srv.KnownHosts}
}

// BenchmarkSyncPush: the first `tally sync` of a clone whose local ledger has
// 5,000 entries (genesis, a 100-cell plan, notes) to an empty remote with
// tally's server hook (gitserver.NewBare), over git daemon and smart HTTP,
// beside a plain `git push` of the same ref to a bare repository without
// hooks on the same server, in the same iterations. Each iteration pushes to
// a new pair of bare repositories (set up untimed) through a new remote
// name, so every sync is a first one: nothing fetched, nothing recorded.
// The server's ledger must then be the local one.
//
//	TMPDIR=/work/tmp TALLY_BENCH_REMOTE=1 go test ./cmd/tally -run '^$' -bench SyncPush -benchtime 5x
func BenchmarkSyncPush(b *testing.B) {
	benchRemoteOn(b)
	const entries = 5_000
	bin := testrepo.Tally(b)
	dir := testrepo.New(b)
	netWaitMaintenance(b, dir)
	if r := testrepo.Run(b, dir, "planner", nil, "--json", "init"); r.Code != 0 {
		b.Fatalf("%s", r)
	}
	if r := testrepo.Run(b, dir, "planner", nil, "--json", "plan", netPlan(b, dir, "bench", 100, nil)); r.Code != 0 {
		b.Fatalf("%s", r)
	}
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	for done := 2; done < entries; {
		k := min(1000, entries-done)
		builds := make([]ledger.BuildFunc, k)
		for i := range builds {
			text := fmt.Sprintf("note %d", done+i)
			builds[i] = func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
				return &ledger.Draft{Kind: chain.KindNote, Body: lease.NoteBody{Text: text}}, nil
			}
		}
		if _, err := l.AppendBatch(fmt.Sprintf("agent-%d", done%7), builds); err != nil {
			b.Fatal(err)
		}
		done += k
	}
	l.WaitMaintenance()
	l.Close()
	tip := testrepo.Git(b, dir, "rev-parse", "refs/tally/ledger")
	remotes := 0 // b.Run runs each sub-benchmark more than once: names never repeat
	for _, kind := range gitserver.Kinds {
		b.Run(string(kind), func(b *testing.B) {
			root := b.TempDir()
			base := gitserver.Start(b, kind, root)
			var tallyWalls, gitWalls []time.Duration
			b.ResetTimer()
			for n := 0; n < b.N; n++ {
				b.StopTimer()
				remotes++
				name := fmt.Sprintf("%s%d", kind, remotes)
				bare := gitserver.NewBare(b, root, name+".git")
				plain := filepath.Join(root, name+"-plain.git")
				testrepo.Git(b, root, "init", "-q", "--bare", plain)
				testrepo.Git(b, plain, "config", "http.receivepack", "true")
				testrepo.Git(b, dir, "remote", "add", name, base+"/"+name+".git")
				b.StartTimer()
				p := netRun(bin, dir, "bench", nil, "sync", name)
				if p.Err != nil || p.Code != 0 || p.JSON["action"] != "pushed" {
					b.Fatalf("%s: %v", p, p.Err)
				}
				start := time.Now()
				if _, err := netGit(dir, nil, "push", "-q", base+"/"+name+"-plain.git", "refs/tally/ledger:refs/tally/ledger"); err != nil {
					b.Fatal(err)
				}
				gitWalls = append(gitWalls, time.Since(start))
				tallyWalls = append(tallyWalls, p.Wall)
				b.StopTimer()
				if got := testrepo.Git(b, bare, "rev-parse", "refs/tally/ledger"); got != tip {
					b.Fatalf("server ledger %s, local %s", got, tip)
				}
				testrepo.WaitCompaction(b, bare)
				os.RemoveAll(bare)
				os.RemoveAll(plain)
				b.StartTimer()
			}
			b.StopTimer()
			t50, g50 := netPercentile(tallyWalls, 50), netPercentile(gitWalls, 50)
			b.ReportMetric(ms(t50), "sync-p50-ms")
			b.ReportMetric(entries/t50.Seconds(), "entries/s")
			b.ReportMetric(ms(g50), "git-push-p50-ms")
			b.ReportMetric(float64(t50)/float64(g50), "sync/git")
		})
	}
}
