package main

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestRunOutcome: tally run's own outcome and its command's are told apart.
// A command that exits 0 is ok; one that exits 3 is COMMAND-FAILED (exit 2,
// exit_code 3), never an integrity failure, and its evidence is recorded all
// the same (done puts it in the receipt). With --json the command's stdout
// reaches stderr and stdout is exactly the one JSON object.
func TestRunOutcome(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"a"}]}`))
	r.ok("A", "claim", "w/a")
	jsonRun := func(argv ...string) testrepo.Result { // --json before the command's own arguments
		return testrepo.Run(t, r.dir, "A", r.env(), append([]string{"--json", "run", "w/a", "--"}, argv...)...)
	}

	ok := jsonRun("sh", "-c", "echo fine")
	if ok.Code != 0 || ok.JSON["ok"] != true || !strings.Contains(ok.Stderr, "fine") {
		t.Fatalf("run of a passing command: exit %d %s / %s", ok.Code, ok.Stdout, ok.Stderr)
	}
	res := jsonRun("sh", "-c", "echo to-stdout; echo to-stderr >&2; exit 3")
	if res.Code != 2 || res.ErrorCode() != "COMMAND-FAILED" {
		t.Fatalf("run of a command exiting 3: exit %d code %q\n%s", res.Code, res.ErrorCode(), res.Stdout)
	}
	e := obj(t, res.JSON, "error")
	if e["exit_code"] != 3.0 || e["retryable"] != false || obj(t, e, "evidence")["exit_code"] != 3.0 {
		t.Fatalf("COMMAND-FAILED details: %v", e)
	}
	if !strings.Contains(res.Stderr, "to-stdout") || !strings.Contains(res.Stderr, "to-stderr") {
		t.Fatalf("the command's output is lost under --json: stderr %q", res.Stderr)
	}
	// Text mode: the command owns stdout.
	text := testrepo.Run(t, r.dir, "A", r.env(), "run", "w/a", "--", "sh", "-c", "echo plain; exit 4")
	if text.Code != 2 || strings.TrimSpace(text.Stdout) != "plain" || !strings.Contains(text.Stderr, "COMMAND-FAILED") {
		t.Fatalf("text run: exit %d stdout %q stderr %q", text.Code, text.Stdout, text.Stderr)
	}
	r.ok("A", "done", "w/a", "--epoch", "1")
	entries := netLedger(t, r.dir)
	last := entries[len(entries)-1]
	if ev, _ := last.Body["evidence"].([]any); last.Kind != "done" || len(ev) != 3 || ev[1].(map[string]any)["exit_code"] != 3.0 || ev[2].(map[string]any)["exit_code"] != 4.0 {
		t.Fatalf("the failed run's evidence is not in the receipt: %s %v", last.Kind, last.Body)
	}
}

// TestClaimFromScript: a claim made from a script (sh -c, make, a CI step)
// records no holder process unless the harness names one, because tally's
// parent is the shell, gone at once: a reclaim-dead of that live lease is an
// ordinary claim (LEASE-HELD). With $TALLY_PID naming a process that has
// ended, the lease is reclaimed as a dead holder's.
func TestClaimFromScript(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"a"},{"id":"b"}]}`))
	script := exec.Command("sh", "-c", `"$0" -C "$1" --json claim w/a`, testrepo.Tally(t), r.dir)
	script.Env = testrepo.Env("TALLY_ACTOR=A")
	if out, err := script.CombinedOutput(); err != nil || !strings.Contains(string(out), `"pid":0`) {
		t.Fatalf("claim from sh -c: %v %s", err, out)
	}
	r.refuse(1, "LEASE-HELD", "B", "claim", "w/a", "--reclaim-dead")

	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	harness := testrepo.Run(t, r.dir, "A", append(r.env(), fmt.Sprintf("TALLY_PID=%d", gone.Process.Pid)), "--json", "claim", "w/b")
	if harness.Code != 0 || obj(t, harness.JSON, "lease")["pid"] != float64(gone.Process.Pid) {
		t.Fatalf("claim with TALLY_PID: exit %d %s", harness.Code, harness.Stdout)
	}
	if res := r.ok("B", "claim", "w/b", "--reclaim-dead"); res["takeover"] != "dead-holder" {
		t.Fatalf("reclaim of a TALLY_PID holder that is gone: %v", res)
	}
	bad := testrepo.Run(t, r.dir, "A", append(r.env(), "TALLY_PID=nope"), "--json", "claim", "w/a")
	if bad.Code != 2 || bad.ErrorCode() != "USAGE" {
		t.Fatalf("TALLY_PID=nope: exit %d %s", bad.Code, bad.Stdout)
	}
}

// TestDoneEvidenceFileStrict: done --evidence takes evidence in the form
// tally run records, decoded strictly. Unrelated JSON, an unknown member, a
// missing exit code or a malformed start time is USAGE (exit 2) and writes
// nothing; a well-formed object lands in the receipt as given.
func TestDoneEvidenceFileStrict(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"a"}]}`))
	r.ok("A", "claim", "w/a")
	for name, body := range map[string]string{
		"unrelated":     `{"totally":"unrelated"}`,
		"unknown":       `{"argv":["make"],"exit_code":0,"started_at":"2031-03-04T05:06:07.089Z","verdict":"fine"}`,
		"no-exit-code":  `{"argv":["make"],"started_at":"2031-03-04T05:06:07.089Z"}`,
		"bad-time":      `{"argv":["make"],"exit_code":0,"started_at":"yesterday"}`,
		"empty-argv":    `[{"argv":[],"exit_code":0,"started_at":"2031-03-04T05:06:07.089Z"}]`,
		"not-an-object": `"make test passed"`,
	} {
		e := r.refuse(2, "USAGE", "A", "done", "w/a", "--epoch", "1", "--evidence", r.file(name+".json", body))
		if !strings.Contains(e["message"].(string), "evidence file") {
			t.Errorf("%s: %v", name, e)
		}
	}
	good := `{"argv":["make","check"],"exit_code":2,"started_at":"2031-03-04T05:06:07.089Z","duration_ms":1500}`
	r.ok("A", "done", "w/a", "--epoch", "1", "--evidence", r.file("good.json", good))
	entries := netLedger(t, r.dir)
	ev, _ := entries[len(entries)-1].Body["evidence"].([]any)
	if len(ev) != 1 || ev[0].(map[string]any)["exit_code"] != 2.0 || fmt.Sprint(ev[0].(map[string]any)["argv"]) != "[make check]" {
		t.Fatalf("receipt evidence: %v", ev)
	}
}

// TestDoneWarnings: a valid receipt that a reviewer would question says so,
// in --json "warnings" and on stderr, without being refused: no change since
// the claim, evidence of a failed command, edits left uncommitted under the
// cell's paths. A clean receipt has none.
func TestDoneWarnings(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"a","paths":["src/**"]},{"id":"b","paths":["src/**"]}]}`))
	r.ok("A", "claim", "w/a")
	testrepo.Run(t, r.dir, "A", r.env(), "run", "w/a", "--", "false")
	r.commit("work", "src/a.go")
	r.file("src/a.go", "edited after the commit\n")
	res := r.ok("A", "done", "w/a", "--epoch", "1")
	got := fmt.Sprint(res["warnings"])
	if !strings.Contains(got, "failed command: false exited 1") || !strings.Contains(got, "uncommitted edits are not in the receipt: src/a.go") ||
		strings.Contains(got, "changes nothing") {
		t.Fatalf("warnings %s", got)
	}
	testrepo.Git(t, r.dir, "checkout", "--", "src/a.go")
	r.ok("A", "claim", "w/b")
	text := testrepo.Run(t, r.dir, "A", r.env(), "done", "w/b", "--epoch", "1")
	if text.Code != 0 || !strings.Contains(text.Stderr, "tally: warning: commit") || !strings.Contains(text.Stderr, "changes nothing since the base") {
		t.Fatalf("done with no change: exit %d, stderr %q", text.Code, text.Stderr)
	}
	r.ok("A", "plan", r.file("plan2.json", `{"wave":"v","cells":[{"id":"c"}]}`))
	r.ok("A", "claim", "v/c")
	r.commit("clean work", "docs/c.md")
	if res := r.ok("A", "done", "v/c", "--epoch", "1"); fmt.Sprint(res["warnings"]) != "[]" {
		t.Fatalf("a clean receipt warns: %v", res["warnings"])
	}
}

// TestDoneLeavesIndexAlone: done reads the work tree's status without
// writing the index. A tracked file whose stat data changed (same content)
// makes a plain `git status` refresh .git/index under index.lock, a lock the
// user's own git commands and the other agents' done need; done must leave
// the index as it was and still see that nothing is left uncommitted.
func TestDoneLeavesIndexAlone(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"a","paths":["src/**"]}]}`))
	r.ok("A", "claim", "w/a")
	r.commit("work", "src/a.go")
	later := time.Now().Add(time.Hour)
	if err := os.Chtimes(filepath.Join(r.dir, "src/a.go"), later, later); err != nil {
		t.Fatal(err)
	}
	index := filepath.Join(r.dir, ".git", "index")
	before, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	res := r.ok("A", "done", "w/a", "--epoch", "1")
	if fmt.Sprint(res["warnings"]) != "[]" {
		t.Fatalf("warnings %v: the file's content is committed", res["warnings"])
	}
	after, err := os.ReadFile(index)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before, after) {
		t.Fatalf("done rewrote .git/index (%d bytes, was %d)", len(after), len(before))
	}
}
