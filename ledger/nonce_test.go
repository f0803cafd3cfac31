package ledger_test

import (
	"testing"
	"time"

	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// TestAnsweredNonce: a nonce is found among the ledger's last NonceWindow
// entries, and forgotten once more entries have landed after it.
func TestAnsweredNonce(t *testing.T) {
	dir := initRepo(t)
	l := openLedger(t, dir)
	const nonce = "0123456789abcdef0123456789abcdef"
	ap, err := l.Append("a", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: "mine"}, Nonce: nonce}, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	seen := func() bool {
		t.Helper()
		s, err := l.Head()
		if err != nil {
			t.Fatal(err)
		}
		seq, ok, err := s.AnsweredNonce(nonce)
		if err != nil || ok && seq != ap.Entry.Seq {
			t.Fatalf("AnsweredNonce: seq %d %v, want %d", seq, err, ap.Entry.Seq)
		}
		return ok
	}
	if !seen() {
		t.Fatal("the last entry's nonce was not found")
	}
	builds := make([]ledger.BuildFunc, ledger.NonceWindow-1)
	for i := range builds {
		builds[i] = noteDraft("after")
	}
	if _, err := l.AppendBatch("a", builds); err != nil {
		t.Fatal(err)
	}
	if !seen() {
		t.Fatalf("the nonce of the %dth last entry was not found", ledger.NonceWindow)
	}
	if _, err := l.Append("a", noteDraft("one more")); err != nil {
		t.Fatal(err)
	}
	if seen() {
		t.Fatalf("a nonce %d entries back was still found", ledger.NonceWindow+1)
	}
}
