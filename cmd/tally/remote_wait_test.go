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

	cmd := exec.Command(c.bin, "-C", b, "--json", "--remote", "origin", "claim", "--next", "--wait", "1m")
	cmd.Env = testrepo.Env("TALLY_ACTOR=B")
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
	if err != nil || !strings.Contains(line, "NO-READY-CELL") {
		cmd.Process.Kill()
		cmd.Wait()
		t.Fatalf("remote claim --next --wait did not wait: %q %v\n%s", line, err, stdout.String())
	}
	c.ok(a, "A", nil, "--remote", "origin", "done", "w/a", "--epoch", "1")
	go io.Copy(io.Discard, stderr)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("remote claim --next --wait: %v\n%s", err, stdout.String())
	}
	var got map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &got); err != nil || got["cell"] != "b" {
		t.Fatalf("remote claim --next --wait got %s, want cell b", stdout.String())
	}
	c.ok(b, "B", nil, "--remote", "origin", "done", "w/b", "--epoch", "1")
	fresh := c.clone("fresh")
	p := c.refused(2, "PLAN-COMPLETE", fresh, "C", nil, "--remote", "origin", "claim", "--next", "--wait", "1h")
	if p.errField("open") != 0.0 {
		t.Fatalf("PLAN-COMPLETE without open 0: %s", p)
	}
}

// writeTestFile writes a file in dir and returns its path.
func writeTestFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	r := &repo{t: t, dir: dir}
	return r.file(name, content)
}
