package ledger

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"maps"
	"strconv"
	"strings"

	"github.com/tally-dev/tally/gitstore"
)

// A sent range (FORMAT.md §9b) spares a sequenced claim its fetch: the
// request names the client's verified tip of the remote ledger (have), and
// the sequencer, once it has appended, prints the objects of the entries
// after have up to its new tip on its stderr, which receive-pack passes to
// the pusher through the push's sideband as "remote: " lines. The client
// trusts none of it: objects are named by their hash on arrival, the range
// must reach its own verified record by first parents, every object the
// range adds must be there (or already stored), and the entries are
// verified from the record by the same VerifyRangeEach as after a fetch.
// Anything short of that is ignored and the client fetches as before.

// Bounds of a sent range: beyond them the sequencer sends nothing (the
// client fetches). They keep the sideband, which git relays in 128-byte
// reads, to the few entries a contended claim misses. sentMaxBytes bounds
// the range's objects' contents (as applied, for a delta) and, apart, the
// contents of the stored objects a form 3 range takes as delta bases.
const (
	sentMaxEntries = 256
	sentMaxBytes   = 1 << 20
)

// The lines of a sent range: a header, one line per object, an end line.
// The header's version says the objects' form: 1, each object's content;
// 2, each object's pack entry as the server stores it, which the client
// inflates to name it and copies into its pack unchanged; 3, form 2's
// lines and, for a tree or blob whose parent entry holds one at its path,
// a git delta against that one, which the client has already: stored, or
// earlier in the range.
const (
	sentHeader = "tally-range"     // tally-range <form> <have> <tip> <objects>
	sentObject = "tally-object"    // form 1: tally-object <type number> <base64 content>
	sentEntry  = "tally-entry"     // forms 2 and 3: tally-entry <base64 pack entry>
	sentDelta  = "tally-delta"     // form 3: tally-delta <base id> <base64 git delta>
	sentEnd    = "tally-range-end" // tally-range-end <tip>
)

// SentForm is the newest form of sent range this version sends and reads;
// a request names the newest it reads (Intent's sent), and the server
// sends the newest it knows not above that one.
const SentForm = 3

// errSentTooBig stops collecting a range beyond sentMaxBytes.
var errSentTooBig = errors.New("sent range too big")

// sentObj is an object a sent entry adds, with its delta base: the object
// of the same kind its parent entry holds at its path (zero for none, and
// for the commit).
type sentObj struct{ id, base gitstore.ObjectID }

// SendRange writes to w the lines of the objects of the ledger's entries
// after have up to tip, in form (1 to SentForm): each entry's commit and
// the trees and blobs its tree has that its parent's has not at the same
// path. Forms 1 and 2 send them newest entry first; form 3 oldest first,
// so that a delta's base, the parent entry's object at the same path, is
// either earlier in the range or held by have's tree, which the client
// has. In forms 2 and 3 an object sent whole and stored whole in a pack is
// sent as its entry there (ObjectDB.ReadEntry: checked against the index's
// CRC32), any other compressed anew. It writes nothing when have is zero,
// not reached from tip within sentMaxEntries first parents, or the
// objects' contents exceed sentMaxBytes: the client then fetches.
func (l *Ledger) SendRange(w io.Writer, have, tip gitstore.ObjectID, form int) error {
	if have.IsZero() {
		return nil
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return err
	}
	r := &rangeReader{db: db, read: map[gitstore.ObjectID]*gitstore.Object{}}
	entries, count, ok := r.walk(have, tip)
	if !ok {
		return nil // have is not an ancestor within reach, or too much
	}
	form = min(form, SentForm)
	bw := bufio.NewWriterSize(w, 64<<10) // a range in a few writes, not one a 4 KiB
	fmt.Fprintf(bw, "%s %d %s %s %d\n", sentHeader, form, have, tip, count)
	enc := &rangeEncoder{w: bw, r: r, form: form, sent: map[gitstore.ObjectID]bool{}, storedBases: map[gitstore.ObjectID]bool{}}
	if form < 3 {
		for _, e := range entries {
			enc.entry(e)
		}
	} else {
		for i := len(entries) - 1; i >= 0; i-- {
			enc.entry(entries[i])
		}
	}
	fmt.Fprintf(bw, "%s %s\n", sentEnd, tip)
	return bw.Flush()
}

// rangeReader reads a range's objects through ReadEntry and keeps what it
// read, so that a commit or tree the walk reads and then sends, or reads as
// one entry's and then as its parent's (or as a delta base), is inflated
// once.
type rangeReader struct {
	db   *gitstore.ObjectDB
	read map[gitstore.ObjectID]*gitstore.Object
}

// object is object id, read once.
func (r *rangeReader) object(id gitstore.ObjectID) (*gitstore.Object, error) {
	if o, ok := r.read[id]; ok {
		return o, nil
	}
	o, err := r.db.ReadEntry(id)
	if err == nil {
		r.read[id] = o
	}
	return o, err
}

// walk returns the objects of the entries after have up to tip, newest
// entry first, each entry's commit first, an object in every entry that
// adds it, and how many distinct objects they are; ok false when have is
// not reached within sentMaxEntries first parents, an object cannot be
// read, or the distinct objects' contents exceed sentMaxBytes.
func (r *rangeReader) walk(have, tip gitstore.ObjectID) (entries [][]sentObj, count int, ok bool) {
	readObject := func(id gitstore.ObjectID) (gitstore.ObjectType, []byte, error) {
		o, err := r.object(id)
		if err != nil {
			return 0, nil, err
		}
		return o.Type(), o.Data(), nil
	}
	var objs []sentObj
	seen, size := map[gitstore.ObjectID]bool{}, 0
	add := func(id, base gitstore.ObjectID, _ gitstore.ObjectType, _ []byte) error {
		objs = append(objs, sentObj{id, base})
		if seen[id] {
			return nil
		}
		seen[id] = true
		o, err := r.object(id)
		if err != nil {
			return err
		}
		if size += len(o.Data()); size > sentMaxBytes {
			return errSentTooBig
		}
		return nil
	}
	diff := gitstore.NewTreeDiffer(readObject)
	for id, n := tip, 0; id != have; n++ {
		if n == sentMaxEntries {
			return nil, 0, false
		}
		c, err := gitstore.ReadCommitWith(readObject, id)
		if err != nil || len(c.Parents) == 0 {
			return nil, 0, false // have is not an ancestor: the client fetches
		}
		p, err := gitstore.ReadCommitWith(readObject, c.Parents[0])
		if err != nil {
			return nil, 0, false
		}
		objs = nil
		if add(id, gitstore.ObjectID{}, gitstore.CommitObject, nil) != nil || diff.Added(p.Tree, c.Tree, add) != nil {
			return nil, 0, false
		}
		entries = append(entries, objs)
		id = c.Parents[0]
	}
	return entries, len(seen), true
}

// rangeEncoder writes a range's object lines, each object once, in form.
type rangeEncoder struct {
	w    *bufio.Writer
	r    *rangeReader
	form int
	sent map[gitstore.ObjectID]bool
	// The bases of the deltas sent so far that the range does not hold
	// before them (the client reads them from its store), and their
	// contents' total, kept within sentMaxBytes as the client requires.
	storedBases map[gitstore.ObjectID]bool
	stored      int
	line        []byte // one buffer for every line: a range is ≈ 100 KB of base64
}

// entry writes the lines of an entry's objects not yet sent.
func (e *rangeEncoder) entry(objs []sentObj) {
	for _, so := range objs {
		if e.sent[so.id] {
			continue
		}
		o := e.r.read[so.id] // walk read every one
		switch {
		case e.form == 1:
			e.line = fmt.Appendf(e.line[:0], "%s %d ", sentObject, o.Type())
			e.line = base64.StdEncoding.AppendEncode(e.line, o.Data())
		case e.form == 3 && e.delta(o, so.base):
		default:
			e.line = append(append(e.line[:0], sentEntry...), ' ')
			e.line = base64.StdEncoding.AppendEncode(e.line, o.Entry())
		}
		e.w.Write(append(e.line, '\n'))
		e.sent[so.id] = true
	}
}

// delta puts in e.line the delta line of o against base, and reports
// whether it did: only where the line is shorter than o's entry line, and
// against a base the range does not hold before it only while such bases
// total sentMaxBytes at most.
func (e *rangeEncoder) delta(o *gitstore.Object, base gitstore.ObjectID) bool {
	if base.IsZero() {
		return false
	}
	b, err := e.r.object(base)
	if err != nil || b.Type() != o.Type() { // a delta's result has its base's type
		return false
	}
	newStored := !e.sent[base] && !e.storedBases[base]
	if newStored && e.stored+len(b.Data()) > sentMaxBytes {
		return false
	}
	d := gitstore.EncodeDelta(b.Data(), o.Data())
	b64 := base64.StdEncoding.EncodedLen
	if len(sentDelta)+2*len(base)+2+b64(len(d)) >= len(sentEntry)+1+b64(len(o.Entry())) {
		return false
	}
	if newStored {
		e.storedBases[base] = true
		e.stored += len(b.Data())
	}
	e.line = fmt.Appendf(e.line[:0], "%s %s ", sentDelta, base)
	e.line = base64.StdEncoding.AppendEncode(e.line, d)
	return true
}

// parseSent reads a sent range for have..tip from the server's lines, in
// any form, the objects keyed by the hash of what arrived (so a forged
// object is only an object nobody asked for): a form 2 or 3 entry must
// decode as a whole object (gitstore.DecodeEntry: not a delta, its zlib
// stream intact and ending with the entry), a form 3 delta must apply
// (sentParser.delta). stored reads the client's stored objects, a form 3
// delta's base when the range holds none before it. It returns nil without
// a header naming exactly have and tip, an end line naming tip, and as
// many distinct objects between them as the header announced, all of the
// header's form and within sentMaxBytes of content in total. Other lines
// (other hooks') are skipped.
func parseSent(lines []string, have, tip gitstore.ObjectID, stored func(gitstore.ObjectID) (*gitstore.Object, error)) *sentParser {
	var p *sentParser
	want := 0
	for _, line := range lines {
		f := strings.Split(line, " ")
		switch {
		case len(f) == 5 && f[0] == sentHeader && (f[1] == "1" || f[1] == "2" || f[1] == "3") && f[2] == have.String() && f[3] == tip.String():
			n, err := strconv.Atoi(f[4])
			if err != nil || n < 0 {
				return nil
			}
			p, want = &sentParser{form: f[1], objs: map[gitstore.ObjectID]*gitstore.Object{}, stored: stored}, n
		case p == nil:
		case len(f) == 2 && f[0] == sentEnd && f[1] == tip.String():
			if len(p.objs) != want {
				return nil
			}
			return p
		case f[0] == sentObject || f[0] == sentEntry || f[0] == sentDelta:
			if !p.line(f) {
				return nil // malformed, or an object line of another form
			}
		}
	}
	return nil
}

// sentParser holds what a sent range has given so far.
type sentParser struct {
	form   string
	objs   map[gitstore.ObjectID]*gitstore.Object // the range's objects
	size   int                                    // their contents' total
	stored func(gitstore.ObjectID) (*gitstore.Object, error)
	// The delta bases read from the store, each once, and their
	// contents' total.
	bases     map[gitstore.ObjectID]*gitstore.Object
	basesSize int
}

// line takes one object line (fields f) and reports whether it was of the
// range's form and well formed.
func (p *sentParser) line(f []string) bool {
	var o *gitstore.Object
	switch {
	case len(f) == 3 && f[0] == sentObject && p.form == "1":
		t, err := strconv.Atoi(f[1])
		data, err2 := base64.StdEncoding.DecodeString(f[2])
		if err != nil || err2 != nil || t < int(gitstore.CommitObject) || t > int(gitstore.BlobObject) || len(data) > sentMaxBytes-p.size {
			return false
		}
		o = gitstore.NewObject(gitstore.ObjectType(t), data)
	case len(f) == 2 && f[0] == sentEntry && p.form != "1":
		entry, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			return false
		}
		if o, err = gitstore.DecodeEntry(entry, uint64(sentMaxBytes-p.size)); err != nil || o.Type() > gitstore.BlobObject {
			return false
		}
	case len(f) == 3 && f[0] == sentDelta && p.form == "3":
		base, err := gitstore.ParseObjectID(f[1])
		delta, err2 := base64.StdEncoding.DecodeString(f[2])
		if err != nil || err2 != nil || base.String() != f[1] {
			return false
		}
		if o = p.delta(base, delta); o == nil {
			return false
		}
	default:
		return false
	}
	p.size += len(o.Data())
	p.objs[o.ID()] = o
	return true
}

// delta is the object delta makes of base: an object of the range before
// it (whatever line brought it, a delta too: each is applied once, to a
// base already whole, so a chain costs no more than its links), or else
// one this clone stores (read once; all such bases within sentMaxBytes,
// each one's declared size checked before it is read and its real size
// after: the read itself is as large as the object the server names,
// FORMAT.md §9b). The result, of the
// base's type (a commit, tree or blob), must fit in what is left of
// sentMaxBytes, checked from the delta's header before the base is read
// and again before anything is allocated for the result
// (gitstore.DeltaObject), and is named by its hash. nil if any of that
// fails.
func (p *sentParser) delta(base gitstore.ObjectID, delta []byte) *gitstore.Object {
	baseSize, size, ok := gitstore.DeltaSizes(delta)
	left := uint64(sentMaxBytes - p.size)
	if !ok || size > left {
		return nil
	}
	b := p.objs[base]
	if b == nil {
		b = p.bases[base]
	}
	if b == nil {
		if baseSize > uint64(sentMaxBytes-p.basesSize) {
			return nil
		}
		var err error
		if b, err = p.stored(base); err != nil || b.Type() > gitstore.BlobObject {
			return nil
		}
		if p.basesSize += len(b.Data()); p.basesSize > sentMaxBytes {
			return nil
		}
		if p.bases == nil {
			p.bases = map[gitstore.ObjectID]*gitstore.Object{}
		}
		p.bases[base] = b
	}
	o, err := gitstore.DeltaObject(b, delta, left)
	if err != nil {
		return nil
	}
	return o
}

// takeSent takes the range have..tip the server sent in lines, where the
// server reported tip as the entry it appended on old: it writes the range's
// objects as one pack (kept until the tracking ref reaches it), verifies the
// entries from this clone's record exactly as after a fetch, moves the
// tracking ref to tip and then records tip as the remote's verified tip, in
// the order of a fetch (whose ref moves before its verify is recorded), so
// that the record never names a tip no ref reaches. It returns the entry at
// tip, or nil — having written nothing that stays — when the range is not
// there, incomplete, not from the record, not built on old, does not
// verify, or the tracking ref cannot be moved: the caller then fetches.
func (l *Ledger) takeSent(remote string, have, old, tip gitstore.ObjectID, lines []string) *Appended {
	db, err := l.Repo.Objects()
	if err != nil {
		return nil
	}
	sent := parseSent(lines, have, tip, db.ReadEntry)
	if sent == nil {
		return nil
	}
	objs := sent.objs
	pw := gitstore.NewPackWriter()
	packed := map[gitstore.ObjectID]*gitstore.Object{} // what goes into the pack
	pack1 := func(o *gitstore.Object) {
		pw.AddObject(o)
		packed[o.ID()] = o
	}
	// read serves the range's objects, then the stored ones the range's
	// deltas were applied to (read once), then the store; what it serves
	// from the range goes into the pack.
	read := func(id gitstore.ObjectID) (gitstore.ObjectType, []byte, error) {
		if o, ok := objs[id]; ok {
			pack1(o)
			return o.Type(), o.Data(), nil
		}
		if o, ok := sent.bases[id]; ok {
			return o.Type(), o.Data(), nil
		}
		return db.Read(id)
	}
	need := func(id, _ gitstore.ObjectID, t gitstore.ObjectType, data []byte) error {
		if data != nil { // a tree: read already took it
			return nil
		}
		if o, ok := objs[id]; ok {
			pack1(o)
			return nil
		}
		if !db.Has(id) {
			return fmt.Errorf("object %s missing", id)
		}
		return nil
	}
	diff := gitstore.NewTreeDiffer(read)
	for id, n := tip, 0; id != have; n++ {
		c, err := gitstore.ReadCommitWith(read, id)
		if n == sentMaxEntries || err != nil || len(c.Parents) == 0 || (n == 0 && c.Parents[0] != old) {
			return nil
		}
		p, err := gitstore.ReadCommitWith(read, c.Parents[0])
		if err != nil || diff.Added(p.Tree, c.Tree, need) != nil {
			return nil
		}
		id = c.Parents[0]
	}
	// The verify reads the range's objects back, and the state at have
	// the stored bases are part of: from the decoded objects (named by
	// their hash, stored), not by inflating them again.
	held, pack, keep := map[gitstore.ObjectID]*gitstore.Object{}, "", func() {}
	maps.Copy(held, sent.bases)
	if pw.Len() > 0 {
		if pack, keep, err = pw.WriteKept(l.Repo.ObjectDir); err != nil {
			return nil
		}
		if db.AddPack(pack) == nil {
			maps.Copy(held, packed)
		}
	}
	release := db.Hold(held)
	var last *Applied
	_, err = l.checkRemoteTip(remote, have, tip, false, func(a *Applied) error { last = a; return nil })
	release()
	if err == nil && last != nil {
		err = l.moveTracking(remote, tip)
	}
	if err == nil && last != nil {
		err = l.writeRemoteRecord(remote, tip)
	}
	keep() // the tracking ref reaches the pack, or the pack goes
	if err != nil || last == nil {
		if pack != "" && !l.trackingReaches(remote, tip) {
			gitstore.RemovePack(l.Repo.ObjectDir, pack)
		}
		return nil
	}
	return &Appended{Applied: *last, Commit: tip}
}

// moveTracking moves the remote's tracking ref to tip, as a fetch that
// found tip there would, unless it holds tip already (another process of
// this clone landed a newer tip first): forward only, as a fetch lands.
func (l *Ledger) moveTracking(remote string, tip gitstore.ObjectID) error {
	wl, err := l.lockWriter()
	if err != nil {
		return err
	}
	defer wl.Release()
	ref := l.trackingRef(remote)
	cur, _ := l.Repo.ReadRef(ref)
	if !cur.IsZero() && cur != tip {
		if newer, err := l.holdsCommit(cur, tip); err == nil && newer {
			return nil
		}
	}
	return l.Repo.UpdateRef(wl, ref, cur, tip)
}

// trackingReaches reports whether the remote's tracking ref is at tip.
func (l *Ledger) trackingReaches(remote string, tip gitstore.ObjectID) bool {
	cur, err := l.Repo.ReadRef(l.trackingRef(remote))
	return err == nil && cur == tip
}
