package ledger_test

import (
	"sync"
	"sync/atomic"
	"testing"

	"github.com/tally-dev/tally/ledger"
)

// TestViewsBesideAppends: a view holds no lock, so appends move the ref and
// the writer's record while it reads. Views running beside a stream of
// appends must never take that for a rollback or a fork: every view
// answers, and the ledger verifies afterwards.
func TestViewsBesideAppends(t *testing.T) {
	dir := initRepo(t)
	w, v := openLedger(t, dir), openLedger(t, dir)
	defer w.Close()
	defer v.Close()
	var done atomic.Bool
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		defer done.Store(true)
		for range 300 {
			if _, err := w.AppendBatch("a", []ledger.BuildFunc{noteDraft("beside a view")}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	views := 0
	for !done.Load() {
		if _, err := v.VerifiedHead(); err != nil {
			t.Fatalf("view %d beside appends: %v", views, err)
		}
		views++
	}
	wg.Wait()
	t.Logf("%d views beside 300 appends", views)
	verifyOK(t, dir, true)
}
