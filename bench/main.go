// Command bench measures tally against the git CLI doing the same work in the
// same run, and prints markdown tables (docs/PERFORMANCE.md quotes them).
//
//	go run ./bench [-dir DIR] [-entries 100000] [-objects 1000000] [-runs 200]
//	go run ./bench -quick          # small sizes, a smoke test of the script
//	go run ./bench -dir DIR -entries N -build   # only the N-entry ledger, in DIR/empty
//	go run ./bench -dir DIR -firstcontact       # fresh clones of DIR/empty's first remote command
//
// Put DIR on the filesystem you care about: fsync cost differs between mounts
// (on the development machine /tmp was about three times slower than /work).
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

var (
	dirFlag = flag.String("dir", "", "work directory (default: a new temporary directory)")
	entries = flag.Int("entries", 100000, "ledger length for the large-ledger measurements")
	objects = flag.Int("objects", 1000000, "packed objects in the big host repository")
	runs    = flag.Int("runs", 200, "whole-process runs per measurement")
	quick   = flag.Bool("quick", false, "small sizes (2k entries, 20k objects, 30 runs)")
	keep    = flag.Bool("keep", false, "keep the work directory")
	build   = flag.Bool("build", false, "only build DIR/empty, a ledger of -entries entries (grown if it exists), and stop")
)

func main() {
	flag.Parse()
	if *quick {
		*entries, *objects, *runs = 2000, 20000, 30
	}
	dir := *dirFlag
	if dir == "" {
		var err error
		if dir, err = os.MkdirTemp("", "tally-bench-"); err != nil {
			die(err)
		}
	}
	if !*keep && *dirFlag == "" {
		defer os.RemoveAll(dir)
	}
	b := &bench{dir: dir, tally: filepath.Join(dir, "tally")}
	b.run()
}

type bench struct {
	dir, tally string
	rows       [][]string
}

func die(err error) {
	fmt.Fprintln(os.Stderr, "bench:", err)
	os.Exit(1)
}

func (b *bench) row(cols ...string) {
	b.rows = append(b.rows, cols)
	fmt.Fprintln(os.Stderr, "  "+strings.Join(cols, " | "))
}

var env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
	"GIT_AUTHOR_NAME=bench", "GIT_AUTHOR_EMAIL=bench@example.com",
	"GIT_COMMITTER_NAME=bench", "GIT_COMMITTER_EMAIL=bench@example.com", "TALLY_ACTOR=bench")

func sh(dir string, stdin io.Reader, name string, args ...string) string {
	cmd := exec.Command(name, args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, env, stdin
	out, err := cmd.Output()
	if err != nil {
		msg := ""
		if ee, ok := err.(*exec.ExitError); ok {
			msg = string(ee.Stderr)
		}
		die(fmt.Errorf("%s %v in %s: %v %s", name, args, dir, err, msg))
	}
	return strings.TrimSpace(string(out))
}

// timed runs a command n times and returns the sorted wall times.
func timed(n int, mk func(i int) *exec.Cmd) []time.Duration {
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		cmd := mk(i)
		var stderr strings.Builder
		cmd.Env, cmd.Stdout, cmd.Stderr = env, io.Discard, &stderr
		t0 := time.Now()
		if err := cmd.Run(); err != nil {
			die(fmt.Errorf("%v: %v %s", cmd.Args, err, stderr.String()))
		}
		ds = append(ds, time.Since(t0))
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds
}

func pct(ds []time.Duration, p float64) time.Duration {
	i := int(float64(len(ds))*p+0.999999) - 1
	return ds[max(0, min(i, len(ds)-1))]
}

func ms(d time.Duration) string { return fmt.Sprintf("%.2f ms", float64(d.Microseconds())/1000) }

func (b *bench) run() {
	fmt.Fprintf(os.Stderr, "bench in %s: %d entries, %d host objects, %d runs\n", b.dir, *entries, *objects, *runs)
	sh(".", nil, "env", "CGO_ENABLED=0", "go", "build", "-o", b.tally, "./cmd/tally")

	if *firstContact {
		b.firstContactBench()
		return
	}
	if *build {
		// The ledger the verify measurements read, for measuring them on
		// their own (docs/PERFORMANCE.md); growing an existing one keeps its
		// first entries, so one directory can be copied at each size.
		empty := filepath.Join(b.dir, "empty")
		if _, err := os.Stat(empty); err != nil {
			empty = b.newRepo("empty")
			b.initLedger(empty)
		}
		b.grow(empty, *entries)
		return
	}
	empty := b.newRepo("empty")
	b.initLedger(empty)
	b.grow(empty, 1000)
	fmt.Fprintln(os.Stderr, "whole-process latency, 1k-entry ledger, empty host repository")
	b.latency("empty repo", empty, "1k")

	b.inProcessAppend(empty, "1k")
	b.grow(empty, *entries)
	b.latency("empty repo", empty, fmt.Sprintf("%dk", *entries/1000))
	b.inProcessAppend(empty, fmt.Sprintf("%dk", *entries/1000))

	big := b.bigRepo()
	sh(big, nil, "git", "fetch", "-q", empty, "refs/tally/*:refs/tally/*")
	b.latency(fmt.Sprintf("%dk-object repo", *objects/1000), big, fmt.Sprintf("%dk", *entries/1000))
	b.verify(empty)
	b.verify(big)
	b.disk()
	b.print()
}

func (b *bench) newRepo(name string) string {
	dir := filepath.Join(b.dir, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		die(err)
	}
	sh(dir, nil, "git", "init", "-q", "-b", "main")
	sh(dir, nil, "git", "commit", "-q", "--allow-empty", "-m", "root")
	return dir
}

// initLedger writes genesis and a wave of cells for the claim measurements.
func (b *bench) initLedger(dir string) {
	sh(dir, nil, b.tally, "init", "--origin", "bench")
	var p strings.Builder
	p.WriteString(`{"wave":"bench","cells":[`)
	for i := 0; i < 20000; i++ {
		if i > 0 {
			p.WriteByte(',')
		}
		fmt.Fprintf(&p, `{"id":"c%05d"}`, i)
	}
	p.WriteString(`]}`)
	sh(dir, strings.NewReader(p.String()), b.tally, "plan", "-")
}

// grow appends notes in batches until the ledger has n entries.
func (b *bench) grow(dir string, n int) {
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		die(err)
	}
	defer l.Close()
	defer l.WaitMaintenance()
	t0 := time.Now()
	for {
		s, err := l.Head()
		if err != nil {
			die(err)
		}
		left := n - int(s.Meta.Size)
		if left <= 0 {
			break
		}
		builds := make([]ledger.BuildFunc, min(left, 2000))
		for i := range builds {
			builds[i] = func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
				return &ledger.Draft{Kind: chain.KindNote, Body: lease.NoteBody{Text: "bench"}}, nil
			}
		}
		if _, err := l.AppendBatch("bench", builds); err != nil {
			die(err)
		}
	}
	if _, err := l.CompactNow(); err != nil {
		die(err)
	}
	fmt.Fprintf(os.Stderr, "ledger of %d entries built in %v\n", n, time.Since(t0).Round(time.Second))
}

// latency measures whole tally processes against the git CLI appending a
// commit the same way (commit-tree, then update-ref with the old value).
func (b *bench) latency(where, dir, size string) {
	note := timed(*runs, func(i int) *exec.Cmd {
		cmd := exec.Command(b.tally, "note", fmt.Sprintf("n%d", i))
		cmd.Dir = dir
		return cmd
	})
	claim := timed(*runs, func(i int) *exec.Cmd {
		cmd := exec.Command(b.tally, "claim", "--next", "--wave", "bench", "--ttl", "3600")
		cmd.Dir = dir
		return cmd
	})
	tree := sh(dir, nil, "git", "rev-parse", "refs/tally/ledger^{tree}")
	parent := sh(dir, nil, "git", "rev-parse", "refs/tally/ledger")
	sh(dir, nil, "git", "update-ref", "refs/bench/git", parent)
	git := timed(*runs, func(i int) *exec.Cmd {
		script := `old=$(git rev-parse refs/bench/git) && new=$(git commit-tree -p "$old" -m "n$1" "$2") && git update-ref refs/bench/git "$new" "$old"`
		cmd := exec.Command("sh", "-c", script, "sh", fmt.Sprint(i), tree)
		cmd.Dir = dir
		return cmd
	})
	b.row("append, whole process", where, size+" entries", "tally note", ms(pct(note, .5)), ms(pct(note, .99)))
	b.row("append, whole process", where, size+" entries", "tally claim --next", ms(pct(claim, .5)), ms(pct(claim, .99)))
	b.row("append, whole process", where, size+" entries", "git rev-parse + commit-tree + update-ref", ms(pct(git, .5)), ms(pct(git, .99)))
}

// inProcessAppend measures ledger.Append in the library.
func (b *bench) inProcessAppend(dir, size string) {
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		die(err)
	}
	defer l.Close()
	defer l.WaitMaintenance()
	ds := make([]time.Duration, *runs)
	for i := range ds {
		t0 := time.Now()
		_, err := l.Append("bench", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: chain.KindNote, Body: lease.NoteBody{Text: "in-process"}}, nil
		})
		if err != nil {
			die(err)
		}
		ds[i] = time.Since(t0)
	}
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	b.row("append, in process", "empty repo", size+" entries", "ledger.Append", ms(pct(ds, .5)), ms(pct(ds, .99)))
}

// bigRepo builds a host repository with the requested number of packed
// objects (fast-import) and 20k packed refs.
func (b *bench) bigRepo() string {
	dir := filepath.Join(b.dir, "big")
	os.MkdirAll(dir, 0o755)
	sh(dir, nil, "git", "init", "-q", "-b", "main")
	t0 := time.Now()
	r, w := io.Pipe()
	go func() {
		bw := bufio.NewWriterSize(w, 1<<20)
		blobs := *objects - 2
		for i := 0; i < blobs; i++ {
			content := fmt.Sprintf("object %d\n", i)
			fmt.Fprintf(bw, "blob\nmark :%d\ndata %d\n%s\n", i+1, len(content), content)
		}
		fmt.Fprintf(bw, "commit refs/heads/main\ncommitter bench <bench@example.com> 1700000000 +0000\ndata 4\nbig\n")
		for i := 0; i < blobs; i++ {
			fmt.Fprintf(bw, "M 100644 :%d d%03d/f%07d\n", i+1, i%1000, i)
		}
		bw.WriteString("\n")
		bw.Flush()
		w.Close()
	}()
	sh(dir, r, "git", "fast-import", "--quiet")
	var refs strings.Builder
	head := sh(dir, nil, "git", "rev-parse", "refs/heads/main")
	for i := 0; i < 20000; i++ {
		fmt.Fprintf(&refs, "create refs/heads/topic/%05d %s\n", i, head)
	}
	sh(dir, strings.NewReader(refs.String()), "git", "update-ref", "--stdin")
	sh(dir, nil, "git", "pack-refs", "--all", "--prune")
	sh(dir, nil, "git", "checkout", "-q", "main")
	count := sh(dir, nil, "git", "count-objects", "-v")
	fmt.Fprintf(os.Stderr, "host repository built in %v:\n%s\n", time.Since(t0).Round(time.Second), count)
	return dir
}

// verify measures a full verify, as a whole process and in the library.
func (b *bench) verify(dir string) {
	t0 := time.Now()
	sh(dir, nil, b.tally, "verify", "--full")
	whole := time.Since(t0)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		die(err)
	}
	defer l.Close()
	t0 = time.Now()
	rep, err := l.Verify(true)
	if err != nil {
		die(err)
	}
	lib := time.Since(t0)
	where := filepath.Base(dir) + " repo"
	n := float64(rep.Entries)
	b.row("full verify", where, fmt.Sprintf("%d entries", rep.Entries), "tally verify --full", fmt.Sprintf("%.0f entries/s", n/whole.Seconds()), whole.Round(time.Millisecond).String())
	b.row("full verify", where, fmt.Sprintf("%d entries", rep.Entries), "ledger.Verify(full)", fmt.Sprintf("%.0f entries/s", n/lib.Seconds()), lib.Round(time.Millisecond).String())
	// git reading every object verify --full reads back (every object of
	// every state of the ledger), for the cost of that check.
	t0 = time.Now()
	sh(dir, nil, "sh", "-c", "git rev-list --objects refs/tally/ledger | git cat-file --batch >/dev/null")
	git := time.Since(t0)
	b.row("full verify", where, fmt.Sprintf("%d entries", rep.Entries), "git rev-list --objects | git cat-file --batch", fmt.Sprintf("%.0f entries/s", n/git.Seconds()), git.Round(time.Millisecond).String())
}

// disk measures bytes per entry of single appends before and after
// maintenance, and the number of packs as appends go on (auto-pack).
func (b *bench) disk() {
	dir := b.newRepo("disk")
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		die(err)
	}
	defer l.Close()
	chunked := lease.ReceiptIndexChunked // as tally init writes it
	if _, err := l.Append("bench", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "disk", ReceiptIndex: &chunked}}, nil
	}); err != nil {
		die(err)
	}
	before := duBytes(filepath.Join(dir, ".git", "objects"))
	const n = 1000
	var packCounts []string
	for i := 1; i <= n; i++ {
		if _, err := l.Append("bench", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: chain.KindNote, Body: lease.NoteBody{Text: fmt.Sprintf("entry %d", i)}}, nil
		}); err != nil {
			die(err)
		}
		if i%200 == 0 {
			l.WaitMaintenance()
			packCounts = append(packCounts, fmt.Sprintf("%d:%d", i, countPacks(dir)))
		}
	}
	l.WaitMaintenance()
	grown := duBytes(filepath.Join(dir, ".git", "objects")) - before
	if _, err := l.CompactNow(); err != nil {
		die(err)
	}
	compacted := duBytes(filepath.Join(dir, ".git", "objects")) - before
	sh(dir, nil, "git", "repack", "-a", "-d", "-q")
	sh(dir, nil, "git", "prune-packed")
	after := duBytes(filepath.Join(dir, ".git", "objects")) - before
	b.row("disk per entry", "single appends", fmt.Sprintf("%d entries", n), "as written (background compaction on)", fmt.Sprintf("%d B", grown/n), "packs after N appends: "+strings.Join(packCounts, " "))
	b.row("disk per entry", "single appends", fmt.Sprintf("%d entries", n), "after tally gc", fmt.Sprintf("%d B", compacted/n), "")
	b.row("disk per entry", "single appends", fmt.Sprintf("%d entries", n), "after git repack -a -d (deltas)", fmt.Sprintf("%d B", after/n), "")
}

func countPacks(dir string) int {
	m, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.idx"))
	return len(m)
}

// duBytes is the disk usage (allocated blocks) under dir.
func duBytes(dir string) int64 {
	out := sh(dir, nil, "du", "-sk", ".")
	var kb int64
	fmt.Sscan(out, &kb)
	return kb * 1024
}

func (b *bench) print() {
	fmt.Println("| measurement | where | size | what | p50 / rate | p99 / time |")
	fmt.Println("|---|---|---|---|---|---|")
	for _, r := range b.rows {
		fmt.Println("| " + strings.Join(r, " | ") + " |")
	}
}
