package main

import (
	"fmt"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

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
