package ledger

import (
	crand "crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// Draft is an entry to append, before the ledger gives it a place in the chain.
type Draft struct {
	Kind chain.Kind
	Body any
	// Actor, if set, replaces the appender's actor (sync rebuilding entries
	// that other local actors wrote).
	Actor string
	// Nonce, if set, is the entry's nonce (32 lowercase hex digits) instead
	// of a fresh one: a writer whose entry the writer lock's holder appends
	// chose it, and finds the entry by it if the holder dies before
	// answering (AppendHanded).
	Nonce string
	// Beside, if set, moves one more ref with the entry's (only in a local
	// append: a remote's sequencer writes no refs of this clone).
	Beside *Beside
}

// Beside is a ref moved with an append's entries (Draft.Beside), in the
// same UpdateRefsWithPack right after the ledger's ref, so one pack and
// one round of fsyncs carry both. It cannot fail the append: a Beside
// that errs, or whose move does not land, leaves the entries to land
// alone, and their Appended.BesideErr says why.
type Beside struct {
	Ref string
	// Move runs under the writer lock once the append's entries are built,
	// on every attempt, with every entry of the append whose draft moves
	// Ref, in order (an append of several writers' intents holds several);
	// it adds the objects of the ref's new value to the append's pack pw
	// and returns the one move of Ref (nil: none needed). The Move of the
	// first such entry runs for all of them.
	Move func(aps []*Appended, pw *gitstore.PackWriter) (*gitstore.RefMove, error)
}

// BuildFunc decides the entry to append given the current tip state and the
// entry's timestamp. It runs again on every retry, so a decision such as "the
// next ready cell" is always made on the state the entry will extend.
type BuildFunc func(s *Snapshot, now time.Time) (*Draft, error)

// Appended describes an acknowledged append.
type Appended struct {
	Applied
	Commit gitstore.ObjectID
	// BesideErr is why the draft's Beside move did not land (nil: it did,
	// or there was none).
	BesideErr error
	beside    *Beside
	raw       []byte // the entry's canonical bytes
}

// Retry policy for a lost compare-and-swap (only a writer that bypasses the
// writer lock, such as the git CLI, can make tally lose one).
const (
	appendAttempts    = 12
	writerLockTimeout = 30 * time.Second
)

// Append appends one entry: read the tip, build the entry on it, check and
// apply it with Step, write the new objects as one fsynced pack, and move the
// ref with a compare-and-swap. A lost swap re-reads and rebuilds with jittered
// backoff; when attempts run out the error is CONFLICT. The entry is
// acknowledged (returned) only once the objects and the ref are durable.
func (l *Ledger) Append(actor string, build BuildFunc) (*Appended, error) {
	out, err := l.AppendBatch(actor, []BuildFunc{build})
	if err != nil {
		return nil, err
	}
	return out[0], nil
}

// lockWriter takes the clone's writer lock (one tally writer of the ledger at
// a time); one held longer than writerLockTimeout is CONFLICT.
func (l *Ledger) lockWriter() (*gitstore.WriterLock, error) {
	wl, err := l.Repo.LockWriter(l.Files.WriterLock(), writerLockTimeout)
	return wl, l.writerLockErr(err)
}

// writerLockErr is err of taking the writer lock, as the CLI reports it: a
// lock held past writerLockTimeout is CONFLICT, saying who held it where
// the system tells (details holder_pid, holder_uid).
func (l *Ledger) writerLockErr(err error) error {
	var held *gitstore.LockHeldError
	if !errors.As(err, &held) {
		return err
	}
	e := errs.New(errs.Conflict, "another tally writer held %s for %v: %v", l.Ref, writerLockTimeout, held)
	if held.PID != 0 {
		e = e.With("holder_pid", held.PID)
	}
	if held.UID >= 0 {
		e = e.With("holder_uid", held.UID)
	}
	return e
}

// AppendBatch appends several entries, each built on the state the previous
// one leaves, with one pack and one compare-and-swap: all of them land or
// none does. It is how bulk work (benchmarks, sync) avoids paying for
// durability once per entry.
func (l *Ledger) AppendBatch(actor string, builds []BuildFunc) ([]*Appended, error) {
	if err := checkBatch(actor, builds); err != nil {
		return nil, err
	}
	// The files the append creates (its pack, the index, a lock for the
	// ledger's ref and for each Beside move expected) are made before the
	// lock, beside the other writers' appends: under it, creating them was
	// half of an append's CPU (PERFORMANCE.md at b45f87f, "The drain, fifth pass").
	spares := l.makeSpares()
	defer spares.Remove() // after the release: the next writer does not wait for it
	wl, err := l.lockWriter()
	if err != nil {
		return nil, err
	}
	return l.holding(wl, spares, func() ([]*Appended, error) { return l.appendLocked(wl, actor, builds) })
}

// checkBatch refuses an append of no entries, or by an invalid actor.
func checkBatch(actor string, builds []BuildFunc) error {
	if err := chain.ValidActor(actor); err != nil {
		return errs.New(errs.Usage, "%v", err)
	}
	if len(builds) == 0 {
		return errs.New(errs.Usage, "nothing to append")
	}
	return nil
}

// makeSpares makes the spares of the next append (ExpectBeside).
func (l *Ledger) makeSpares() *gitstore.Spares {
	return l.Repo.MakeSpares(3 + int(l.beside.Swap(0)))
}

// holding runs own, this writer's append, under the writer lock wl, then
// serves the intents other writers handed it meanwhile (serve), and
// releases wl; spares are the files made for it before the lock.
func (l *Ledger) holding(wl *gitstore.WriterLock, spares *gitstore.Spares, own func() ([]*Appended, error)) ([]*Appended, error) {
	wl.UseSpares(spares)
	endHold := func() {}
	if db, err := l.Repo.Objects(); err == nil {
		endHold = db.HoldRetired()
	}
	ln := l.listen(wl)
	out, err := own()
	served := false
	if ln != nil {
		served = l.serve(wl, ln)
		ln.Close() // before the release: no intent reaches a writer that no longer holds the lock
	}
	// The next writer waits for the lock: maintenance (unmapping the packs
	// compaction retired, listing the pack directory, starting a compaction
	// process) comes after its release.
	wl.Release()
	endHold()
	if err == nil || served { // a refused holder's batch wrote a pack too
		l.maybePack()
	}
	return out, err
}

// ExpectBeside tells the next append of l that one of its drafts will
// have a Beside move (Draft.Beside), so that it makes that ref's lock before
// the writer lock too (AppendBatch). A wrong guess costs a file made for
// nothing, or one made under the lock.
func (l *Ledger) ExpectBeside() { l.beside.Add(1) }

// appendLocked is AppendBatch under the writer lock wl.
func (l *Ledger) appendLocked(wl *gitstore.WriterLock, actor string, builds []BuildFunc) ([]*Appended, error) {
	return l.retried(func() ([]*Appended, error) {
		return l.tryAppend(wl, func(snap *Snapshot, pw *gitstore.PackWriter) ([]*Appended, error) {
			return l.buildAll(snap, actor, time.Time{}, builds, pw)
		})
	})
}

// retried runs attempt, an append under the writer lock, again while it
// loses its compare-and-swap, with jittered backoff (only a writer that
// bypasses the lock, such as the git CLI, can make it lose); when attempts
// run out the error is CONFLICT.
func (l *Ledger) retried(attempt func() ([]*Appended, error)) ([]*Appended, error) {
	pause := time.Millisecond
	for range appendAttempts {
		out, err := attempt()
		if !errors.Is(err, gitstore.ErrRefChanged) {
			return out, err
		}
		time.Sleep(pause/2 + rand.N(pause))
		pause = min(2*pause, 100*time.Millisecond)
	}
	return nil, errs.New(errs.Conflict, "%s kept changing; gave up after %d attempts", l.Ref, appendAttempts)
}

// tryAppend is one attempt of an append under wl: read the tip, check what
// is new since the writer's record, build the entries on it with prepare
// (which adds their objects to pw and advances the snapshot; no entries:
// nothing is written), and move the refs.
func (l *Ledger) tryAppend(wl *gitstore.WriterLock, prepare func(*Snapshot, *gitstore.PackWriter) ([]*Appended, error)) ([]*Appended, error) {
	tip, err := l.Tip()
	if err != nil {
		return nil, err
	}
	snap, err := l.appendSnapshot(tip)
	if err != nil {
		return nil, err
	}
	if err := l.verifiedUpTo(snap); err != nil {
		return nil, err
	}
	pw := gitstore.NewPackWriter()
	out, err := prepare(snap, pw)
	if err != nil || len(out) == 0 {
		return out, err
	}
	err = l.moveRefs(wl, tip, out, pw)
	if err != nil {
		if errors.Is(err, gitstore.ErrRefLocked) {
			return nil, errs.Wrap(errs.RefLocked, err, "update %s", l.Ref)
		}
		if errors.Is(err, gitstore.ErrRefChanged) {
			return nil, err
		}
		return nil, errs.Wrap(errs.Internal, err, "update %s", l.Ref)
	}
	snap.built = nil // landed: the repository holds them, and a lent snapshot lives on
	// The new tip extends a checked one through Step: the writer's record
	// moves to it, so the next append checks nothing. A record that fails
	// to land only makes the next append check more.
	last := out[len(out)-1]
	l.writeRecordMeta(l.writerRecordPath(), last.Commit, last.Meta)
	return out, nil
}

// moveRefs moves the ledger's ref from parent to the last entry of out,
// with the objects of pw, and with it the refs the entries' Beside moves
// (Draft.Beside). A Beside move that cannot be made (its ref changed, or is
// locked, since the Beside read it) is dropped and the ledger's ref moved
// alone; once the ledger's ref has landed, a later move that fails is only
// the BesideErr of its entry.
func (l *Ledger) moveRefs(wl *gitstore.WriterLock, parent gitstore.ObjectID, out []*Appended, pw *gitstore.PackWriter) error {
	moves := []gitstore.RefMove{{Ref: l.Ref, Old: parent, New: out[len(out)-1].Commit}}
	var beside [][]*Appended // the entries of each move after the first
	for _, aps := range besideGroups(out) {
		m, err := aps[0].beside.Move(aps, pw)
		for _, ap := range aps {
			ap.BesideErr = err
		}
		if err == nil && m != nil {
			moves = append(moves, *m)
			beside = append(beside, aps)
		}
	}
	for {
		_, err := l.Repo.UpdateRefsWithPack(wl, moves, pw)
		var me *gitstore.RefMoveError
		if !errors.As(err, &me) {
			return err
		}
		if me.Index == 0 {
			return me.Err
		}
		for _, aps := range beside[me.Index-1:] {
			for _, ap := range aps {
				ap.BesideErr = me
			}
		}
		if me.Landed > 0 {
			return nil // the ledger's ref moved: the entries landed
		}
		moves, beside = moves[:me.Index], beside[:me.Index-1]
	}
}

// besideGroups are the entries of out with a Beside move, by the ref it
// moves, in the order the refs first appear.
func besideGroups(out []*Appended) [][]*Appended {
	var groups [][]*Appended
	for _, ap := range out {
		if ap.beside == nil {
			continue
		}
		i := slices.IndexFunc(groups, func(g []*Appended) bool { return g[0].beside.Ref == ap.beside.Ref })
		if i < 0 {
			groups = append(groups, nil)
			i = len(groups) - 1
		}
		groups[i] = append(groups[i], ap)
	}
	return groups
}

// writerRecordPath is the writer's own record (FORMAT.md §8): the tip this
// clone's writer last extended or checked. It is apart from verify's record,
// so that tally verify still re-derives the entries this clone appended.
func (l *Ledger) writerRecordPath() string { return l.Files.Appended() }

// verifiedUpTo makes sure the chain the writer is about to extend verifies:
// the entries since the writer's record, else since verify's, are verified
// (normally none: every append records its tip), and the writer's record
// moves to tip. A ledger that does not verify, or no longer extends what
// this clone wrote or verified, is never extended; the error carries the
// integrity code and the first bad seq.
func (l *Ledger) verifiedUpTo(snap *Snapshot) error {
	checked, err := l.checkSinceRecord(snap, "append to")
	if err != nil || !checked {
		return err
	}
	return l.writeRecordMeta(l.writerRecordPath(), snap.Commit, snap.Meta)
}

// VerifiedHead is Head for a view: the writer's check (verifiedUpTo) runs
// on the tip first, so a view answers only from a state that verifies from
// this clone's record, at the cost of the entries after it (normally none),
// and refuses with the integrity code and seq otherwise. The record moves to
// the checked tip when it can; a view on a read-only local directory still
// answers, only checking the same entries again next time.
//
// A view holds no lock, so an append may move the ref and the record past
// the tip it read: the record then names a descendant of that tip, which
// reads as a rollback. A fork or rollback is therefore believed only when
// the ref still holds the tip the view checked; otherwise the view reads
// the new tip and checks again (an append landed; a real rollback leaves
// the ref where it is).
func (l *Ledger) VerifiedHead() (*Snapshot, error) {
	for {
		snap, err := l.Head()
		if err != nil {
			return nil, err
		}
		checked, err := l.checkSinceRecord(snap, "answer from")
		if code := errs.CodeOf(err); code == errs.ForkDetected || code == errs.RollbackDetected {
			if now, terr := l.Tip(); terr == nil && now != snap.Commit {
				continue
			}
		}
		if err != nil {
			return nil, err
		}
		if checked {
			_ = l.writeRecordMeta(l.writerRecordPath(), snap.Commit, snap.Meta)
		}
		return snap, nil
	}
}

// checkSinceRecord verifies the entries of snap after the writer's record,
// else after verify's, else from genesis; checked says whether it had to
// (false: the writer's record already names this tip). An error is refused
// as "refusing to <what> a ledger that does not verify", with the
// verifier's code and details.
func (l *Ledger) checkSinceRecord(snap *Snapshot, what string) (checked bool, err error) {
	tip := snap.Commit
	if tip.IsZero() || l.recordNames(l.writerRecordPath(), snap) {
		return false, nil // the usual case: the last append recorded this very tip
	}
	base, _ := l.trustedRecordAt(l.writerRecordPath())
	if base.IsZero() {
		base, _ = l.trustedRecord()
	}
	if base == tip {
		return true, nil
	}
	if _, err := l.VerifyRange(base, tip); err != nil {
		e := errs.From(err)
		msg := "refusing to " + what + " a ledger that does not verify (run tally verify): " + e.Message
		if e.Code == errs.ForkDetected || e.Code == errs.RollbackDetected {
			msg += fmt.Sprintf(" (if you moved %s on purpose, remove %s and %s)", l.Ref, l.writerRecordPath(), l.recordPath())
		}
		refused := errs.New(e.Code, "%s", msg)
		for k, v := range e.Details {
			refused = refused.With(k, v)
		}
		return false, refused
	}
	return true, nil
}

// Prepared is an entry built on the current tip, with the objects of its
// commit written, but not on the ref.
type Prepared struct {
	Appended
	Parent gitstore.ObjectID // the tip it was built on (zero for genesis)
}

// Prepare builds the next entry on the current tip and writes its objects
// without moving the ref. It exists for tools and tests that move the ref
// themselves (for example with git update-ref); Append is the normal path.
func (l *Ledger) Prepare(actor string, build BuildFunc) (*Prepared, error) {
	if err := chain.ValidActor(actor); err != nil {
		return nil, errs.New(errs.Usage, "%v", err)
	}
	tip, err := l.Tip()
	if err != nil {
		return nil, err
	}
	out, pw, err := l.prepareOn(tip, actor, []BuildFunc{build})
	if err != nil {
		return nil, err
	}
	if _, err := pw.WriteTo(l.Repo.ObjectDir); err != nil {
		return nil, err
	}
	return &Prepared{Appended: *out[0], Parent: tip}, nil
}

// prepareOn builds entries on tip, each on the state the previous one
// leaves, and returns them with the objects to write.
func (l *Ledger) prepareOn(tip gitstore.ObjectID, actor string, builds []BuildFunc) ([]*Appended, *gitstore.PackWriter, error) {
	snap, err := l.SnapshotAt(tip)
	if err != nil {
		return nil, nil, err
	}
	pw := gitstore.NewPackWriter()
	out, err := l.buildAll(snap, actor, time.Time{}, builds, pw)
	return out, pw, err
}

// buildAll builds entries on snap, each on the state the previous one
// leaves, and advances snap past them; clock is the time they are built
// at (zero: the ledger's clock, EntryTime).
func (l *Ledger) buildAll(snap *Snapshot, actor string, clock time.Time, builds []BuildFunc, pw *gitstore.PackWriter) ([]*Appended, error) {
	var out []*Appended
	for _, build := range builds {
		ap, err := l.build(snap, actor, clock, build, pw)
		if err != nil {
			return nil, err
		}
		out = append(out, ap)
	}
	return out, nil
}

// build builds one entry on snap as actor at clock (zero: the ledger's
// clock), with snap.Commit as its commit's parent, adds the new objects to
// pw, and advances snap past it (its tree, commit and meta). A refusal,
// by the build or the rules (Step), leaves snap as it was.
func (l *Ledger) build(snap *Snapshot, actor string, clock time.Time, build BuildFunc, pw *gitstore.PackWriter) (*Appended, error) {
	parent := snap.Commit
	if clock.IsZero() {
		clock = l.now()
	}
	now := entryTime(snap, clock)
	if !chain.TimeInRange(now) {
		// The format's range (FORMAT.md §2); the CLI refuses such a
		// TALLY_NOW when it opens the repository, a library clock here.
		return nil, errs.New(errs.Usage, "the clock reads %s, outside %s..%s, the times an entry can carry",
			now.Format(time.RFC3339Nano), chain.FirstTime, chain.LastTime).With("limit", chain.RangeLimit(now))
	}
	draft, err := build(snap, now)
	if err != nil {
		return nil, err
	}
	if draft.Actor != "" {
		actor = draft.Actor
	}
	if (draft.Kind == chain.KindGenesis) != parent.IsZero() {
		if parent.IsZero() {
			return nil, errs.New(errs.NotInitialized, "no ledger at %s (run tally init)", l.Ref)
		}
		return nil, errs.New(errs.AlreadyInitialized, "%s already holds a ledger", l.Ref)
	}
	body, err := chain.MarshalCanonical(draft.Body)
	if err != nil {
		return nil, errs.Wrap(errs.Usage, err, "entry body")
	}
	nonce := draft.Nonce
	if nonce == "" {
		nonce = NewNonce()
	}
	e := &chain.Entry{V: chain.FormatVersion, Seq: snap.Meta.Size, Kind: draft.Kind, Prev: snap.Meta.Head,
		TS: chain.FormatTime(now), Actor: actor, Nonce: nonce, Body: body}
	raw, err := e.Encode()
	if err != nil {
		return nil, err
	}
	if len(raw) >= largeEntry {
		defer collectGarbage()()
	}
	sig, err := sigRuleAt(snap.Tree, actor)
	if err != nil {
		return nil, err
	}
	// Refuse up front what verify would refuse: an unsigned entry where
	// signatures are required, or one signed with a key not registered for
	// the actor. (Step below changes the tree, so every refusal comes first.)
	if err := sig.checkSigner(l.signer); err != nil {
		return nil, err
	}
	applied, err := step(snap.Tree, raw, snap.Meta)
	if err != nil {
		return nil, err
	}
	// A large state change (a plan of many cells) spends its time
	// compressing the objects it writes: count them. Ordinary entries write a
	// few dozen objects and show nothing (nor break into a step around them,
	// such as sync's rebuild).
	total := 0
	if l.Progress != nil {
		if n := snap.Tree.Pending(); n >= minProgressWrite {
			total = n
		}
	}
	m, written := l.meter("write", total), 0
	if m != nil {
		pw.Progress = func() {
			if written++; written%progressEvery == 0 {
				m.add(progressEvery)
			}
		}
	}
	tree, err := snap.Tree.Hash(pw)
	pw.Progress = nil
	if err != nil {
		return nil, err
	}
	m.add(total - written/progressEvery*progressEvery) // Pending is a bound: end at the total
	commit := CommitFor(applied, tree, parent)
	if l.signer != nil {
		if commit.Signature, err = l.signer.SignCommit(commit.Payload()); err != nil {
			return nil, err
		}
	}
	id := pw.Add(gitstore.CommitObject, commit.Encode())
	snap.Commit, snap.Meta = id, applied.Meta
	if snap.built == nil {
		snap.built = map[gitstore.ObjectID][]byte{}
	}
	snap.built[gitstore.HashObject(gitstore.BlobObject, raw)] = raw
	return &Appended{Applied: *applied, Commit: id, beside: draft.Beside, raw: raw}, nil
}

// EntryTime is the time an entry appended on snap now would carry: the
// clock at millisecond precision, raised to the last entry's time (entry time
// never goes backwards, whatever this machine's clock says). Views judge
// expiry with it too, so they agree with what an append would decide.
func (l *Ledger) EntryTime(snap *Snapshot) time.Time { return entryTime(snap, l.now()) }

// entryTime is EntryTime by the clock reading clock.
func entryTime(snap *Snapshot, clock time.Time) time.Time {
	now := clock.UTC().Truncate(time.Millisecond)
	if last, err := chain.ParseTime(snap.Meta.TS); err == nil && now.Before(last) {
		now = last
	}
	return now
}

// NewNonce is a fresh nonce: 16 random bytes in lowercase hex, as every
// entry, hand-over step and sequencer request carries one.
func NewNonce() string {
	var b [16]byte
	crand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// CommitFor returns the ledger commit recording an applied entry: one parent
// (none for genesis), author and committer from the entry's actor and time,
// and a message whose subject is the rules' summary and whose trailers carry
// the seq and the entry hash.
func CommitFor(a *Applied, tree, parent gitstore.ObjectID) *gitstore.Commit {
	ts, _ := chain.ParseTime(a.Entry.TS)
	who := gitstore.Ident{Name: a.Entry.Actor, Email: a.Entry.Actor, When: ts.Unix(), TZ: "+0000"}
	c := &gitstore.Commit{Tree: tree, Author: who, Committer: who,
		Message: commitMessage(a.Result.Summary, a.Entry.Seq, a.Hash)}
	if !parent.IsZero() {
		c.Parents = []gitstore.ObjectID{parent}
	}
	return c
}
