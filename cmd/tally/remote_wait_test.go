package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestRemoteClaimWait: claim --next --wait in remote mode, from a fresh
// clone that has no local ledger, waits on the remote's ledger (it used to
// read the empty local one and give NOT-INITIALIZED at once). It is granted
// the cell another agent's done makes ready, through the server; once every
// cell is done it answers PLAN-COMPLETE at once.
func TestRemoteClaimWait(t *testing.T) {
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.clone("seed")
	c.ok(seed, "planner", nil, "--remote", "origin", "init")
	plan := writeTestFile(t, seed, "w.json", `{"wave":"w","cells":[{"id":"a"},{"id":"b","deps":["a"]}]}`)
	c.ok(seed, "planner", nil, "--remote", "origin", "plan", plan)
	a, b := c.clone("a"), c.clone("b")
	c.ok(a, "A", nil, "--remote", "origin", "claim", "w/a")

	granted := startWaitingClaim(t, b, "B", "waiting up to 1m0s", "--remote", "origin", "claim", "--next", "--wait", "1m")
	c.ok(a, "A", nil, "--remote", "origin", "done", "w/a", "--epoch", "1")
	if got := granted(); got["cell"] != "b" {
		t.Fatalf("remote claim --next --wait got %v, want cell b", got)
	}
	c.ok(b, "B", nil, "--remote", "origin", "done", "w/b", "--epoch", "1")
	fresh := c.clone("fresh")
	p := c.refused(2, "PLAN-COMPLETE", fresh, "C", nil, "--remote", "origin", "claim", "--next", "--wait", "1h")
	if p.ErrorField("open") != 0.0 {
		t.Fatalf("PLAN-COMPLETE without open 0: %s", p)
	}
}

// writeTestFile writes a file in dir and returns its path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	r := &repo{t: t, dir: dir}
	return r.file(name, content)
}

// startWaitingClaim starts `tally --json ARGS` (a claim with --wait) in dir
// as actor and returns once its stderr announces the wait (a line holding
// announce and NO-READY-CELL), so the caller can then make a cell ready. The
// function it returns waits for the claim to end and returns its result.
func startWaitingClaim(t *testing.T, dir, actor, announce string, args ...string) func() map[string]any {
	t.Helper()
	cmd := exec.Command(testrepo.Tally(t), append([]string{"-C", dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	line, err := bufio.NewReader(stderr).ReadString('\n')
	if err != nil || !strings.Contains(line, announce) || !strings.Contains(line, "NO-READY-CELL") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("tally %v did not announce its wait: %q %v\n%s", args, line, err, stdout.String())
	}
	go io.Copy(io.Discard, stderr)
	return func() map[string]any {
		t.Helper()
		if err := cmd.Wait(); err != nil {
			t.Fatalf("tally %v: %v\n%s", args, err, stdout.String())
		}
		var got map[string]any
		if err := json.Unmarshal(stdout.Bytes(), &got); err != nil {
			t.Fatalf("tally %v: %v: %s", args, err, stdout.String())
		}
		return got
	}
}
