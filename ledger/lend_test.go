package ledger_test

import (
	"testing"
	"time"

	"github.com/tally-dev/tally/ledger"
)

// An append builds on the snapshot a caller lent it (ledger.Lend) when the
// ref still holds that snapshot's commit, instead of reading the state
// again; a lent snapshot of a tip that has moved since is not used, and a
// lent snapshot serves one append only.
func TestAppendBuildsOnLentSnapshot(t *testing.T) {
	dir := initRepo(t)
	l := openLedger(t, dir)
	var got *ledger.Snapshot
	build := func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		got = s
		return noteDraft("n")(s, now)
	}
	lent, err := l.Head()
	if err != nil {
		t.Fatal(err)
	}
	l.Lend(lent)
	if _, err := l.Append("a", build); err != nil {
		t.Fatal(err)
	}
	if got != lent {
		t.Fatalf("the append read the state again instead of building on the lent snapshot of %s", lent.Commit)
	}
	if _, err := l.Append("a", build); err != nil {
		t.Fatal(err)
	}
	if got == lent {
		t.Fatal("a second append built on the snapshot lent to the first")
	}

	stale, err := l.Head()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := l.Append("a", noteDraft("moves the tip")); err != nil {
		t.Fatal(err)
	}
	l.Lend(stale)
	if _, err := l.Append("a", build); err != nil {
		t.Fatal(err)
	}
	if got == stale || got.Commit == stale.Commit {
		t.Fatalf("the append built on a lent snapshot of %s, no longer the tip", stale.Commit)
	}
	if rep, err := l.Verify(true); err != nil {
		t.Fatalf("verify after the appends: %v %+v", err, rep)
	}
}
