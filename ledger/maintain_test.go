package ledger_test

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/tally-dev/tally/ledger"
)

// An append starts maintenance (listing the pack directory, starting a
// compaction process) only after it has released the writer lock: the next
// writer, queued on that lock, does not wait for it. The Maintainer here
// checks the lock is free with a non-blocking flock of its own, and compacts
// in this process while it holds the compaction lock, as `tally gc
// --holding-lock` would.
func TestMaintenanceAfterWriterLock(t *testing.T) {
	dir := initRepo(t)
	started, held := 0, 0
	maintain := func(l *ledger.Ledger, lock *os.File) (func(), error) {
		started++
		f, err := os.OpenFile(l.Files.WriterLock(), os.O_RDWR, 0)
		if err != nil {
			return nil, err
		}
		defer f.Close()
		switch err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); {
		case errors.Is(err, syscall.EWOULDBLOCK):
			held++
		case err != nil:
			return nil, err
		default:
			syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		}
		if _, err := l.Compact(); err != nil {
			return nil, err
		}
		return func() {}, nil
	}
	l, err := ledger.Open(dir, ledger.Options{Maintain: maintain})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	for i := 0; i < 40; i++ {
		if _, err := l.Append("alice", noteDraft(fmt.Sprint("note ", i))); err != nil {
			t.Fatal(err)
		}
		l.WaitMaintenance()
	}
	if started == 0 || held > 0 {
		t.Fatalf("%d compactions started over 40 appends, %d of them while the writer lock was held", started, held)
	}
}
