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
