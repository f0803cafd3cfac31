package gitstore

import (
	"errors"
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
