package ledger_test

import (
	"errors"
	"testing"
	"time"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// A draft's Beside move goes with its entry: the objects it adds are in
// the entry's pack and its ref moves in the same update. A Beside move
// that cannot be made (its ref changed since the Beside read it) does not
// fail the append: the entry lands alone, its BesideErr says why, and the
// other ref stays where it was.
func TestAppendBesideMove(t *testing.T) {
	dir := initRepo(t)
	l := openLedger(t, dir)
	const ref = "refs/notes/beside"
	beside := func(stale bool) *ledger.Beside {
		return &ledger.Beside{Ref: ref, Move: func(aps []*ledger.Appended, pw *gitstore.PackWriter) (*gitstore.RefMove, error) {
			ap := aps[0]
			old, _ := l.Repo.ReadRef(ref)
			blob := pw.Add(gitstore.BlobObject, []byte("beside entry "+ap.Hash.String()+"\n"))
			tree := pw.Add(gitstore.TreeObject, append([]byte("100644 n\x00"), blob[:]...))
			who := gitstore.Ident{Name: "t", Email: "t", When: 1, TZ: "+0000"}
			c := &gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: "beside\n"}
			if !old.IsZero() {
				c.Parents = []gitstore.ObjectID{old}
			}
			if stale {
				old = ap.Commit // not what the ref holds
			}
			return &gitstore.RefMove{Ref: ref, Old: old, New: pw.Add(gitstore.CommitObject, c.Encode())}, nil
		}}
	}
	draft := func(stale bool) ledger.BuildFunc {
		return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: "n"}, Beside: beside(stale)}, nil
		}
	}
	ap, err := l.Append("a", draft(false))
	if err != nil || ap.BesideErr != nil {
		t.Fatalf("append: %v, beside: %v", err, ap.BesideErr)
	}
	moved := gitIn(t, dir, nil, "rev-parse", ref)
	if got := gitIn(t, dir, nil, "cat-file", "-p", moved+":n"); got != "beside entry "+ap.Hash.String() {
		t.Fatalf("%s holds %q", ref, got)
	}
	if tip := gitIn(t, dir, nil, "rev-parse", "refs/tally/ledger"); tip != ap.Commit.String() {
		t.Fatalf("ledger at %s, want %s", tip, ap.Commit)
	}

	ap, err = l.Append("a", draft(true))
	if err != nil {
		t.Fatalf("append with a stale Beside move: %v", err)
	}
	if !errors.Is(ap.BesideErr, gitstore.ErrRefChanged) {
		t.Fatalf("BesideErr %v, want the changed ref", ap.BesideErr)
	}
	if tip := gitIn(t, dir, nil, "rev-parse", "refs/tally/ledger"); tip != ap.Commit.String() {
		t.Fatalf("the entry did not land alone: ledger at %s, want %s", tip, ap.Commit)
	}
	if now := gitIn(t, dir, nil, "rev-parse", ref); now != moved {
		t.Fatalf("%s moved to %s with a stale old value", ref, now)
	}
	if rep, err := l.Verify(true); err != nil {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}
