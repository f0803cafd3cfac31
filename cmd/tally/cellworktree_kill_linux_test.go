package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tally-dev/tally/internal/testrepo"
)

// killTallyAt runs tally in dir and kills it with SIGKILL after delay (if it
// has not exited by then). Only tally is killed, as a harness kills its
// tool: the git processes it started finish on their own, and since this
// process is their subreaper, reapOrphans waits for them before the test
// looks. It returns the result when tally exited by itself, else nil.
func killTallyAt(bin, dir, actor string, delay time.Duration, args ...string) *testrepo.Result {
	cmd := exec.Command(bin, append([]string{"-C", dir}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	if err := cmd.Start(); err != nil {
		return &testrepo.Result{Err: err}
	}
	timer := time.AfterFunc(delay, func() { cmd.Process.Signal(syscall.SIGKILL) })
	err := cmd.Wait()
	timer.Stop()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return nil
		}
	}
	r := &testrepo.Result{Args: args, Stdout: stdout.String()}
	if ee != nil {
		r.Code = ee.ExitCode()
	}
	if err := json.Unmarshal(stdout.Bytes(), &r.JSON); err != nil {
		r.Err = err
	}
	return r
}

// reapOrphans waits for every process orphaned to this one (a killed
// tally's git children), so none still writes when the test looks.
func reapOrphans() {
	for {
		var ws unix.WaitStatus
		if _, err := unix.Wait4(-1, &ws, 0, nil); errors.Is(err, unix.ECHILD) {
			return
		} else if err != nil && !errors.Is(err, unix.EINTR) {
			return
		}
	}
}

// claim --worktree and done --merge are killed with SIGKILL at random
// points, round after round. Nothing acknowledged is lost (an acknowledged
// claim's worktree is there and bound; an acknowledged done's work is on
// main with its receipt), no orphan survives prune (every linked worktree
// is bound, every tally/* branch has its worktree, no intent is left), and
// uncommitted work planted in worktrees whose leases ended is never deleted.
func TestCellWorktreeKills(t *testing.T) {
	if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
		t.Skipf("cannot become a subreaper: %v", err)
	}
	defer unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 0, 0, 0, 0)
	const rounds, cells, actor = 40, 50, "agent"
	dir := testrepo.New(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	var ids []string
	for i := 0; i < cells; i++ {
		ids = append(ids, fmt.Sprintf(`{"id":"c%02d"}`, i))
	}
	os.WriteFile(plan, []byte(`{"wave":"w","cells":[`+strings.Join(ids, ",")+`]}`), 0o644)
	for _, args := range [][]string{{"init"}, {"plan", plan}} {
		if r := testrepo.Run(t, dir, "planner", nil, args...); r.Code != 0 {
			t.Fatal(r)
		}
	}
	bin := testrepo.Tally(t)
	seed := time.Now().UnixNano()
	t.Logf("seed %d", seed)
	rng := rand.New(rand.NewPCG(uint64(seed), 31))
	// A kill point is uniform over a run's usual length, measured as it
	// goes; the first round is not killed, to measure it.
	claimTook, doneTook := time.Minute, time.Minute
	point := func(took time.Duration) time.Duration { return time.Duration(rng.Int64N(int64(took) * 5 / 4)) }
	// What the kills hit: worktrees made but never bound, and work landed
	// on main before its receipt.
	var killedClaims, killedDones, abandoned, landedFirst int
	acked := map[string]bool{}
	var planted []string
	for round := 0; round < rounds; round++ {
		start := time.Now()
		r := killTallyAt(bin, dir, actor, point(claimTook), "--json", "claim", "--next", "--worktree")
		reapOrphans()
		ackedPath := ""
		if r == nil {
			killedClaims++
		} else {
			claimTook = time.Since(start)
			if r.Code != 0 {
				t.Fatalf("round %d: claim: %v", round, r.JSON)
			}
			ackedPath = r.JSON["worktree"].(map[string]any)["path"].(string)
		}
		abandoned += pruneAndCheck(t, dir, planted)
		live := liveWorktree(t, dir, actor)
		if ackedPath != "" && (live == nil || live["path"] != ackedPath) {
			t.Fatalf("round %d: the acknowledged claim's worktree %s is not live after prune: %v", round, ackedPath, live)
		}
		if live == nil {
			// A claim killed before its worktree was bound: its lease goes
			// back, and a claim that runs to the end gives this round's
			// done a worktree.
			releaseHeld(t, dir, actor)
			if r := testrepo.Run(t, dir, actor, nil, "--json", "claim", "--next", "--worktree"); r.Code != 0 {
				t.Fatal(r)
			}
			live = liveWorktree(t, dir, actor)
		}
		wt, cell := live["path"].(string), live["cell"].(string)
		if err := commitFile(wt, "cells/"+cell, cell+"\n"); err != nil {
			t.Fatal(err)
		}
		if round%4 == 3 {
			// Work left uncommitted in a worktree whose lease ends: prune
			// must keep it, whatever else happens.
			p := filepath.Join(wt, "planted-"+cell)
			os.WriteFile(p, []byte("uncommitted work\n"), 0o644)
			planted = append(planted, p)
			if r := testrepo.Run(t, wt, actor, nil, "--json", "release"); r.Code != 0 {
				t.Fatal(r)
			}
			continue
		}
		before := testrepo.Git(t, dir, "rev-parse", "main")
		start = time.Now()
		if r := killTallyAt(bin, wt, actor, point(doneTook), "--json", "done", "--merge"); r != nil {
			doneTook = time.Since(start)
			if r.Code != 0 {
				t.Fatalf("round %d: done --merge: %v", round, r.JSON)
			}
		} else {
			killedDones++
		}
		reapOrphans()
		if state := cellState(t, dir, cell); state != "done" {
			if testrepo.Git(t, dir, "rev-parse", "main") != before {
				landedFirst++
			}
			// Killed before its receipt: done again finishes it, binding the
			// landing a kill after the move left.
			if r := testrepo.Run(t, wt, actor, nil, "--json", "done", "--merge"); r.Code != 0 {
				t.Fatalf("round %d: done --merge after a kill: %v", round, r.JSON)
			}
		}
		acked[cell] = true
		pruneAndCheck(t, dir, planted)
	}
	for cell := range acked {
		if adds := testrepo.Git(t, dir, "log", "--format=%H", "--diff-filter=A", "main", "--", "cells/"+cell); len(strings.Fields(adds)) != 1 {
			t.Errorf("acknowledged cell %s's work was added to main %d times", cell, len(strings.Fields(adds)))
		}
		show := testrepo.Run(t, dir, "auditor", nil, "--json", "show", "w/"+cell)
		receipt := show.JSON["cell"].(map[string]any)["receipt"].(map[string]any)["commit"].(string)
		if _, err := gitIn(dir, "merge-base", "--is-ancestor", receipt, "main"); err != nil {
			t.Errorf("cell %s's receipt binds %s, not on main", cell, receipt)
		}
	}
	t.Logf("%d rounds: %d claims killed (%d left a worktree prune removed), %d dones killed (%d after landing, before the receipt); %d cells done, %d worktrees with planted work kept",
		rounds, killedClaims, abandoned, killedDones, landedFirst, len(acked), len(planted))
	// prune --force takes the kept worktrees, their work saved first.
	r := testrepo.Run(t, dir, "janitor", nil, "--json", "worktree", "prune", "--force")
	saved := 0
	for _, w := range r.JSON["worktrees"].([]any) {
		w := w.(map[string]any)
		if w["action"] != "stashed" {
			continue
		}
		if got := testrepo.Git(t, dir, "show", w["stash"].(string)+":planted-"+w["cell"].(string)); got != "uncommitted work" {
			t.Errorf("%s holds %q", w["stash"], got)
		}
		saved++
	}
	if saved != len(planted) {
		t.Errorf("prune --force saved %d worktrees' work, want %d", saved, len(planted))
	}
	if list := testrepo.Git(t, dir, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("worktrees remain after prune --force:\n%s", list)
	}
	if r := testrepo.Run(t, dir, "auditor", nil, "--json", "verify", "--full"); r.Code != 0 {
		t.Fatal(r)
	}
	testrepo.WaitCompaction(t, filepath.Join(dir, ".git"))
	testrepo.Git(t, dir, "fsck")
}

// pruneAndCheck prunes, then checks that no orphan survived and that the
// planted uncommitted files are all there.
func pruneAndCheck(t *testing.T, dir string, planted []string) (abandoned int) {
	t.Helper()
	r := testrepo.Run(t, dir, "janitor", nil, "--json", "worktree", "prune")
	if r.Code != 0 {
		t.Fatal(r)
	}
	for _, p := range planted {
		if _, err := os.Stat(p); err != nil {
			t.Fatalf("prune deleted uncommitted work: %v", err)
		}
	}
	checkedOut := map[string]bool{}
	path := ""
	for _, l := range strings.Split(testrepo.Git(t, dir, "worktree", "list", "--porcelain"), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			path = p
			if path == dir {
				continue
			}
			gitDir, err := gitIn(path, "rev-parse", "--absolute-git-dir")
			if err != nil {
				t.Fatalf("worktree %s survived prune broken: %v", path, err)
			}
			if _, err := os.Stat(filepath.Join(gitDir, "tally-cell")); err != nil {
				t.Fatalf("worktree %s survived prune unbound", path)
			}
		}
		if b, ok := strings.CutPrefix(l, "branch refs/heads/"); ok {
			checkedOut[b] = true
		}
	}
	for _, b := range strings.Fields(testrepo.Git(t, dir, "branch", "--list", "--format=%(refname:short)", "tally/*")) {
		if !checkedOut[b] {
			t.Fatalf("branch %s survived prune without its worktree", b)
		}
	}
	if left, _ := os.ReadDir(filepath.Join(dir, ".git", "tally", "worktrees")); len(left) > 0 {
		t.Fatalf("prune left %d intent records", len(left))
	}
	return int(r.JSON["abandoned"].(float64))
}

// liveWorktree is actor's live cell worktree, nil if none.
func liveWorktree(t *testing.T, dir, actor string) map[string]any {
	t.Helper()
	r := testrepo.Run(t, dir, "auditor", nil, "--json", "worktree", "list")
	for _, w := range r.JSON["worktrees"].([]any) {
		if w := w.(map[string]any); w["state"] == "live" && w["actor"] == actor {
			return w
		}
	}
	return nil
}

// releaseHeld releases the leases actor holds.
func releaseHeld(t *testing.T, dir, actor string) {
	t.Helper()
	r := testrepo.Run(t, dir, "auditor", nil, "--json", "status")
	for _, wave := range r.JSON["waves"].([]any) {
		for _, c := range wave.(map[string]any)["cells"].([]any) {
			c := c.(map[string]any)
			if c["state"] == "claimed" && c["holder"] == actor {
				if r := testrepo.Run(t, dir, actor, nil, "--json", "release", "w/"+c["cell"].(string), "--epoch", fmt.Sprint(c["epoch"])); r.Code != 0 {
					t.Fatal(r)
				}
			}
		}
	}
}

// cellState is the state of w/cell.
func cellState(t *testing.T, dir, cell string) string {
	t.Helper()
	return testrepo.Run(t, dir, "auditor", nil, "--json", "show", "w/"+cell).JSON["cell"].(map[string]any)["state"].(string)
}
