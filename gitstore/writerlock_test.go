package gitstore

import (
	"errors"
	"path/filepath"
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
