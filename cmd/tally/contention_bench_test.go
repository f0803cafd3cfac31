package main

// The remote contention curve (issue #15): N agents, each in its own clone,
// run `tally --remote origin claim --next` in a loop, unsynchronized, against
// a loopback server (git daemon and smart HTTP) whose hooks tally installed.
// Run it with
//
//	TMPDIR=/work/tmp TALLY_BENCH_REMOTE=1 go test ./cmd/tally -run '^$' -bench Contention -benchtime 1x
//
// TALLY_BENCH_SECONDS sets how long each configuration runs (default 10).
// design=cas is the compare-and-swap push of every clone (tally.sequencer
// false); design=sequencer sends claim --next to the server's proc-receive
// sequencer (tally.sequencer true; a clone's default where the server
// offers it).
// With TALLY_BENCH_MAIN_BIN naming a tally binary built from another commit
// (the design before this one), design=main (compare-and-swap) and
// design=main-sequencer run it, for server and clients, in the same run.
// Each configuration reports aggregate claims/s, the wall-time percentiles
// of the claims that succeeded (retries included), the fewest and most claims
// any one agent got, and the double grants found in the server's ledger
// afterwards (a cell claimed twice: every claim here is --ttl 3600 and no
// cell is released, so any second claim of a cell is a double grant).

import (
	"fmt"
	"os"
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
	seconds := 10
	if s, err := strconv.Atoi(os.Getenv("TALLY_BENCH_SECONDS")); err == nil && s > 0 {
		seconds = s
	}
	designs := []string{"cas", "sequencer"}
	mainBin := os.Getenv("TALLY_BENCH_MAIN_BIN")
	if mainBin != "" {
		designs = append([]string{"main", "main-sequencer"}, designs...)
	}
	for _, kind := range gitserver.Kinds {
		for _, design := range designs {
			for _, agents := range []int{1, 8, 16} {
				b.Run(fmt.Sprintf("server=%s/design=%s/agents=%d", kind, design, agents), func(b *testing.B) {
					c := newNetCluster(b, kind)
					if strings.HasPrefix(design, "main") {
						// The server's hook and every client run the other build,
						// on a server set up by its install alone (this build's
						// uninstall removes what this build's install set).
						if p := netRun(c.bin, c.bare, "server", nil, "hooks", "uninstall"); p.Code != 0 {
							b.Fatalf("%s", p)
						}
						c.bin = mainBin
						if p := netRun(mainBin, c.bare, "server", nil, "hooks", "install", "--server"); p.Code != 0 {
							b.Fatalf("%s", p)
						}
					}
					// More cells than the fastest configuration could claim.
					c.seeded("bench", 100*seconds)
					dirs := c.agents(agents)
					if strings.HasSuffix(design, "sequencer") {
						sequenced(b, dirs...)
					} else {
						// The server offers its sequencer, which clones use
						// unless told not to.
						for _, d := range dirs {
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

// contention is the outcome of one contend run.
type contention struct {
	walls     []time.Duration // of the claims that succeeded
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
