package ledger_test

// Race tests: real tally processes (and in-process ledgers) append to one
// repository concurrently with a git CLI writer (git update-ref with an old
// value, i.e. git's own compare-and-swap) and with git pack-refs / git gc
// rewriting the refs under them. Afterwards the chain is read back with git
// and every acknowledged append must be in it exactly once, at the seq and
// commit it was acknowledged with.
//
// Default size keeps `go test ./ledger` quick (about 500 contended appends
// here). The stress mode runs 8 × 3,750 = 30,000 contended `tally note`
// appends (plus a few hundred to a few thousand by the git writer), 16 × 500
// in-process appends, and 400 crash rounds (crash_test.go); it takes 15 to
// 25 minutes on two cores:
//
//	TALLY_STRESS=1 go test ./ledger -run 'TestRaceAppends|TestCrashAppends' -count=1 -timeout 60m -v

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/ledger"
)

// ack is an acknowledged append: its unique note text and where the writer
// said it landed.
type ack struct {
	text   string
	seq    uint64
	commit string
}

// appendLog collects the outcome of every append attempt of a race.
type appendLog struct {
	mu        sync.Mutex
	acks      []ack
	attempted map[string]bool // every text any writer tried to append
	failures  map[string]int  // "exit 1 CONFLICT" -> count
	bad       []string        // failures no concurrent append may produce
	byWriter  map[string]int  // acknowledged appends per kind of writer
	gitWon    chan struct{}   // closed at the git writer's next acknowledged append
	known     []string        // failures matching a known, reported bug (see transientMiss)
}

// transientMiss reports the signature of a known bug: a read of an object
// that exists fails with "object not found" (CORRUPT, exit 3) when git
// repack or git gc replaces packs during the lookup — gitstore.ObjectDB
// rescans the pack directory only once. Seen about once in 8,000 contended
// in-process appends in stress mode; a concurrent append must never fail
// with an integrity error, so the test reports it as a skipped known bug
// rather than hiding it.
func transientMiss(code, msg string) bool {
	return code == "CORRUPT" && strings.Contains(msg, "object not found")
}

func (a *appendLog) knownBug(msg string) {
	a.mu.Lock()
	a.known = append(a.known, msg)
	a.mu.Unlock()
}

// failOnKnownBugs fails the test if appends failed with a transient object miss
// (fixed: the object database rescans while the pack set changes).
func (a *appendLog) failOnKnownBugs(t *testing.T) {
	t.Helper()
	if len(a.known) > 0 {
		t.Errorf("%d appends failed with a transient object miss beside git repack/gc (first: %s)", len(a.known), a.known[0])
	}
}

func newAppendLog() *appendLog {
	return &appendLog{attempted: map[string]bool{}, failures: map[string]int{}, byWriter: map[string]int{}}
}

func (a *appendLog) try(text string) {
	a.mu.Lock()
	a.attempted[text] = true
	a.mu.Unlock()
}

func (a *appendLog) ok(who string, k ack) {
	a.mu.Lock()
	a.acks = append(a.acks, k)
	a.byWriter[who]++
	if who == "git" && a.gitWon != nil {
		close(a.gitWon)
		a.gitWon = nil
	}
	a.mu.Unlock()
}

// yieldToGit waits, at most a second, for the git writer's next win while
// the other writers have more than ratio times as many acknowledged appends.
func (a *appendLog) yieldToGit(ratio int) {
	a.mu.Lock()
	behind := len(a.acks)-a.byWriter["git"] > ratio*(a.byWriter["git"]+1)
	if a.gitWon == nil {
		a.gitWon = make(chan struct{})
	}
	won := a.gitWon
	a.mu.Unlock()
	if behind {
		select {
		case <-won:
		case <-time.After(time.Second):
		}
	}
}

func (a *appendLog) acked(who string) int {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.byWriter[who]
}

func (a *appendLog) fail(kind string, badMsg string) {
	a.mu.Lock()
	a.failures[kind]++
	if badMsg != "" && len(a.bad) < 20 {
		a.bad = append(a.bad, badMsg)
	}
	a.mu.Unlock()
}

// runNote runs one `tally --json note text` process and records its outcome.
// An append that exits 0 is acknowledged with the seq and commit it printed.
// A concurrent append may only fail as retryable contention (exit 1,
// CONFLICT or REF-LOCKED); any other outcome is recorded as bad.
func runNote(t testing.TB, dir, actor, text string, log *appendLog) (acked bool) {
	log.try(text)
	cmd := tallyCmd(t, dir, actor, "--json", "note", text)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var out struct {
		OK    bool `json:"ok"`
		Entry struct {
			Seq uint64 `json:"seq"`
		} `json:"entry"`
		Commit string `json:"commit"`
		Error  struct {
			Code string `json:"code"`
		} `json:"error"`
	}
	jerr := json.Unmarshal(stdout.Bytes(), &out)
	code := 0
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		code = ee.ExitCode()
	} else if err != nil {
		log.fail("exec error", fmt.Sprintf("%s: %v", text, err))
		return false
	}
	switch {
	case code == 0 && jerr == nil && out.OK && len(out.Commit) == 40:
		log.ok("tally", ack{text, out.Entry.Seq, out.Commit})
		return true
	case code == 1 && (out.Error.Code == "CONFLICT" || out.Error.Code == "REF-LOCKED"):
		log.fail("exit 1 "+out.Error.Code, "")
	case transientMiss(out.Error.Code, stdout.String()):
		log.fail("exit 3 transient object miss (known bug)", "")
		log.knownBug(fmt.Sprintf("%s: %s", text, strings.TrimSpace(stdout.String())))
	default:
		log.fail(fmt.Sprintf("exit %d %s", code, out.Error.Code),
			fmt.Sprintf("%s: exit %d: %s %s", text, code, strings.TrimSpace(stdout.String()), strings.TrimSpace(stderr.String())))
	}
	return false
}

// gitWriter appends notes the way a foreign tool would: build a valid entry
// on the tip with ledger.Prepare, then move the ref with
// `git update-ref <ref> <new> <old>`. When git refuses (the ref moved, or is
// locked) it rebuilds on the new tip and tries again; only appends git
// accepted are acknowledged. Each logical append keeps its text across
// retries, so two landed attempts would show up as a duplicate.
func gitWriter(t testing.TB, dir string, stop <-chan struct{}, log *appendLog) {
	var l *ledger.Ledger
	defer func() {
		if l != nil {
			l.Close()
		}
	}()
	prepareErrors := 0
	for n, attempts := 0, 0; ; n++ {
		text := fmt.Sprintf("git-%d", n)
		log.try(text)
		for ; ; attempts++ {
			select {
			case <-stop:
				return
			default:
			}
			// A fresh ledger now and then: a long-lived one keeps a mapping of
			// every pack it has seen (see TestLongLivedReaderReleasesPacks)
			// and in stress mode would run out of mappings.
			if l == nil || attempts%200 == 0 {
				if l != nil {
					l.Close()
				}
				var err error
				if l, err = ledger.Open(dir, ledger.Options{}); err != nil {
					log.fail("git writer open", err.Error())
					return
				}
			}
			p, err := l.Prepare("git-writer", noteDraft(text))
			if err != nil {
				// Not an append, so not part of the invariant; but a read
				// failure here is tally's own, so the first ones are shown.
				log.fail("git writer prepare: "+errCode(err), "")
				if prepareErrors++; prepareErrors <= 5 {
					t.Logf("%s: Prepare: %v", text, err)
				}
				continue
			}
			old := p.Parent.String()
			// core.warnAmbiguousRefs=false: with it on, git update-ref first
			// looks its hex arguments up as ref names, which loads a snapshot
			// of packed-refs before it takes the ref lock, and git 2.39 then
			// apparently trusts that snapshot under the lock even when git
			// pack-refs has just replaced packed-refs (same size, same second):
			// it reads a stale old value and accepts a stale <old>. Measured
			// with git alone, no tally: 5 of 1,019 contended update-refs
			// beside pack-refs were accepted on an already replaced value,
			// 0 of 1,155 with this setting. That lost update is git's own and
			// no other writer can prevent it, so the test avoids it.
			if _, err := gitTry(dir, nil, "-c", "core.warnAmbiguousRefs=false", "update-ref", ledgerRef, p.Commit.String(), old); err != nil {
				log.fail("git update-ref refused", "")
				continue
			}
			log.ok("git", ack{text, p.Entry.Seq, p.Commit.String()})
			break
		}
	}
}

// refPacker rewrites the refs under the writers until stop: git pack-refs
// --all, every third time with --prune (which deletes the loose ledger ref
// under its lock), and every tenth time git gc --auto in the foreground.
func refPacker(dir string, stop <-chan struct{}, runs *atomic.Int64) {
	for i := 1; ; i++ {
		select {
		case <-stop:
			return
		default:
		}
		switch {
		case i%10 == 0:
			gitTry(dir, nil, "-c", "gc.autoDetach=false", "gc", "--auto", "--quiet")
		case i%3 == 0:
			gitTry(dir, nil, "pack-refs", "--all", "--prune")
		default:
			gitTry(dir, nil, "pack-refs", "--all")
		}
		runs.Add(1)
	}
}

// checkAppends checks the race's invariant on the final ledger, read with git:
// the chain is contiguous and linked, every acknowledged append is in it
// exactly once at the seq and commit it was acknowledged with, no other text
// appears more than once, and every entry is one somebody tried to append.
// It returns the chain and the appends that landed without an acknowledgement.
func checkAppends(t *testing.T, dir string, log *appendLog, extra map[string]bool) ([]chainEntry, []string) {
	t.Helper()
	entries := readChain(t, dir)
	checkChainLinks(t, entries)
	where := map[string][]uint64{}
	for _, e := range entries {
		if e.Kind == "note" {
			where[e.Text] = append(where[e.Text], e.Seq)
		}
	}
	acked := map[string]bool{}
	for _, a := range log.acks {
		acked[a.text] = true
		seqs := where[a.text]
		if len(seqs) != 1 {
			there := "nothing"
			if a.seq < uint64(len(entries)) {
				e := entries[a.seq]
				there = fmt.Sprintf("%q by %s (commit %s)", e.Text, e.Actor, e.Commit)
			}
			t.Errorf("acknowledged append %q (seq %d, commit %s) is in the chain %d times %v; the chain has %s at seq %d",
				a.text, a.seq, a.commit, len(seqs), seqs, there, a.seq)
			continue
		}
		if seqs[0] != a.seq || entries[a.seq].Commit != a.commit {
			t.Errorf("acknowledged append %q: acknowledged at seq %d commit %s, chain has it at seq %d commit %s",
				a.text, a.seq, a.commit, seqs[0], entries[seqs[0]].Commit)
		}
	}
	var unacked []string
	for text, seqs := range where {
		if !log.attempted[text] && !extra[text] {
			t.Errorf("note %q at %v was never appended by this test", text, seqs)
		}
		if len(seqs) > 1 {
			t.Errorf("note %q is in the chain %d times, at %v", text, len(seqs), seqs)
		}
		if !acked[text] && !extra[text] {
			unacked = append(unacked, fmt.Sprintf("%s@%v", text, seqs))
		}
	}
	if len(log.acks) != len(acked) {
		t.Errorf("%d acknowledgements for %d distinct texts", len(log.acks), len(acked))
	}
	sort.Strings(unacked)
	return entries, unacked
}

// checkRepo checks the repository after a race: git fsck --strict is clean,
// tally verify --full passes over the whole chain, tally's log agrees with
// git's history and no lock file remains under refs/.
func checkRepo(t *testing.T, dir string, entries []chainEntry) {
	t.Helper()
	waitMaintenance(t, dir)
	fsck(t, dir)
	j := verifyOK(t, dir, true)
	if j["entries"] != float64(len(entries)) || j["checked"] != float64(len(entries)) {
		t.Errorf("verify --full: %v, want %d entries", j, len(entries))
	}
	r := testrepo.Run(t, dir, "reader", nil, "--json", "log")
	logged, _ := r.JSON["entries"].([]any)
	if r.Code != 0 || len(logged) != len(entries) {
		t.Fatalf("tally log: exit %d, %d entries, want %d", r.Code, len(logged), len(entries))
	}
	for i, x := range logged {
		e := entries[len(entries)-1-i]
		m := x.(map[string]any)
		if m["commit"] != e.Commit || m["seq"] != float64(e.Seq) || m["hash"] != entryHashHex(e.Raw) {
			t.Fatalf("tally log line %d: %v, git has seq %d commit %s", i, m, e.Seq, e.Commit)
		}
	}
	if locks := lockFiles(t, dir); len(locks) > 0 {
		t.Errorf("lock files remain: %v", locks)
	}
}

func TestRaceAppends(t *testing.T) {
	t.Parallel()
	// perProc appends per worker, up to maxPerProc while the git writer has
	// fewer than minGit wins
	procs, perProc, maxPerProc, minGit, gitRatio := 8, 40, 80, 10, 20
	if stress() {
		perProc, maxPerProc, minGit = 3750, 3750, 100
	}
	dir := initRepo(t)
	log := newAppendLog()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var packRuns atomic.Int64
	bg.Add(2)
	go func() { defer bg.Done(); gitWriter(t, dir, stop, log) }()
	go func() { defer bg.Done(); refPacker(dir, stop, &packRuns) }()

	start := time.Now()
	var tallyRuns atomic.Int64
	var workers sync.WaitGroup
	for p := range procs {
		workers.Add(1)
		go func() {
			defer workers.Done()
			// Past its share, a worker keeps appending until the git writer
			// has won some races too (it is slower, and can starve on a
			// loaded machine), so that every run mixes both kinds.
			// Half the workers also yield to the git writer while it is more
			// than gitRatio appends behind (a git update-ref takes far longer
			// than a tally append, so it would rarely win a race against all
			// eight): it then races the other half.
			failed := 0 // in a row: a worker that cannot append at all gives up
			for i := 0; failed < 10 && (i < perProc || (log.acked("git") < minGit && i < maxPerProc)); i++ {
				if p%2 == 0 {
					log.yieldToGit(gitRatio)
				}
				if runNote(t, dir, fmt.Sprintf("agent-%d", p), fmt.Sprintf("p%d-%d", p, i), log) {
					failed = 0
				} else {
					failed++
				}
				tallyRuns.Add(1)
			}
			if failed >= 10 {
				log.fail("worker gave up", fmt.Sprintf("worker %d: 10 appends in a row failed", p))
			}
		}()
	}
	workers.Wait()
	close(stop)
	bg.Wait()
	elapsed := time.Since(start)

	t.Logf("%d tally appends acknowledged of %d, %d by git update-ref, in %v; %d pack-refs/gc runs; failures: %v",
		log.byWriter["tally"], tallyRuns.Load(), log.byWriter["git"], elapsed.Round(time.Millisecond), packRuns.Load(), log.failures)
	for _, b := range log.bad {
		t.Errorf("unexpected outcome: %s", b)
	}
	if log.byWriter["git"] < minGit {
		t.Errorf("the git writer won only %d races (want %d): the race did not mix writers", log.byWriter["git"], minGit)
	}
	entries, unacked := checkAppends(t, dir, log, nil)
	t.Logf("%d appends landed without an acknowledgement (allowed, each at most once): %v", len(unacked), unacked)
	checkRepo(t, dir, entries)
	log.failOnKnownBugs(t)
}

// The same race between goroutines of one process, each with its own
// ledger.Open (so the writer lock's flock is exercised within a process),
// beside the git CLI writer and the ref packer; half the goroutines yield to
// the git writer when it falls behind, as in TestRaceAppends.
func TestRaceAppendsInProcess(t *testing.T) {
	t.Parallel()
	workers, perWorker := 12, 20
	if stress() {
		workers, perWorker = 16, 500
	}
	dir := initRepo(t)
	log := newAppendLog()
	stop := make(chan struct{})
	var bg sync.WaitGroup
	var packRuns atomic.Int64
	bg.Add(2)
	go func() { defer bg.Done(); gitWriter(t, dir, stop, log) }()
	go func() { defer bg.Done(); refPacker(dir, stop, &packRuns) }()

	var wg sync.WaitGroup
	for w := range workers {
		l := openLedger(t, dir)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range perWorker {
				if w%2 == 0 {
					log.yieldToGit(20)
				}
				text := fmt.Sprintf("g%d-%d", w, i)
				log.try(text)
				ap, err := l.Append(fmt.Sprintf("goroutine-%d", w), noteDraft(text))
				if err != nil {
					if code := errCode(err); code == "CONFLICT" || code == "REF-LOCKED" {
						log.fail(code, "")
					} else if transientMiss(code, err.Error()) {
						log.fail(code+" transient object miss (known bug)", "")
						log.knownBug(fmt.Sprintf("%s: %v", text, err))
					} else {
						log.fail(code, fmt.Sprintf("%s: %v", text, err))
					}
					continue
				}
				log.ok("ledger", ack{text, ap.Entry.Seq, ap.Commit.String()})
			}
		}()
	}
	wg.Wait()
	close(stop)
	bg.Wait()
	t.Logf("%d in-process appends acknowledged of %d, %d by git update-ref; %d pack-refs/gc runs; failures: %v",
		log.byWriter["ledger"], workers*perWorker, log.byWriter["git"], packRuns.Load(), log.failures)
	for _, b := range log.bad {
		t.Errorf("unexpected outcome: %s", b)
	}
	entries, unacked := checkAppends(t, dir, log, nil)
	t.Logf("%d appends landed without an acknowledgement (allowed, each at most once): %v", len(unacked), unacked)
	checkRepo(t, dir, entries)
	log.failOnKnownBugs(t)
}

// A long-lived reader (the MCP server, a git writer like gitWriter above)
// sees packs come and go: every append writes one, and git repack (tally's
// own background repack, git gc) replaces them. The mappings of packs that
// are gone must be released, or the process runs into vm.max_map_count and
// every read fails ("mmap: cannot allocate memory"), as the git writer of a
// 30,000-append TestRaceAppends did after about 1,100 appends.
func TestLongLivedReaderReleasesPacks(t *testing.T) {
	t.Parallel()
	dir := initRepo(t)
	l := openLedger(t, dir)
	const rounds = 60
	for i := range rounds {
		if r := testrepo.Run(t, dir, "agent", nil, "note", fmt.Sprintf("n%d", i)); r.Code != 0 {
			t.Fatalf("tally note: exit %d %s", r.Code, r.Stderr)
		}
		if i%10 == 9 {
			gitIn(t, dir, nil, "repack", "-a", "-d", "-q")
		}
		snap, err := l.Head()
		if err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if e, _, _, err := snap.Entry(snap.Meta.Size - 1); err != nil || e.Seq != uint64(i+1) {
			t.Fatalf("round %d: reading the new entry: %v %v", i, e, err)
		}
	}
	maps, err := os.ReadFile("/proc/self/maps")
	if err != nil {
		t.Skip("no /proc/self/maps")
	}
	gd := gitDir(t, dir)
	live, gone := 0, 0
	for _, line := range strings.Split(string(maps), "\n") {
		if !strings.Contains(line, filepath.Join(gd, "objects", "pack")) {
			continue
		}
		if strings.HasSuffix(line, "(deleted)") {
			gone++
		} else {
			live++
		}
	}
	t.Logf("after %d appends and %d repacks: %d mappings of live packs, %d of deleted ones", rounds, rounds/10, live, gone)
	if gone > 4 {
		t.Fatalf("%d mappings of deleted packs remain", gone)
	}
}
