package ledger

import (
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// LogEntry is one line of the ledger's log.
type LogEntry struct {
	Seq     uint64     `json:"seq"`
	Hash    chain.Hash `json:"hash"`
	TS      string     `json:"ts"`
	Actor   string     `json:"actor"`
	Kind    string     `json:"kind"`
	Summary string     `json:"summary"`
	Commit  string     `json:"commit"`
}

// Log returns the last n entries (all with n <= 0) of the local ledger,
// newest first. It reads what the commits say; verify is what checks them.
func (l *Ledger) Log(n int) ([]LogEntry, error) {
	tip, err := l.Tip()
	if err != nil {
		return nil, err
	}
	return l.LogFrom(tip, n)
}

// LogFrom is Log starting at the ledger commit tip.
func (l *Ledger) LogFrom(tip gitstore.ObjectID, n int) ([]LogEntry, error) {
	if tip.IsZero() {
		return nil, errs.New("NOT-INITIALIZED", "no ledger at %s (run tally init)", l.Ref)
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	var out []LogEntry
	for cur := tip; !cur.IsZero() && (n <= 0 || len(out) < n); {
		c, err := db.ReadCommit(cur)
		if err != nil {
			return nil, errs.Wrap("CORRUPT", err, "ledger commit %s", cur)
		}
		raw, err := entryBytes(db, c.Tree)
		if err != nil {
			return nil, errs.Wrap("CORRUPT", err, "ledger commit %s", cur)
		}
		e, err := chain.Decode(raw)
		if err != nil {
			return nil, errs.Wrap("CORRUPT", err, "ledger commit %s", cur)
		}
		out = append(out, LogEntry{Seq: e.Seq, Hash: chain.EntryHash(raw), TS: e.TS, Actor: e.Actor, Kind: e.Kind,
			Summary: strings.SplitN(c.Message, "\n", 2)[0], Commit: cur.String()})
		cur = gitstore.ObjectID{}
		if len(c.Parents) > 0 {
			cur = c.Parents[0]
		}
	}
	return out, nil
}
