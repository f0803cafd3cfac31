//go:build linux

package gitstore

import (
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"
)

// Only a user who may write the repository can take its locks: a lock
// file is made readable and writable by its owner alone, one an older
// version made readable by all (0644) is narrowed when its owner next
// takes it, and group write access is kept with its read access. Another
// user then cannot open it to flock it through a read-only descriptor
// (which flock allows), so it cannot hold off the writers.
func TestLockFileOnlyWriters(t *testing.T) {
	dir := reachableDir(t, 0o755)
	for _, tc := range []struct {
		name       string
		was, want  os.FileMode // was 0: no file yet
		takeLocked func(path string) (release func(), err error)
	}{
		{"writer lock made", 0, 0o600, takeWriterLock},
		{"writer lock of an older version", 0o644, 0o600, takeWriterLock},
		{"writer lock of a shared repository", 0o664, 0o660, takeWriterLock},
		{"compaction lock made", 0, 0o600, takeCompactionLock},
		{"compaction lock of an older version", 0o644, 0o600, takeCompactionLock},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(dir, strconv.Itoa(int(tc.was))+tc.name[:6]+".lock")
			if tc.was != 0 {
				if err := os.WriteFile(path, nil, tc.was); err != nil {
					t.Fatal(err)
				}
				os.Chmod(path, tc.was)
			}
			release, err := tc.takeLocked(path)
			if err != nil {
				t.Fatal(err)
			}
			release()
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if fi.Mode().Perm() != tc.want {
				t.Fatalf("mode %v, want %v", fi.Mode().Perm(), tc.want)
			}
			_, out := asNobody(t, `
import fcntl, sys
try:
    f = open(sys.argv[1], "rb")
    fcntl.flock(f, fcntl.LOCK_EX | fcntl.LOCK_NB)
    print("locked", flush=True)
except OSError as e:
    print("refused", flush=True)
`, path)
			if line := readLine(t, out); line != "refused" {
				t.Fatalf("another user's read-only flock: %s", line)
			}
		})
	}
}

// takeWriterLock takes the writer lock at path.
func takeWriterLock(path string) (func(), error) {
	w, err := AcquireWriterLock(path, time.Second)
	if err != nil {
		return nil, err
	}
	return w.Release, nil
}

// takeCompactionLock takes the compaction lock at path.
func takeCompactionLock(path string) (func(), error) {
	c, err := LockCompaction(path, false)
	if err != nil || c == nil {
		return nil, errors.Join(err, errors.New("compaction lock busy"))
	}
	return func() { c.Close() }, nil
}

// A writer lock held past the timeout is a LockHeldError (ErrRefLocked)
// that says who holds it where the system tells (lockHolderKnown): here
// this test's own process, which took it first.
func TestWriterLockSaysWhoHolds(t *testing.T) {
	path := filepath.Join(t.TempDir(), "writer.lock")
	first, err := AcquireWriterLock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Release()
	_, err = AcquireWriterLock(path, 20*time.Millisecond)
	var held *LockHeldError
	if !errors.Is(err, ErrRefLocked) || !errors.As(err, &held) {
		t.Fatalf("acquire while held: %v, want a LockHeldError", err)
	}
	want := LockHeldError{Path: path, UID: -1}
	if lockHolderKnown {
		want.PID, want.UID = os.Getpid(), os.Geteuid()
	}
	if *held != want {
		t.Fatalf("held: %+v, want %+v (%v)", *held, want, err)
	}
}
