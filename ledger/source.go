package ledger

import (
	"math/rand/v2"
	"time"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// Source is where a client's ledger of truth lives, chosen once when the
// client opens: this clone's ref (Local), or a git remote's, moved by
// compare-and-swap pushes (Remote). Every read a view makes, every append,
// verify and wait goes through it, so no caller decides by mode, and a third
// source (a server that sequences appends itself) is one more
// implementation.
type Source interface {
	// Remote names the remote (a remote name or URL); "" for the local ref.
	Remote() string
	// Head is the current state, verified: the local tip checked from this
	// clone's record (VerifiedHead), or the remote's tip fetched and
	// verified. No ledger is NOT-INITIALIZED; one that does not verify is
	// refused with the integrity code.
	Head() (*Snapshot, error)
	// LocalHead is the current state when it can be read without asking
	// anyone (ok false otherwise): what an agent polling for work reads to
	// refuse early without taking the writer lock.
	LocalHead() (s *Snapshot, ok bool, err error)
	// Append appends entries as actor, all or none (AppendBatch).
	Append(actor string, builds []BuildFunc) ([]*Appended, error)
	// Verify verifies what is new since this clone's record of the source
	// (everything with full).
	Verify(full bool) (*Report, error)
	// Watch returns a watcher that reports changes of the source's tip.
	Watch() (Watcher, error)
}

// Watcher waits for a source's tip to move from where it was when the
// watcher was made or last returned.
type Watcher interface {
	// Await returns when the tip has moved, or at until.
	Await(until time.Time)
}

// Local is the source of a clone that keeps its own ledger.
func (l *Ledger) Local() Source { return localSource{l} }

// RemoteSource is the source of a clone working through remote (a remote
// name or URL).
func (l *Ledger) RemoteSource(remote string) Source { return remoteSource{l, remote} }

type localSource struct{ l *Ledger }

// The local source's NOT-INITIALIZED errors say which remotes hold a ledger
// (cloneHint): only on that path does it ask them.

func (s localSource) Remote() string { return "" }
func (s localSource) Head() (*Snapshot, error) {
	h, err := s.l.VerifiedHead()
	return h, s.l.cloneHint(err)
}
func (s localSource) LocalHead() (*Snapshot, bool, error) {
	h, err := s.l.Head()
	return h, true, s.l.cloneHint(err)
}
func (s localSource) Append(actor string, builds []BuildFunc) ([]*Appended, error) {
	out, err := s.l.AppendBatch(actor, builds)
	return out, s.l.cloneHint(err)
}
func (s localSource) Verify(full bool) (*Report, error) {
	rep, err := s.l.Verify(full)
	return rep, s.l.cloneHint(err)
}

func (s localSource) Watch() (Watcher, error) {
	tip, err := s.l.Tip()
	return &localWatcher{l: s.l, seen: tip}, err
}

// localWatcher polls the ledger ref. Reading the ref is a small file read;
// polling it every two milliseconds costs a waiting agent well under one
// percent of a core, and an entry is noticed within that time of landing.
type localWatcher struct {
	l    *Ledger
	seen gitstore.ObjectID
}

func (w *localWatcher) Await(until time.Time) {
	for time.Now().Before(until) {
		time.Sleep(min(2*time.Millisecond, time.Until(until)))
		if tip, err := w.l.Tip(); err != nil || tip != w.seen {
			w.seen = tip
			return
		}
	}
}

type remoteSource struct {
	l      *Ledger
	remote string
}

func (s remoteSource) Remote() string { return s.remote }

func (s remoteSource) Head() (*Snapshot, error) {
	tip, err := s.l.FetchRemote(s.remote)
	if err != nil {
		return nil, err
	}
	if tip.IsZero() {
		return nil, errs.New(errs.NotInitialized, "remote %s has no ledger at %s", s.remote, s.l.Ref)
	}
	return s.l.SnapshotAt(tip)
}

func (s remoteSource) LocalHead() (*Snapshot, bool, error) { return nil, false, nil }

func (s remoteSource) Append(actor string, builds []BuildFunc) ([]*Appended, error) {
	return s.l.AppendRemote(s.remote, actor, builds)
}

func (s remoteSource) Verify(full bool) (*Report, error) { return s.l.VerifyRemote(s.remote, full) }

func (s remoteSource) Watch() (Watcher, error) {
	tip, err := s.l.FetchRemote(s.remote)
	return &remoteWatcher{s: s, seen: tip, pause: 50 * time.Millisecond}, err
}

// remoteWatcher fetches the remote's tip with jittered, doubling pauses (50
// ms up to 1 s), so many waiting agents do not poll the server in step.
type remoteWatcher struct {
	s     remoteSource
	seen  gitstore.ObjectID
	pause time.Duration
}

func (w *remoteWatcher) Await(until time.Time) {
	for time.Now().Before(until) {
		time.Sleep(max(min(w.pause/2+rand.N(w.pause), time.Until(until)), 0))
		w.pause = min(2*w.pause, time.Second)
		if tip, err := w.s.l.FetchRemote(w.s.remote); err != nil || tip != w.seen {
			w.seen = tip
			return
		}
	}
}
