package ledger

import (
	"runtime"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// Verification retains nothing per entry: the heap that is live while a
// ledger of 4N entries is verified is no larger than for N entries, give or
// take 500 bytes an entry (the in-order path keeps a 20-byte id for each;
// keeping every walked commit, as before, cost 1,000–1,350; single samples
// of the parallel path reached 565 under scheduling, hence the least of
// three),
// both for the parallel segments and for the in-order path with a
// callback. The live heap is measured after a collection at every progress
// call, that is, in the middle of the work, every progressEvery entries.
func TestVerifyMemoryFlatInLength(t *testing.T) {
	if !gitstore.PacksMapped {
		t.Skip("this build reads packs into the heap (Windows' way, and -tags portable): the live heap grows with the packs verify reads")
	}
	defer func(n int) { minSegment = n }(minSegment)
	// Short segments and overlay restarts keep what is in flight at once (a
	// few segments being walked, queued and checked) small beside the growth
	// a per-entry retention would show (a kilobyte an entry when every
	// walked commit was kept).
	minSegment = 64
	dir := testrepo.New(t)
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	grow := func(n int) {
		var builds []BuildFunc
		if tip, _ := l.Tip(); tip.IsZero() {
			builds = append(builds, func(*Snapshot, time.Time) (*Draft, error) {
				return &Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "mem"}}, nil
			})
		}
		for len(builds) < n {
			builds = append(builds, func(*Snapshot, time.Time) (*Draft, error) {
				return &Draft{Kind: "note", Body: lease.NoteBody{Text: "a note of a typical length, some sixty bytes"}}, nil
			})
		}
		if _, err := l.AppendBatch("a", builds); err != nil {
			t.Fatal(err)
		}
		l.WaitMaintenance() // a background compaction allocates too
	}
	// peak verifies the whole ledger and returns the largest live heap seen.
	peak := func(inOrder bool) uint64 {
		var most uint64
		l.Progress = func(string, int, int) {
			runtime.GC()
			var m runtime.MemStats
			runtime.ReadMemStats(&m)
			most = max(most, m.HeapAlloc)
		}
		defer func() { l.Progress = nil }()
		tip, err := l.Tip()
		if err != nil {
			t.Fatal(err)
		}
		var each func(*Applied) error
		if inOrder {
			each = func(*Applied) error { return nil }
		}
		if _, err := l.VerifyRangeEach(gitstore.ObjectID{}, tip, each); err != nil {
			t.Fatal(err)
		}
		return most
	}
	// least is the smallest of three peaks: how many parallel segments are
	// in flight when the heap is sampled varies with scheduling, and one
	// unlucky sample must not read as growth (a real retention shows in
	// every run).
	least := func(inOrder bool) uint64 { return min(peak(inOrder), peak(inOrder), peak(inOrder)) }
	const n = 1500
	grow(n)
	small := [2]uint64{least(false), least(true)}
	grow(3 * n)
	for i, big := range [2]uint64{least(false), least(true)} {
		path := [2]string{"parallel segments", "in order"}[i]
		t.Logf("%s: live heap %d KB at %d entries, %d KB at %d", path, small[i]>>10, n, big>>10, 4*n)
		if big > small[i]+500*3*n {
			t.Errorf("%s: live heap grew by %d bytes an entry from %d to %d entries, want at most 500",
				path, (int64(big)-int64(small[i]))/(3*n), n, 4*n)
		}
	}
}
