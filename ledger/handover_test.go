package ledger_test

import (
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// noteIntent is the intent of the tests' IntentDecoder: notes, appended as
// Actor, each with its nonce; a note "refuse" is refused by the rules'
// stand-in (USAGE).
type noteIntent struct {
	Actor string    `json:"actor"`
	Now   time.Time `json:"now"`
	Texts []string  `json:"texts"`
	Nonce []string  `json:"nonces"`
}

// requesterClock is the clock the tests' requesters put in their intents:
// an hour ahead of the holder's, so that an entry a holder appended at its
// own time instead shows.
var requesterClock = time.Now().Add(time.Hour).UTC().Truncate(time.Millisecond)

// noteBuild is the build of a note text with nonce, refused for "refuse"
// and failing (not a refusal: the whole batch fails) for "fail".
func noteBuild(text, nonce string) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		switch text {
		case "refuse":
			return nil, errs.New(errs.Usage, "refused %s", nonce)
		case "fail":
			return nil, errs.New(errs.Internal, "failed %s", nonce)
		}
		return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: text}, Nonce: nonce}, nil
	}
}

func decodeNotes(_ *ledger.Ledger, raw []byte) (*ledger.Group, error) {
	var in noteIntent
	if err := json.Unmarshal(raw, &in); err != nil {
		return nil, err
	}
	g := &ledger.Group{Actor: in.Actor, Clock: in.Now}
	for i, text := range in.Texts {
		g.Builds = append(g.Builds, noteBuild(text, in.Nonce[i]))
	}
	return g, nil
}

// handedNotes appends texts as actor through l.AppendHanded.
func handedNotes(l *ledger.Ledger, actor string, texts ...string) ([]*ledger.Appended, error) {
	in := noteIntent{Actor: actor, Now: requesterClock, Texts: texts}
	var builds []ledger.BuildFunc
	for i, text := range texts {
		var b [16]byte
		rand.Read(b[:])
		in.Nonce = append(in.Nonce, hex.EncodeToString(b[:]))
		builds = append(builds, noteBuild(text, in.Nonce[i]))
	}
	raw, _ := json.Marshal(in)
	return l.AppendHanded(actor, builds, ledger.Handed{Intent: raw, Nonces: in.Nonce})
}

// servingLedger opens the ledger at dir as a writer that serves hand-overs
// of the tests' intents.
func servingLedger(t *testing.T, dir string) *ledger.Ledger {
	l, err := ledger.Open(dir, ledger.Options{Intents: decodeNotes})
	if err != nil {
		t.Error(err) // callable from a goroutine
		return nil
	}
	t.Cleanup(func() { l.WaitMaintenance(); l.Close() })
	return l
}

// holdWriterLock starts a serving writer's own append, which holds the
// writer lock, with its socket bound, until release; release returns the
// append's error once the holder is done (its batch served).
func holdWriterLock(t *testing.T, dir string) (holder *ledger.Ledger, release func() error) {
	holder = servingLedger(t, dir)
	proceed, held := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := holder.Append("holder", func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
			<-proceed // the lock is held and the socket bound: the others hand over
			return noteDraft("holder's own")(s, now)
		})
		held <- err
	}()
	testrepo.AwaitSockets(t, testrepo.HandoverSocket(gitDir(t, dir)), 1)
	return holder, func() error { close(proceed); return <-held }
}

// handOutcome is what a writer's AppendHanded returned.
type handOutcome struct {
	aps []*ledger.Appended
	err error
}

// handOver hands texts, as actor, from a writer of its own, and delivers
// its outcome on the channel.
func handOver(t *testing.T, dir, actor string, texts ...string) chan handOutcome {
	out := make(chan handOutcome, 1)
	go func() {
		l := servingLedger(t, dir)
		if l == nil {
			out <- handOutcome{err: errors.New("cannot open the ledger")}
			return
		}
		aps, err := handedNotes(l, actor, texts...)
		out <- handOutcome{aps, err}
	}()
	return out
}

// A writer that holds the writer lock appends, once its own append is
// done, the intents other writers handed it meanwhile as one batch: one
// pack and one move of the ledger's ref, each group on the state the one
// before leaves. A group whose first entry is refused gets the refusal and
// the others still land; a group whose later entry is refused stands with
// the entries before it. Each writer gets its own entries, at their seqs,
// and a connection that sends garbage, or nothing, does not disturb the
// batch.
func TestHandoverBatch(t *testing.T) {
	dir := initRepo(t)
	name := testrepo.HandoverSocket(gitDir(t, dir))
	packs := func() int {
		p, _ := filepath.Glob(filepath.Join(gitDir(t, dir), "objects", "pack", "*.pack"))
		return len(p)
	}
	before := packs()
	holder, release := holdWriterLock(t, dir)
	requests := map[string][]string{"a": {"a1", "a2"}, "b": {"refuse"}, "c": {"c1", "refuse", "c3"}}
	outcomes := map[string]chan handOutcome{}
	for actor, texts := range requests {
		outcomes[actor] = handOver(t, dir, actor, texts...)
	}
	garbage, err := gitstore.DialHolder(name)
	if err != nil {
		t.Fatal(err)
	}
	defer garbage.Close()
	garbage.Send([]byte("not an intent"))
	silent, err := gitstore.DialHolder(name)
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	testrepo.AwaitSockets(t, name, 1+len(requests)+2)
	if err := release(); err != nil {
		t.Fatal(err)
	}

	a, b, c := <-outcomes["a"], <-outcomes["b"], <-outcomes["c"]
	if a.err != nil || len(a.aps) != 2 || a.aps[1].Entry.Seq != a.aps[0].Entry.Seq+1 {
		t.Fatalf("a: %v %v", a.aps, a.err)
	}
	if errs.CodeOf(b.err) != errs.Usage || !strings.Contains(b.err.Error(), "refused") || b.aps != nil {
		t.Fatalf("b: %v, want its refusal", b.err)
	}
	if c.err != nil || len(c.aps) != 1 {
		t.Fatalf("c: %v %v, want c1 alone", c.aps, c.err)
	}
	if _, err := garbage.Receive(64); err == nil {
		t.Fatal("the garbage connection got an answer")
	}
	if got := packs() - before; got != 2 {
		t.Fatalf("%d packs written, want 2: the holder's own append and one batch", got)
	}
	snap, err := holder.Head()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Meta.Size != 5 {
		t.Fatalf("%d entries, want genesis, the holder's and a1, a2, c1", snap.Meta.Size)
	}
	for _, ap := range append(a.aps, c.aps...) {
		if ap.Entry.TS != chain.FormatTime(requesterClock) {
			t.Fatalf("seq %d at %s, want its writer's time %s, not the holder's", ap.Entry.Seq, ap.Entry.TS, chain.FormatTime(requesterClock))
		}
		e, _, _, err := snap.Entry(ap.Entry.Seq)
		if err != nil || e.Nonce != ap.Entry.Nonce || e.Actor != ap.Entry.Actor {
			t.Fatalf("seq %d holds %+v (%v), the writer was told %+v", ap.Entry.Seq, e, err, ap.Entry)
		}
		if at, err := holder.CommitAt(snap.Commit, ap.Entry.Seq); err != nil || at != ap.Commit {
			t.Fatalf("seq %d: commit %s, the writer was told %s", ap.Entry.Seq, at, ap.Commit)
		}
	}
	if rep, err := holder.Verify(true); err != nil {
		t.Fatalf("verify: %v %+v", err, rep)
	}
}

// A batch that fails as a whole (a build error that is not a refusal, as a
// failed write would be) is not answered with that error: each requester
// looks in the ledger and, finding nothing, appends its intent itself, so a
// writer whose intent merely shared the batch still lands, and the one
// whose build fails gets its own failure.
func TestHandoverBatchFailed(t *testing.T) {
	dir := initRepo(t)
	holder, release := holdWriterLock(t, dir)
	xc, yc := handOver(t, dir, "x", "fail"), handOver(t, dir, "y", "y1")
	testrepo.AwaitSockets(t, testrepo.HandoverSocket(gitDir(t, dir)), 3)
	if err := release(); err != nil {
		t.Fatal(err)
	}
	x, y := <-xc, <-yc
	if errs.CodeOf(x.err) != errs.Internal || !strings.Contains(x.err.Error(), "failed") {
		t.Fatalf("x: %v %v, want its own build's failure", x.aps, x.err)
	}
	if y.err != nil || len(y.aps) != 1 || errors.Is(y.aps[0].BesideErr, ledger.ErrRecovered) {
		t.Fatalf("y: %v %v, want y1 appended by y itself", y.aps, y.err)
	}
	snap, err := holder.Head()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Meta.Size != 3 {
		t.Fatalf("%d entries, want genesis, the holder's and y1", snap.Meta.Size)
	}
}

// A writer whose holder took its intent and ended without answering
// (killed) looks for its entries under the writer lock before it appends
// anything: entries the holder appended for it are its outcome, found by
// their nonces, and are not appended again; entries the holder never
// appended are appended then. The holder here is the test itself, holding
// the lock and the socket with gitstore's own pieces. A "taken" frame the
// writer cannot read (longer than any it knows) still counts as taken: the
// holder may have appended the intent, so the writer searches from seq 0.
func TestHandoverHolderGone(t *testing.T) {
	long := fmt.Sprintf(`{"from":1,"pad":%q}`, strings.Repeat("x", 100))
	for _, tc := range []struct {
		landed bool
		taken  string
	}{{true, `{"from":1}`}, {false, `{"from":1}`}, {true, long}, {false, long}} {
		landed := tc.landed
		t.Run(fmt.Sprintf("landed=%v/taken=%d bytes", landed, len(tc.taken)), func(t *testing.T) {
			dir := initRepo(t)
			l := openLedger(t, dir)
			wl, err := gitstore.AcquireWriterLock(filepath.Join(gitDir(t, dir), "tally", "writer.lock"), time.Second)
			if err != nil {
				t.Fatal(err)
			}
			ln := wl.Listen(testrepo.HandoverSocket(gitDir(t, dir)))
			if ln == nil {
				t.Fatal("cannot listen on the hand-over socket")
			}
			type outcome struct {
				aps []*ledger.Appended
				err error
			}
			done := make(chan outcome, 1)
			go func() {
				aps, err := handedNotes(openLedger(t, dir), "w", "n1", "n2")
				done <- outcome{aps, err}
			}()
			testrepo.AwaitSockets(t, testrepo.HandoverSocket(gitDir(t, dir)), 2)
			conns := ln.Take(1)
			if len(conns) != 1 {
				t.Fatalf("took %d intents, want the writer's", len(conns))
			}
			var in noteIntent
			if err := json.Unmarshal(conns[0].Intent, &in); err != nil {
				t.Fatal(err)
			}
			if err := conns[0].Send([]byte(tc.taken)); err != nil {
				t.Fatal(err)
			}
			ln.Close()
			if landed {
				landOnRef(t, l, dir, in)
			}
			conns[0].Close() // the holder is gone: no answer
			wl.Release()
			out := <-done
			if out.err != nil || len(out.aps) != 2 {
				t.Fatalf("the writer's outcome: %v %v", out.aps, out.err)
			}
			snap, err := l.Head()
			if err != nil {
				t.Fatal(err)
			}
			if snap.Meta.Size != 3 {
				t.Fatalf("%d entries, want genesis and the writer's two, once", snap.Meta.Size)
			}
			for i, ap := range out.aps {
				if ap.Entry.Nonce != in.Nonce[i] || ap.Entry.Seq != uint64(1+i) {
					t.Fatalf("entry %d: %+v", i, ap.Entry)
				}
				if landed != errors.Is(ap.BesideErr, ledger.ErrRecovered) {
					t.Fatalf("entry %d: BesideErr %v with landed %v", i, ap.BesideErr, landed)
				}
			}
			if rep, err := l.Verify(true); err != nil {
				t.Fatalf("verify: %v %+v", err, rep)
			}
		})
	}
}

// landOnRef appends the intent's notes to the ledger at dir as its holder
// would have before it died, while the test holds the writer lock: each
// prepared with its nonce, then the ref moved with git.
func landOnRef(t *testing.T, l *ledger.Ledger, dir string, in noteIntent) {
	t.Helper()
	for i, text := range in.Texts {
		p, err := l.Prepare(in.Actor, noteBuild(text, in.Nonce[i]))
		if err != nil {
			t.Fatal(err)
		}
		gitIn(t, dir, nil, "update-ref", ledgerRef, p.Commit.String(), p.Parent.String())
	}
}

// A writer that signs its entries never serves hand-overs (a holder must
// never append another's entries under its own key): while it holds the
// writer lock nobody listens on the socket, where an unsigned writer
// does.
func TestSigningWriterDoesNotServe(t *testing.T) {
	dir := initRepo(t)
	signer, _ := sigKey(t, t.TempDir(), "alice")
	name := testrepo.HandoverSocket(gitDir(t, dir))
	for _, tc := range []struct {
		signer *identity.Signer
		serves bool
	}{{nil, true}, {signer, false}} {
		l, err := ledger.Open(dir, ledger.Options{Signer: tc.signer, Intents: decodeNotes})
		if err != nil {
			t.Fatal(err)
		}
		var dialErr error
		// The signed note may be refused (alice has no key registered):
		// only what listened while the lock was held matters.
		l.Append("alice", func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
			c, err := gitstore.DialHolder(name)
			if err == nil {
				c.Close()
			}
			dialErr = err
			return noteDraft("under the lock")(s, now)
		})
		l.WaitMaintenance()
		l.Close()
		if tc.serves && dialErr != nil {
			t.Fatalf("an unsigned holder: dial %v, want it listening", dialErr)
		}
		if !tc.serves && !errors.Is(dialErr, gitstore.ErrNoHolder) {
			t.Fatalf("a signing holder: dial %v, want nobody listening", dialErr)
		}
	}
}

// A holder serves one batch, the intents handed to it while it made its
// own append: a writer that connects while that batch is being built is
// not served by this holder (its connection is reset when the holder
// closes the socket, so it waits for the lock and appends itself).
func TestHandoverOneBatch(t *testing.T) {
	dir := initRepo(t)
	name := testrepo.HandoverSocket(gitDir(t, dir))
	late := make(chan *gitstore.HolderConn, 1)
	dialed := false // decode runs on the holder's goroutine alone
	decode := func(l *ledger.Ledger, raw []byte) (*ledger.Group, error) {
		if !dialed { // the batch is being built: another writer comes
			dialed = true
			c, err := gitstore.DialHolder(name)
			if err != nil {
				return nil, err
			}
			in, _ := json.Marshal(noteIntent{Actor: "late", Now: requesterClock, Texts: []string{"late"}, Nonce: []string{"00"}})
			if err := c.Send(in); err != nil {
				return nil, err
			}
			late <- c
		}
		return decodeNotes(l, raw)
	}
	holder, err := ledger.Open(dir, ledger.Options{Intents: decode})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { holder.WaitMaintenance(); holder.Close() })
	proceed, held := make(chan struct{}), make(chan error, 1)
	go func() {
		_, err := holder.Append("holder", func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
			<-proceed
			return noteDraft("holder's own")(s, now)
		})
		held <- err
	}()
	testrepo.AwaitSockets(t, name, 1)
	early := handOver(t, dir, "early", "e1")
	testrepo.AwaitSockets(t, name, 2)
	close(proceed)
	if err := <-held; err != nil {
		t.Fatal(err)
	}
	if e := <-early; e.err != nil || len(e.aps) != 1 {
		t.Fatalf("early: %v %v, want e1 served", e.aps, e.err)
	}
	c := <-late
	defer c.Close()
	if b, err := c.Receive(64); !errors.Is(err, io.EOF) {
		t.Fatalf("the writer that came during the batch got %q (%v), want its connection closed untaken", b, err)
	}
	snap, err := holder.Head()
	if err != nil {
		t.Fatal(err)
	}
	if snap.Meta.Size != 3 {
		t.Fatalf("%d entries, want genesis, the holder's and e1", snap.Meta.Size)
	}
}

// A nonce is answered already when an entry earlier in the same batch
// carries it, though that entry's blob is not in the repository yet: two
// requests with one nonce that a sequencer serves in one batch land once.
// The entries of a batch that landed read back from the repository.
func TestAnsweredNonceInBatch(t *testing.T) {
	dir := initRepo(t)
	l := openLedger(t, dir)
	nonce := ledger.NewNonce()
	unanswered := func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		if seq, seen, err := s.AnsweredNonce(nonce); err != nil || seen {
			return nil, fmt.Errorf("nonce answered by entry %d (%v)", seq, err)
		}
		d, err := noteDraft("request")(s, now)
		d.Nonce = nonce
		return d, err
	}
	var sawSeq uint64
	replay := func(s *ledger.Snapshot, now time.Time) (*ledger.Draft, error) {
		seq, seen, err := s.AnsweredNonce(nonce)
		if err != nil || !seen {
			return nil, fmt.Errorf("the batch's first entry does not answer the nonce: seen %v, %v", seen, err)
		}
		sawSeq = seq
		return noteDraft("saw the replay")(s, now)
	}
	out, err := l.AppendBatch("a", []ledger.BuildFunc{unanswered, replay})
	if err != nil {
		t.Fatal(err)
	}
	if sawSeq != out[0].Entry.Seq {
		t.Fatalf("the replay was seen at entry %d, want %d", sawSeq, out[0].Entry.Seq)
	}
	if _, err := l.Append("a", replay); err != nil {
		t.Fatalf("after the batch landed: %v", err)
	}
}
