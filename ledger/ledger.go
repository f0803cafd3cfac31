// Package ledger is tally's ledger on a git ref: it appends entries with a
// git-safe compare-and-swap, replays and verifies the chain, and reads
// snapshots of the state. The rules themselves live in package lease; Step is
// the single place where an entry is checked and applied, shared by the
// writer, the verifier and the hooks.
package ledger

import (
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/refname"
)

// DefaultNamespace is the ref prefix of a ledger; the ledger itself is
// <namespace>/ledger.
const DefaultNamespace = "refs/tally"

// Options configure Open. They are the whole configuration of a ledger:
// nothing below cmd/ reads the environment, so a library user gets exactly
// what it passes.
type Options struct {
	// Namespace is the ref prefix (default DefaultNamespace); a trailing "/"
	// is dropped, and <namespace>/ledger must be a valid ref name.
	Namespace string
	// Now is the clock new entries are stamped with (default the wall clock).
	Now func() time.Time
	// Signer, if set, signs every ledger commit this ledger appends.
	Signer *identity.Signer
	// Maintain, if set, runs background compaction outside this process (see
	// Maintainer); unset, it runs in a goroutine of this one.
	Maintain Maintainer
	// Trust, if set, judges a remote's stored checkpoints, so that the first
	// fetch of a remote's ledger starts from a trusted one instead of from
	// genesis (FetchRemote); unset, every first fetch is of all history.
	Trust CheckpointTrust
	// Intents, if set, makes a writer of this ledger serve the intents
	// other writers hand it while it holds the writer lock (FORMAT.md §9,
	// "Group commit"), decoding each with it; unset, it takes none, and
	// they wait for the lock as before. A signing ledger never serves.
	Intents IntentDecoder
}

// Ledger is one ledger in one repository.
type Ledger struct {
	Repo      *gitstore.Repo
	Namespace string
	Ref       string
	// Files names this clone's never-pushed files (writer lock, verify
	// record, pending evidence). They live in the common git directory, so
	// every linked worktree of a clone shares them.
	Files gitstore.LocalPaths
	// Progress, if set, is told how far verification, sync's rebuild, a
	// large append and compaction have come.
	Progress Progress
	// PushProgress, if set, receives git's own progress of sync's ledger
	// push (gitstore.Repo.PushRefShowing): the one push that may send
	// thousands of entries. Other pushes (a remote append's, notes) send a
	// few objects and stay quiet.
	PushProgress io.Writer

	now      func() time.Time
	signer   *identity.Signer
	maintain Maintainer
	trust    CheckpointTrust
	intents  IntentDecoder

	repacking chan struct{}            // closed when a background compaction started here ends
	lent      atomic.Pointer[Snapshot] // see Lend
	beside    atomic.Int32             // Beside moves the next append expects (ExpectBeside)
}

// Open opens the ledger of the repository containing dir.
func Open(dir string, opt Options) (*Ledger, error) {
	repo, err := OpenRepo(dir)
	if err != nil {
		return nil, err
	}
	l, err := New(repo, opt)
	if err != nil {
		repo.Close()
		return nil, err
	}
	return l, nil
}

// OpenRepo opens the repository containing dir, with tally's error codes, for
// a caller that reads its configuration before it chooses the Options (New).
func OpenRepo(dir string) (*gitstore.Repo, error) {
	repo, err := gitstore.Open(dir)
	if err != nil {
		if errors.Is(err, gitstore.ErrUnsupported) {
			return nil, errs.Wrap(errs.NotSupported, err, "%s", dir)
		}
		return nil, errs.Wrap(errs.NotARepo, err, "cannot open repository")
	}
	return repo, nil
}

// New opens the ledger of an open repository; opt is validated here, once.
// The ledger owns repo from then on (Close closes it).
func New(repo *gitstore.Repo, opt Options) (*Ledger, error) {
	ns := opt.Namespace
	if ns == "" {
		ns = DefaultNamespace
	}
	ns = strings.TrimSuffix(ns, "/")
	if !refname.Valid(ns + "/ledger") {
		return nil, errs.New(errs.Usage, "namespace %q does not form a valid ref name", ns)
	}
	now := opt.Now
	if now == nil {
		now = time.Now
	}
	local := gitstore.LocalPathsOf(repo.CommonDir)
	if ns != DefaultNamespace {
		local = local.ForNamespace(ns)
	}
	return &Ledger{Repo: repo, Namespace: ns, Ref: ns + "/ledger", Files: local,
		now: now, signer: opt.Signer, maintain: opt.Maintain, trust: opt.Trust, intents: opt.Intents}, nil
}

// Now is the ledger's clock.
func (l *Ledger) Now() time.Time { return l.now() }

// Close releases resources.
func (l *Ledger) Close() error { return l.Repo.Close() }

// Snapshot is the ledger state at one commit. It implements chain.KV over the
// commit's tree; reads are lazy, so a snapshot costs only what is read.
type Snapshot struct {
	Commit gitstore.ObjectID // zero for the empty ledger
	Meta   *chain.Meta
	Tree   *gitstore.Tree
	// built holds the blobs of the entries an append built on this
	// snapshot (by blob id): they are in its pack writer, not yet in the
	// repository, until the append lands, and a later entry of the same
	// batch reads them (AnsweredNonce).
	built map[gitstore.ObjectID][]byte
}

// entryBlob reads the entry blob loc: one this snapshot's append built, or
// one in the repository.
func (s *Snapshot) entryBlob(loc [20]byte) ([]byte, error) {
	if raw, ok := s.built[loc]; ok {
		return raw, nil
	}
	typ, raw, err := s.Tree.DB().Read(gitstore.ObjectID(loc))
	if err == nil && typ != gitstore.BlobObject {
		err = fmt.Errorf("a %s, not a blob", typ)
	}
	return raw, err
}

// Get reads a state key.
func (s *Snapshot) Get(key string) ([]byte, bool, error) { return s.Tree.Get(key) }

// Tip returns the commit the ledger ref points at (zero if there is none).
func (l *Ledger) Tip() (gitstore.ObjectID, error) {
	id, err := l.Repo.ReadRef(l.Ref)
	if errors.Is(err, gitstore.ErrNoRef) {
		return gitstore.ObjectID{}, nil
	}
	if err != nil {
		return id, errs.Wrap(errs.Corrupt, err, "read %s", l.Ref)
	}
	return id, nil
}

// SnapshotAt opens the state at a ledger commit (zero: the empty ledger).
func (l *Ledger) SnapshotAt(commit gitstore.ObjectID) (*Snapshot, error) {
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	s := &Snapshot{Commit: commit}
	var tree gitstore.ObjectID
	if !commit.IsZero() {
		c, err := db.ReadCommit(commit)
		if err != nil {
			return nil, errs.Wrap(errs.Corrupt, err, "ledger commit %s", commit)
		}
		tree = c.Tree
	}
	s.Tree = gitstore.NewTree(db, tree)
	b, ok, err := s.Tree.Get(chain.MetaKey)
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "ledger commit %s", commit)
	}
	if s.Meta, err = chain.DecodeMeta(b, ok); err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "ledger commit %s", commit)
	}
	return s, nil
}

// Lend gives s, a snapshot its caller read and will not use again, to the
// next append of l: if the ref still holds s.Commit once the writer lock is
// taken, the append builds on s, whose tree already holds every node the
// caller read, instead of reading the state again (claim --next decides on
// the tip before taking the lock, then again under it). Only the next
// append's first attempt can take it.
func (l *Ledger) Lend(s *Snapshot) { l.lent.Store(s) }

// appendSnapshot is the snapshot an append builds on at tip: the lent one
// if it is of tip, else one read now.
func (l *Ledger) appendSnapshot(tip gitstore.ObjectID) (*Snapshot, error) {
	if s := l.lent.Swap(nil); s != nil && s.Commit == tip {
		return s, nil
	}
	return l.SnapshotAt(tip)
}

// Head returns the snapshot at the tip, or NOT-INITIALIZED.
func (l *Ledger) Head() (*Snapshot, error) {
	tip, err := l.Tip()
	if err != nil {
		return nil, err
	}
	if tip.IsZero() {
		return nil, errs.New(errs.NotInitialized, "no ledger at %s (run tally init)", l.Ref)
	}
	return l.SnapshotAt(tip)
}

// Entry reads entry seq of the snapshot's log through the Merkle tiles (the
// level 0 tile locates the entry blob), so its cost does not grow with the
// ledger's length. It checks the blob against the recorded entry hash.
func (s *Snapshot) Entry(seq uint64) (*chain.Entry, chain.Hash, []byte, error) {
	if seq >= s.Meta.Size {
		return nil, chain.Hash{}, nil, errs.New(errs.Usage, "no entry %d (ledger has %d)", seq, s.Meta.Size)
	}
	h, loc, err := chain.EntryRecord(s, s.Meta.Size, seq)
	if err != nil {
		return nil, h, nil, errs.Wrap(errs.Corrupt, err, "entry %d", seq)
	}
	raw, err := s.entryBlob(loc)
	if err != nil {
		return nil, h, nil, errs.Wrap(errs.Corrupt, err, "entry %d blob %x", seq, loc)
	}
	if chain.EntryHash(raw) != h {
		return nil, h, nil, errs.New(errs.HashMismatch, "entry %d does not match its recorded hash", seq).With("seq", seq)
	}
	e, err := chain.Decode(raw)
	if err != nil {
		return nil, h, nil, errs.Wrap(errs.Corrupt, err, "entry %d", seq)
	}
	return e, h, raw, nil
}
