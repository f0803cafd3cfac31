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

// killedDone runs `tally done cell --epoch epoch` in dir under strace, which
// kills it (SIGKILL) as it opens the notes lock: after the done entry has
// landed, before the note is written.
func killedDone(t *testing.T, strace, dir, actor, cell, epoch string) {
	t.Helper()
	notesLock := filepath.Join(dir, ".git", "tally", "notes.lock")
	cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-P", notesLock,
		"-e", "trace=open,openat", "-e", "inject=open,openat:signal=KILL",
		testrepo.Tally(t), "-C", dir, "--json", "done", cell, "--epoch", epoch)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != -1 {
		t.Fatalf("done was not killed: %v %s", err, out)
	}
}

// A done killed between its append and its git note leaves the receipt
// without a note; `tally receipt repair` writes the missing line, once, and
// in remote mode the repaired note reaches the server's refs/notes/tally as
// done's notes do.
func TestReceiptRepairAfterKilledDone(t *testing.T) {
	strace := testrepo.Strace(t)
	t.Run("local", func(t *testing.T) {
		t.Parallel()
		r := newRepo(t)
		r.ok("A", "init")
		r.ok("A", "plan", r.file("plan.yaml", "wave: w\ncells:\n  - id: c\n"))
		epoch := fmt.Sprint(num(t, obj(t, r.ok("A", "claim", "w/c"), "lease"), "epoch"))
		commit := r.commit("work", "f.txt")
		killedDone(t, strace, r.dir, "A", "w/c", epoch)

		cell := r.ok("A", "show", "w/c")
		if c := obj(t, cell, "cell"); c["state"] != "done" {
			t.Fatalf("the killed done did not land: %v", cell)
		}
		if out, err := exec.Command("git", "-C", r.dir, "notes", "--ref=tally", "show", commit).CombinedOutput(); err == nil {
			t.Fatalf("the killed done wrote its note: %s", out)
		}
		r.refuse(2, "CELL-STATE", "A", "done", "w/c", "--epoch", epoch)

		res := r.ok("A", "receipt", "repair")
		written := arr(t, res, "written")
		if len(written) != 1 {
			t.Fatalf("repair wrote %v, want one line", written)
		}
		note := r.git("notes", "--ref=tally", "show", commit)
		if !strings.HasPrefix(note, "tally-receipt ") || !strings.Contains(note, "cell=w/c epoch="+epoch) {
			t.Fatalf("repaired note %q", note)
		}
		v := r.ok("A", "receipt", "verify", commit)
		if rc := obj(t, arr(t, v, "receipts")[0].(map[string]any), "checks"); rc["note"] != true {
			t.Fatalf("receipt verify after repair: %v", v)
		}
		if again := arr(t, r.ok("A", "receipt", "repair"), "written"); len(again) != 0 {
			t.Fatalf("a second repair wrote %v", again)
		}
		if got := r.git("notes", "--ref=tally", "show", commit); got != note {
			t.Fatalf("a second repair changed the note to %q", got)
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
		killedDone(t, strace, a, "A", "w/c000", epoch)
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
