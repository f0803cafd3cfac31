package ledger

import (
	"bufio"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
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
// reads, to the few entries a contended claim misses.
const (
	sentMaxEntries = 256
	sentMaxBytes   = 1 << 20
)

// The lines of a sent range: a header, one line per object, an end line.
// The header's version says the objects' form: 1, each object's content;
// 2, each object's pack entry as the server stores it, which the client
// inflates to name it and copies into its pack unchanged.
const (
	sentHeader = "tally-range"     // tally-range <form> <have> <tip> <objects>
	sentObject = "tally-object"    // form 1: tally-object <type number> <base64 content>
	sentEntry  = "tally-entry"     // form 2: tally-entry <base64 pack entry>
	sentEnd    = "tally-range-end" // tally-range-end <tip>
)

// SentForm is the newest form of sent range this version sends and reads;
// a request names the newest it reads (Intent's sent), and the server
// sends the newest it knows not above that one.
const SentForm = 2

// errSentTooBig stops collecting a range beyond sentMaxBytes.
var errSentTooBig = errors.New("sent range too big")

// SendRange writes to w the lines of the objects of the ledger's entries
// after have up to tip, in form (1 or 2, SentForm): each entry's commit
// and the trees and blobs its tree has that its parent's has not at the
// same path. In form 2 an object stored whole in a pack is sent as its
// entry there (ObjectDB.ReadEntry: checked against the index's CRC32),
// any other compressed anew. It writes nothing when have is zero, not
// reached from tip within sentMaxEntries first parents, or the objects'
// contents exceed sentMaxBytes: the client then fetches.
func (l *Ledger) SendRange(w io.Writer, have, tip gitstore.ObjectID, form int) error {
	if have.IsZero() {
		return nil
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return err
	}
	var objs []*gitstore.Object
	seen := map[gitstore.ObjectID]bool{}
	// entry reads through ReadEntry and keeps what it read (in read), so
	// that a commit or tree the walk reads and then sends, or reads as one
	// entry's and then as its parent's, is inflated once.
	read := map[gitstore.ObjectID]*gitstore.Object{}
	entry := func(id gitstore.ObjectID) (*gitstore.Object, error) {
		if o, ok := read[id]; ok {
			return o, nil
		}
		o, err := db.ReadEntry(id)
		if err == nil {
			read[id] = o
		}
		return o, err
	}
	readObject := func(id gitstore.ObjectID) (gitstore.ObjectType, []byte, error) {
		o, err := entry(id)
		if err != nil {
			return 0, nil, err
		}
		return o.Type(), o.Data(), nil
	}
	size := 0
	add := func(id gitstore.ObjectID, _ gitstore.ObjectType, _ []byte) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		o, err := entry(id)
		if err != nil {
			return err
		}
		if size += len(o.Data()); size > sentMaxBytes {
			return errSentTooBig
		}
		objs = append(objs, o)
		return nil
	}
	diff := gitstore.NewTreeDiffer(readObject)
	for id, n := tip, 0; id != have; n++ {
		if n == sentMaxEntries {
			return nil
		}
		c, err := gitstore.ReadCommitWith(readObject, id)
		if err != nil || len(c.Parents) == 0 {
			return nil // have is not an ancestor: the client fetches
		}
		p, err := gitstore.ReadCommitWith(readObject, c.Parents[0])
		if err != nil {
			return nil
		}
		if add(id, gitstore.CommitObject, nil) != nil || diff.Added(p.Tree, c.Tree, add) != nil {
			return nil
		}
		id = c.Parents[0]
	}
	form = min(form, SentForm)
	bw := bufio.NewWriterSize(w, 64<<10) // a range in a few writes, not one a 4 KiB
	fmt.Fprintf(bw, "%s %d %s %s %d\n", sentHeader, form, have, tip, len(objs))
	var line []byte // one buffer for every line: a range is ≈ 100 KB of base64
	for _, o := range objs {
		if form == 1 {
			line = fmt.Appendf(line[:0], "%s %d ", sentObject, o.Type())
			line = base64.StdEncoding.AppendEncode(line, o.Data())
		} else {
			line = append(append(line[:0], sentEntry...), ' ')
			line = base64.StdEncoding.AppendEncode(line, o.Entry())
		}
		bw.Write(append(line, '\n'))
	}
	fmt.Fprintf(bw, "%s %s\n", sentEnd, tip)
	return bw.Flush()
}

// parseSent reads a sent range for have..tip from the server's lines, in
// either form, the objects keyed by the hash of what arrived (so a forged
// object is only an object nobody asked for): a form 2 entry must decode
// as a whole object (gitstore.DecodeEntry: not a delta, its zlib stream
// intact and ending with the entry). It returns nil without a header naming
// exactly have and tip, an end line naming tip, and as many distinct
// objects between them as the header announced, all of the header's form
// and within sentMaxBytes of content in total. Other lines (other hooks')
// are skipped.
func parseSent(lines []string, have, tip gitstore.ObjectID) map[gitstore.ObjectID]*gitstore.Object {
	var objs map[gitstore.ObjectID]*gitstore.Object
	form, want, size := "", 0, 0
	for _, line := range lines {
		f := strings.Split(line, " ")
		switch {
		case len(f) == 5 && f[0] == sentHeader && (f[1] == "1" || f[1] == "2") && f[2] == have.String() && f[3] == tip.String():
			n, err := strconv.Atoi(f[4])
			if err != nil || n < 0 {
				return nil
			}
			objs, form, want, size = map[gitstore.ObjectID]*gitstore.Object{}, f[1], n, 0
		case objs == nil:
		case len(f) == 3 && f[0] == sentObject && form == "1":
			t, err := strconv.Atoi(f[1])
			data, err2 := base64.StdEncoding.DecodeString(f[2])
			if err != nil || err2 != nil || t < int(gitstore.CommitObject) || t > int(gitstore.BlobObject) {
				return nil
			}
			if size += len(data); size > sentMaxBytes {
				return nil
			}
			o := gitstore.NewObject(gitstore.ObjectType(t), data)
			objs[o.ID()] = o
		case len(f) == 2 && f[0] == sentEntry && form == "2":
			entry, err := base64.StdEncoding.DecodeString(f[1])
			if err != nil {
				return nil
			}
			o, err := gitstore.DecodeEntry(entry, uint64(sentMaxBytes-size))
			if err != nil || o.Type() > gitstore.BlobObject {
				return nil
			}
			size += len(o.Data())
			objs[o.ID()] = o
		case len(f) == 2 && f[0] == sentEnd && f[1] == tip.String():
			if len(objs) != want {
				return nil
			}
			return objs
		case f[0] == sentObject || f[0] == sentEntry:
			return nil // an object line of the other form
		}
	}
	return nil
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
	objs := parseSent(lines, have, tip)
	if objs == nil {
		return nil
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return nil
	}
	pw := gitstore.NewPackWriter()
	packed := map[gitstore.ObjectID]*gitstore.Object{} // what goes into the pack
	pack1 := func(o *gitstore.Object) {
		pw.AddObject(o)
		packed[o.ID()] = o
	}
	// read serves the range's objects before stored ones; what it serves
	// from the range goes into the pack.
	read := func(id gitstore.ObjectID) (gitstore.ObjectType, []byte, error) {
		if o, ok := objs[id]; ok {
			pack1(o)
			return o.Type(), o.Data(), nil
		}
		return db.Read(id)
	}
	need := func(id gitstore.ObjectID, t gitstore.ObjectType, data []byte) error {
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
	pack, keep, release := "", func() {}, func() {}
	if pw.Len() > 0 {
		if pack, keep, err = pw.WriteKept(l.Repo.ObjectDir); err != nil {
			return nil
		}
		if db.AddPack(pack) == nil {
			// The verify reads them back: from the decoded objects (named
			// by their hash, now in the pack), not by inflating the pack.
			release = db.Hold(packed)
		}
	}
	var last *Applied
	_, err = l.checkRemoteTip(remote, tip, false, func(a *Applied) error { last = a; return nil })
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
// found tip there would (whatever it held: fetches force it).
func (l *Ledger) moveTracking(remote string, tip gitstore.ObjectID) error {
	wl, err := l.lockWriter()
	if err != nil {
		return err
	}
	defer wl.Release()
	ref := l.trackingRef(remote)
	cur, _ := l.Repo.ReadRef(ref)
	return l.Repo.UpdateRef(wl, ref, cur, tip)
}

// trackingReaches reports whether the remote's tracking ref is at tip.
func (l *Ledger) trackingReaches(remote string, tip gitstore.ObjectID) bool {
	cur, err := l.Repo.ReadRef(l.trackingRef(remote))
	return err == nil && cur == tip
}
