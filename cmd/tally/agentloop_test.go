package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestAgentLoop: three agents, each the shell script testdata/agentloop/
// agent.sh in its own linked worktree, drain a wave using only `tally
// --json` and exit codes. They meet every refusal an agent loop must act on
// — LEASE-HELD (a hint another actor holds), LEASE-OWNED (a claim repeated
// after a lost answer), USAGE (an unknown command), CELL-STATE (a heartbeat
// after the receipt), WAIT-TIMEOUT (only a failed cell is left) and
// PLAN-COMPLETE — act on each by its code and exit class, and end on their
// own. Afterwards every cell is done exactly once, the flaky cell after one
// failure and one requeue.
func TestAgentLoop(t *testing.T) {
	r := newRepo(t)
	tallyBin := testrepo.Tally(t)
	cells := []string{"a", "b", "c", "d", "e", "flaky", "after"}
	var plan []string
	for _, c := range cells {
		deps := ""
		if c == "after" {
			deps = `,"deps":["flaky"]`
		}
		plan = append(plan, fmt.Sprintf(`{"id":%q%s}`, c, deps))
	}
	r.ok("H", "init")
	r.ok("H", "plan", r.file("w.json", `{"wave":"w","cells":[`+strings.Join(plan, ",")+`]}`))
	r.ok("H", "plan", r.file("g.json", `{"wave":"g","cells":[{"id":"gate"}]}`))
	r.ok("H", "claim", "g/gate", "--ttl", "1h") // the hint every agent is given, held by a person

	shared, logs := t.TempDir(), t.TempDir()
	script, err := filepath.Abs(filepath.Join("testdata", "agentloop", "agent.sh"))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	var wg sync.WaitGroup
	results := make([]string, 3)
	for i := range results {
		actor := fmt.Sprintf("agent-%d", i+1)
		wt := filepath.Join(t.TempDir(), actor)
		r.git("worktree", "add", "-q", "-b", actor, wt)
		wg.Add(1)
		go func() {
			defer wg.Done()
			cmd := exec.CommandContext(ctx, "sh", script, tallyBin, "w", "g/gate", shared, filepath.Join(logs, actor))
			cmd.Dir = wt
			cmd.Env = testrepo.Env("TALLY_ACTOR="+actor, "GIT_AUTHOR_NAME="+actor, "GIT_AUTHOR_EMAIL="+actor,
				"GIT_COMMITTER_NAME="+actor, "GIT_COMMITTER_EMAIL="+actor)
			out, err := cmd.CombinedOutput()
			if err != nil {
				results[i] = fmt.Sprintf("%s: %v (context: %v)\n%s", actor, err, ctx.Err(), out)
			}
		}()
	}
	wg.Wait()
	for _, res := range results {
		if res != "" {
			t.Fatalf("an agent did not end on its own with PLAN-COMPLETE:\n%s", res)
		}
	}

	met := map[string]int{}
	ends := 0
	for i := range results {
		b, err := os.ReadFile(filepath.Join(logs, fmt.Sprintf("agent-%d", i+1)))
		if err != nil {
			t.Fatal(err)
		}
		for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
			f := strings.Fields(line)
			met[f[1]]++
		}
		if lines := strings.Split(strings.TrimSpace(string(b)), "\n"); lines[len(lines)-1] != "met PLAN-COMPLETE claim --next" {
			t.Errorf("agent-%d's last answer was %q, not PLAN-COMPLETE", i+1, lines[len(lines)-1])
		} else {
			ends++
		}
	}
	for _, code := range []string{"LEASE-HELD", "LEASE-OWNED", "USAGE", "CELL-STATE", "WAIT-TIMEOUT", "PLAN-COMPLETE"} {
		if met[code] == 0 {
			t.Errorf("no agent met %s (met: %v)", code, met)
		}
	}

	var done []string
	for _, e := range arr(t, r.ok("H", "log", "--kind", "done"), "entries") {
		done = append(done, strings.Fields(e.(map[string]any)["summary"].(string))[1])
	}
	sort.Strings(done)
	want := []string{}
	for _, c := range cells {
		want = append(want, "w/"+c)
	}
	sort.Strings(want)
	if strings.Join(done, " ") != strings.Join(want, " ") {
		t.Errorf("done entries for %v, want each of %v exactly once", done, want)
	}
	if n := len(arr(t, r.ok("H", "log", "--kind", "fail"), "entries")); n != 1 {
		t.Errorf("%d fail entries, want the flaky cell's one", n)
	}
	if n := len(arr(t, r.ok("H", "log", "--kind", "requeue"), "entries")); n != 1 {
		t.Errorf("%d requeue entries, want one", n)
	}
	w := arr(t, r.ok("H", "status", "w"), "waves")[0].(map[string]any)
	if c := obj(t, w, "counts"); c["done"] != float64(len(cells)) || len(c) != 1 {
		t.Errorf("wave w counts %v, want all %d done", c, len(cells))
	}
	if r.run("H", "verify", "--full").Code != 0 {
		t.Error("the drained ledger does not verify")
	}
}
