package ledger_test

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/ledger"
)

// countingMaintainer is a Maintainer that compacts in this process, holding
// the compaction lock as `tally gc --holding-lock` would, and counts the
// compactions it was handed and how many of them came while the ledger's
// writer lock was held (a lock of its own, not waiting, fails).
func countingMaintainer(t *testing.T, started, held *int) ledger.Maintainer {
	return func(l *ledger.Ledger, lock *os.File) (func(), error) {
		*started++
		// The writer lock's own kind of lock (gitstore/lockfile.go), taken
		// without waiting: nil when the writer lock is held.
		probe, err := gitstore.LockCompaction(l.Files.WriterLock(), false)
		if err != nil {
			return nil, err
		}
		if probe == nil {
			*held++
		} else {
			probe.Close()
		}
		if _, err := l.Compact(); err != nil {
			t.Error(err)
		}
		return func() {}, nil
	}
}

// openMaintained opens the ledger at dir with maintain as its Maintainer.
func openMaintained(t *testing.T, dir string, maintain ledger.Maintainer) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{Maintain: maintain})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.WaitMaintenance(); l.Close() })
	return l
}

func packCount(t *testing.T, dir string) int {
	t.Helper()
	packs, err := filepath.Glob(filepath.Join(gitDir(t, dir), "objects", "pack", "*.idx"))
	if err != nil {
		t.Fatal(err)
	}
	return len(packs)
}

// An append compacts only after it has released the writer lock: the next
// writer, queued on that lock, does not wait for maintenance. Four packs of
// about 100 KiB make a round too large to merge in the appending process, so
// the Maintainer gets it.
func TestMaintenanceAfterWriterLock(t *testing.T) {
	dir := initRepo(t)
	started, held := 0, 0
	l := openMaintained(t, dir, countingMaintainer(t, &started, &held))
	rng := rand.New(rand.NewPCG(7, 7))
	for i := 0; i < 4; i++ {
		big := make([]byte, 100<<10)
		for j := range big {
			big[j] = byte(rng.Uint32())
		}
		pw := gitstore.NewPackWriter()
		pw.Add(gitstore.BlobObject, big)
		if _, err := pw.WriteTo(l.Repo.ObjectDir); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 20; i++ {
		if _, err := l.Append("alice", noteDraft(fmt.Sprint("note ", i))); err != nil {
			t.Fatal(err)
		}
		l.WaitMaintenance()
	}
	if started == 0 || held > 0 {
		t.Fatalf("%d compactions started over 20 appends, %d of them while the writer lock was held", started, held)
	}
}

// The merges of small packs (each append's own) run in the appending
// process: over 60 appends no compaction process is started, and the packs
// stay bounded.
func TestSmallCompactionInProcess(t *testing.T) {
	dir := initRepo(t)
	started, held := 0, 0
	l := openMaintained(t, dir, countingMaintainer(t, &started, &held))
	most := 0
	for i := 0; i < 60; i++ {
		if _, err := l.Append("alice", noteDraft(fmt.Sprint("note ", i))); err != nil {
			t.Fatal(err)
		}
		most = max(most, packCount(t, dir))
	}
	t.Logf("up to %d packs", most)
	if started > 0 || most > 13 {
		t.Fatalf("%d compactions started in the background over 60 appends, up to %d packs", started, most)
	}
}
