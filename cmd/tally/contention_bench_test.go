package main

// The remote contention curve (issues #15, #32): N agents, each in its own
// clone, run `tally --remote origin claim --next` in a loop, unsynchronized,
// against a loopback server (git daemon, smart HTTP, or OpenSSH's sshd in
// front of the same bare repository) whose hooks tally installed. Run it with
//
//	TMPDIR=/work/tmp TALLY_BENCH_REMOTE=1 go test ./cmd/tally -run '^$' -bench Contention -benchtime 1x
//
// TALLY_BENCH_SECONDS sets how long each configuration runs (default 10),
// TALLY_BENCH_AGENTS the agent counts (default 1,8,16).
// design=cas is the compare-and-swap push of every clone (tally.sequencer
// false); design=default is a clone as a new user leaves it (no tally
// configuration: sequenced where the server offers it, FORMAT.md §9b);
// design=sequencer sets tally.sequencer true.
import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

func BenchmarkRemoteContention(b *testing.B) {
	benchRemoteOn(b)
	seconds, counts := benchRun(b)
	designs := []string{"cas", "default", "sequencer"}
	mainBin := os.Getenv("TALLY_BENCH_MAIN_BIN")
	if mainBin != "" {
		designs = append([]string{"main", "main-sequencer"}, designs...)
	}
	for _, kind := range []string{string(gitserver.GitDaemon), string(gitserver.SmartHTTP), "ssh", "ssh-mux"} {
		for _, design := range designs {
			for _, agents := range counts {
				b.Run(fmt.Sprintf("server=%s/design=%s/agents=%d", kind, design, agents), func(b *testing.B) {
					// ssh reaches the daemon cluster's bare repository
					// through sshd: the same server-side hooks, git's own ssh
					// transport on the client.
					var c *netCluster
					var srv *gitserver.SSHServer
					if strings.HasPrefix(kind, "ssh") {
						c = newNetCluster(b, gitserver.GitDaemon)
						srv = gitserver.SSH(b, filepath.Dir(c.bare))
					} else {
						c = newNetCluster(b, gitserver.Kind(kind))
					}
					if strings.HasPrefix(design, "main") {
						// The server's hook and every client run the other build,
						// on a server set up by its install alone (this build's
						// uninstall removes what this build's install set).
						c.useBuild(b, mainBin)
					}
					// More cells than the fastest configuration could claim.
					c.seeded("bench", 100*seconds)
					dirs := c.agents(agents)
					mux := ""
					if kind == "ssh-mux" {
						// What docs/HOSTING.md suggests for agents over ssh: each
						// agent reuses one connection (its own: sshd's MaxSessions,
						// default 10, bounds the sessions of one), kept 60 s.
						// ControlPath is a socket: a short directory of its own.
						var err error
						if mux, err = os.MkdirTemp("", "cm"); err != nil {
							b.Fatal(err)
						}
						b.Cleanup(func() { os.RemoveAll(mux) })
					}
					for i, d := range dirs {
						if srv != nil {
							ssh := srv.Command(srv.Key)
							if mux != "" {
								ssh += fmt.Sprintf(" -o ControlMaster=auto -o ControlPersist=60 -o ControlPath=%s/%d", mux, i)
							}
							testrepo.Git(b, d, "config", "core.sshCommand", ssh)
							testrepo.Git(b, d, "remote", "set-url", "origin", srv.URL+"/shared.git")
						}
						switch {
						case strings.HasSuffix(design, "sequencer"):
							sequenced(b, d)
						case design == "default":
							// nothing: what a new clone has
						default:
							// The server offers its sequencer, which clones use
							// unless told not to.
							testrepo.Git(b, d, "config", "tally.sequencer", "false")
						}
					}
					r := contend(b, c, dirs, time.Duration(seconds)*time.Second)
					r.report(b)
				})
			}
		}
	}
}

// benchRun is how long each configuration of a contention benchmark runs,
// in seconds (TALLY_BENCH_SECONDS, default 10), and its agent counts
// (TALLY_BENCH_AGENTS, default 1,8,16).
func benchRun(b *testing.B) (seconds int, counts []int) {
	seconds = 10
	if s, err := strconv.Atoi(os.Getenv("TALLY_BENCH_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	counts = []int{1, 8, 16}
	if v := os.Getenv("TALLY_BENCH_AGENTS"); v != "" {
		counts = nil
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(f)
			if err != nil || n < 1 {
				b.Fatalf("TALLY_BENCH_AGENTS=%q: want agent counts like 1,8,16", v)
			}
			counts = append(counts, n)
		}
	}
	return seconds, counts
}

// contention is the outcome of one contend run.
type contention struct {
	walls     []time.Duration // of the claims that succeeded
	later     []time.Duration // of those after each agent's first
	perAgent  []int
	elapsed   time.Duration
	conflicts int // CONFLICT: retries ran out
	double    int // cells with two claims in the server's ledger
}

// contend runs every agent's claim loop for d, then checks the server's
// ledger against what the agents were told: each claim reported is there,
// by that agent, and no cell is claimed twice.
func contend(b *testing.B, c *netCluster, dirs []string, d time.Duration) *contention {
	b.Helper()
	r := &contention{perAgent: make([]int, len(dirs))}
	var mu sync.Mutex
	told := map[string]string{}
	var failure error
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	stop := start.Add(d)
	for i := range dirs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				p := netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
				mu.Lock()
				switch {
				case p.Err != nil:
					failure = fmt.Errorf("%s: %v", p, p.Err)
				case p.Code == 1 && p.ErrorCode() == "CONFLICT":
					r.conflicts++
				case p.Code != 0:
					failure = fmt.Errorf("%s", p)
				default:
					r.walls = append(r.walls, p.Wall)
					if r.perAgent[i] > 0 {
						r.later = append(r.later, p.Wall)
					}
					r.perAgent[i]++
					key := fmt.Sprintf("%v/%v", p.JSON["wave"], p.JSON["cell"])
					if prev, ok := told[key]; ok {
						failure = fmt.Errorf("%s reported granted to %s and %s", key, prev, netAgent(i))
					}
					told[key] = netAgent(i)
				}
				bad := failure != nil
				mu.Unlock()
				if bad {
					return
				}
			}
		}()
	}
	wg.Wait()
	r.elapsed = time.Since(start)
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	claims := map[string]string{}
	for _, e := range netLedger(b, c.bare) {
		if e.Kind != "claim" {
			continue
		}
		if _, ok := claims[e.cell()]; ok {
			r.double++
		}
		claims[e.cell()] = e.Actor
	}
	for cell, who := range told {
		if claims[cell] != who {
			b.Fatalf("%s: the agent %s was told it won, the server's ledger says %q", cell, who, claims[cell])
		}
	}
	if len(claims) != len(told) {
		b.Fatalf("%d claims in the server's ledger, %d reported to agents", len(claims), len(told))
	}
	return r
}

func (r *contention) report(b *testing.B) {
	ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
	fewest, most := r.perAgent[0], r.perAgent[0]
	for _, n := range r.perAgent {
		fewest, most = min(fewest, n), max(most, n)
	}
	b.ReportMetric(float64(len(r.walls))/r.elapsed.Seconds(), "claims/s")
	b.ReportMetric(ms(netPercentile(r.walls, 50)), "p50-ms")
	b.ReportMetric(ms(netPercentile(r.walls, 90)), "p90-ms")
	// An agent's first claim meets the server: it fetches and verifies the
	// ledger, then claims (over ssh two connections where the others open
	// one), all agents at once. In a short run with many agents these
	// first claims are near a tenth of all and the slowest, so p90-ms
	// says as much about first contact as about the steady state that
	// p90-later-ms measures alone.
	b.ReportMetric(ms(netPercentile(r.later, 90)), "p90-later-ms")
	b.ReportMetric(ms(netPercentile(r.walls, 100)), "max-ms")
	b.ReportMetric(float64(fewest), "fewest/agent")
	b.ReportMetric(float64(most), "most/agent")
	b.ReportMetric(float64(r.conflicts), "conflicts")
	b.ReportMetric(float64(r.double), "double-grants")
	b.Logf("per-agent claims %v", r.perAgent)
	if r.double != 0 {
		b.Errorf("%d double grants", r.double)
	}
}

// BenchmarkRemoteRenewContention: where sequencing an op other than claim
// --next beats compare-and-swap (issue #32, item 3). N agents, each in its
// own clone holding a lease it claimed, renew it in a loop against git
// daemon on loopback: with compare-and-swap every renew races every other
// agent's for the ledger ref, sequenced the server appends each in turn.
// Run it with
//
//	TMPDIR=/work/tmp TALLY_BENCH_REMOTE=1 go test ./cmd/tally -run '^$' -bench RemoteRenewContention -benchtime 1x
//
// TALLY_BENCH_SECONDS and TALLY_BENCH_AGENTS as for BenchmarkRemoteContention.
func BenchmarkRemoteRenewContention(b *testing.B) {
	benchRemoteOn(b)
	seconds, counts := benchRun(b)
	for _, design := range []string{"cas", "default"} {
		for _, agents := range counts {
			b.Run(fmt.Sprintf("design=%s/agents=%d", design, agents), func(b *testing.B) {
				c := newNetCluster(b, gitserver.GitDaemon)
				c.seeded("bench", agents)
				dirs := c.agents(agents)
				epochs := make([]string, agents)
				for i, d := range dirs {
					if design == "cas" {
						testrepo.Git(b, d, "config", "tally.sequencer", "false")
					}
					res := c.ok(d, netAgent(i), nil, "--remote", "origin", "claim", fmt.Sprintf("bench/c%03d", i), "--ttl", "3600")
					epochs[i] = fmt.Sprint(res["lease"].(map[string]any)["epoch"])
				}
				walls, conflicts, elapsed := agentLoops(b, agents, time.Duration(seconds)*time.Second, false, func(i int) testrepo.Result {
					return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "renew", fmt.Sprintf("bench/c%03d", i), "--epoch", epochs[i], "--ttl", "3600")
				})
				renews := 0
				for _, e := range netLedger(b, c.bare) {
					if e.Kind == "renew" {
						renews++
					}
				}
				if renews != len(walls) {
					b.Fatalf("%d renews in the server's ledger, %d reported to agents", renews, len(walls))
				}
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(float64(len(walls))/elapsed.Seconds(), "renews/s")
				b.ReportMetric(ms(netPercentile(walls, 50)), "p50-ms")
				b.ReportMetric(ms(netPercentile(walls, 90)), "p90-ms")
				b.ReportMetric(float64(conflicts), "conflicts")
			})
		}
	}
}

// BenchmarkRemoteDrainDone: agents drain a wave through the server, each
// claiming, committing and finishing cell after cell, for
// TALLY_BENCH_SECONDS: where done by compare-and-swap meets the
// sequencer's stream of claims (issue #32, item 3). design=default is a
// clone as a new user leaves it; with TALLY_BENCH_MAIN_BIN, design=main is
// that build's default clone (its done compare-and-swap). A done that gave
// up (CONFLICT) ends its agent, and is counted.
//
//	TALLY_BENCH_REMOTE=1 TALLY_BENCH_AGENTS=8 TALLY_BENCH_MAIN_BIN=$B go test ./cmd/tally -run '^$' -bench RemoteDrainDone -benchtime 1x
func BenchmarkRemoteDrainDone(b *testing.B) {
	benchRemoteOn(b)
	seconds, counts := benchRun(b)
	designs := []string{"default"}
	if os.Getenv("TALLY_BENCH_MAIN_BIN") != "" {
		designs = append([]string{"main"}, designs...)
	}
	for _, design := range designs {
		for _, agents := range counts {
			b.Run(fmt.Sprintf("design=%s/agents=%d", design, agents), func(b *testing.B) {
				c := newNetCluster(b, gitserver.GitDaemon)
				if design == "main" {
					c.useBuild(b, os.Getenv("TALLY_BENCH_MAIN_BIN"))
				}
				c.seeded("drain", 100*seconds)
				dirs := c.agents(agents)
				dones, gaveUp, elapsed := agentLoops(b, agents, time.Duration(seconds)*time.Second, true, func(i int) testrepo.Result {
					p := netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "claim", "--next", "--ttl", "3600")
					if p.Err != nil || p.Code != 0 {
						return p
					}
					cell := fmt.Sprint(p.JSON["wave"], "/", p.JSON["cell"])
					netGit(dirs[i], nil, "commit", "-q", "--allow-empty", "-m", "work on "+cell)
					return netRun(c.bin, dirs[i], netAgent(i), nil, "--remote", "origin", "done", cell, "--epoch", fmt.Sprint(p.JSON["lease"].(map[string]any)["epoch"]))
				})
				ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
				b.ReportMetric(float64(len(dones))/elapsed.Seconds(), "cells/s")
				b.ReportMetric(ms(netPercentile(dones, 50)), "done-p50-ms")
				b.ReportMetric(ms(netPercentile(dones, 90)), "done-p90-ms")
				b.ReportMetric(float64(gaveUp), "gave-up")
			})
		}
	}
}

// useBuild makes bin the build the cluster's server hooks and clients run:
// the server set up by bin's install alone (this build's uninstall removes
// what this build's install set).
func (c *netCluster) useBuild(b *testing.B, bin string) {
	b.Helper()
	if p := netRun(c.bin, c.bare, "server", nil, "hooks", "uninstall"); p.Code != 0 {
		b.Fatalf("%s", p)
	}
	c.bin = bin
	if p := netRun(bin, c.bare, "server", nil, "hooks", "install", "--server"); p.Code != 0 {
		b.Fatalf("%s", p)
	}
}

// agentLoops runs step for agents 0..n-1 at once, each in a loop, for d,
// and returns the walls of the steps that succeeded, how many gave up
// (CONFLICT: retries ran out), and how long it all took. An agent whose
// step gave up stops when giveUpEnds; any other failure fails b.
func agentLoops(b *testing.B, n int, d time.Duration, giveUpEnds bool, step func(i int) testrepo.Result) (walls []time.Duration, gaveUp int, elapsed time.Duration) {
	var mu sync.Mutex
	var failure error
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	stop := start.Add(d)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for time.Now().Before(stop) {
				p := step(i)
				mu.Lock()
				conflict := p.Err == nil && p.Code == 1 && p.ErrorCode() == "CONFLICT"
				switch {
				case conflict:
					gaveUp++
				case p.Err != nil || p.Code != 0:
					failure = fmt.Errorf("%s: %v", p, p.Err)
				default:
					walls = append(walls, p.Wall)
				}
				end := failure != nil || conflict && giveUpEnds
				mu.Unlock()
				if end {
					return
				}
			}
		}()
	}
	wg.Wait()
	elapsed = time.Since(start)
	b.StopTimer()
	if failure != nil {
		b.Fatal(failure)
	}
	return walls, gaveUp, elapsed
}
