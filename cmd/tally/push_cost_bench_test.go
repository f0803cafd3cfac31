package main

import (
	"fmt"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// BenchmarkPreReceiveAtLimits: the server hook's whole-process cost for a
// push of one claim, on a typical ledger and on one at the cost limits. It
// runs `tally hook pre-receive` as receive-pack would (see
// BenchmarkPreReceive), the claim's objects already in the bare repository.
//
//	typical:       a wave of 100 cells of 2 paths, 20 claimed by another
//	               actor; the claim of a 21st
//	limits/simple: 15 cells of 256 paths claimed by another actor (3,840 live
//	               holds); the claim of a 16th cell with 8 literal paths
//	limits/worst:  the same state with 44 of the holds starting with a glob;
//	               the claim of a cell of 256 glob paths, each pair of those
//	               tested (1.96M of the 2M check budget), none overlapping
//
//	TALLY_BENCH_REMOTE=1 go test ./cmd/tally -run '^$' -bench PreReceiveAtLimits -benchtime 20x
func BenchmarkPreReceiveAtLimits(b *testing.B) {
	benchRemoteOn(b)
	bin := testrepo.Tally(b)
	claim := func(wave, cell string) ledger.BuildFunc {
		return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: "claim", Body: lease.ClaimBody{CellRef: lease.CellRef{Wave: wave, Cell: cell},
				TTL: 3600, PID: 1, Host: "bench", Mode: lease.ModeClaim}}, nil
		}
	}
	// setup builds a bare repository holding plan and the claims of cells
	// 0..held-1 by actor h; it returns the repository, the ledger tip and
	// the tip after a's claim of cell last (not yet pushed).
	setup := func(cells []lease.PlanCell, held int, last string) (bare, old, new string) {
		bare = b.TempDir()
		testrepo.Git(b, bare, "init", "-q", "--bare")
		l, err := ledger.Open(bare, ledger.Options{})
		if err != nil {
			b.Fatal(err)
		}
		defer l.Close()
		step := func(actor string, f ledger.BuildFunc) {
			if _, err := l.Append(actor, f); err != nil {
				b.Fatal(err)
			}
		}
		step("bench", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "bench/limits"}}, nil
		})
		step("x", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: "plan", Body: lease.PlanBody{Wave: "w", Cells: cells}}, nil
		})
		for i := range held {
			step("h", claim("w", cells[i].ID))
		}
		old = testrepo.Git(b, bare, "rev-parse", "refs/tally/ledger")
		step("a", claim("w", last))
		new = testrepo.Git(b, bare, "rev-parse", "refs/tally/ledger")
		testrepo.Git(b, bare, "update-ref", "refs/tally/ledger", old) // the push has not happened yet
		l.WaitMaintenance()
		return bare, old, new
	}
	atLimits := func(wild int, last func(p int) string) []lease.PlanCell {
		var cells []lease.PlanCell
		for c := range 16 {
			var paths []string
			for p := range 256 {
				switch n := c*256 + p; {
				case c == 15 && last(p) != "":
					paths = append(paths, last(p))
				case c == 15:
				case n < wild:
					paths = append(paths, fmt.Sprintf("*/h%04d/z", n))
				default:
					paths = append(paths, fmt.Sprintf("d%02d/f%04d.go", c, p))
				}
			}
			cells = append(cells, lease.PlanCell{ID: fmt.Sprintf("c%02d", c), Paths: paths})
		}
		return cells
	}
	var typical []lease.PlanCell
	for c := range 100 {
		typical = append(typical, lease.PlanCell{ID: fmt.Sprintf("c%02d", c),
			Paths: []string{fmt.Sprintf("docs/c%02d.md", c), fmt.Sprintf("svc/c%02d/**", c)}})
	}
	for _, sc := range []struct {
		name  string
		cells []lease.PlanCell
		held  int
	}{
		{"typical", typical, 20},
		{"limits/simple", atLimits(0, func(p int) string {
			if p < 8 {
				return fmt.Sprintf("src/new/f%d.go", p)
			}
			return ""
		}), 15},
		{"limits/worst", atLimits(44, func(p int) string { return fmt.Sprintf("r/*/q%03d", p) }), 15},
	} {
		bare, old, new := setup(sc.cells, sc.held, sc.cells[sc.held].ID)
		b.Run(sc.name, func(b *testing.B) {
			var walls, cpus []time.Duration
			for b.Loop() {
				wall, cpu := timedPreReceive(b, bin, bare, old+" "+new+" refs/tally/ledger\n")
				walls, cpus = append(walls, wall), append(cpus, cpu)
			}
			ms := func(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
			b.ReportMetric(ms(netPercentile(walls, 50)), "p50-ms")
			b.ReportMetric(ms(netPercentile(walls, 99)), "p99-ms")
			// CPU time is what the hook costs the server, and it barely moves
			// when other work shares the cores.
			b.ReportMetric(ms(netPercentile(cpus, 50)), "cpu-p50-ms")
		})
	}
}
