package anchor_test

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// A `checkpoint --save` killed (SIGKILL, injected by strace) as it renames
// refs/tally/checkpoints/N.lock over the ref leaves that lock. The next save
// — of another size, so another ref — recognizes it from the writer record
// in checkpoints.lock and removes it, and then `git fetch
// 'refs/tally/*:refs/tally/*'` from the repository works.
func TestCheckpointLockOrphanRemoved(t *testing.T) {
	t.Parallel()
	strace := testrepo.Strace(t)
	dir := newLedger(t, "cplock", 3) // 4 entries
	lock := filepath.Join(gitIn(t, dir, "", "rev-parse", "--path-format=absolute", "--git-common-dir"),
		"refs", "tally", "checkpoints", "4.lock")
	renames := "rename,renameat,renameat2"
	cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-P", lock,
		"-e", "trace="+renames, "-e", "inject="+renames+":signal=KILL",
		testrepo.Tally(t), "-C", dir, "checkpoint", "--save")
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("checkpoint --save was not killed: %v %s", err, out)
	}
	if _, err := os.Stat(lock); err != nil {
		t.Fatalf("the killed save left no %s: %v", lock, err)
	}

	tally(t, dir, 0, "note", "more")
	_, res := checkpoint(t, dir, "--save")
	if res["size"] != float64(5) {
		t.Fatalf("second save: size %v, want 5", res["size"])
	}
	if _, err := os.Stat(lock); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("%s remains after the next save (%v)", lock, err)
	}
	dst := clone(t, dir) // fetches refs/tally/*:refs/tally/*
	if got := gitIn(t, dst, "", "cat-file", "-t", "refs/tally/checkpoints/5"); got != "blob" {
		t.Fatalf("fetched checkpoint 5 is a %q", got)
	}
}
