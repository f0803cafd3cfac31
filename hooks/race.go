package hooks

import (
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/ledger"
)

// A lost compare-and-swap race costs the server nothing beyond reading a ref.
// receive-pack checks each pushed old value only in its ref transaction,
// after pre-receive has run, so without this check every loser of a race paid
// for a whole verify of entries that could never land. Refusing early is
// always safe: receive-pack would refuse the same update later, and the hook
// only reads.

// Retry hint bounds: the server's suggestion of how long a loser should wait
// before its next attempt, about one landing interval of recent entries.
const (
	minRetryHint     = 5 * time.Millisecond
	maxRetryHint     = time.Second
	defaultRetryHint = 50 * time.Millisecond
)

// LostRace returns the refusal of a push whose ledger update expects an old
// value the ledger ref no longer holds (nil when it holds it, or the push
// does not touch the ledger). The message is ledger.LostRaceMessage's, so a
// client can read the current tip and the server's retry hint from it.
func LostRace(l *ledger.Ledger, updates []Update) (*Finding, error) {
	for _, u := range updates {
		if u.Ref != l.Ref {
			continue
		}
		cur, err := l.Tip()
		if err != nil {
			return nil, err
		}
		if cur == u.Old {
			return nil, nil
		}
		return &Finding{Ref: u.Ref, Code: errs.Conflict, Message: ledger.LostRaceMessage(u.Old, cur, retryHint(l, u.Old, cur))}, nil
	}
	return nil, nil
}

// racingWindow is how many entries behind the tip a pushed old value may be
// for the push to count as racing; one further behind was merely stale.
const racingWindow = 16

// retryHint is the mean interval between the entries that landed since old
// (by their timestamps), within [minRetryHint, maxRetryHint]: after that long
// another writer has typically landed, so a loser retrying then meets a new
// tip rather than a push in flight. A push built on a tip more than
// racingWindow entries old lost no race, it was stale: 0, fetch at once.
// defaultRetryHint when old is unknown here.
func retryHint(l *ledger.Ledger, old, cur gitstore.ObjectID) time.Duration {
	if old.IsZero() || cur.IsZero() {
		return defaultRetryHint
	}
	a, err1 := l.SnapshotAt(old)
	b, err2 := l.SnapshotAt(cur)
	if err1 != nil || err2 != nil || b.Meta.Size <= a.Meta.Size {
		return defaultRetryHint
	}
	if b.Meta.Size-a.Meta.Size > racingWindow {
		return 0
	}
	ta, err1 := chain.ParseTime(a.Meta.TS)
	tb, err2 := chain.ParseTime(b.Meta.TS)
	if err1 != nil || err2 != nil {
		return defaultRetryHint
	}
	d := tb.Sub(ta) / time.Duration(b.Meta.Size-a.Meta.Size)
	return max(minRetryHint, min(d, maxRetryHint))
}
