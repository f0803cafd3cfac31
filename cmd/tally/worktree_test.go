package main

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// Linked worktrees of one clone share one ledger: agents in 8 worktrees drain
// a wave together; every cell is granted exactly once, and verify passes from
// every worktree.
func TestWorktreesShareOneLedger(t *testing.T) {
	dir := testrepo.New(t)
	const agents, cells = 8, 40
	plan := `{"wave":"w","cells":[`
	for i := 0; i < cells; i++ {
		if i > 0 {
			plan += ","
		}
		plan += fmt.Sprintf(`{"id":"c%02d"}`, i)
	}
	plan += `]}`
	planFile := filepath.Join(t.TempDir(), "plan.json")
	os.WriteFile(planFile, []byte(plan), 0o644)
	if r := testrepo.Run(t, dir, "planner", nil, "init"); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	if r := testrepo.Run(t, dir, "planner", nil, "plan", planFile); r.Code != 0 {
		t.Fatal(r.Stderr)
	}
	var trees []string
	for i := 0; i < agents; i++ {
		wt := filepath.Join(t.TempDir(), fmt.Sprintf("wt%d", i))
		testrepo.Git(t, dir, "worktree", "add", "-q", "-b", fmt.Sprintf("agent%d", i), wt)
		trees = append(trees, wt)
	}
	var mu sync.Mutex
	granted := map[string]string{} // cell -> actor
	var wg sync.WaitGroup
	for i, wt := range trees {
		wg.Add(1)
		go func(actor, wt string) {
			defer wg.Done()
			for {
				r := testrepo.Run(t, wt, actor, nil, "--json", "claim", "--next", "--wave", "w")
				if r.Code != 0 {
					if r.ErrorCode() != "NO-READY-CELL" && r.ErrorCode() != "PLAN-COMPLETE" {
						t.Errorf("%s: claim --next: exit %d %v", actor, r.Code, r.JSON)
					}
					return
				}
				cell := r.JSON["cell"].(string)
				mu.Lock()
				if prev, dup := granted[cell]; dup {
					t.Errorf("cell %s granted to %s and to %s", cell, prev, actor)
				}
				granted[cell] = actor
				mu.Unlock()
			}
		}(fmt.Sprintf("agent%d", i), wt)
	}
	wg.Wait()
	if len(granted) != cells {
		t.Fatalf("%d cells granted, want %d", len(granted), cells)
	}
	for _, wt := range append(trees, dir) {
		r := testrepo.Run(t, wt, "auditor", nil, "--json", "verify", "--full")
		if r.Code != 0 {
			t.Fatalf("verify from %s: %v", wt, r.JSON)
		}
		if got := r.JSON["entries"].(float64); got != cells+2 {
			t.Fatalf("verify from %s sees %v entries, want %d", wt, got, cells+2)
		}
	}
	// Local files live in the common directory: one writer lock for all.
	if _, err := os.Stat(filepath.Join(dir, ".git", "tally", "writer.lock")); err != nil {
		t.Fatalf("writer lock not in the common git directory: %v", err)
	}
}
