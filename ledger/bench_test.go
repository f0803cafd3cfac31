package ledger_test

import (
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

func note(text string) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: text}}, nil
	}
}

func genesis() ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "test"}}, nil
	}
}

// benchLedger is a ledger holding its genesis entry, in a new repository.
func benchLedger(b *testing.B) *ledger.Ledger {
	b.Helper()
	dir := testrepo.New(b)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(l.WaitMaintenance)
	if _, err := l.Append("bench", genesis()); err != nil {
		b.Fatal(err)
	}
	return l
}

func BenchmarkAppendNote(b *testing.B) {
	l := benchLedger(b)
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.Append("bench", note("x")); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkAppendBatch(b *testing.B) {
	l := benchLedger(b)
	builds := make([]ledger.BuildFunc, 1000)
	for i := range builds {
		builds[i] = note("x")
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := l.AppendBatch("bench", builds); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*len(builds)), "ns/entry")
}

// BenchmarkAnsweredNonce is what the sequencer pays, under the writer
// lock, to look for a request's nonce among the ledger's last
// ledger.NonceWindow entries (a nonce none carries: the whole window).
func BenchmarkAnsweredNonce(b *testing.B) {
	l := benchLedger(b)
	builds := make([]ledger.BuildFunc, ledger.NonceWindow+10)
	for i := range builds {
		builds[i] = note("x")
	}
	if _, err := l.AppendBatch("bench", builds); err != nil {
		b.Fatal(err)
	}
	s, err := l.Head()
	if err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, seen, err := s.AnsweredNonce(ledger.NewNonce()); err != nil || seen {
			b.Fatal(seen, err)
		}
	}
}
