package main

import (
	"strings"
	"testing"

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
