package ledger_test

// Crash tests: tally processes are killed with SIGKILL at random points of an
// append (and, with strace's fault injection, at one exact point), and the
// repository must stay consistent: the ref readable, git fsck --strict clean,
// tally verify --full passing, every acknowledged append in the chain, and no
// lockfile of ours that blocks the next append. Locks git holds are waited
// for and never removed.
//
// Stress mode (several hundred rounds):
//
//	TALLY_STRESS=1 go test ./ledger -run 'TestCrashAppends' -count=1 -timeout 60m -v

import (
	"bufio"
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

func TestCrashAppends(t *testing.T) {
	t.Parallel()
	rounds, procs := 40, 4
	if stress() {
		rounds = 400
	}
	dir := initRepo(t)
	gd := gitDir(t, dir)
	refLock := filepath.Join(gd, filepath.FromSlash(ledgerRef)+".lock")
	log := newAppendLog()
	var killed, killedAfterAck, orphans, landed, knownBug int
	for round := range rounds {
		type proc struct {
			cmd    *exec.Cmd
			text   string
			out    bytes.Buffer
			victim bool
		}
		ps := make([]*proc, procs)
		victims := 0
		for i := range ps {
			p := &proc{text: fmt.Sprintf("r%d-p%d", round, i), victim: rand.IntN(2) == 0}
			if i == procs-1 && victims == 0 {
				p.victim = true
			}
			if p.victim {
				victims++
			}
			p.cmd = tallyCmd(t, dir, fmt.Sprintf("agent-%d", i), "--json", "note", p.text)
			p.cmd.Stdout = &p.out
			ps[i] = p
		}
		var wg sync.WaitGroup
		var failures []string
		for _, p := range ps {
			log.try(p.text)
			if err := p.cmd.Start(); err != nil {
				t.Fatal(err)
			}
			if p.victim {
				// the delay randomizes the kill point; it does not wait for anything
				delay := time.Duration(rand.IntN(10_000)) * time.Microsecond
				wg.Add(1)
				go func() {
					defer wg.Done()
					time.Sleep(delay)
					p.cmd.Process.Signal(syscall.SIGKILL)
				}()
			}
		}
		for _, p := range ps {
			err := p.cmd.Wait()
			st := p.cmd.ProcessState
			if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
				killed++
				// tally prints its acknowledgement only once the append is
				// durable, so one printed before the kill counts too
				if a, ok := parseAck(p.text, p.out.Bytes()); ok {
					killedAfterAck++
					log.ok("tally", a)
				}
				continue
			}
			if st.ExitCode() != 0 {
				failures = append(failures, fmt.Sprintf("round %d: %s (victim %v) exited %d: %v %s",
					round, p.text, p.victim, st.ExitCode(), err, p.out.String()))
				continue
			}
			a, ok := parseAck(p.text, p.out.Bytes())
			if !ok {
				t.Fatalf("round %d: %s exited 0 with output %q", round, p.text, p.out.String())
			}
			log.ok("tally", a)
		}
		wg.Wait()

		if _, err := gitTry(dir, nil, "rev-parse", "--verify", ledgerRef); err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		lockBefore, lockErr := os.ReadFile(refLock)
		recBefore, _ := os.ReadFile(filepath.Join(gd, "tally", "writer.lock"))
		var lockAge time.Duration
		if fi, err := os.Stat(refLock); err == nil {
			lockAge = time.Since(fi.ModTime())
		}
		if lockErr == nil && len(lockBefore) == 0 && strings.TrimSpace(string(recBefore)) == "" { // a cleared record is spaces
			// The known bug TestOrphanLockSecondKill/rewriting-record-empty-young
			// shows: a writer killed while it waited for a young empty orphan
			// had emptied the record, and from then on every append fails
			// REF-LOCKED (those of this round too). Remove the orphan as a
			// user would, count it, and go on testing everything else.
			knownBug++
			t.Logf("round %d: known bug: an empty orphaned lock beside an empty writer record; removed by hand (failures this round: %v)",
				round, failures)
			failures = nil
			os.Remove(refLock)
		}
		for _, f := range failures {
			t.Error(f)
		}
		if _, err := os.Stat(refLock); err == nil {
			// a killed process left its lock: the next append must get through
			orphans++
			text := fmt.Sprintf("r%d-recover", round)
			log.try(text)
			r := testrepo.Run(t, dir, "recover", nil, "--json", "note", text)
			if r.Code != 0 {
				lock, _ := os.ReadFile(refLock)
				rec, _ := os.ReadFile(filepath.Join(gd, "tally", "writer.lock"))
				t.Fatalf("round %d: the append after a killed one failed: exit %d %s\n"+
					"before it: lock %q (age %v), writer record %q; after: lock %q, writer record %q",
					round, r.Code, r.Stdout, lockBefore, lockAge, recBefore, lock, rec)
			}
			a, _ := parseAck(text, []byte(r.Stdout))
			log.ok("tally", a)
			if _, err := os.Stat(refLock); err == nil {
				t.Fatalf("round %d: %s remains after a successful append", round, refLock)
			}
		}
		waitMaintenance(t, dir)
		fsck(t, dir)
		verifyOK(t, dir, true)
		_, unacked := checkAppends(t, dir, log, nil)
		landed = len(unacked)
		if t.Failed() {
			t.Fatalf("round %d failed", round)
		}
	}
	t.Logf("%d rounds: %d processes killed (%d after printing their acknowledgement), %d orphaned ref locks recovered, %d appends acknowledged, %d landed unacknowledged",
		rounds, killed, killedAfterAck, orphans, len(log.acks), landed)
	if locks := lockFiles(t, dir); len(locks) > 0 {
		t.Errorf("lock files remain: %v", locks)
	}
	if knownBug > 0 {
		t.Errorf("in %d of %d rounds a killed writer left an empty orphaned lock and an empty writer record, "+
			"which blocked every later append (see TestOrphanLockSecondKill/rewriting-record-empty-young)", knownBug, rounds)
	}
}

// parseAck reads the acknowledgement `tally --json note` printed.
func parseAck(text string, out []byte) (ack, bool) {
	var r struct {
		OK    bool `json:"ok"`
		Entry struct {
			Seq uint64 `json:"seq"`
		} `json:"entry"`
		Commit string `json:"commit"`
	}
	if err := json.Unmarshal(out, &r); err != nil || !r.OK || len(r.Commit) != 40 {
		return ack{}, false
	}
	return ack{text, r.Entry.Seq, r.Commit}, true
}

// orphanFixture returns a ledger repository and what a tally process killed
// after creating the ref's lockfile leaves behind: its writer record
// "refs/tally/ledger <new id>\n" in <commondir>/tally/writer.lock (new id: a complete entry on
// the tip whose objects were written, as an append writes them before it
// takes the ref lock) and the paths of the record and the lock.
func orphanFixture(t *testing.T) (dir, newID, record, lock string) {
	t.Helper()
	dir = initRepo(t)
	if r := testrepo.Run(t, dir, "agent", nil, "note", "before"); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	l := openLedger(t, dir)
	p, err := l.Prepare("killed", noteDraft("never acknowledged"))
	if err != nil {
		t.Fatal(err)
	}
	gd := gitDir(t, dir)
	record = filepath.Join(gd, "tally", "writer.lock")
	lock = filepath.Join(gd, filepath.FromSlash(ledgerRef)+".lock")
	newID = p.Commit.String()
	if err := os.WriteFile(record, []byte(ledgerRef+" "+newID+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir, newID, record, lock
}

// appendAfter runs `tally note text` and requires it to succeed, to land on
// top of the previous tip and to leave no lock behind.
func appendAfter(t *testing.T, dir, lock, text string) {
	t.Helper()
	before := tip(t, dir)
	r := testrepo.Run(t, dir, "next", nil, "--json", "note", text)
	if r.Code != 0 {
		content, _ := os.ReadFile(lock)
		t.Fatalf("append after a killed writer: exit %d %s%s (lock now %q)", r.Code, r.Stdout, r.Stderr, content)
	}
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s remains after the append (%v)", lock, err)
	}
	entries := readChain(t, dir)
	last := entries[len(entries)-1]
	if last.Text != text || entries[len(entries)-2].Commit != before {
		t.Fatalf("tip is %q at %s, want %q on top of %s", last.Text, last.Commit, text, before)
	}
	for _, e := range entries {
		if e.Text == "never acknowledged" {
			t.Fatalf("the killed writer's entry landed at seq %d", e.Seq)
		}
	}
	verifyOK(t, dir, true)
}

// A lock a killed tally left, holding all or part of what its record says
// (or nothing, once older than a live git keeps a lock empty), is removed by
// the next append, which succeeds.
func TestOrphanLockRecovered(t *testing.T) {
	t.Parallel()
	for name, content := range map[string]func(id string) string{
		"full":    func(id string) string { return id + "\n" },
		"no-eol":  func(id string) string { return id },
		"partial": func(id string) string { return id[:17] },
		"empty":   func(string) string { return "" },
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, id, _, lock := orphanFixture(t)
			if err := os.WriteFile(lock, []byte(content(id)), 0o644); err != nil {
				t.Fatal(err)
			}
			if content(id) == "" { // created by the killed process a while ago
				old := time.Now().Add(-5 * time.Second)
				if err := os.Chtimes(lock, old, old); err != nil {
					t.Fatal(err)
				}
			}
			appendAfter(t, dir, lock, "after-crash")
			appendAfter(t, dir, lock, "and-again")
		})
	}
}

// A lock whose content is not the killed writer's record belongs to git: the
// append waits for it, fails with REF-LOCKED (exit 1) when it persists, and
// leaves it in place.
func TestForeignLockWaitedFor(t *testing.T) {
	t.Parallel()
	for name, record := range map[string]func(id string) string{
		"no-record":    func(string) string { return "" },
		"stale-record": func(id string) string { return ledgerRef + " " + id + "\n" }, // a tally killed before it took the lock
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, id, recPath, lock := orphanFixture(t)
			if err := os.WriteFile(recPath, []byte(record(id)), 0o644); err != nil {
				t.Fatal(err)
			}
			foreign := tip(t, dir) + "\n" // git writes the new value into its lock
			if err := os.WriteFile(lock, []byte(foreign), 0o644); err != nil {
				t.Fatal(err)
			}
			before := tip(t, dir)
			start := time.Now()
			r := testrepo.Run(t, dir, "waiter", nil, "--json", "note", "blocked")
			waited := time.Since(start)
			if r.Code != 1 || r.ErrorCode() != "REF-LOCKED" || r.JSON["error"].(map[string]any)["retryable"] != true {
				t.Fatalf("append beside a foreign lock: exit %d %s", r.Code, r.Stdout)
			}
			if waited < time.Second {
				t.Errorf("gave up after %v: a foreign lock is waited for", waited)
			}
			if b, err := os.ReadFile(lock); err != nil || string(b) != foreign {
				t.Fatalf("foreign lock changed or removed: %q %v", b, err)
			}
			if tip(t, dir) != before {
				t.Fatal("the ref moved while git held its lock")
			}
			os.Remove(lock) // git is done
			appendAfter(t, dir, lock, "unblocked")
		})
	}
}

// The same with a lock a real git process holds: `git update-ref --stdin` in
// a prepared transaction keeps refs/tally/ledger.lock until it commits.
func TestGitHeldLockWaitedFor(t *testing.T) {
	t.Parallel()
	dir, id, _, lock := orphanFixture(t) // also a stale record from a killed tally
	old := tip(t, dir)
	// git will move the ref to a complete entry on the tip
	l := openLedger(t, dir)
	p, err := l.Prepare("git", noteDraft("by git"))
	if err != nil {
		t.Fatal(err)
	}
	if p.Commit.String() == id {
		t.Fatal("two prepared entries are the same commit")
	}
	cmd := exec.Command("git", "update-ref", "--stdin")
	cmd.Dir, cmd.Env = dir, testrepo.Env()
	stdin, _ := cmd.StdinPipe()
	stdout, _ := cmd.StdoutPipe()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	fmt.Fprintf(stdin, "start\nupdate %s %s %s\nprepare\n", ledgerRef, p.Commit, old)
	lines := bufio.NewReader(stdout)
	for {
		line, err := lines.ReadString('\n')
		if err != nil {
			t.Fatalf("git update-ref --stdin: %v %s", err, stderr.String())
		}
		if strings.TrimSpace(line) == "prepare: ok" {
			break
		}
	}
	held, err := os.ReadFile(lock)
	if err != nil {
		t.Fatalf("git holds no %s after prepare: %v", lock, err)
	}

	r := testrepo.Run(t, dir, "waiter", nil, "--json", "note", "blocked")
	if r.Code != 1 || r.ErrorCode() != "REF-LOCKED" {
		t.Fatalf("append while git holds the lock: exit %d %s", r.Code, r.Stdout)
	}
	if b, err := os.ReadFile(lock); err != nil || !bytes.Equal(b, held) {
		t.Fatalf("git's lock changed or removed: %q %v", b, err)
	}
	fmt.Fprintf(stdin, "commit\n")
	stdin.Close()
	io.Copy(io.Discard, lines)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("git update-ref --stdin commit: %v %s", err, stderr.String())
	}
	if tip(t, dir) != p.Commit.String() {
		t.Fatalf("git's transaction did not land")
	}
	appendAfter(t, dir, lock, "after-git")
}

// A second tally process is killed while it recovers from the first one's
// orphaned lock — strace injects SIGKILL at exact points: when it writes its
// writer record (after truncating it), or when it calls unlinkat on the
// orphan. Whatever it leaves, the next append must recognize the orphan and
// succeed; an orphan no record describes would make every later append take
// it for git's lock and fail REF-LOCKED until someone removes it by hand.
// (TestCrashAppends hit this at random in stress mode: a round ended with an
// orphaned empty lock and an empty record.)
func TestOrphanLockSecondKill(t *testing.T) {
	t.Parallel()
	strace, err := exec.LookPath("strace")
	if err != nil {
		t.Skip("strace not installed")
	}
	rewriting := func(record, _ string) []string {
		return []string{"-P", record, "-e", "trace=pwrite64", "-e", "inject=pwrite64:signal=KILL"}
	}
	removing := func(_, lock string) []string {
		return []string{"-P", lock, "-e", "trace=unlink,unlinkat", "-e", "inject=unlink,unlinkat:signal=KILL"}
	}
	for name, c := range map[string]struct {
		orphan func(id string) string // the first writer's lock
		kill   func(record, lock string) []string
	}{
		"rewriting-record":             {func(id string) string { return id + "\n" }, rewriting},
		"removing-orphan":              {func(id string) string { return id + "\n" }, removing},
		"rewriting-record-empty-young": {func(string) string { return "" }, rewriting},
	} {
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			dir, id, record, lock := orphanFixture(t)
			// the first writer was killed holding the lock (an empty one
			// just now: created, nothing written yet)
			if err := os.WriteFile(lock, []byte(c.orphan(id)), 0o644); err != nil {
				t.Fatal(err)
			}
			kill := c.kill
			args := append([]string{"-f", "-qq", "-o", "/dev/null"}, kill(record, lock)...)
			cmd := exec.Command(strace, append(args, testrepo.Tally(t), "-C", dir, "note", "killed-while-recovering")...)
			cmd.Env = testrepo.Env("TALLY_ACTOR=second")
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("the second writer was not killed: %v %s", err, out)
			}
			b, _ := os.ReadFile(lock)
			rec, _ := os.ReadFile(record)
			t.Logf("after the second kill: lock %q, writer record %q", b, rec)
			appendAfter(t, dir, lock, "third")
		})
	}
}
