package ledger

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// Report is the outcome of a successful verification.
type Report struct {
	Entries uint64            `json:"entries"` // length of the verified ledger
	Checked uint64            `json:"checked"` // entries replayed by this run
	Head    Head              `json:"head"`
	Root    chain.Hash        `json:"root"`
	Commit  gitstore.ObjectID `json:"-"`
	// StaleRecord reports that this clone's record of the last verified tip was
	// damaged or inconsistent, so the ledger was verified from genesis.
	StaleRecord bool `json:"stale_record,omitempty"`
	// From is the trusted checkpoint this clone's verification began at when
	// it did not begin at genesis (ShallowStart): entries before it were
	// neither fetched nor replayed here.
	From *CheckpointStart `json:"from,omitempty"`
}

// Head identifies the last entry of a ledger.
type Head struct {
	Seq    uint64     `json:"seq"`
	Hash   chain.Hash `json:"hash"`
	Commit string     `json:"commit"`
}

// verifiedRecord is the local, never-pushed record of the last verified tip.
type verifiedRecord struct {
	Commit string     `json:"commit"`
	Seq    uint64     `json:"seq"`
	Hash   chain.Hash `json:"hash"`
}

func (l *Ledger) recordPath() string { return l.Files.Verified() }

// Verify re-derives the ledger from the repository and checks every entry
// added since the last successful verification recorded in this clone (all of
// them with full). A failure is an *errs.Error whose code names the check and
// whose "seq" detail names the first bad position. With full it also checks
// that every stored object of every state is stored intact (verifier.stored).
func (l *Ledger) Verify(full bool) (*Report, error) {
	tip, err := l.Tip()
	if err != nil {
		return nil, err
	}
	if tip.IsZero() {
		return nil, errs.New(errs.NotInitialized, "no ledger at %s (run tally init)", l.Ref)
	}
	var base gitstore.ObjectID
	stale := false
	if !full {
		base, stale = l.trustedRecord()
	}
	rep, err := l.verifyRange(base, tip, nil, full)
	if err != nil {
		return nil, l.historyShallow(err)
	}
	if full {
		l.clearShallowStart()
	}
	rep.StaleRecord = stale
	rep.From = l.ShallowStart()
	if tip == base {
		return rep, nil // the record already says so
	}
	if err := l.writeRecord(l.recordPath(), tip); err != nil {
		return nil, err
	}
	return rep, nil
}

// writeRecord records tip (a verified ledger commit) at path.
func (l *Ledger) writeRecord(path string, tip gitstore.ObjectID) error {
	snap, err := l.SnapshotAt(tip)
	if err != nil {
		return err
	}
	return l.writeRecordMeta(path, tip, snap.Meta)
}

// writeRecordMeta is writeRecord for a caller that holds tip's chain meta.
func (l *Ledger) writeRecordMeta(path string, tip gitstore.ObjectID, m *chain.Meta) error {
	rec := verifiedRecord{Commit: tip.String(), Seq: m.Size - 1, Hash: m.Head}
	return writeRecordInPlace(path, mustJSON(rec))
}

// recordSize is the length of every record file (FORMAT.md §8): the JSON,
// then spaces and a newline. The longest record (a 20-digit seq) is 154
// bytes.
const recordSize = 192

// writeRecordInPlace overwrites the record at path with rec, padded to
// recordSize, by one write into the existing file; a missing record is
// created whole (writeFileAtomic). A record is written on every append and
// most views, and replacing it by a new file and a rename cost a new inode,
// a rename and the old inode's eviction each time. It is never synced:
// what a reader finds, after a crash too, is the old record, the new one,
// or (a reader racing the write, a torn sector) bytes that do not parse or
// do not match their commit, which are never believed (trustedRecordAt).
// The writer records a tip only once its ref update is durable, so the
// record is never ahead of the ref on disk; behind is safe, the entries after
// it are checked again.
func writeRecordInPlace(path string, rec []byte) error {
	if len(rec) < recordSize {
		rec = append(rec, bytes.Repeat([]byte{' '}, recordSize-1-len(rec))...)
		rec = append(rec, '\n')
	}
	f, err := gitstore.OpenFile(path, os.O_WRONLY, 0)
	if errors.Is(err, os.ErrNotExist) {
		return writeFileAtomic(path, rec)
	}
	if err != nil {
		return err
	}
	_, err = f.WriteAt(rec, 0)
	if fi, serr := f.Stat(); err == nil && serr == nil && fi.Size() != int64(len(rec)) {
		err = f.Truncate(int64(len(rec))) // a record of another length (an older tally's, or edited)
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}

// trustedRecord returns the commit the record says was verified, if the
// record is intact: it must name a ledger commit whose metadata has the
// recorded seq and head hash. A missing record gives zero (verify from
// genesis); a damaged or inconsistent one — edited, truncated, naming some
// other commit — is never believed: zero, and stale is true.
func (l *Ledger) trustedRecord() (base gitstore.ObjectID, stale bool) {
	return l.trustedRecordAt(l.recordPath())
}

// recordNames reports whether the record at path names snap's commit with
// its seq and head hash: trustedRecordAt's check without reading the commit
// again, for a caller that holds the snapshot.
func (l *Ledger) recordNames(path string, snap *Snapshot) bool {
	b, err := gitstore.ReadFile(path)
	if err != nil {
		return false
	}
	var rec verifiedRecord
	return json.Unmarshal(b, &rec) == nil && rec.Commit == snap.Commit.String() &&
		snap.Meta.Size == rec.Seq+1 && snap.Meta.Head == rec.Hash
}

func (l *Ledger) trustedRecordAt(path string) (base gitstore.ObjectID, stale bool) {
	b, err := gitstore.ReadFile(path)
	if err != nil {
		return gitstore.ObjectID{}, !errors.Is(err, os.ErrNotExist)
	}
	var rec verifiedRecord
	if json.Unmarshal(b, &rec) != nil {
		return gitstore.ObjectID{}, true
	}
	id, err := gitstore.ParseObjectID(rec.Commit)
	if err != nil {
		return gitstore.ObjectID{}, true
	}
	snap, err := l.SnapshotAt(id)
	if err != nil || snap.Meta.Size != rec.Seq+1 || snap.Meta.Head != rec.Hash {
		return gitstore.ObjectID{}, true
	}
	return id, false
}

// VerifyRange verifies the entries from base (exclusive, trusted as already
// verified; zero means from genesis) to tip. base must be an ancestor of tip:
// otherwise the ledger was rolled back (tip is an ancestor of base) or forked,
// and the error is ROLLBACK-DETECTED or FORK-DETECTED.
func (l *Ledger) VerifyRange(base, tip gitstore.ObjectID) (*Report, error) {
	return l.VerifyRangeEach(base, tip, nil)
}

// VerifyRangeEach is VerifyRange that also hands each verified entry, in
// order, to each (nil: none); an error from each stops verification and is
// returned. The hooks use it to apply checks that depend on where the chain
// is being accepted, such as clock skew.
//
// Memory does not grow with the length of the range (but for 20 bytes an
// entry with each): commits are walked back from tip in segments of
// minSegment, a segment's commits are dropped once it is checked, and a
// verifier's tree overlay is restarted from the verified stored tree every
// minSegment entries, so it holds only what recent entries touched.
func (l *Ledger) VerifyRangeEach(base, tip gitstore.ObjectID, each func(*Applied) error) (*Report, error) {
	return l.verifyRange(base, tip, each, false)
}

// verifyRange is VerifyRangeEach; with stored, the verifiers also check the
// stored objects (verifier.stored).
func (l *Ledger) verifyRange(base, tip gitstore.ObjectID, each func(*Applied) error, stored bool) (*Report, error) {
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	start, err := l.SnapshotAt(base)
	if err != nil {
		return nil, err
	}
	// The tip's own claim of its size sizes the progress meter and the
	// segments only: the checks never read it, and a damaged tip is
	// reported by them.
	expect := 0
	if t, err := l.SnapshotAt(tip); err == nil && t.Meta.Size > start.Meta.Size {
		expect = int(t.Meta.Size - start.Meta.Size)
	}
	if expect >= minSegment {
		defer collectGarbage()()
	}
	v := &verifier{db: db, pos: start.Meta.Size, parent: base, meta: start.Meta, each: each,
		sigRules: map[string]*sigRule{}, meter: l.meter("verify", expect)}
	if stored {
		v.stored = []gitstore.ObjectID{}
	}
	v.setTree(start.Tree)
	var checked int
	if each != nil {
		checked, err = l.verifyInOrder(db, v, base, tip)
	} else {
		checked, v, err = l.verifySegments(db, v, base, tip, expect)
	}
	if err != nil {
		return nil, err
	}
	return &Report{Entries: v.pos, Checked: uint64(checked), Commit: tip, Root: v.meta.Root,
		Head: Head{Seq: v.pos - 1, Hash: v.meta.Head, Commit: tip.String()}}, nil
}

// verifyInOrder checks the range in one chain, oldest first, for a per-entry
// callback: only commit ids are kept from the walk back, and each commit is
// read again when its turn comes.
func (l *Ledger) verifyInOrder(db *gitstore.ObjectDB, v *verifier, base, tip gitstore.ObjectID) (int, error) {
	var ids []gitstore.ObjectID
	found, err := walkBack(db, tip, base, minSegment, func(seg []walked, _ gitstore.ObjectID) error {
		for _, w := range seg {
			ids = append(ids, w.id)
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	if !found {
		return 0, l.divergence(db, base, tip, v.meta.Size)
	}
	slices.Reverse(ids)
	commits := make([]walked, len(ids))
	for i, id := range ids {
		commits[i].id = id
	}
	return len(commits), v.run(commits)
}

// verifySegments checks the range as segments of at most minSegment commits
// (segmentLen of expect, the range's length as far as known),
// each from the state tree its predecessor's last commit claims, in parallel
// with each other and with the walk back that finds them (newest first).
// That claim is exactly what the predecessor's last check verifies, so all
// segments passing means the whole chain passes, and the failing segment
// oldest in the chain names the first bad entry. It returns the verifier
// of the newest segment (first, the one for the oldest if there is a single
// one).
func (l *Ledger) verifySegments(db *gitstore.ObjectDB, first *verifier, base, tip gitstore.ObjectID, expect int) (int, *verifier, error) {
	type segment struct {
		k       int      // 0 for the newest
		commits []walked // oldest first
		parent  gitstore.ObjectID
	}
	queue := make(chan segment, 1)
	var (
		mu       sync.Mutex
		failures = map[int]error{}
		newest   *verifier
		wg       sync.WaitGroup
	)
	workers := max(1, runtime.GOMAXPROCS(0))
	for range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for seg := range queue {
				v := &verifier{db: db, each: first.each, sigRules: map[string]*sigRule{}, meter: first.meter,
					tree: first.tree, pos: first.pos, parent: first.parent, meta: first.meta}
				if first.stored != nil {
					v.stored = []gitstore.ObjectID{}
				}
				var err error
				if seg.parent != base {
					var snap *Snapshot
					if snap, err = l.SnapshotAt(seg.parent); err == nil {
						v.setTree(snap.Tree)
						v.pos, v.parent, v.meta = snap.Meta.Size, seg.parent, snap.Meta
					}
				}
				if err == nil {
					err = v.run(seg.commits)
				}
				mu.Lock()
				if err != nil {
					failures[seg.k] = err
				}
				if seg.k == 0 {
					newest = v
				}
				mu.Unlock()
			}
		}()
	}
	k, checked := 0, 0
	found, err := walkBack(db, tip, base, segmentLen(expect, workers), func(seg []walked, parent gitstore.ObjectID) error {
		slices.Reverse(seg)
		queue <- segment{k, seg, parent}
		k++
		checked += len(seg)
		return nil
	})
	close(queue)
	wg.Wait()
	if err != nil {
		return 0, nil, err
	}
	if !found {
		return 0, nil, l.divergence(db, base, tip, first.meta.Size)
	}
	if k == 0 {
		return 0, first, nil // nothing new
	}
	for i := k - 1; i >= 0; i-- {
		if err := failures[i]; err != nil {
			return 0, nil, err
		}
	}
	return checked, newest, nil
}

type walked struct {
	id     gitstore.ObjectID
	commit *gitstore.Commit // nil: the verifier reads it
}

// walkBack walks the commits from tip back to (excluding) stop along first
// parents and hands them to emit in segments of at most segLen, tip
// first, each newest first, with the first parent of the segment's oldest
// commit (stop for the last segment). emit may keep the slice. found is
// false if the walk reached a root without meeting stop; the segments
// emitted so far were then not of the range.
func walkBack(db *gitstore.ObjectDB, tip, stop gitstore.ObjectID, segLen int, emit func(seg []walked, parent gitstore.ObjectID) error) (found bool, err error) {
	var seg []walked
	rd := db.Cursor()
	for cur := tip; cur != stop; {
		c, err := rd.ReadCommit(cur)
		if err != nil {
			return false, errs.Wrap(errs.Corrupt, err, "ledger commit %s", cur)
		}
		seg = append(seg, walked{cur, c})
		if len(c.Parents) == 0 {
			if !stop.IsZero() {
				return false, nil
			}
			break
		}
		cur = c.Parents[0]
		if len(seg) == segLen && cur != stop {
			if err := emit(seg, cur); err != nil {
				return false, err
			}
			seg = nil
		}
	}
	if len(seg) > 0 {
		return true, emit(seg, stop)
	}
	return true, nil
}

// divergence explains why base is not an ancestor of tip.
func (l *Ledger) divergence(db *gitstore.ObjectDB, base, tip gitstore.ObjectID, baseSize uint64) error {
	found, err := walkBack(db, base, tip, minSegment, func([]walked, gitstore.ObjectID) error { return nil })
	if err == nil && found {
		return errs.New(errs.RollbackDetected, "%s was moved back from %s (verified, %d entries) to an ancestor %s",
			l.Ref, base, baseSize, tip).With("verified_size", baseSize)
	}
	return errs.New(errs.ForkDetected, "%s at %s does not extend the verified %s (%d entries)", l.Ref, tip, base, baseSize).
		With("verified_size", baseSize)
}

type verifier struct {
	db     *gitstore.ObjectDB
	tree   *gitstore.Tree
	pos    uint64 // position (expected seq) of the next commit
	parent gitstore.ObjectID
	meta   *chain.Meta
	each   func(*Applied) error
	meter  *meter // shared by the segments of one verification
	// sigRules caches the signature rule per actor; policy and keys entries
	// invalidate it.
	sigRules map[string]*sigRule
	// stored, when not nil, collects the objects each entry's replay made
	// anew, and check requires each to be stored intact by the checksums
	// the repository keeps for it (gitstore.Cursor.CheckStored), and the
	// commit's bytes to hash to its id: a full verification thus checks
	// every stored object of every state once, since each was new in some
	// entry, and a damaged one is CORRUPT at the entry that introduced it.
	stored []gitstore.ObjectID
	cur    *gitstore.Cursor // for the checks of stored objects, made by run
	// encoded holds the commit an entry prescribes, compared with the
	// stored one; reused from entry to entry.
	encoded []byte
}

// setTree makes t the state the next entry applies to, tracking the objects
// its replays make anew when the verifier checks stored objects.
func (v *verifier) setTree(t *gitstore.Tree) {
	if v.stored != nil {
		t.TrackNew()
	}
	v.tree = t
}

// minSegment is the fewest entries worth a parallel segment of their own (a
// variable so that tests can cut small ledgers into segments).
var minSegment = 4096

// segmentLen is the length of the segments a range of n entries is cut into
// for workers verifying them in parallel: n itself below minSegment (one
// segment), else from half of minSegment to minSegment, and as far as that
// allows of one length and numbering workers times a whole number of
// rounds, so that the workers finish together. Segments of minSegment each
// left the workers uneven: at 20k entries, 5 segments on 2 workers, one of
// which checked 3 (61%).
func segmentLen(n, workers int) int {
	if n < minSegment {
		return minSegment
	}
	rounds := (n + workers*minSegment - 1) / (workers * minSegment)
	return max(minSegment/2, (n+workers*rounds-1)/(workers*rounds))
}

// run checks commits (oldest first) in order. Reading and inflating objects
// runs ahead of the checks in another goroutine: the commits (those the walk
// did not keep) and entry bytes of the next commits are fetched while the
// current one is replayed. Every minSegment entries and at the end, the tree
// overlay starts again from the stored tree just verified, dropping what it
// had loaded, and the pack pages read so far leave the resident set.
func (v *verifier) run(commits []walked) error {
	raws := make(chan fetched, 256)
	stop := make(chan struct{})
	done := make(chan struct{})
	defer func() { close(stop); <-done }() // the reader must stop before the caller may close the repository
	v.cur = v.db.Cursor()
	go func() {
		defer close(done)
		defer close(raws)
		rd := v.db.Cursor()
		for _, w := range commits {
			f := fetched{commit: w.commit}
			if f.commit == nil {
				if f.commit, f.err = rd.ReadCommit(w.id); f.err != nil {
					f.err = errs.Wrap(errs.Corrupt, f.err, "ledger commit %s", w.id)
				}
			}
			if f.err == nil {
				f.raw, f.read, f.err = entryBytesWhere(rd, f.commit.Tree)
			}
			select {
			case raws <- f:
			case <-stop:
				return
			}
		}
	}()
	for i, w := range commits {
		f := <-raws
		if f.commit == nil {
			return f.err
		}
		w.commit = f.commit
		if err := v.check(w, f); err != nil {
			return err
		}
		if (i+1)%minSegment == 0 || i+1 == len(commits) {
			v.setTree(gitstore.NewTree(v.db, w.commit.Tree))
			v.db.DropResident()
		}
		v.meter.add(counted(i, len(commits)))
	}
	return nil
}

// fetched is a commit and its entry's bytes read ahead of its check.
type fetched struct {
	commit *gitstore.Commit
	raw    []byte
	read   entryRead
	err    error
}

func (v *verifier) fail(code errs.Code, format string, args ...any) *errs.Error {
	return errs.New(code, "entry %d: "+format, append([]any{v.pos}, args...)...).With("seq", v.pos)
}

// check verifies one ledger commit at position v.pos and advances.
func (v *verifier) check(w walked, f fetched) error {
	c := w.commit
	if want := min(v.pos, 1); uint64(len(c.Parents)) != want {
		return v.fail(errs.HistoryNonlinear, "commit %s has %d parents, a ledger commit has exactly %d", w.id, len(c.Parents), want)
	}
	raw, err := f.raw, f.err
	if err != nil {
		return v.fail(errs.Corrupt, "commit %s: %v", w.id, err)
	}
	if len(raw) >= largeEntry {
		defer collectGarbage()()
	}
	e, err := decodeEntry(raw)
	if errs.CodeOf(err) == errs.Noncanonical {
		return v.fail(errs.Noncanonical, "stored bytes are not canonical JSON")
	}
	decodeErr := err // reported after the hash check, as step would
	sig := v.sigRules[c.Author.Name]
	if sig == nil {
		if sig, err = sigRuleAt(v.tree, c.Author.Name); err != nil {
			return v.fail(errs.Corrupt, "%v", err)
		}
		v.sigRules[c.Author.Name] = sig
	}
	h := chain.EntryHash(raw)
	var hexBuf [2 * len(chain.Hash{})]byte
	if recorded, _ := gitstore.Trailer(c.Message, "Tally-Entry"); recorded != string(h.AppendHex(hexBuf[:0])) {
		return v.fail(errs.HashMismatch, "entry hashes to %s, commit %s records %q", h, w.id, recorded)
	}
	var applied *Applied
	if err = decodeErr; err == nil {
		applied, err = apply(v.tree, raw, e, h, v.meta)
	}
	if err != nil {
		e := errs.From(err)
		switch e.Code {
		case errs.Noncanonical, errs.Corrupt, errs.SeqGap, errs.LinkBroken, errs.TimeReversed, errs.RuleViolation:
			return v.fail(e.Code, "%s", e.Message)
		}
		return v.fail(errs.RuleViolation, "breaks rule %s: %s", e.Code, e.Message).With("rule", e.Code)
	}
	tree, err := v.hashTree()
	if err != nil {
		return err
	}
	if tree != c.Tree {
		return v.fail(errs.StateMismatch, "commit %s has tree %s, replaying the entries gives %s", w.id, c.Tree, tree)
	}
	if err := v.checkStored(w, f.read); err != nil {
		return err
	}
	// The commit must be byte for byte the one §4 prescribes, carrying the
	// signature it has (if any) in the one place Encode puts it. Where it is
	// not, the signature headers, which are outside the signed payload,
	// tell a change of what was signed (COMMIT-MISMATCH) from a second
	// gpgsig, a gpgsig-sha256 or a gpgsig out of place: changes anyone can
	// make to a signed commit, and to its id, without the key.
	want := CommitFor(applied, tree, v.parent)
	want.Signature = c.Signature
	v.encoded = want.AppendEncode(v.encoded[:0])
	if !bytes.Equal(v.encoded, c.Raw()) {
		if !bytes.Equal(want.Payload(), c.Payload()) {
			return v.fail(errs.CommitMismatch, "commit %s does not match its entry (author, committer, message or trailers)", w.id)
		}
		return v.fail(errs.BadSignature, "commit %s of %s's entry has a signature header FORMAT.md §4 does not allow "+
			"(a second gpgsig, a gpgsig-sha256, or a gpgsig out of place)", w.id, c.Author.Name)
	}
	if err := sig.check(c); err != nil {
		e := errs.From(err)
		return v.fail(e.Code, "%s", e.Message)
	}
	if v.each != nil {
		if err := v.each(applied); err != nil {
			return err
		}
	}
	if applied.Result.ChangesSigning() {
		clear(v.sigRules)
	}
	v.pos++
	v.parent = w.id
	v.meta = applied.Meta
	return nil
}

// hashTree computes the state tree's id after an entry, collecting the
// objects it made anew when the verifier checks stored objects.
func (v *verifier) hashTree() (gitstore.ObjectID, error) {
	if v.stored == nil {
		return v.tree.Hash(nil)
	}
	return v.tree.HashNew(func(id gitstore.ObjectID) { v.stored = append(v.stored, id) })
}

// checkStored checks that the objects hashTree collected are stored intact
// (gitstore.Cursor.CheckStored), and the commit's SHA-1 (its bytes are the
// ones check compared). The root tree and the entry blob, which the
// read-ahead read (r), are checked where it found them.
func (v *verifier) checkStored(w walked, r entryRead) error {
	if v.stored == nil {
		return nil
	}
	if got := gitstore.HashObject(gitstore.CommitObject, w.commit.Raw()); got != w.id {
		return v.fail(errs.Corrupt, "commit %s is damaged: its content hashes to %s", w.id, got)
	}
	for _, id := range v.stored {
		var where gitstore.Where
		switch id {
		case r.tree:
			where = r.treeWhere
		case r.entry:
			where = r.entryWhere
		}
		if err := v.cur.CheckStoredWhere(id, where); err != nil {
			return v.fail(errs.Corrupt, "commit %s: stored state object %s: %v", w.id, id, err)
		}
	}
	v.stored = v.stored[:0]
	return nil
}

// entryBytes reads the "entry" blob of a ledger commit's tree.
func entryBytes(rd *gitstore.Cursor, tree gitstore.ObjectID) ([]byte, error) {
	raw, _, err := entryBytesWhere(rd, tree)
	return raw, err
}

// entryRead says where entryBytesWhere found the root tree and the entry
// blob, which a full verify then checks (verifier.checkStored) without
// looking them up again.
type entryRead struct {
	tree, entry           gitstore.ObjectID
	treeWhere, entryWhere gitstore.Where
}

// entryBytesWhere is entryBytes, saying where it read what.
func entryBytesWhere(rd *gitstore.Cursor, tree gitstore.ObjectID) ([]byte, entryRead, error) {
	r := entryRead{tree: tree}
	typ, data, w, err := rd.ReadWhere(tree)
	if err != nil {
		return nil, r, err
	}
	if typ != gitstore.TreeObject {
		return nil, r, errors.New("root is not a tree")
	}
	r.treeWhere = w
	e, ok, err := gitstore.FindTreeEntry(data, EntryKey)
	if err != nil {
		return nil, r, err
	}
	if !ok || e.IsDir() {
		return nil, r, errors.New("tree has no entry blob")
	}
	typ, raw, w, err := rd.ReadWhere(e.ID)
	if err == nil && typ != gitstore.BlobObject {
		err = errors.New("entry is not a blob")
	}
	r.entry, r.entryWhere = e.ID, w
	return raw, r, err
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// writeFileAtomic replaces path with data (temp file + rename), so a reader
// sees the old or the new content, never a torn one.
func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	// A temporary name of its own for every write: goroutines of one
	// process (a library user's views beside its appends) write the same
	// record, and a name shared by the process let one rename the other's.
	f, err := os.CreateTemp(filepath.Dir(path), filepath.Base(path)+".tmp*")
	if err != nil {
		return err
	}
	tmp := f.Name()
	_, err = f.Write(data)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Chmod(tmp, 0o644)
	}
	if err == nil {
		err = os.Rename(tmp, path)
	}
	if err != nil {
		os.Remove(tmp)
	}
	return err
}
