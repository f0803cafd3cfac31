package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// newPacks returns the packs of the repository that are not in before.
func (r *repo) newPacks(before []string) []string {
	r.t.Helper()
	now, _ := filepath.Glob(filepath.Join(r.dir, ".git", "objects", "pack", "*.pack"))
	var added []string
	for _, p := range now {
		if !slices.Contains(before, p) {
			added = append(added, p)
		}
	}
	return added
}

// straceCall matches a completed system call of an strace -f log (no
// "<unfinished ...>"): its name and its arguments.
var straceCall = regexp.MustCompile(`^\d+ +(\w+)\((.*)\) += +(-?\d+)`)

// syscallCounts runs `tally -C dir --json args...` as actor under strace
// and returns how many fsyncs, renames and exclusive file creations
// (O_CREAT|O_EXCL) it made, every thread and child included.
func syscallCounts(t *testing.T, strace, dir, actor string, args ...string) (fsyncs, renames, creates int) {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", trace, "-e", "trace=fsync,fdatasync,rename,renameat,renameat2,open,openat",
		testrepo.Tally(t), "-C", dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tally %v: %v %s", args, err, out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range straceJoin(string(b)) {
		m := straceCall.FindStringSubmatch(l)
		if m == nil || m[3] == "-1" {
			continue
		}
		switch m[1] {
		case "fsync", "fdatasync":
			fsyncs++
		case "rename", "renameat", "renameat2":
			renames++
		case "open", "openat":
			if strings.Contains(m[2], "O_CREAT") && strings.Contains(m[2], "O_EXCL") {
				creates++
			}
		}
	}
	return fsyncs, renames, creates
}

// A local done is one append: the receipt entry and its note's commit go
// into one pack, and both refs/tally/ledger and refs/notes/tally reach it,
// with one round of fsyncs: the pack, its index, the two ref locks, the
// pack directory, then each ref's directory after its rename (7, where the
// receipt's append and the note's own made 10), four files created (the
// pack, born as its .keep, its index and the two locks: a done that finds
// the writer lock free makes them under it, as nobody waits; 6 before),
// and three renames (the index, the two refs). A
// second receipt of the same commit and text added with git notes are
// kept in the note, which the receipt's check still finds.
func TestDoneOneAppend(t *testing.T) {
	strace := testrepo.Strace(t)
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.yaml", "wave: w\ncells:\n  - id: a\n  - id: b\n"))
	r.ok("A", "claim", "w/a")
	r.ok("A", "claim", "w/b")
	commit := r.commit("work", "f.txt")
	r.git("notes", "--ref=tally", "add", "-m", "reviewed by a human", commit)
	for _, cell := range []string{"w/a", "w/b"} {
		before, _ := filepath.Glob(filepath.Join(r.dir, ".git", "objects", "pack", "*.pack"))
		fsyncs, renames, creates := syscallCounts(t, strace, r.dir, "A", "done", cell, "--epoch", "1")
		if fsyncs != 7 || renames != 3 || creates != 4 {
			t.Errorf("done %s: %d fsyncs, %d renames, %d files created; want 7, 3 (the index, two refs) and 4", cell, fsyncs, renames, creates)
		}
		added := r.newPacks(before)
		if len(added) != 1 {
			t.Fatalf("done %s wrote %d packs %v, want one", cell, len(added), added)
		}
		in := r.git("verify-pack", "-v", strings.TrimSuffix(added[0], ".pack")+".idx")
		for _, ref := range []string{"refs/tally/ledger", "refs/notes/tally"} {
			if id := r.git("rev-parse", ref); !strings.Contains(in, id+" commit") {
				t.Errorf("done %s: the commit of %s (%s) is not in its pack:\n%s", cell, ref, id, in)
			}
		}
	}
	note := r.git("notes", "--ref=tally", "show", commit)
	lines := strings.Split(note, "\n")
	if len(lines) != 3 || lines[0] != "reviewed by a human" || !strings.Contains(lines[1], "cell=w/a epoch=1") || !strings.Contains(lines[2], "cell=w/b epoch=1") {
		t.Fatalf("note after two dones: %q", note)
	}
	for _, rc := range arr(t, r.ok("A", "receipt", "verify", commit), "receipts") {
		if checks := obj(t, rc.(map[string]any), "checks"); checks["note"] != true {
			t.Errorf("receipt verify: %v", rc)
		}
	}
	r.git("fsck", "--strict", "--no-progress")
	r.ok("A", "verify", "--full")
}

// An append that waits for the writer lock creates no file while it holds
// it: its pack, the index and the ref locks (the ledger's, and the notes
// ref's for a done) are spares made before it waited, so the writers
// queued behind it do not wait for ext4 allocating inodes. A note makes
// them before it asks for the lock; a done, which may hand its entries to
// the lock's holder instead (FORMAT.md §9, "Group commit"), makes them
// once it knows it will wait: when the lock is held by a writer that does
// not take intents (here the test itself). A done that finds the lock free
// makes its files under it, as nobody waits. Every spare is used or
// removed: none is left in objects/pack after a done, a note, or a done
// the rules refuse.
func TestAppendCreatesNoFileUnderWriterLock(t *testing.T) {
	strace := testrepo.Strace(t)
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.yaml", "wave: w\ncells:\n  - id: a\n  - id: b\n"))
	r.ok("A", "claim", "w/a")
	r.ok("A", "claim", "w/b")
	r.commit("work", "f.txt")
	lockPath := filepath.Join(r.dir, ".git", "tally", "writer.lock")
	spares := filepath.Join(r.dir, ".git", "objects", "pack", "tally-tmp-spare-*")
	lockCall := regexp.MustCompile(`^(\d+) +flock\(\d+<([^>]*)>, (LOCK_\w+)`)
	// run runs tally args under strace (with held, while this test holds
	// the writer lock, until tally has made its spares) and returns the
	// files it created under the lock and how many spares it linked as ref
	// locks there.
	run := func(wantCode int, held bool, args ...string) (created []string, links int) {
		t.Helper()
		trace := filepath.Join(t.TempDir(), "trace")
		cmd := exec.Command(strace, append([]string{"-f", "-qq", "-y", "-o", trace, "-e", "trace=flock,open,openat,link,linkat",
			testrepo.Tally(t), "-C", r.dir, "--json"}, args...)...)
		cmd.Env = testrepo.Env("TALLY_ACTOR=A")
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		var wl *gitstore.WriterLock
		if held {
			var err error
			if wl, err = gitstore.AcquireWriterLock(lockPath, time.Second); err != nil {
				t.Fatal(err)
			}
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		if held {
			for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
				if made, _ := filepath.Glob(spares); len(made) > 0 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("tally %v made no spares while the lock was held", args)
				}
			}
			wl.Release()
		}
		err := cmd.Wait()
		if code := cmd.ProcessState.ExitCode(); code != wantCode {
			t.Fatalf("tally %v: exit %d, want %d: %v %s", args, code, wantCode, err, out.String())
		}
		b, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		locked, took := false, 0
		for _, l := range straceJoin(string(b)) {
			if m := lockCall.FindStringSubmatch(l); m != nil && strings.HasSuffix(m[2], "/tally/writer.lock") && !strings.Contains(l, "= -1") {
				locked = m[3] == "LOCK_EX"
				if locked {
					took++
				}
				continue
			}
			m := straceCall.FindStringSubmatch(l)
			if m == nil || m[3] == "-1" || !locked {
				continue
			}
			if strings.Contains(m[2], "O_CREAT") {
				created = append(created, l)
			}
			if strings.HasPrefix(m[1], "link") {
				links++
			}
		}
		if took == 0 {
			t.Fatalf("tally %v: no writer lock taken in the trace", args)
		}
		if left, _ := filepath.Glob(filepath.Join(r.dir, ".git", "objects", "pack", "tally-tmp-*")); len(left) > 0 {
			t.Errorf("tally %v left %v", args, left)
		}
		return created, links
	}
	for _, c := range []struct {
		held bool
		args []string
	}{{false, []string{"note", "after"}}, {true, []string{"done", "w/a", "--epoch", "1"}}} {
		if created, links := run(0, c.held, c.args...); len(created) > 0 || links == 0 {
			t.Errorf("tally %v: %d spares linked as ref locks under the writer lock, and created:\n%s", c.args, links, strings.Join(created, "\n"))
		}
	}
	if created, _ := run(0, false, "done", "w/b", "--epoch", "1"); len(created) != 4 {
		t.Errorf("a done that found the writer lock free created %d files under it; want its 4 files, made there", len(created))
	}
	if created, _ := run(2, false, "done", "w/a", "--epoch", "1"); len(created) > 0 { // the cell is done: refused
		t.Errorf("a refused done created files under the writer lock:\n%s", strings.Join(created, "\n"))
	}
	r.git("fsck", "--strict", "--no-progress")
	r.ok("A", "verify", "--full")
}

// A done killed at each step of its one append leaves no receipt and no
// note (before the ledger's ref is renamed), or the receipt, and then only
// a kill between the two renames leaves it without its note, which the
// next writer (a plain note here) finishes from the writer lock's record.
// A note never names a receipt the ledger lacks, no lockfile outlives the
// next writer, and the repository stays clean.
func TestDoneKilledAtEachStep(t *testing.T) {
	strace := testrepo.Strace(t)
	steps := []struct {
		name, path, syscalls string
		landed               bool
	}{
		{"creating the ledger's lock", ".git/refs/tally/ledger.lock", "open,openat,link,linkat", false},
		{"creating the notes ref's lock", ".git/refs/notes/tally.lock", "open,openat,link,linkat", false},
		{"renaming the ledger's ref", ".git/refs/tally/ledger.lock", renames, false},
		{"renaming the notes ref", ".git/refs/notes/tally.lock", renames, true},
	}
	for _, step := range steps {
		t.Run(strings.ReplaceAll(step.name, " ", "_"), func(t *testing.T) {
			t.Parallel()
			r := newRepo(t)
			r.ok("A", "init")
			r.ok("A", "plan", r.file("plan.yaml", "wave: w\ncells:\n  - id: c\n"))
			r.ok("A", "claim", "w/c")
			commit := r.commit("work", "f.txt")
			tip := r.tip()
			killedAt(t, strace, filepath.Join(r.dir, step.path), step.syscalls, r.dir, "A", "done", "w/c", "--epoch", "1")

			_, noteErr := netGit(r.dir, nil, "notes", "--ref=tally", "show", commit)
			if noteErr == nil {
				t.Fatalf("killed %s: the note's ref moved", step.name)
			}
			state := obj(t, r.ok("A", "show", "w/c"), "cell")["state"]
			if !step.landed {
				if state != "claimed" || r.tip() != tip {
					t.Fatalf("killed %s: the cell is %v, the ledger at %s (was %s): the receipt landed", step.name, state, r.tip(), tip)
				}
				r.ok("A", "done", "w/c", "--epoch", "1") // the lease is still live: done again finishes it
			} else {
				if state != "done" {
					t.Fatalf("killed %s: the cell is %v, want done", step.name, state)
				}
				r.ok("A", "note", "the next writer")
			}
			note := r.git("notes", "--ref=tally", "show", commit)
			if strings.Count(note, "cell=w/c epoch=1") != 1 {
				t.Fatalf("killed %s: note after the next writer %q", step.name, note)
			}
			if written := arr(t, r.ok("A", "receipt", "repair"), "written"); len(written) != 0 {
				t.Fatalf("killed %s: repair wrote %v after the next writer", step.name, written)
			}
			if locks, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "*", "*.lock")); len(locks) > 0 {
				t.Errorf("killed %s: locks left: %v", step.name, locks)
			}
			r.git("fsck", "--strict", "--no-progress")
			r.ok("A", "verify", "--full")
		})
	}
}
