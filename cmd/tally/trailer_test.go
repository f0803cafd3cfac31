package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// The commit-msg hook stamps code commits with the ledger's checkpoint, and
// verify --trailers checks those stamps: a ledger rewritten under a stamped
// commit is caught from the code history.
func TestCheckpointTrailers(t *testing.T) {
	dir := testrepo.New(t)
	tally := func(want int, args ...string) testrepo.Result {
		t.Helper()
		r := testrepo.Run(t, dir, "alice", nil, append([]string{"--json"}, args...)...)
		if r.Code != want {
			t.Fatalf("tally %v: exit %d, want %d: %s %s", args, r.Code, want, r.Stdout, r.Stderr)
		}
		return r
	}
	tally(0, "init", "--origin", "trailers-test")
	tally(0, "note", "one")
	tally(0, "hooks", "install", "--commit-msg")
	commit := func(msg string) string {
		os.WriteFile(filepath.Join(dir, "f"), []byte(msg), 0o644)
		testrepo.Git(t, dir, "add", "f")
		testrepo.Git(t, dir, "commit", "-q", "-m", msg)
		return testrepo.Git(t, dir, "log", "-1", "--format=%(trailers:key=Tally-Checkpoint,valueonly)")
	}
	stamp := commit("first change\n\nSigned-off-by: someone <s@x>")
	meta := testrepo.Git(t, dir, "show", "refs/tally/ledger:meta")
	if !strings.HasPrefix(stamp, "trailers-test 2 ") || !strings.Contains(meta, `"size":2`) {
		t.Fatalf("trailer %q does not name the ledger of size 2 (meta %s)", stamp, meta)
	}
	if body := testrepo.Git(t, dir, "log", "-1", "--format=%B"); !strings.Contains(body, "Signed-off-by: someone <s@x>\nTally-Checkpoint: ") {
		t.Fatalf("the trailer was not added to the existing trailer block:\n%s", body)
	}
	tally(0, "note", "two")
	commit("second change")
	r := tally(0, "verify", "--trailers", "HEAD")
	if n := len(r.JSON["trailers"].([]any)); n != 2 {
		t.Fatalf("verify checked %d trailers, want 2: %s", n, r.Stdout)
	}
	// Rewrite the ledger below the first stamp: the code history exposes it.
	old := testrepo.Git(t, dir, "rev-parse", "refs/tally/ledger~2")
	testrepo.Git(t, dir, "update-ref", "refs/tally/ledger", old)
	// This clone's verify record knows better: its writer refuses to extend
	// the rollback. A clone without the record (as the rewriter's would be)
	// builds on it.
	if r := tally(3, "note", "refused"); r.ErrorCode() != "ROLLBACK-DETECTED" {
		t.Fatalf("append on a rolled-back ledger: %s", r.Stdout)
	}
	for _, record := range []string{"verified", "appended"} {
		if err := os.Remove(filepath.Join(dir, ".git", "tally", record)); err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
	}
	tally(0, "note", "rewritten one")
	tally(0, "note", "rewritten two")
	r = tally(3, "verify", "--full", "--trailers", "HEAD")
	if r.ErrorCode() != "FORK-DETECTED" || !strings.Contains(r.Stdout, "commit ") {
		t.Fatalf("want FORK-DETECTED naming a code commit, got %s", r.Stdout)
	}
	// Uninstalling restores a repository without hooks.
	tally(0, "hooks", "uninstall", "--commit-msg")
	if _, err := os.Stat(filepath.Join(dir, ".git", "hooks", "commit-msg")); !os.IsNotExist(err) {
		t.Fatalf("commit-msg hook still there: %v", err)
	}
}
