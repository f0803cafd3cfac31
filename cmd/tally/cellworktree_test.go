package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// gitIn runs git in dir for a goroutine (no *testing.T): its stdout, or an
// error with its stderr.
func gitIn(dir string, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testrepo.Env()
	out, err := cmd.Output()
	if ee, ok := err.(*exec.ExitError); ok {
		return "", fmt.Errorf("git %v in %s: %v: %s", args, dir, err, ee.Stderr)
	}
	return strings.TrimSpace(string(out)), err
}

// commitFile writes name in the worktree wt and commits it.
func commitFile(wt, name, content string) error {
	if err := os.MkdirAll(filepath.Dir(filepath.Join(wt, name)), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(wt, name), []byte(content), 0o644); err != nil {
		return err
	}
	if _, err := gitIn(wt, "add", name); err != nil {
		return err
	}
	_, err := gitIn(wt, "commit", "-q", "-m", "work on "+name)
	return err
}

// planCells plans wave w of n cells c00…; cell i depends on cell i-8 from
// the ninth on, and on cell i-3 every fifth, so later cells wait for work
// that must be in their worktree's base.
func planCells(t *testing.T, dir string, n int) map[string][]string {
	t.Helper()
	deps := map[string][]string{}
	var cells []string
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("c%02d", i)
		var d []string
		if i >= 8 {
			d = append(d, fmt.Sprintf("c%02d", i-8))
		}
		if i%5 == 4 && i >= 3 {
			d = append(d, fmt.Sprintf("c%02d", i-3))
		}
		deps[id] = d
		quoted := make([]string, len(d))
		for j, x := range d {
			quoted[j] = `"` + x + `"`
		}
		cells = append(cells, fmt.Sprintf(`{"id":%q,"deps":[%s]}`, id, strings.Join(quoted, ",")))
	}
	planFile := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(planFile, []byte(`{"wave":"w","cells":[`+strings.Join(cells, ",")+`]}`), 0o644)
	for _, args := range [][]string{{"init"}, {"plan", planFile}} {
		if r := testrepo.Run(t, dir, "planner", nil, args...); r.Code != 0 {
			t.Fatal(r)
		}
	}
	return deps
}

// Eight agent processes drain a 40-cell plan with dependencies, each cell in
// its own worktree: claim --next --worktree, commit there, done --merge (half
// of them chain: done --merge --next --worktree).
// Afterwards every cell's work is on main exactly once, every commit that
// landed has a receipt, prune leaves no cell worktree or branch, and verify
// --full and git fsck pass. The same commits made without worktrees leave a
// repository of about the same size.
func TestCellWorktreesDrain(t *testing.T) {
	const agents, cells = 8, 40
	dir := testrepo.New(t)
	deps := planCells(t, dir, cells)
	bin := testrepo.Tally(t)
	var wg sync.WaitGroup
	errc := make(chan error, agents*cells)
	for i := 0; i < agents; i++ {
		wg.Add(1)
		go func(actor string, chained bool) {
			defer wg.Done()
			var claimed map[string]any // a done --next --worktree's next claim
			for {
				r := claimed
				if r == nil {
					res := testrepo.Exec(bin, dir, actor, nil, "--json", "claim", "--next", "--worktree", "--wait", "2m")
					if res.ErrorCode() == "PLAN-COMPLETE" {
						return
					}
					if res.Code != 0 || res.Err != nil {
						errc <- fmt.Errorf("%s: %v", res, res.Err)
						return
					}
					r = res.JSON
				}
				claimed = nil
				wt := r["worktree"].(map[string]any)["path"].(string)
				cell := r["cell"].(string)
				for _, d := range deps[cell] {
					if _, err := os.Stat(filepath.Join(wt, "cells", d)); err != nil {
						errc <- fmt.Errorf("%s's worktree lacks the work of its dependency %s: %v", cell, d, err)
					}
				}
				if err := commitFile(wt, "cells/"+cell, cell+" by "+actor+"\n"); err != nil {
					errc <- err
					return
				}
				args := []string{"--json", "done", "--merge"}
				if chained {
					args = append(args, "--next", "--worktree", "--wait", "2m")
				}
				done := testrepo.Exec(bin, wt, actor, nil, args...)
				if done.Code != 0 || done.Err != nil {
					errc <- fmt.Errorf("%s: %v", done, done.Err)
					return
				}
				if next, _ := done.JSON["next"].(map[string]any); next != nil {
					if next["ok"] != true {
						if code := next["error"].(map[string]any)["code"]; code != "PLAN-COMPLETE" {
							errc <- fmt.Errorf("%s: next: %v", actor, next)
						}
						return
					}
					claimed = next
				}
			}
		}(fmt.Sprintf("agent%d", i), i%2 == 0)
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	for cell := range deps {
		if adds := testrepo.Git(t, dir, "log", "--format=%H", "--diff-filter=A", "main", "--", "cells/"+cell); len(strings.Fields(adds)) != 1 {
			t.Errorf("cell %s's work was added to main %d times", cell, len(strings.Fields(adds)))
		}
	}
	receipted := map[string]bool{}
	for _, line := range strings.Split(testrepo.Git(t, dir, "notes", "--ref", "tally", "list"), "\n") {
		if f := strings.Fields(line); len(f) == 2 {
			receipted[f[1]] = true
		}
	}
	landed := strings.Fields(testrepo.Git(t, dir, "rev-list", "--first-parent", "main", "^main~"+fmt.Sprint(cells)))
	if len(landed) != cells {
		t.Fatalf("%d commits landed on main's first-parent line, want %d", len(landed), cells)
	}
	for _, c := range landed {
		if !receipted[c] {
			t.Errorf("landed commit %s has no receipt", c)
		}
	}
	if r := testrepo.Run(t, dir, "lead", nil, "--json", "worktree", "prune"); r.Code != 0 {
		t.Fatal(r)
	}
	if list := testrepo.Git(t, dir, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
		t.Errorf("worktrees remain after prune:\n%s", list)
	}
	if branches := testrepo.Git(t, dir, "branch", "--list", "tally/*"); branches != "" {
		t.Errorf("cell branches remain after prune: %s", branches)
	}
	if r := testrepo.Run(t, dir, "auditor", nil, "--json", "verify", "--full"); r.Code != 0 {
		t.Fatal(r)
	}
	testrepo.WaitCompaction(t, filepath.Join(dir, ".git"))
	testrepo.Git(t, dir, "fsck", "--strict")

	// The same commits, made in the main worktree without worktrees by one
	// agent.
	flat := testrepo.New(t)
	planCells(t, flat, cells)
	for range cells {
		r := testrepo.Run(t, flat, "agent", nil, "--json", "claim", "--next")
		if r.Code != 0 {
			t.Fatal(r)
		}
		cell := r.JSON["cell"].(string)
		epoch := fmt.Sprint(r.JSON["lease"].(map[string]any)["epoch"])
		if err := commitFile(flat, "cells/"+cell, cell+" by agent0\n"); err != nil {
			t.Fatal(err)
		}
		if r := testrepo.Run(t, flat, "agent", nil, "done", "w/"+cell, "--epoch", epoch); r.Code != 0 {
			t.Fatal(r)
		}
	}
	// The size is what the drain left on disk, once tally's background
	// compaction is over: git gc's delta choices vary from run to run by
	// a third on this ledger-heavy repository, which would measure git,
	// not the worktrees.
	sizes := map[string]int64{}
	for name, repo := range map[string]string{"worktrees": dir, "flat": flat} {
		testrepo.WaitCompaction(t, filepath.Join(repo, ".git"))
		sizes[name] = dirSize(t, filepath.Join(repo, ".git"))
	}
	t.Logf(".git: %d bytes drained in worktrees, %d bytes without", sizes["worktrees"], sizes["flat"])
	if ratio := float64(sizes["worktrees"]) / float64(sizes["flat"]); ratio > 1.10 {
		t.Errorf("the repository drained in worktrees is %.2f× the size of the same commits made without", ratio)
	}
}

// dirSize sums the sizes of the regular files under dir.
func dirSize(t *testing.T, dir string) int64 {
	t.Helper()
	var n int64
	err := filepath.Walk(dir, func(_ string, info os.FileInfo, err error) error {
		if err == nil && info.Mode().IsRegular() {
			n += info.Size()
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// Two cells edit one line: the second done --merge is MERGE-CONFLICT, its
// worktree, branch and lease as they were; merging main into the branch,
// resolving and running done again lands it.
func TestCellWorktreeConflict(t *testing.T) {
	dir := testrepo.New(t)
	os.WriteFile(filepath.Join(dir, "shared.txt"), []byte("one line\n"), 0o644)
	testrepo.Git(t, dir, "add", "shared.txt")
	testrepo.Git(t, dir, "commit", "-q", "-m", "shared")
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(`{"wave":"w","cells":[{"id":"a"},{"id":"b"}]}`), 0o644)
	for _, args := range [][]string{{"init"}, {"plan", plan}} {
		if r := testrepo.Run(t, dir, "planner", nil, args...); r.Code != 0 {
			t.Fatal(r)
		}
	}
	trees := map[string]string{}
	for _, cell := range []string{"a", "b"} {
		r := testrepo.Run(t, dir, "agent-"+cell, nil, "--json", "claim", "w/"+cell, "--worktree")
		if r.Code != 0 {
			t.Fatal(r)
		}
		trees[cell] = r.JSON["worktree"].(map[string]any)["path"].(string)
		if err := commitFile(trees[cell], "shared.txt", "edited by "+cell+"\n"); err != nil {
			t.Fatal(err)
		}
	}
	if r := testrepo.Run(t, trees["a"], "agent-a", nil, "--json", "done", "--merge"); r.Code != 0 {
		t.Fatal(r)
	}
	tipB := testrepo.Git(t, trees["b"], "rev-parse", "HEAD")
	r := testrepo.Run(t, trees["b"], "agent-b", nil, "--json", "done", "--merge")
	if r.Code != 2 || r.ErrorCode() != "MERGE-CONFLICT" {
		t.Fatalf("second done --merge: %v, want MERGE-CONFLICT (exit 2)", r)
	}
	if files := r.ErrorField("files"); fmt.Sprint(files) != "[shared.txt]" {
		t.Errorf("conflicting files %v, want [shared.txt]", files)
	}
	if status := testrepo.Git(t, trees["b"], "status", "--porcelain"); status != "" {
		t.Errorf("the refused done left the worktree changed:\n%s", status)
	}
	if tip := testrepo.Git(t, trees["b"], "rev-parse", "HEAD"); tip != tipB {
		t.Errorf("the refused done moved the branch from %s to %s", tipB, tip)
	}
	show := testrepo.Run(t, trees["b"], "agent-b", nil, "--json", "show")
	if cell := show.JSON["cell"].(map[string]any); cell["state"] != "claimed" || cell["lease"].(map[string]any)["actor"] != "agent-b" {
		t.Fatalf("after the refused done the cell is %v", cell)
	}
	// Resolve where git says, commit, done again.
	cmd := exec.Command("git", "merge", "-q", "main")
	cmd.Dir, cmd.Env = trees["b"], testrepo.Env()
	if cmd.Run() == nil {
		t.Fatal("merging main into b did not conflict")
	}
	os.WriteFile(filepath.Join(trees["b"], "shared.txt"), []byte("edited by a and b\n"), 0o644)
	testrepo.Git(t, trees["b"], "commit", "-q", "-am", "resolve")
	r = testrepo.Run(t, trees["b"], "agent-b", nil, "--json", "done", "--merge")
	if r.Code != 0 {
		t.Fatal(r)
	}
	if got := testrepo.Git(t, dir, "show", "main:shared.txt"); got != "edited by a and b" {
		t.Errorf("main has %q after the resolved landing", got)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "shared.txt")); string(b) != "edited by a and b\n" {
		t.Errorf("main's worktree has %q: the landing did not carry its files", b)
	}
	if landed := r.JSON["landed"].(map[string]any)["commit"]; landed != testrepo.Git(t, dir, "rev-parse", "main") {
		t.Errorf("landed %v, main is at %s", landed, testrepo.Git(t, dir, "rev-parse", "main"))
	}
}

// A claim --worktree that is refused makes nothing; one whose target lacks
// a dependency's receipted commit is WORKTREE-BASE with its lease given
// back. An expired lease's worktree stays until another epoch takes the
// cell over; then prune removes it (clean, nothing unmerged), and the new
// holder's worktree gets a branch of its own.
func TestCellWorktreeLifecycle(t *testing.T) {
	dir := testrepo.New(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(`{"wave":"w","cells":[{"id":"a"},{"id":"b","deps":["a"]},{"id":"c"}]}`), 0o644)
	t0 := time.Date(2026, 12, 4, 12, 0, 0, 0, time.UTC)
	at := func(d time.Duration) []string { return []string{"TALLY_NOW=" + t0.Add(d).Format(time.RFC3339Nano)} }
	for _, args := range [][]string{{"init"}, {"plan", plan}} {
		if r := testrepo.Run(t, dir, "planner", at(0), args...); r.Code != 0 {
			t.Fatal(r)
		}
	}
	nothingMade := func(when string) {
		t.Helper()
		if list := testrepo.Git(t, dir, "worktree", "list", "--porcelain"); strings.Count(list, "worktree ") != 1 {
			t.Fatalf("%s: a worktree was made:\n%s", when, list)
		}
		if b := testrepo.Git(t, dir, "branch", "--list", "tally/*"); b != "" {
			t.Fatalf("%s: a branch was made: %s", when, b)
		}
	}
	// Cell a done in place, without landing its commit on main.
	if r := testrepo.Run(t, dir, "one", at(0), "--json", "claim", "w/a"); r.Code != 0 {
		t.Fatal(r)
	}
	side := t.TempDir()
	testrepo.Git(t, dir, "worktree", "add", "-q", "-b", "side", side)
	if err := commitFile(side, "a.txt", "a\n"); err != nil {
		t.Fatal(err)
	}
	if r := testrepo.Run(t, side, "one", at(0), "--json", "done", "w/a", "--epoch", "1"); r.Code != 0 {
		t.Fatal(r)
	}
	r := testrepo.Run(t, dir, "two", at(time.Minute), "--json", "claim", "w/b", "--worktree")
	if r.Code != 2 || r.ErrorCode() != "WORKTREE-BASE" || r.ErrorField("dep") != "w/a" {
		t.Fatalf("claim of b on a main without a's commit: %v", r)
	}
	if show := testrepo.Run(t, dir, "two", at(time.Minute), "--json", "show", "w/b"); show.JSON["cell"].(map[string]any)["state"] != "pending" {
		t.Fatalf("b's lease was not given back: %v", show.JSON["cell"])
	}
	testrepo.Git(t, dir, "worktree", "remove", side)
	testrepo.Git(t, dir, "branch", "-D", "side")
	nothingMade("WORKTREE-BASE")

	// c claimed by one with a worktree; a claim of c by two is refused and
	// makes nothing.
	r = testrepo.Run(t, dir, "one", at(time.Minute), "--json", "claim", "w/c", "--worktree", "--ttl", "10m")
	if r.Code != 0 {
		t.Fatal(r)
	}
	first := r.JSON["worktree"].(map[string]any)["path"].(string)
	if r := testrepo.Run(t, dir, "two", at(2*time.Minute), "--json", "claim", "w/c", "--worktree"); r.ErrorCode() != "LEASE-HELD" {
		t.Fatalf("second claim of c: %v", r)
	}
	if n := strings.Count(testrepo.Git(t, dir, "worktree", "list", "--porcelain"), "worktree "); n != 2 {
		t.Fatalf("a refused claim changed the worktrees: %d", n)
	}
	state := func(when time.Duration) string {
		t.Helper()
		r := testrepo.Run(t, dir, "auditor", at(when), "--json", "worktree", "list")
		return r.JSON["worktrees"].([]any)[0].(map[string]any)["state"].(string)
	}
	if got := state(time.Hour); got != "expired" {
		t.Fatalf("c's worktree after its lease expired is %s", got)
	}
	if r := testrepo.Run(t, dir, "janitor", at(time.Hour), "--json", "worktree", "prune"); len(r.JSON["worktrees"].([]any)) != 0 {
		t.Fatalf("prune acted on an expired lease's worktree: %v", r.JSON)
	}
	r = testrepo.Run(t, dir, "two", at(time.Hour), "--json", "claim", "w/c", "--worktree")
	if r.Code != 0 {
		t.Fatal(r)
	}
	if b := r.JSON["worktree"].(map[string]any)["branch"]; b != "tally/w/c-2" {
		t.Errorf("the takeover's branch is %v, want tally/w/c-2 beside the kept one", b)
	}
	if got := state(time.Hour); got != "stale" {
		t.Fatalf("c's first worktree after a takeover is %s", got)
	}
	r = testrepo.Run(t, dir, "janitor", at(time.Hour), "--json", "worktree", "prune")
	if p := r.JSON["worktrees"].([]any); len(p) != 1 || p[0].(map[string]any)["action"] != "removed" {
		t.Fatalf("prune after the takeover: %v", r.JSON)
	}
	if _, err := os.Stat(first); err == nil {
		t.Fatalf("%s is still there", first)
	}
}

// In remote mode a done in a cell's worktree pushes the receipt's commit
// to the remote as the cell's branch, through the server's hook.
func TestCellWorktreeRemotePushesBranch(t *testing.T) {
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("w", 2)
	dir := c.clone("agent")
	c.ok(dir, "agent", nil, "remote", "set", "origin")
	res := c.ok(dir, "agent", nil, "claim", "w/c000", "--worktree")
	wt := res["worktree"].(map[string]any)["path"].(string)
	if err := commitFile(wt, "c000.txt", "c000\n"); err != nil {
		t.Fatal(err)
	}
	done := c.ok(wt, "agent", nil, "done", "--merge")
	bp, _ := done["branch_push"].(map[string]any)
	commit := done["receipt"].(map[string]any)["commit"]
	if bp == nil || bp["error"] != nil || bp["ref"] != "refs/heads/tally/w/c000" || bp["commit"] != commit {
		t.Fatalf("done in remote mode: %v", done)
	}
	if got := testrepo.Git(t, c.bare, "rev-parse", "refs/heads/tally/w/c000"); got != commit {
		t.Fatalf("the server's tally/w/c000 is %s, the receipt binds %v", got, commit)
	}
}

// A landing never overwrites work in the worktree where its target branch
// is checked out: an uncommitted edit elsewhere rides along, one to a file
// the landing changes refuses it (WORKTREE-DIRTY) with everything kept.
func TestCellWorktreeLandingKeepsTargetEdits(t *testing.T) {
	dir := testrepo.New(t)
	for _, f := range []string{"mine.txt", "theirs.txt"} {
		os.WriteFile(filepath.Join(dir, f), []byte("committed\n"), 0o644)
	}
	testrepo.Git(t, dir, "add", ".")
	testrepo.Git(t, dir, "commit", "-q", "-m", "files")
	plan := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(plan, []byte(`{"wave":"w","cells":[{"id":"a"},{"id":"b"}]}`), 0o644)
	for _, args := range [][]string{{"init"}, {"plan", plan}} {
		if r := testrepo.Run(t, dir, "planner", nil, args...); r.Code != 0 {
			t.Fatal(r)
		}
	}
	os.WriteFile(filepath.Join(dir, "mine.txt"), []byte("the user's edit\n"), 0o644)
	land := func(cell, file string) testrepo.Result {
		t.Helper()
		r := testrepo.Run(t, dir, "agent", nil, "--json", "claim", "w/"+cell, "--worktree")
		if r.Code != 0 {
			t.Fatal(r)
		}
		wt := r.JSON["worktree"].(map[string]any)["path"].(string)
		if err := commitFile(wt, file, "landed by "+cell+"\n"); err != nil {
			t.Fatal(err)
		}
		return testrepo.Run(t, wt, "agent", nil, "--json", "done", "--merge")
	}
	if r := land("a", "theirs.txt"); r.Code != 0 {
		t.Fatal(r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "theirs.txt")); string(b) != "landed by a\n" {
		t.Errorf("theirs.txt in main's worktree is %q after the landing", b)
	}
	r := land("b", "mine.txt")
	if r.Code != 2 || r.ErrorCode() != "WORKTREE-DIRTY" {
		t.Fatalf("a landing over an uncommitted edit: %v", r)
	}
	if b, _ := os.ReadFile(filepath.Join(dir, "mine.txt")); string(b) != "the user's edit\n" {
		t.Errorf("the user's uncommitted edit became %q", b)
	}
	if got := testrepo.Git(t, dir, "show", "main:mine.txt"); got != "committed" {
		t.Errorf("main moved to %q under the user's edit", got)
	}
	if state := testrepo.Run(t, dir, "agent", nil, "--json", "show", "w/b").JSON["cell"].(map[string]any)["state"]; state != "claimed" {
		t.Errorf("b is %v after its refused landing", state)
	}
}
