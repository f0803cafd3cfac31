//go:build windows || portable

package gitstore

import (
	"os"
	"path/filepath"
	"runtime"
	"testing"
)

// A writer renames a new version over a file another process is reading:
// where the system refuses that (Windows), renameFile tries again, and the
// reader closing the file lets the next try through. The reader closes at
// the first retry, so no timing decides the outcome. Needs no git: the
// Windows test executable runs it under wine.
func TestRenameOverAFileBeingRead(t *testing.T) {
	// Not t.TempDir: under wine 8 Go's RemoveAll fails on a file renamed
	// over ("Invalid function"), which would fail the test for wine's sake.
	dir, err := os.MkdirTemp("", "rename-busy")
	if err != nil {
		t.Fatal(err)
	}
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "ref")
	if err := os.WriteFile(path, []byte("old\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	reader, err := os.Open(path) // Go opens without FILE_SHARE_DELETE
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	retried := 0
	defer func(f func()) { renameRetried = f }(renameRetried)
	renameRetried = func() {
		if retried++; retried == 1 {
			reader.Close()
		}
	}
	tmp := filepath.Join(dir, "ref.new")
	if err := os.WriteFile(tmp, []byte("new\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := renameFile(tmp, path); err != nil {
		t.Fatalf("rename over a file being read: %v (after %d retries)", err, retried)
	}
	if b, err := readFile(path); err != nil || string(b) != "new\n" {
		t.Fatalf("after the rename: %q, %v", b, err)
	}
	if runtime.GOOS == "windows" && retried == 0 {
		t.Fatal("Windows replaced a file being read at once: the retry is not needed there")
	}
}
