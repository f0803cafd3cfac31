package gitstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The writer lock times out with ErrRefLocked while another holder has it; a
// waiter that gave up leaves nothing behind (its blocked flock drops what it
// takes), and a waiter still within its timeout gets the lock as soon as the
// holder releases it.
func TestWriterLockTimeoutAndHandOver(t *testing.T) {
	path := filepath.Join(t.TempDir(), "writer.lock")
	first, err := AcquireWriterLock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := AcquireWriterLock(path, 20*time.Millisecond); !errors.Is(err, ErrRefLocked) {
			t.Fatalf("acquire while held: %v, want ErrRefLocked", err)
		}
	}
	got := make(chan error, 1)
	go func() {
		w, err := AcquireWriterLock(path, time.Minute)
		if err == nil {
			w.Release()
		}
		got <- err
	}()
	first.Release()
	if err := <-got; err != nil {
		t.Fatalf("waiter after release: %v", err)
	}
	// The three abandoned waiters took the lock in turn and dropped it: a
	// new holder gets it, and holds it alone.
	again, err := AcquireWriterLock(path, time.Minute)
	if err != nil {
		t.Fatalf("acquire after abandoned waiters: %v", err)
	}
	if _, err := AcquireWriterLock(path, 20*time.Millisecond); !errors.Is(err, ErrRefLocked) {
		t.Fatalf("second holder admitted: %v", err)
	}
	again.Release()
}

// A holder clears its record by overwriting it with spaces, not by cutting
// the file (FORMAT.md §8: a truncate frees the file's block, the costliest
// system call of a note after fsync and open); a padded record still names
// the lock a killed holder left, and the next holder removes that orphan.
func TestWriterRecordPaddedNotCut(t *testing.T) {
	r := odbNewRepo(t)
	r.commitFile("a", "1")
	repo, err := Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	head, err := repo.Head()
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(r.dir, ".git", "tally", "writer.lock")
	wl, err := AcquireWriterLock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if err := repo.UpdateRef(wl, "refs/heads/x", ObjectID{}, head); err != nil {
		t.Fatal(err)
	}
	wl.Release()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if line := "refs/heads/x " + head.String() + "\n"; len(b) != len(line) || strings.Trim(string(b), " ") != "" {
		t.Fatalf("record after the update: %q, want %d spaces (the record %q overwritten)", b, len(line), line)
	}
	// The cleared record is nothing left over: the next holder has no
	// recovery to run, and LockWriter rewrites no record for it.
	if wl, err := AcquireWriterLock(path, time.Second); err != nil {
		t.Fatal(err)
	} else if wl.Release(); wl.stale != "" {
		t.Fatalf("a cleared record reads as left over: %q", wl.stale)
	}

	// a holder killed after its padded record and its lock were written
	orphan := filepath.Join(r.dir, ".git", "refs", "heads", "y.lock")
	if err := os.WriteFile(orphan, []byte(head.String()+"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte("refs/heads/y "+head.String()+"\n"+strings.Repeat(" ", 20)), 0o644); err != nil {
		t.Fatal(err)
	}
	wl, err = AcquireWriterLock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Release()
	if err := repo.UpdateRef(wl, "refs/heads/x", head, head); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(orphan); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the orphaned lock the padded record names is still there: %v", err)
	}
}
