package ledger

import (
	"runtime"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// Verification tells its Progress how far it has come: in order, every
// progressEvery entries per segment (never per entry), ending at the total,
// however many segments check the chain in parallel; nothing when there is
// nothing to check.
func TestVerifyProgress(t *testing.T) {
	defer func(n int) { minSegment = n }(minSegment)
	minSegment = 100
	dir := testrepo.New(t)
	l, err := Open(dir, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	const total = 1001
	builds := []BuildFunc{func(*Snapshot, time.Time) (*Draft, error) {
		return &Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "progress"}}, nil
	}}
	for len(builds) < total {
		builds = append(builds, func(*Snapshot, time.Time) (*Draft, error) {
			return &Draft{Kind: "note", Body: lease.NoteBody{Text: "n"}}, nil
		})
	}
	if _, err := l.AppendBatch("a", builds); err != nil {
		t.Fatal(err)
	}
	var dones []int
	l.Progress = func(what string, done, all int) {
		if what != "verify" || all != total {
			t.Errorf("progress(%q, %d, %d), want verify of %d", what, done, all, total)
		}
		dones = append(dones, done)
	}
	if _, err := l.Verify(true); err != nil {
		t.Fatal(err)
	}
	parts := max(1, min(runtime.GOMAXPROCS(0), total/minSegment))
	if len(dones) == 0 || dones[len(dones)-1] != total {
		t.Fatalf("progress %v does not end at %d", dones, total)
	}
	if most := total/progressEvery + parts; len(dones) > most {
		t.Errorf("%d calls for %d entries in %d segments, want at most %d: %v", len(dones), total, parts, most, dones)
	}
	for i := 1; i < len(dones); i++ {
		if dones[i] <= dones[i-1] {
			t.Errorf("progress goes back: %v", dones)
		}
	}
	dones = nil
	if _, err := l.Verify(false); err != nil || len(dones) != 0 {
		t.Errorf("verify with nothing new: %v, progress %v", err, dones)
	}
}
