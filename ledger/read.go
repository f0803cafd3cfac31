package ledger

import (
	"encoding/json"
	"strings"
	"time"

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
	Kind    chain.Kind `json:"kind"`
	Summary string     `json:"summary"`
	Commit  string     `json:"commit"`
}

// LogFilter selects log entries; a zero field selects all.
type LogFilter struct {
	Actor string     // entries by this actor
	Kind  chain.Kind // entries of this kind
	Cell  string     // entries about this cell ("wave/cell", from the body)
	Since time.Time  // entries dated at or after this time
}

// match reports whether e passes f. Since is not judged here: LogFrom stops
// at the first entry before it, as entry time never goes backwards.
func (f LogFilter) match(e *chain.Entry) bool {
	if f.Actor != "" && e.Actor != f.Actor || f.Kind != "" && e.Kind != f.Kind {
		return false
	}
	if f.Cell == "" {
		return true
	}
	var ref struct{ Wave, Cell string }
	return json.Unmarshal(e.Body, &ref) == nil && ref.Wave+"/"+ref.Cell == f.Cell
}

// Log returns the last n entries (all with n <= 0) of the local ledger,
// newest first. It reads what the commits say; verify is what checks them.
func (l *Ledger) Log(n int) ([]LogEntry, error) {
	tip, err := l.Tip()
	if err != nil {
		return nil, err
	}
	return l.LogFrom(tip, n, LogFilter{})
}

// LogFrom is Log starting at the ledger commit tip, keeping the entries f
// selects (the last n of them).
func (l *Ledger) LogFrom(tip gitstore.ObjectID, n int, f LogFilter) ([]LogEntry, error) {
	if tip.IsZero() {
		return nil, errs.New(errs.NotInitialized, "no ledger at %s (run tally init)", l.Ref)
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	out := []LogEntry{}
	rd := db.Cursor()
	for cur := tip; !cur.IsZero() && (n <= 0 || len(out) < n); {
		c, err := rd.ReadCommit(cur)
		if err != nil {
			return nil, l.historyShallow(errs.Wrap(errs.Corrupt, err, "ledger commit %s", cur))
		}
		raw, err := entryBytes(rd, c.Tree)
		if err != nil {
			return nil, errs.Wrap(errs.Corrupt, err, "ledger commit %s", cur)
		}
		e, err := chain.Decode(raw)
		if err != nil {
			return nil, errs.Wrap(errs.Corrupt, err, "ledger commit %s", cur)
		}
		if !f.Since.IsZero() {
			if ts, err := chain.ParseTime(e.TS); err == nil && ts.Before(f.Since) {
				break // every older entry is dated before it too
			}
		}
		if f.match(e) {
			out = append(out, LogEntry{Seq: e.Seq, Hash: chain.EntryHash(raw), TS: e.TS, Actor: e.Actor, Kind: e.Kind,
				Summary: strings.SplitN(c.Message, "\n", 2)[0], Commit: cur.String()})
		}
		cur = gitstore.ObjectID{}
		if len(c.Parents) > 0 {
			cur = c.Parents[0]
		}
	}
	return out, nil
}
