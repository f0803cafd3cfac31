package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// killedRun starts `tally -C dir --json args...` as actor and sends it
// SIGKILL after a random delay up to max (the delay picks the kill point;
// it waits for nothing). It returns the decoded acknowledgement when the
// process exited 0 before the kill (nil otherwise), and whether it was
// killed.
func killedRun(t *testing.T, dir, actor string, max time.Duration, args ...string) (map[string]any, bool) {
	t.Helper()
	cmd := exec.Command(testrepo.Tally(t), append([]string{"-C", dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	var out, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	timer := time.AfterFunc(time.Duration(rand.Int64N(int64(max))), func() { cmd.Process.Signal(syscall.SIGKILL) })
	err := cmd.Wait()
	timer.Stop()
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return nil, true
	}
	if err != nil {
		t.Fatalf("tally %v: %v %s %s", args, err, out.String(), stderr.String())
	}
	var ack map[string]any
	if json.Unmarshal(out.Bytes(), &ack) != nil || ack["ok"] != true {
		t.Fatalf("tally %v exited 0 with %q", args, out.String())
	}
	return ack, false
}

// TestCrashDoneAndCheckpointSave: `done` and `checkpoint --save` are killed
// with SIGKILL at random points, 50 rounds each (200 with TALLY_STRESS=1).
// Afterwards every acknowledged done and save is in the repository, every
// receipt has its note or gets it from `tally receipt repair`, no lock is
// left under refs/, `git fetch 'refs/tally/*:refs/tally/*'` from the
// repository works, git fsck --strict is clean and verify --full passes.
func TestCrashDoneAndCheckpointSave(t *testing.T) {
	t.Parallel()
	rounds := 50
	if os.Getenv("TALLY_STRESS") == "1" {
		rounds = 200
	}
	r := newRepo(t)
	r.ok("A", "init")
	var plan strings.Builder
	plan.WriteString("wave: w\ncells:\n")
	for i := range rounds {
		fmt.Fprintf(&plan, "  - id: c%03d\n", i)
	}
	r.ok("A", "plan", r.file("plan.yaml", plan.String()))

	// The kill points spread over the whole run of each command: up to
	// 1.5 times what an unkilled one took.
	span := func(args ...string) time.Duration {
		t0 := time.Now()
		r.ok("A", args...)
		return 3 * time.Since(t0) / 2
	}
	saveSpan := span("checkpoint", "--save")

	commits := make([]string, rounds)
	epochs := make([]string, rounds)
	savedSizes := map[int64]bool{}
	var killedDones, landedKilled, killedSaves int
	var doneSpan time.Duration
	for i := range rounds {
		cell := fmt.Sprintf("w/c%03d", i)
		epochs[i] = fmt.Sprint(num(t, obj(t, r.ok("A", "claim", cell), "lease"), "epoch"))
		commits[i] = r.commit(fmt.Sprintf("work %d", i), fmt.Sprintf("f%03d.txt", i))
		if i == 0 {
			doneSpan = span("done", cell, "--epoch", epochs[i])
		} else if _, killed := killedRun(t, r.dir, "A", doneSpan, "done", cell, "--epoch", epochs[i]); killed {
			killedDones++
			// Landed or not: a killed done either appended its receipt or
			// left the lease live, and then done again must finish it.
			if obj(t, r.ok("A", "show", cell), "cell")["state"] == "done" {
				landedKilled++
			} else {
				r.ok("A", "done", cell, "--epoch", epochs[i])
			}
		}
		r.ok("A", "note", fmt.Sprintf("round %d", i)) // the next save is of a new size
		ack, killed := killedRun(t, r.dir, "A", saveSpan, "checkpoint", "--save")
		if killed {
			killedSaves++
		} else {
			savedSizes[num(t, ack, "size")] = true
		}
	}
	final := r.ok("A", "checkpoint", "--save")
	savedSizes[num(t, final, "size")] = true
	// An empty lockfile counts as a killed save's only once it is older than
	// git keeps one empty (a second): a save killed in the last rounds may
	// leave one the final save could not yet tell from git's. Age such locks
	// past that, and one more save of a new size must remove them.
	if young, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "tally", "checkpoints", "*.lock")); len(young) > 0 {
		for _, l := range young {
			if fi, err := os.Stat(l); err == nil && fi.Size() == 0 {
				past := time.Now().Add(-2 * time.Second)
				os.Chtimes(l, past, past)
			}
		}
		r.ok("A", "note", "after the crashes")
		savedSizes[num(t, r.ok("A", "checkpoint", "--save"), "size")] = true
	}
	missing := 0
	for i := range rounds {
		if _, err := netGit(r.dir, nil, "notes", "--ref=tally", "show", commits[i]); err != nil {
			missing++
		}
	}
	t.Logf("%d rounds: %d dones killed (%d of them had landed, %d receipts left without a note), %d saves killed, %d saves acknowledged",
		rounds, killedDones, landedKilled, missing, killedSaves, len(savedSizes))
	repaired := arr(t, r.ok("A", "receipt", "repair"), "written")
	if len(repaired) != missing {
		t.Errorf("%d receipts had no note; receipt repair wrote %d lines", missing, len(repaired))
	}
	for i := range rounds {
		cell := fmt.Sprintf("w/c%03d", i)
		c := obj(t, r.ok("A", "show", cell), "cell")
		if c["state"] != "done" {
			t.Errorf("%s is %v after the crashes, want done", cell, c["state"])
		}
		note, err := netGit(r.dir, nil, "notes", "--ref=tally", "show", commits[i])
		if err != nil || strings.Count(note, "cell="+cell+" epoch="+epochs[i]) != 1 {
			t.Errorf("note of %s (%s) after repair: %q %v", commits[i], cell, note, err)
		}
	}
	if again := arr(t, r.ok("A", "receipt", "repair"), "written"); len(again) != 0 {
		t.Errorf("a second repair wrote %v", again)
	}
	locks, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "tally", "*", "*.lock"))
	if more, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "*", "*.lock")); len(more) > 0 {
		locks = append(locks, more...)
	}
	if len(locks) > 0 {
		t.Errorf("locks left under refs/: %v", locks)
	}
	for size := range savedSizes {
		if _, err := netGit(r.dir, nil, "cat-file", "-e", fmt.Sprintf("refs/tally/checkpoints/%d", size)); err != nil {
			t.Errorf("acknowledged checkpoint of size %d is not stored: %v", size, err)
		}
	}
	dst := filepath.Join(t.TempDir(), "clone")
	testrepo.Git(t, filepath.Dir(dst), "clone", "-q", r.dir, dst)
	testrepo.Git(t, dst, "fetch", "-q", "origin", "refs/tally/*:refs/tally/*", "refs/notes/tally:refs/notes/tally")
	r.git("fsck", "--strict", "--no-progress")
	r.ok("A", "verify", "--full")
}
