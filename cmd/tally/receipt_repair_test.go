package main

import (
	"errors"
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// killedAt runs `tally -C dir --json args...` as actor under strace, which
// kills it (SIGKILL) at the first of the system calls syscalls that names
// path, without running that call (it fails with EIO as the signal comes).
func killedAt(t *testing.T, strace, path, syscalls, dir, actor string, args ...string) {
	t.Helper()
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", "/dev/null", "-P", path,
		"-e", "trace=" + syscalls, "-e", "inject=" + syscalls + ":error=EIO:signal=KILL",
		testrepo.Tally(t), "-C", dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("tally %v was not killed at %s of %s: %v %s", args, syscalls, path, err, out)
	}
}

// renames are the system calls that rename a file.
const renames = "rename,renameat,renameat2"

// A local done is one append, whose last step moves refs/notes/tally after
// the ledger's ref: a done killed between the two renames leaves the
// receipt without its note and the note's lockfile, and the next tally
// writer (here done again, refused CELL-STATE, since the cell is done)
// finishes the note's move from the writer lock's record before anything
// else; `tally receipt repair` then has nothing to write. In remote mode a
// done killed after its entry landed on the remote, as it creates the
// local note's lockfile, leaves the receipt without a note; receipt repair
// writes the missing line, once, and the repaired note reaches the
// server's refs/notes/tally as done's notes do.
func TestReceiptRepairAfterKilledDone(t *testing.T) {
	strace := testrepo.Strace(t)
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t)
		r.ok("A", "init")
		r.ok("A", "plan", r.file("plan.yaml", "wave: w\ncells:\n  - id: c\n"))
		epoch := fmt.Sprint(num(t, obj(t, r.ok("A", "claim", "w/c"), "lease"), "epoch"))
		commit := r.commit("work", "f.txt")
		notesLock := filepath.Join(r.dir, ".git", "refs", "notes", "tally.lock")
		killedAt(t, strace, notesLock, renames, r.dir, "A", "done", "w/c", "--epoch", epoch)

		cell := r.ok("A", "show", "w/c")
		if c := obj(t, cell, "cell"); c["state"] != "done" {
			t.Fatalf("the killed done did not land: %v", cell)
		}
		if out, err := exec.Command("git", "-C", r.dir, "notes", "--ref=tally", "show", commit).CombinedOutput(); err == nil {
			t.Fatalf("the killed done's note moved: %s", out)
		}
		r.refuse(2, "CELL-STATE", "A", "done", "w/c", "--epoch", epoch)
		note := r.git("notes", "--ref=tally", "show", commit)
		if !strings.HasPrefix(note, "tally-receipt ") || strings.Count(note, "cell=w/c epoch="+epoch) != 1 {
			t.Fatalf("note after the next writer %q", note)
		}
		if locks, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "*", "*.lock")); len(locks) > 0 {
			t.Fatalf("locks left after the next writer: %v", locks)
		}
		v := r.ok("A", "receipt", "verify", commit)
		if rc := obj(t, arr(t, v, "receipts")[0].(map[string]any), "checks"); rc["note"] != true {
			t.Fatalf("receipt verify after the next writer: %v", v)
		}
		if again := arr(t, r.ok("A", "receipt", "repair"), "written"); len(again) != 0 {
			t.Fatalf("repair wrote %v after the next writer finished the note", again)
		}
		if got := r.git("notes", "--ref=tally", "show", commit); got != note {
			t.Fatalf("repair changed the note to %q", got)
		}
		r.git("fsck", "--strict", "--no-progress")
	})
	t.Run("remote", func(t *testing.T) {
		t.Parallel()
		c := newNetCluster(t, gitserver.Kinds[0])
		c.seeded("w", 1)
		a := c.clone("a")
		c.ok(a, "A", nil, "remote", "set", "origin")
		epoch := netClaimEpoch(c, a, "A", "w/c000")
		commit := netWork(t, a, "f")
		if _, err := netGit(a, nil, "push", "-q", "origin", "HEAD:refs/heads/work"); err != nil {
			t.Fatal(err)
		}
		killedAt(t, strace, filepath.Join(a, ".git", "refs", "notes", "tally.lock"), "open,openat", a, "A", "done", "w/c000", "--epoch", epoch)
		if _, err := netGit(c.bare, nil, "notes", "--ref", "tally", "show", commit); err == nil {
			t.Fatal("the server has a note of the killed done")
		}
		res := c.ok(a, "A", nil, "receipt", "repair")
		np, _ := res["notes_push"].(map[string]any)
		if w, _ := res["written"].([]any); len(w) != 1 {
			t.Fatalf("repair wrote %v, want one line", res["written"])
		}
		if pushed, _ := np["pushed"].([]any); len(pushed) != 1 || pushed[0] != commit || np["error"] != nil {
			t.Fatalf("repair notes_push %v, want pushed [%s]", np, commit)
		}
		note, err := netGit(c.bare, nil, "notes", "--ref", "tally", "show", commit)
		if err != nil || !strings.Contains(note, "cell=w/c000 epoch="+epoch) {
			t.Fatalf("server note after repair: %q %v", note, err)
		}
		third := c.clone("third")
		c.ok(third, "C", nil, "remote", "set", "origin")
		if _, err := netGit(third, nil, "fetch", "-q", "origin"); err != nil {
			t.Fatal(err)
		}
		v := c.ok(third, "C", nil, "receipt", "verify", commit)
		rs, _ := v["receipts"].([]any)
		r0, _ := rs[0].(map[string]any)
		if checks, _ := r0["checks"].(map[string]any); checks["note"] != true {
			t.Fatalf("receipt verify in a third clone: %v", v)
		}
	})
}
