package main

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// hostedCIScript is the job script of docs/HOSTING.md, between its markers.
func hostedCIScript(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "HOSTING.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, rest, ok := strings.Cut(string(b), "<!-- tally-ci-script -->\n```sh\n")
	script, _, ok2 := strings.Cut(rest, "```\n<!-- /tally-ci-script -->")
	if !ok || !ok2 {
		t.Fatal("docs/HOSTING.md has no tally-ci-script block")
	}
	return script
}

// TestHostedCIScript: a hosted remote runs no hooks, so plain git pushes
// land whatever they carry; the CI job of docs/HOSTING.md, run as written in
// a fresh clone, then judges each push: a receipted commit on the protected
// branch passes (exit 0), an unreceipted one fails with RECEIPT-MISSING
// (exit 2), and a forged, illegal ledger entry fails verify (exit 3).
func TestHostedCIScript(t *testing.T) {
	root := t.TempDir()
	bare := filepath.Join(root, "hosted.git")
	testrepo.Git(t, root, "init", "-q", "--bare", "-b", "main", bare) // no tally hook: a hosted server
	c := &netCluster{t: t, kind: gitserver.GitDaemon, bare: bare, url: gitserver.Daemon(t, root) + "/hosted.git", bin: testrepo.Tally(t)}
	script := hostedCIScript(t)
	pathEnv := "PATH=" + filepath.Dir(c.bin) + string(os.PathListSeparator) + os.Getenv("PATH")
	job := func(ref, before, after string) (int, string) {
		t.Helper()
		dir := filepath.Join(t.TempDir(), "ci")
		testrepo.Git(t, filepath.Dir(dir), "clone", "-q", c.url, dir)
		cmd := exec.Command("sh", "-e", "-c", script)
		cmd.Dir = dir
		cmd.Env = testrepo.Env(pathEnv, "REF="+ref, "BEFORE="+before, "AFTER="+after)
		var out bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &out
		err := cmd.Run()
		if ee, ok := err.(*exec.ExitError); ok {
			return ee.ExitCode(), out.String()
		} else if err != nil {
			t.Fatal(err)
		}
		return 0, out.String()
	}
	pushAll := func(dir string) {
		t.Helper()
		if exit, stderr := c.push(dir, "origin", "main", "+refs/tally/*:refs/tally/*"); exit != 0 {
			t.Fatalf("push to the hosted remote: %s", stderr)
		}
	}

	a := c.clone("alice")
	c.ok(a, "alice", nil, "init")
	c.ok(a, "alice", nil, "plan", netPlan(t, a, "w", 2, nil))
	c.ok(a, "alice", nil, "policy", "set", "--receipts", "enforce", "--protected", "refs/heads/main")
	pushAll(a)
	if exit, out := job("", "", ""); exit != 0 {
		t.Fatalf("scheduled job on a sound ledger: exit %d\n%s", exit, out)
	}

	before := testrepo.Git(t, a, "rev-parse", "HEAD")
	c.ok(a, "alice", nil, "claim", "w/c000")
	testrepo.Git(t, a, "commit", "-q", "--allow-empty", "-m", "receipted work")
	c.ok(a, "alice", nil, "done", "w/c000", "--epoch", "1")
	pushAll(a)
	after := testrepo.Git(t, a, "rev-parse", "HEAD")
	if exit, out := job("refs/heads/main", before, after); exit != 0 {
		t.Fatalf("job on a receipted push: exit %d\n%s", exit, out)
	}

	if err := os.WriteFile(filepath.Join(a, "unreceipted.txt"), []byte("no receipt\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testrepo.Git(t, a, "add", "unreceipted.txt")
	testrepo.Git(t, a, "commit", "-q", "-m", "unreceipted work") // a tree no receipt names
	pushAll(a)
	unreceipted := testrepo.Git(t, a, "rev-parse", "HEAD")
	exit, out := job("refs/heads/main", after, unreceipted)
	if exit != 2 || !strings.Contains(out, "RECEIPT-MISSING") || !strings.Contains(out, unreceipted) {
		t.Fatalf("job on an unreceipted push: exit %d, want 2 naming RECEIPT-MISSING and %s\n%s", exit, unreceipted, out)
	}

	// A new protected branch: what it brings beyond the protected refs that
	// already hold it is judged (BEFORE is all zeros), though the branch
	// itself already exists when the job runs.
	c.ok(a, "alice", nil, "policy", "set", "--protected", "refs/heads/main,refs/heads/release")
	testrepo.Git(t, a, "checkout", "-q", "-b", "release")
	if err := os.WriteFile(filepath.Join(a, "release.txt"), []byte("release notes\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testrepo.Git(t, a, "add", "release.txt")
	testrepo.Git(t, a, "commit", "-q", "-m", "release work")
	release := testrepo.Git(t, a, "rev-parse", "HEAD")
	if exit, stderr := c.push(a, "origin", "release", "+refs/tally/*:refs/tally/*"); exit != 0 {
		t.Fatalf("push release: %s", stderr)
	}
	zeros := strings.Repeat("0", 40)
	exit, out = job("refs/heads/release", zeros, release)
	if exit != 2 || !strings.Contains(out, release) || strings.Contains(out, unreceipted) {
		t.Fatalf("job on a new protected branch: exit %d, want 2 naming only %s\n%s", exit, release, out)
	}
	testrepo.Git(t, a, "checkout", "-q", "main")

	// A forged claim over alice's live lease, pushed with plain git: the
	// hosted server takes it; the job's verify does not.
	c.ok(a, "alice", nil, "claim", "w/c001", "--ttl", "3600")
	pushAll(a)
	forge(t, a, "claim", "mallory", netNowTS(0), netClaimBody("w", "c001"), false)
	pushAll(a)
	exit, out = job("", "", "")
	if exit != 3 || !strings.Contains(out, "RULE-VIOLATION") {
		t.Fatalf("job after a forged entry: exit %d, want 3 RULE-VIOLATION\n%s", exit, out)
	}
}
