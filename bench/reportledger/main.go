// Command reportledger builds a large ledger with the shape a report draws:
// waves of cells claimed, renewed and released or failed by eight actors,
// every tenth lease left to expire and taken over, in batches appended in
// process, on a clock that advances between batches.
//
//	go run ./bench/reportledger -dir DIR [-entries 100000] [-leases 100000]
//
// The first -leases entries are lease work; notes (2,000 an append, fast)
// fill the ledger up to -entries. DIR must be new or empty; run again on a
// DIR it built, it only adds the notes.
package main

import (
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

func main() {
	dir := flag.String("dir", "", "repository to create")
	entries := flag.Int("entries", 100000, "entries to write (about)")
	leases := flag.Int("leases", 100000, "of which lease work (about)")
	flag.Parse()
	if *dir == "" {
		fmt.Fprintln(os.Stderr, "-dir is required")
		os.Exit(2)
	}
	_, statErr := os.Stat(filepath.Join(*dir, ".git"))
	resume := statErr == nil
	for _, argv := range [][]string{{"init", "-q", "-b", "main"}, {"-c", "user.name=b", "-c", "user.email=b@b", "commit", "-q", "--allow-empty", "-m", "root"}} {
		if resume {
			break
		}
		if out, err := exec.Command("git", append([]string{"-C", *dir}, argv...)...).CombinedOutput(); err != nil {
			die(fmt.Errorf("git %v: %v %s", argv, err, out))
		}
	}
	now := time.Date(2031, 1, 1, 0, 0, 0, 0, time.UTC)
	l, err := ledger.Open(*dir, ledger.Options{Now: func() time.Time { return now }})
	if err != nil {
		die(err)
	}
	defer l.Close()
	defer l.WaitMaintenance()
	one := func(actor string, kind chain.Kind, body any) {
		if _, err := l.AppendBatch(actor, []ledger.BuildFunc{func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: kind, Body: body}, nil
		}}); err != nil {
			die(err)
		}
	}
	if resume {
		s, err := l.Head()
		if err != nil {
			die(err)
		}
		now = now.Add(24 * time.Hour)
		notes(l, &now, int(s.Meta.Size), *entries)
		return
	}
	chunked := lease.ReceiptIndexChunked // as tally init writes it
	one("lead", chain.KindGenesis, chain.GenesisBody{Origin: "report-bench", ReceiptIndex: &chunked})
	const group, waveSize = 200, 2000
	actor := func(i int) string { return fmt.Sprintf("agent-%d", i%8+1) }
	batch := func(actors []string, kind chain.Kind, bodies []any) {
		// One batch per actor: AppendBatch appends as one actor.
		by := map[string][]ledger.BuildFunc{}
		var order []string
		for i, b := range bodies {
			b := b
			if by[actors[i]] == nil {
				order = append(order, actors[i])
			}
			by[actors[i]] = append(by[actors[i]], func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
				return &ledger.Draft{Kind: kind, Body: b}, nil
			})
		}
		for _, a := range order {
			if _, err := l.AppendBatch(a, by[a]); err != nil {
				die(err)
			}
		}
	}
	written := 1
	for w := 0; written < *leases; w++ {
		wave := fmt.Sprintf("w%02d", w)
		p := lease.PlanBody{Wave: wave}
		for i := 0; i < waveSize; i++ {
			p.Cells = append(p.Cells, lease.PlanCell{ID: fmt.Sprintf("c%04d", i)})
		}
		one("lead", "plan", p)
		written++
		for g := 0; g < waveSize && written < *leases; g += group {
			var actors, lapsed []string
			var claims, renews, releases, fails, retake, finish []any
			var relActors, failActors []string
			for i := g; i < g+group; i++ {
				ref := lease.CellRef{Wave: wave, Cell: fmt.Sprintf("c%04d", i)}
				a := actor(i + w)
				actors = append(actors, a)
				claims = append(claims, lease.ClaimBody{CellRef: ref, TTL: 120, PID: 1000 + i, Host: "bench", Mode: lease.ModeClaim})
				renews = append(renews, lease.RenewBody{EpochBody: lease.EpochBody{CellRef: ref, Epoch: 1}, TTL: 120})
				if i%10 == 0 {
					lapsed = append(lapsed, actor(i+w+1))
					retake = append(retake, lease.ClaimBody{CellRef: ref, TTL: 120, PID: 2000 + i, Host: "bench", Mode: lease.ModeClaim})
					finish = append(finish, lease.EpochBody{CellRef: ref, Epoch: 2})
					continue
				}
				if i%7 == 0 {
					failActors = append(failActors, a)
					fails = append(fails, lease.FailBody{EpochBody: lease.EpochBody{CellRef: ref, Epoch: 1}, Reason: "tests failed"})
				} else {
					relActors = append(relActors, a)
					releases = append(releases, lease.EpochBody{CellRef: ref, Epoch: 1})
				}
			}
			batch(actors, "claim", claims)
			now = now.Add(90 * time.Second)
			batch(actors, "renew", renews)
			now = now.Add(60 * time.Second)
			batch(relActors, "release", releases)
			batch(failActors, "fail", fails)
			now = now.Add(5 * time.Minute) // the lapsed tenth expire
			batch(lapsed, "claim", retake)
			now = now.Add(time.Minute)
			batch(lapsed, "release", finish)
			written += 2*group + len(releases) + len(fails) + 2*len(retake)
		}
	}
	notes(l, &now, written, *entries)
}

// notes appends notes from size entries up to n, a minute apart per batch.
func notes(l *ledger.Ledger, now *time.Time, size, n int) {
	for size < n {
		builds := make([]ledger.BuildFunc, min(n-size, 2000))
		for i := range builds {
			builds[i] = func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
				return &ledger.Draft{Kind: chain.KindNote, Body: lease.NoteBody{Text: "progress: step finished"}}, nil
			}
		}
		if _, err := l.AppendBatch("agent-9", builds); err != nil {
			die(err)
		}
		size += len(builds)
		*now = now.Add(time.Minute)
	}
	s, err := l.Head()
	if err != nil {
		die(err)
	}
	fmt.Printf("%d entries in %s\n", s.Meta.Size, l.Repo.WorkTree)
}

func die(err error) {
	fmt.Fprintln(os.Stderr, err)
	os.Exit(1)
}
