package main

// Benchmarks of whole tally processes on real repositories. Run them with
// TMPDIR on the same filesystem as the work tree if /tmp is slow, e.g.
//
//	TMPDIR=/work/tmp go test ./cmd/tally -run '^$' -bench . -benchtime 3x
//
// TALLY_BENCH_CELLS sets the number of cells the drain benchmarks (Drain8,
// Drain8DoneNext, DrainMCP8, DrainMCP8DoneNext) drain per iteration
// (default 200), TALLY_BENCH_WORKERS their number of workers
// (default 8; 1 measures what a cell costs without contention).

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

func percentile(d []time.Duration, p float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := append([]time.Duration(nil), d...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return s[min(len(s)-1, int(p*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// BenchmarkDrain8: 8 processes drain a wave (independent cells and chains)
// with claim --next + done. Reports the aggregate claim rate over the drain's
// wall time and the p50/p99 wall time of a successful claim process.
func BenchmarkDrain8(b *testing.B) {
	benchDrain(b, cliAgents, false)
}

// BenchmarkDrain8DoneNext: BenchmarkDrain8 with the batched form, one
// process a cell: a first claim --next, then done --next until the plan is
// complete.
func BenchmarkDrain8DoneNext(b *testing.B) {
	benchDrain(b, cliAgents, true)
}

// BenchmarkDrainMCP8: the drain through 8 long-lived `tally mcp` servers,
// one per worker, each driven over stdio by the SDK's client with the claim
// (next, wait_seconds) and done tools. CPU is the servers' (and the git
// processes they waited for), from their rusage at exit.
func BenchmarkDrainMCP8(b *testing.B) {
	benchDrain(b, mcpAgents, false)
}

// BenchmarkDrainMCP8DoneNext: BenchmarkDrainMCP8 with done's next, one
// call a cell.
func BenchmarkDrainMCP8DoneNext(b *testing.B) {
	benchDrain(b, mcpAgents, true)
}

// benchDrain drains a wave of TALLY_BENCH_CELLS cells with
// TALLY_BENCH_WORKERS workers through the agents agents(bin, dir) makes (a
// fresh set each iteration), batched as drain says, and checks every drain
// against the ledger (checkDrained).
func benchDrain(b *testing.B, agents func(bin, dir string) func(string) (drainAgent, error), batched bool) {
	n := 200
	if s := os.Getenv("TALLY_BENCH_CELLS"); s != "" {
		n, _ = strconv.Atoi(s)
	}
	workers := 8
	if s := os.Getenv("TALLY_BENCH_WORKERS"); s != "" {
		workers, _ = strconv.Atoi(s)
	}
	bin := testrepo.Tally(b)
	r := newRepo(b)
	r.ok("bench", "init")
	var lat []time.Duration
	var total time.Duration
	usage := map[string]*procUsage{}
	var all procUsage
	waited := 0
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		wave := fmt.Sprintf("d%d", i)
		planJSON, _, _ := drainPlan(wave, n)
		r.ok("bench", "plan", r.file(wave+".json", planJSON))
		b.StartTimer()
		start := time.Now()
		claims, dones, st, err := drain(agents(bin, r.dir), wave, n, workers, batched)
		total += time.Since(start)
		if err != nil {
			b.Fatal(err)
		}
		b.StopTimer()
		checkDrained(b, r.dir, wave, n, claims, dones)
		b.StartTimer()
		lat = append(lat, st.latencies...)
		waited += st.waited
		for k, u := range st.usage {
			if usage[k] == nil {
				usage[k] = &procUsage{}
			}
			usage[k].add(*u)
			all.add(*u)
		}
	}
	cells := float64(len(lat))
	b.ReportMetric(cells/total.Seconds(), "claims/s")
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-claim-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-claim-ms")
	// What a cell costs, whatever the load: CPU, processes, page faults
	// and context switches of every tally process the workers ran.
	b.ReportMetric(ms(all.CPU)/cells, "cpu-ms/cell")
	b.ReportMetric(float64(all.Procs)/cells, "procs/cell")
	b.ReportMetric(float64(all.Faults)/cells, "faults/cell")
	b.ReportMetric(float64(all.Switches)/cells, "switches/cell")
	b.ReportMetric(float64(waited)/cells, "waited/cell")
	for _, k := range []string{"claim", "claim-refused", "done", "status", "server"} {
		if u := usage[k]; u != nil && u.Procs > 0 {
			b.Logf("%-13s %5d processes, %6.2f ms CPU, %6.0f faults, %6.0f switches each", k, u.Procs,
				ms(u.CPU)/float64(u.Procs), float64(u.Faults)/float64(u.Procs), float64(u.Switches)/float64(u.Procs))
		}
	}
}

// receiptNoteLines counts the receipt note lines in refs/notes/tally (read
// with git) by "seq wave/cell epoch".
func receiptNoteLines(tb testing.TB, dir string) map[string]int {
	tb.Helper()
	lines := map[string]int{}
	if _, err := netGit(dir, nil, "rev-parse", "-q", "--verify", "refs/notes/tally"); err != nil {
		return lines
	}
	for _, pair := range strings.Split(testrepo.Git(tb, dir, "notes", "--ref=tally", "list"), "\n") {
		blob, _, _ := strings.Cut(pair, " ")
		for _, l := range strings.Split(testrepo.Git(tb, dir, "cat-file", "blob", blob), "\n") {
			var seq, cell, epoch string
			for _, f := range strings.Fields(l) {
				if k, v, ok := strings.Cut(f, "="); ok {
					switch k {
					case "seq":
						seq = v
					case "cell":
						cell = v
					case "epoch":
						epoch = v
					}
				}
			}
			if strings.HasPrefix(l, "tally-receipt ") {
				lines[seq+" "+cell+" "+epoch]++
			}
		}
	}
	return lines
}

// checkDrained checks a drain of wave's n cells against the ledger: every
// cell claimed and done once, no (cell, epoch) granted twice, every
// append a worker saw acknowledged (exit 0) in the ledger at its seq, by
// that worker, of that cell and epoch, and every acknowledged done's note
// line written once in refs/notes/tally.
func checkDrained(tb testing.TB, dir, wave string, n int, claims, dones map[string][]grant) {
	tb.Helper()
	noteLines := receiptNoteLines(tb, dir)
	bySeq := map[int64]loggedEntry{}
	granted := map[string]int{}
	for _, le := range readLedger(tb, dir) {
		var body struct {
			Wave  string `json:"wave"`
			Cell  string `json:"cell"`
			Epoch int64  `json:"epoch"`
		}
		if json.Unmarshal(le.Entry.Body, &body) != nil || body.Wave != wave {
			continue
		}
		bySeq[int64(le.Entry.Seq)] = le
		if le.Entry.Kind == "claim" {
			var epoch int64
			fmt.Sscanf(le.Subject[strings.LastIndex(le.Subject, " ")+1:], "%d", &epoch)
			key := fmt.Sprintf("%s#%d", body.Cell, epoch)
			if granted[key]++; granted[key] > 1 {
				tb.Fatalf("double grant: %s claimed twice (entry %d)", key, le.Entry.Seq)
			}
		}
	}
	if len(claims) != n || len(dones) != n {
		tb.Fatalf("%d cells claimed and %d done, want %d", len(claims), len(dones), n)
	}
	for kind, seen := range map[string]map[string][]grant{"claim": claims, "done": dones} {
		for cell, gs := range seen {
			if len(gs) != 1 {
				tb.Fatalf("%s of %s acknowledged %d times: %+v", kind, cell, len(gs), gs)
			}
			g := gs[0]
			le, ok := bySeq[g.seq]
			e := le.Entry
			var body struct {
				Cell  string `json:"cell"`
				Epoch int64  `json:"epoch"`
			}
			json.Unmarshal(e.Body, &body)
			if !ok || string(e.Kind) != kind || e.Actor != g.actor || body.Cell != cell || (kind == "done" && body.Epoch != g.epoch) {
				tb.Fatalf("acknowledged %s of %s %+v is not in the ledger at seq %d (found %s by %s of %s)", kind, cell, g, g.seq, e.Kind, e.Actor, body.Cell)
			}
			if kind == "done" {
				if key := fmt.Sprintf("%d %s/%s %d", g.seq, wave, cell, g.epoch); noteLines[key] != 1 {
					tb.Fatalf("the note line of done %s (seq, cell, epoch %q) is in refs/notes/tally %d times", cell, key, noteLines[key])
				}
			}
		}
	}
}

func BenchmarkClaimWave100(b *testing.B) { benchClaimWave(b, 100) }
func BenchmarkClaimWave10k(b *testing.B) { benchClaimWave(b, 10000) }

// benchClaimWave measures one `tally claim W/C` process (its whole life) on
// a wave of size cells, and counts the objects each claim writes (the pack it
// adds, listed with git show-index): that number must not grow with the wave.
func benchClaimWave(b *testing.B, size int) {
	bin := testrepo.Tally(b)
	r := newRepo(b)
	r.ok("bench", "init")
	plan := func(wave string) {
		var sb strings.Builder
		sb.WriteString(`{"wave":"` + wave + `","cells":[`)
		for i := 0; i < size; i++ {
			if i > 0 {
				sb.WriteByte(',')
			}
			fmt.Fprintf(&sb, `{"id":"c%05d"}`, i)
		}
		sb.WriteString("]}")
		r.ok("bench", "plan", r.file(wave+".json", sb.String()))
	}
	packDir := filepath.Join(r.dir, ".git", "objects", "pack")
	packs := func() map[string]bool {
		m, _ := filepath.Glob(filepath.Join(packDir, "*.idx"))
		out := map[string]bool{}
		for _, p := range m {
			out[p] = true
		}
		return out
	}
	plan("w0")
	var objects, bytes []int
	var lat []time.Duration
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		wave, cell := fmt.Sprintf("w%d", i/size), fmt.Sprintf("c%05d", i%size)
		if i > 0 && i%size == 0 {
			plan(wave)
		}
		before := packs()
		if len(before) >= 40 {
			// keep tally's background repack (past 50 packs) out of the measurement
			r.git("repack", "-a", "-d", "-q")
			before = packs()
		}
		b.StartTimer()
		p := runTally(bin, r.dir, "bench", "claim", wave+"/"+cell)
		b.StopTimer()
		if p.Err != nil || p.Code != 0 {
			b.Fatalf("claim %s/%s: exit %d %s %v", wave, cell, p.Code, p.Stdout, p.Err)
		}
		lat = append(lat, p.Wall)
		var added []string
		for k := range packs() {
			if !before[k] {
				added = append(added, k)
			}
		}
		if len(added) != 1 {
			b.Fatalf("claim added %d packs, want 1", len(added))
		}
		objects = append(objects, packObjects(b, r.dir, added[0]))
		if fi, err := os.Stat(strings.TrimSuffix(added[0], ".idx") + ".pack"); err == nil {
			bytes = append(bytes, int(fi.Size()))
		}
		b.StartTimer()
	}
	b.StopTimer()
	sum, most, nb := 0, 0, 0
	for i, o := range objects {
		sum += o
		most = max(most, o)
		nb += bytes[i]
	}
	b.ReportMetric(float64(sum)/float64(len(objects)), "objects/append")
	b.ReportMetric(float64(most), "max-objects/append")
	b.ReportMetric(float64(nb)/float64(len(bytes)), "pack-bytes/append")
	b.ReportMetric(ms(percentile(lat, 0.50)), "p50-ms")
	b.ReportMetric(ms(percentile(lat, 0.99)), "p99-ms")
}

// packObjects counts the objects of a pack with git show-index on its .idx.
func packObjects(b *testing.B, dir, idxPath string) int {
	b.Helper()
	idx, err := os.Open(idxPath)
	if err != nil {
		b.Fatal(err)
	}
	defer idx.Close()
	cmd := exec.Command("git", "show-index")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testrepo.Env(), idx
	out, err := cmd.Output()
	if err != nil {
		b.Fatalf("git show-index %s: %v", idxPath, err)
	}
	return len(strings.Split(strings.TrimSpace(string(out)), "\n"))
}

// BenchmarkCommandTree: building the commands a run of `tally note` needs
// (the root and note, commandTree) against the whole tree (rootCommand), a
// cost every tally process paid before it did anything.
func BenchmarkCommandTree(b *testing.B) {
	a := &app{stdout: io.Discard, stderr: io.Discard}
	b.Run("note", func(b *testing.B) {
		for b.Loop() {
			a.commandTree([]string{"note", "x"})
		}
	})
	b.Run("whole", func(b *testing.B) {
		for b.Loop() {
			a.rootCommand()
		}
	})
}
