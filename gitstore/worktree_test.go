package gitstore_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// WorkTreeClean answers true only where git status (tracked files) prints
// nothing, and does so for a committed tree whose files are untouched, with
// untracked files beside them; a modified, staged, deleted or re-moded file,
// a touched one (git would read it) and a racily clean one are left to git.
func TestWorkTreeClean(t *testing.T) {
	dir := testrepo.New(t)
	past := time.Now().Add(-time.Hour)
	write := func(name, content string, mode os.FileMode) {
		p := filepath.Join(dir, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(content), mode); err != nil {
			t.Fatal(err)
		}
		os.Chmod(p, mode)
		os.Chtimes(p, past, past) // not racily clean once the index is written
	}
	write("a.txt", "a\n", 0o644)
	write("sub/b.sh", "#!/bin/sh\n", 0o755)
	testrepo.Git(t, dir, "add", "-A")
	testrepo.Git(t, dir, "commit", "-q", "-m", "files")
	check := func(what string, want bool) {
		t.Helper()
		r, err := gitstore.Open(dir)
		if err != nil {
			t.Fatal(err)
		}
		defer r.Close()
		got := r.WorkTreeClean()
		cmd := exec.Command("git", "--no-optional-locks", "status", "--porcelain=v1", "--untracked-files=no")
		cmd.Dir, cmd.Env = dir, testrepo.Env()
		out, err := cmd.Output()
		if err != nil {
			t.Fatal(err)
		}
		if got && len(out) > 0 {
			t.Fatalf("%s: WorkTreeClean, but git status says %q", what, out)
		}
		if got != want {
			t.Fatalf("%s: WorkTreeClean %v, want %v (git status %q)", what, got, want, out)
		}
	}
	check("committed", true)
	write("untracked.txt", "u\n", 0o644)
	check("an untracked file", true)

	write("a.txt", "A\n", 0o644) // same size, same mtime: only the ctime tells
	check("modified", false)
	write("a.txt", "staged\n", 0o644)
	testrepo.Git(t, dir, "add", "a.txt")
	check("staged", false)
	testrepo.Git(t, dir, "commit", "-q", "-m", "a")
	check("committed again", true)

	os.Chmod(filepath.Join(dir, "sub/b.sh"), 0o644)
	check("lost its executable bit", false)
	os.Chmod(filepath.Join(dir, "sub/b.sh"), 0o755)
	check("executable again", false) // its ctime moved: git would look at it
	os.Remove(filepath.Join(dir, "sub/b.sh"))
	check("deleted", false)

	write("a.txt", "racy\n", 0o644)
	future := time.Now().Add(time.Hour)
	os.Chtimes(filepath.Join(dir, "a.txt"), future, future) // after the index's own
	testrepo.Git(t, dir, "add", "-A")
	testrepo.Git(t, dir, "commit", "-q", "-m", "racy")
	check("racily clean", false)
}
