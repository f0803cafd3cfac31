package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// TestGitRunIdleBoundsSilenceNotLength: a network command is cut when git
// goes silent for Idle, not when it runs longer than Idle while it keeps
// reporting (a big fetch or push prints progress as data moves).
func TestGitRunIdleBoundsSilenceNotLength(t *testing.T) {
	dir := t.TempDir()
	talking := GitRun{Dir: dir, Idle: 400 * time.Millisecond,
		Args: []string{"-c", "alias.talk=!for i in 1 2 3 4 5 6 7 8; do echo $i >&2; sleep 0.1; done; echo done", "talk"}}
	out, err := talking.Run()
	if err != nil || strings.TrimSpace(string(out)) != "done" {
		t.Fatalf("a command that kept talking for twice Idle was cut: %q, %v", out, err)
	}

	silent := GitRun{Dir: dir, Idle: 300 * time.Millisecond,
		Args: []string{"-c", "alias.stall=!echo started >&2; sleep 30", "stall"}}
	start := time.Now()
	_, err = silent.Run()
	var ge *GitError
	if !errors.As(err, &ge) || ge.Code != -1 || !strings.Contains(ge.Err.Error(), "said nothing") {
		t.Fatalf("a silent command: want a GitError saying it was silent, got %v", err)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the silent command (and its sleep) ran %v: not killed", took)
	}
}

// TestGitRunMaxOutput: git (and what it started) is killed once it has
// written more than MaxOutput to stdout and stderr together (a server's
// flood relayed as "remote: " lines), and what was kept stays near the
// bound.
func TestGitRunMaxOutput(t *testing.T) {
	flood := GitRun{Dir: t.TempDir(), MaxOutput: 1 << 20,
		Args: []string{"-c", "alias.flood=!head -c 1073741824 /dev/zero >&2", "flood"}}
	start := time.Now()
	_, err := flood.Run()
	var ge *GitError
	if !errors.As(err, &ge) || ge.Code != -1 || !strings.Contains(ge.Err.Error(), "more than") {
		t.Fatalf("a flood: want a GitError saying it wrote too much, got %v", err)
	}
	if len(ge.Stderr) > 2<<20 {
		t.Fatalf("kept %d bytes of a flood bounded at 1 MiB", len(ge.Stderr))
	}
	if took := time.Since(start); took > time.Minute {
		t.Fatalf("the flood ran %v: not killed", took)
	}
}

// TestGitRunErrorWithoutProgress: a push run with --progress that a server
// hook refuses reports the hook's words and git's refusal, not the progress
// counters git drew on the way (GitRun.Progress).
func TestGitRunErrorWithoutProgress(t *testing.T) {
	bare, work := t.TempDir(), t.TempDir()
	git := func(dir string, args ...string) {
		t.Helper()
		if _, err := RunGit(dir, args...); err != nil {
			t.Fatal(err)
		}
	}
	git(bare, "init", "-q", "--bare")
	hook := "#!/bin/sh\necho 'no pushes today' >&2\nexit 1\n"
	if err := os.WriteFile(filepath.Join(bare, "hooks", "pre-receive"), []byte(hook), 0o755); err != nil {
		t.Fatal(err)
	}
	git(work, "init", "-q")
	for i := range 3 {
		if err := os.WriteFile(filepath.Join(work, fmt.Sprint("f", i)), bytes.Repeat([]byte{byte('a' + i)}, 4096), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	git(work, "add", ".")
	git(work, "-c", "user.name=t", "-c", "user.email=t@example.com", "commit", "-q", "-m", "three files")

	var drawn bytes.Buffer
	_, err := GitRun{Dir: work, Progress: &drawn, Args: []string{"push", "--progress", bare, "HEAD:refs/heads/main"}}.Run()
	var ge *GitError
	if !errors.As(err, &ge) {
		t.Fatalf("want the refused push's GitError, got %v", err)
	}
	if !strings.Contains(drawn.String(), "Writing objects") {
		t.Fatalf("git drew no progress, so the test shows nothing: %q", drawn.String())
	}
	for _, want := range []string{"remote: no pushes today", "pre-receive hook declined", "failed to push"} {
		if !strings.Contains(ge.Stderr, want) {
			t.Errorf("the error lost %q: %q", want, ge.Stderr)
		}
	}
	for _, counter := range []string{"Enumerating objects", "Counting objects", "Writing objects", "Total "} {
		if strings.Contains(ge.Stderr, counter) {
			t.Errorf("the error kept progress %q: %q", counter, ge.Stderr)
		}
	}
}
