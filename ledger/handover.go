package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"slices"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
)

// Group commit across processes (FORMAT.md §9, "Group commit"). Every
// tally writer of a clone queues for one writer lock, and a queued writer
// used to wait for the whole of each append before it: the lock was held
// for 94–97% of a drain's wall time (PERFORMANCE.md at b45f87f, "The drain, fifth
// pass"). Now a writer that finds the lock held hands its intent to the
// holder (gitstore's hand-over socket), and the holder, once its own
// append is done, appends every intent handed to it meanwhile as one
// batch: one pack, one round of fsyncs and one move of the ledger's ref
// for all of them. The holder answers each writer only once the batch is
// durable. A writer whose holder died after taking its intent finds out,
// under the lock it then takes itself, whether its entries landed, by
// their nonces, and appends them only if not.

// Group is one writer's part of an append that the writer lock's holder
// makes for several (an intent, decoded by an IntentDecoder): its entries'
// builds, appended as Actor at Clock (the writer's clock: its entries are
// stamped as its own append would stamp them), each on the state the
// previous one leaves. The first build decides whether the group stands:
// refused, the group is left out with its error, and the other groups of
// the batch still land. A later build refused is left out with those after
// it, and the group stands with the entries before (done --next: the
// receipt without the claim, as done --next's own append would do).
type Group struct {
	Actor  string
	Clock  time.Time
	Builds []BuildFunc
}

// IntentDecoder turns an intent another writer handed this one
// (Handed.Intent) into its group, built on l. An error leaves the intent
// not taken: its writer then appends it itself.
type IntentDecoder func(l *Ledger, intent []byte) (*Group, error)

// Handed is an append the writer lock's holder can make for this writer
// (AppendHanded): Intent, which the holder's IntentDecoder turns into the
// same entries as this writer's builds, and the Nonces those entries carry
// (Draft.Nonce), in order, by which this writer finds them in the ledger
// if the holder dies before answering.
type Handed struct {
	Intent []byte
	Nonces []string
}

// ErrRecovered is the BesideErr of an entry a writer found in the ledger
// after the holder that appended it for it died before answering: whether
// its Beside move (a receipt's note) landed is not known, and the next
// writer of the lock finishes a move it had started (FORMAT.md §8).
var ErrRecovered = errors.New("appended by a writer-lock holder that died before answering; found in the ledger")

// Bounds of a holder's serving (FORMAT.md §9, "Group commit"): after its
// own append a holder serves one batch, of at most batchIntents intents:
// those handed to it while it appended. Then it stops listening, and the
// requesters still waiting take the lock in turn, the first of them
// serving the next batch. Serving more batches in a row drained no faster
// and kept the holder's own caller waiting for them (8 batches: p99 of a
// claim 314–430 ms at 8 MCP servers against 183–187 ms for one, cells/s
// alike; PERFORMANCE.md at b45f87f, "The drain, sixth pass").
const (
	batchIntents = 64
	takenSize    = 64 // the most a "taken" frame may hold
)

// AppendHanded appends the entries of builds as actor, with a Group's
// semantics (the first decides; a later one refused is left out with
// those after it, so the caller may get fewer than it asked for), and
// lets another tally writer append them for this one. When the writer
// lock is held by a writer that serves hand-overs, h goes to it, and its
// answer is the outcome: the entries that landed (with their seq and
// commit), or the error that refused the first. When it is not taken
// (nobody listens: an older tally, or a holder that does not serve), this
// writer waits for the lock and appends builds itself. When the holder
// took it and ended without answering (killed), this writer takes the lock
// and looks for its entries by their nonces among those that landed since
// (findMine): found, they are the outcome; else it appends builds. A
// ledger this process signs never hands over: a holder must never sign
// for another's key.
func (l *Ledger) AppendHanded(actor string, builds []BuildFunc, h Handed) ([]*Appended, error) {
	if err := checkBatch(actor, builds); err != nil {
		return nil, err
	}
	own := &Group{Actor: actor, Builds: builds}
	canHand := l.signer == nil && len(h.Intent) <= gitstore.MaxIntent && len(h.Nonces) == len(builds)
	var res handResult
	var spares *gitstore.Spares
	wl, handed, err := l.lockWriterOr(func() bool {
		if canHand {
			if res = l.handOver(actor, h); res.state == answered {
				return true
			}
		}
		spares = l.makeSpares() // before the wait, as AppendBatch makes them
		return false
	})
	defer spares.Remove()
	l.beside.Store(0) // a lock found free is not waited for: its files are made under it
	if handed {
		l.lent.Store(nil)
		return res.out, res.err
	}
	if err != nil {
		return nil, err
	}
	return l.holding(wl, spares, func() ([]*Appended, error) {
		if res.state == takenUnanswered {
			if found, err := l.findMine(res.from, h.Nonces); err != nil || len(found) > 0 {
				return found, err
			}
		}
		return l.appendGroup(wl, own)
	})
}

// appendGroup appends g's entries under wl, alone.
func (l *Ledger) appendGroup(wl *gitstore.WriterLock, g *Group) ([]*Appended, error) {
	s := &served{group: g}
	if err := l.appendGroups(wl, []*served{s}); err != nil {
		return nil, err
	}
	return s.out, s.err
}

// handState is how far a hand-over got.
type handState int

const (
	notTaken        handState = iota // nothing of the intent can land: append it
	takenUnanswered                  // the holder took it and ended: look for it (findMine)
	answered                         // the holder's answer is the outcome
)

// handResult is the outcome of handOver: out and err when answered, from
// (the ledger's size when the holder took the intent: its entries, if
// any landed, are at that seq or later) when taken.
type handResult struct {
	state handState
	from  uint64
	out   []*Appended
	err   error
}

// handOver hands h to the holder listening on the writer lock's socket and
// waits for its answer (gitstore.HolderConn.Receive: as long as the holder
// lives).
func (l *Ledger) handOver(actor string, h Handed) handResult {
	c, err := gitstore.DialHolder(l.Files.WriterSocket())
	if err != nil {
		return handResult{}
	}
	defer c.Close()
	if c.Send(h.Intent) != nil {
		return handResult{}
	}
	b, err := c.Receive(takenSize)
	if errors.Is(err, io.EOF) { // closed before "taken": nothing of the intent can land
		return handResult{}
	}
	// Any other first frame, even one too long or cut short, may be a
	// "taken" this writer cannot read: the holder may append the intent,
	// so only the ledger can say (from 0: a longer search, never a wrong one).
	res := handResult{state: takenUnanswered}
	var t wireTaken
	if err == nil && json.Unmarshal(b, &t) == nil {
		res.from = t.From
	}
	if b, err = c.Receive(gitstore.MaxAnswer); err != nil {
		return res
	}
	if out, aerr, ok := decodeAnswer(b, actor, h.Nonces); ok {
		return handResult{state: answered, out: out, err: aerr}
	}
	return res // an answer this writer cannot read: look in the ledger
}

// lockWriterOr is lockWriter that calls held first when the lock is held
// (gitstore.Repo.LockWriterOr); handed true means held took care of the
// append and the lock was not taken.
func (l *Ledger) lockWriterOr(held func() bool) (*gitstore.WriterLock, bool, error) {
	wl, handed, err := l.Repo.LockWriterOr(l.Files.WriterLock(), writerLockTimeout, held)
	return wl, handed, l.writerLockErr(err)
}

// findMine looks, under the writer lock, among the entries at seq from and
// later, for those carrying nonces: a prefix of them (a group's entries
// land together and in order, the first with every one). Found, they are
// made durable before they count (the holder may have died between
// renaming the ledger's ref and syncing its directory) and carry
// ErrRecovered as their BesideErr. It verifies the entries it reads, as
// every writer verifies what it extends.
func (l *Ledger) findMine(from uint64, nonces []string) ([]*Appended, error) {
	tip, err := l.Tip()
	if err != nil || tip.IsZero() {
		return nil, err
	}
	var base gitstore.ObjectID
	if from > 0 {
		if base, err = l.CommitAt(tip, from-1); err != nil {
			return nil, err
		}
	}
	var found []*Appended
	_, err = l.VerifyRangeEach(base, tip, func(a *Applied) error {
		if len(found) < len(nonces) && a.Entry.Nonce == nonces[len(found)] {
			found = append(found, &Appended{Applied: *a, BesideErr: ErrRecovered})
		}
		return nil
	})
	if err != nil || len(found) == 0 {
		return nil, err
	}
	for _, ap := range found {
		if ap.Commit, err = l.CommitAt(tip, ap.Entry.Seq); err != nil {
			return nil, err
		}
	}
	if err := l.Repo.SyncRef(l.Ref); err != nil {
		return nil, errs.Wrap(errs.Internal, err, "sync %s", l.Ref)
	}
	return found, nil
}

// listen starts taking intents under wl, or returns nil when this writer
// does not serve: it has no IntentDecoder, or it signs what it appends.
func (l *Ledger) listen(wl *gitstore.WriterLock) *gitstore.HandoverListener {
	if l.intents == nil || l.signer != nil {
		return nil
	}
	return wl.Listen(l.Files.WriterSocket())
}

// serve appends, under wl, the intents handed to this writer through ln
// while it made its own append, as one batch, and says whether a batch
// was appended.
func (l *Ledger) serve(wl *gitstore.WriterLock, ln *gitstore.HandoverListener) bool {
	conns := ln.Take(batchIntents)
	if len(conns) == 0 {
		return false
	}
	wl.Serving()
	return l.serveBatch(wl, conns)
}

// served is one group of a batch, and its requester (none for the
// holder's own).
type served struct {
	conn  *gitstore.HandoverConn
	group *Group
	out   []*Appended // its entries that stand
	err   error       // why its first entry was refused
}

// serveBatch appends the intents of conns as one batch and answers each
// requester. An intent that does not decode is not taken (its connection
// is closed). Every other requester hears "taken", with the ledger's size,
// before anything of the batch can land, and its outcome once the batch is
// durable. It says whether the batch was appended.
func (l *Ledger) serveBatch(wl *gitstore.WriterLock, conns []*gitstore.HandoverConn) bool {
	var ss []*served
	for _, c := range conns {
		if g, err := l.intents(l, c.Intent); err == nil && chain.ValidActor(g.Actor) == nil && len(g.Builds) > 0 {
			ss = append(ss, &served{conn: c, group: g})
		} else {
			c.Close()
		}
	}
	if len(ss) == 0 {
		return false
	}
	snap, err := l.Head()
	if err != nil {
		for _, s := range ss {
			s.conn.Close()
		}
		return false
	}
	l.Lend(snap) // the batch builds on it
	taken, _ := json.Marshal(wireTaken{From: snap.Meta.Size})
	ss = slices.DeleteFunc(ss, func(s *served) bool {
		if s.conn.Send(taken) != nil { // the requester is gone: nobody waits for its entries
			s.conn.Close()
			return true
		}
		return false
	})
	err = l.appendGroups(wl, ss)
	for _, s := range ss {
		// A batch that failed as a whole (not a refusal of a group: a
		// write, or a ref move that may have renamed the ledger's ref and
		// then failed) is not answered: each requester, told "taken",
		// looks for its entries in the ledger (findMine), which alone can
		// say whether they landed.
		if err == nil {
			s.conn.Send(encodeAnswer(s.out, s.err))
		}
		s.conn.Close()
	}
	return err == nil
}

// appendGroups appends the groups of ss under wl as one batch (one pack,
// one move of the ledger's ref), each on the state the previous leaves,
// and sets each one's out and err (buildGroups). An error fails them all:
// nothing landed.
func (l *Ledger) appendGroups(wl *gitstore.WriterLock, ss []*served) error {
	_, err := l.retried(func() ([]*Appended, error) {
		return l.tryAppend(wl, func(snap *Snapshot, pw *gitstore.PackWriter) ([]*Appended, error) {
			return l.buildGroups(snap, ss, pw)
		})
	})
	return err
}

// buildGroups builds the group of each of ss in turn on snap (see Group),
// setting its out and err, and returns every entry that stands, in order.
// An error that is not a refusal (a state that cannot be read, a failed
// write) fails the whole batch.
func (l *Ledger) buildGroups(snap *Snapshot, ss []*served, pw *gitstore.PackWriter) ([]*Appended, error) {
	var all []*Appended
	for _, s := range ss {
		s.out, s.err = nil, nil
		for i, b := range s.group.Builds {
			ap, err := l.build(snap, s.group.Actor, s.group.Clock, b, pw)
			if err != nil {
				if !refusal(err) {
					return nil, err
				}
				if i == 0 {
					s.err = err
				}
				break
			}
			s.out = append(s.out, ap)
		}
		all = append(all, s.out...)
	}
	return all, nil
}

// refusal reports whether err refuses one entry and leaves the state as it
// was: a rule's or the request's (refused or retryable), not a failure to
// read or write.
func refusal(err error) bool {
	e := errs.From(err)
	c := e.Class()
	return (c == errs.Refused || c == errs.Retryable) && e.Code != errs.IOError
}

// The frames a holder answers with (FORMAT.md §9, "Group commit").
type (
	wireTaken struct {
		From uint64 `json:"from"`
	}
	wireAnswer struct {
		Entries []wireEntry `json:"entries,omitempty"`
		Error   *wireError  `json:"error,omitempty"`
	}
	wireEntry struct {
		Commit      string          `json:"commit"`
		Entry       json.RawMessage `json:"entry"`
		Meta        json.RawMessage `json:"meta"`
		Summary     string          `json:"summary"`
		Effect      json.RawMessage `json:"effect,omitempty"`
		BesideError string          `json:"beside_error,omitempty"`
	}
	wireError struct {
		Code    errs.Code      `json:"code"`
		Message string         `json:"message"`
		Details map[string]any `json:"details,omitempty"`
	}
)

// encodeAnswer is the answer frame of a group whose entries out landed, or
// that err refused.
func encodeAnswer(out []*Appended, err error) []byte {
	var a wireAnswer
	if err != nil {
		e := errs.From(err)
		a.Error = &wireError{Code: e.Code, Message: e.Message, Details: e.Details}
	}
	for _, ap := range out {
		meta, _ := ap.Meta.Encode()
		effect, _ := json.Marshal(ap.Result.Effect)
		we := wireEntry{Commit: ap.Commit.String(), Entry: ap.raw, Meta: meta, Summary: ap.Result.Summary, Effect: effect}
		if ap.BesideErr != nil {
			we.BesideError = ap.BesideErr.Error()
		}
		a.Entries = append(a.Entries, we)
	}
	b, _ := json.Marshal(a)
	return b
}

// decodeAnswer reads an answer frame for a writer appending as actor
// entries with nonces: its entries (a prefix of them: each this writer's,
// carrying its nonce in order) or its refusal. ok is false for anything
// else: the writer then looks for its entries in the ledger.
func decodeAnswer(b []byte, actor string, nonces []string) (out []*Appended, refused error, ok bool) {
	var a wireAnswer
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber() // details keep their literal, as a refusal read from a sequencer does
	if dec.Decode(&a) != nil {
		return nil, nil, false
	}
	if a.Error != nil {
		return nil, &errs.Error{Code: a.Error.Code, Message: a.Error.Message, Details: a.Error.Details}, true
	}
	if len(a.Entries) == 0 || len(a.Entries) > len(nonces) {
		return nil, nil, false
	}
	for i, we := range a.Entries {
		ap, err := decodeWireEntry(we)
		if err != nil || ap.Entry.Nonce != nonces[i] || ap.Entry.Actor != actor {
			return nil, nil, false
		}
		out = append(out, ap)
	}
	return out, nil, true
}

// decodeWireEntry is the appended entry we describes.
func decodeWireEntry(we wireEntry) (*Appended, error) {
	e, err := chain.Decode(we.Entry)
	if err != nil {
		return nil, err
	}
	meta, err := chain.DecodeMeta(we.Meta, true)
	if err != nil {
		return nil, err
	}
	commit, err := gitstore.ParseObjectID(we.Commit)
	if err != nil {
		return nil, err
	}
	effect, err := lease.DecodeEffect(e.Kind, we.Effect)
	if err != nil {
		return nil, err
	}
	ap := &Appended{Applied: Applied{Entry: e, Hash: chain.EntryHash(we.Entry), Meta: meta,
		Result: &lease.Result{Summary: we.Summary, Effect: effect}}, Commit: commit, raw: we.Entry}
	if we.BesideError != "" {
		ap.BesideErr = errors.New(we.BesideError)
	}
	return ap, nil
}
