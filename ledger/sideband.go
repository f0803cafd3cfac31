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
const (
	sentHeader = "tally-range"     // tally-range 1 <have> <tip> <objects>
	sentObject = "tally-object"    // tally-object <type number> <base64 content>
	sentEnd    = "tally-range-end" // tally-range-end <tip>
)

// sentObj is one object of a sent range.
type sentObj struct {
	typ  gitstore.ObjectType
	data []byte
}

// errSentTooBig stops collecting a range beyond sentMaxBytes.
var errSentTooBig = errors.New("sent range too big")

// SendRange writes to w the lines of the objects of the ledger's entries
// after have up to tip: each entry's commit and the trees and blobs its tree
// has that its parent's has not at the same path. It writes nothing when
// have is zero, not reached from tip within sentMaxEntries first parents,
// or the objects exceed sentMaxBytes: the client then fetches.
func (l *Ledger) SendRange(w io.Writer, have, tip gitstore.ObjectID) error {
	if have.IsZero() {
		return nil
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return err
	}
	var objs []sentObj
	seen := map[gitstore.ObjectID]bool{}
	size := 0
	add := func(id gitstore.ObjectID, t gitstore.ObjectType, data []byte) error {
		if seen[id] {
			return nil
		}
		seen[id] = true
		if data == nil {
			var err error
			if t, data, err = db.Read(id); err != nil {
				return err
			}
		}
		if size += len(data); size > sentMaxBytes {
			return errSentTooBig
		}
		objs = append(objs, sentObj{t, data})
		return nil
	}
	for id, n := tip, 0; id != have; n++ {
		if n == sentMaxEntries {
			return nil
		}
		c, err := db.ReadCommit(id)
		if err != nil || len(c.Parents) == 0 {
			return nil // have is not an ancestor: the client fetches
		}
		p, err := db.ReadCommit(c.Parents[0])
		if err != nil {
			return nil
		}
		if add(id, gitstore.CommitObject, c.Raw()) != nil || gitstore.AddedObjects(db.Read, p.Tree, c.Tree, add) != nil {
			return nil
		}
		id = c.Parents[0]
	}
	bw := bufio.NewWriter(w)
	fmt.Fprintf(bw, "%s 1 %s %s %d\n", sentHeader, have, tip, len(objs))
	for _, o := range objs {
		fmt.Fprintf(bw, "%s %d %s\n", sentObject, o.typ, base64.StdEncoding.EncodeToString(o.data))
	}
	fmt.Fprintf(bw, "%s %s\n", sentEnd, tip)
	return bw.Flush()
}

// parseSent reads a sent range for have..tip from the server's lines, the
// objects keyed by the hash of what arrived (so a forged object is only an
// object nobody asked for). It returns nil without a header naming exactly
// have and tip, an end line naming tip, and as many distinct objects between
// them as the header announced. Other lines (other hooks') are skipped.
func parseSent(lines []string, have, tip gitstore.ObjectID) map[gitstore.ObjectID]sentObj {
	var objs map[gitstore.ObjectID]sentObj
	want, size := 0, 0
	for _, line := range lines {
		f := strings.Split(line, " ")
		switch {
		case len(f) == 5 && f[0] == sentHeader && f[1] == "1" && f[2] == have.String() && f[3] == tip.String():
			n, err := strconv.Atoi(f[4])
			if err != nil || n < 0 {
				return nil
			}
			objs, want, size = map[gitstore.ObjectID]sentObj{}, n, 0
		case objs == nil:
		case len(f) == 3 && f[0] == sentObject:
			t, err := strconv.Atoi(f[1])
			data, err2 := base64.StdEncoding.DecodeString(f[2])
			if err != nil || err2 != nil || t < int(gitstore.CommitObject) || t > int(gitstore.BlobObject) {
				return nil
			}
			if size += len(data); size > sentMaxBytes {
				return nil
			}
			typ := gitstore.ObjectType(t)
			objs[gitstore.HashObject(typ, data)] = sentObj{typ, data}
		case len(f) == 2 && f[0] == sentEnd && f[1] == tip.String():
			if len(objs) != want {
				return nil
			}
			return objs
		}
	}
	return nil
}

// takeSent takes the range have..tip the server sent in lines, where the
// server reported tip as the entry it appended on old: it writes the range's
// objects as one pack (kept until the tracking ref reaches it), verifies the
// entries from this clone's record exactly as after a fetch, records tip as
// the remote's verified tip and moves the tracking ref to it, as a fetch
// would. It returns the entry at tip, or nil — having written nothing that
// stays — when the range is not there, incomplete, not from the record, not
// built on old, or does not verify: the caller then fetches.
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
	// read serves the range's objects before stored ones; what it serves
	// from the range goes into the pack.
	read := func(id gitstore.ObjectID) (gitstore.ObjectType, []byte, error) {
		if o, ok := objs[id]; ok {
			pw.Add(o.typ, o.data)
			return o.typ, o.data, nil
		}
		return db.Read(id)
	}
	need := func(id gitstore.ObjectID, t gitstore.ObjectType, data []byte) error {
		if data != nil { // a tree: read already took it
			return nil
		}
		if o, ok := objs[id]; ok {
			pw.Add(o.typ, o.data)
			return nil
		}
		if !db.Has(id) {
			return fmt.Errorf("object %s missing", id)
		}
		return nil
	}
	commit := func(id gitstore.ObjectID) (*gitstore.Commit, error) {
		t, data, err := read(id)
		if err != nil || t != gitstore.CommitObject {
			return nil, fmt.Errorf("no commit %s", id)
		}
		return gitstore.ParseCommit(data)
	}
	for id, n := tip, 0; id != have; n++ {
		c, err := commit(id)
		if n == sentMaxEntries || err != nil || len(c.Parents) == 0 || (n == 0 && c.Parents[0] != old) {
			return nil
		}
		p, err := commit(c.Parents[0])
		if err != nil || gitstore.AddedObjects(read, p.Tree, c.Tree, need) != nil {
			return nil
		}
		id = c.Parents[0]
	}
	pack, keep := "", func() {}
	if pw.Len() > 0 {
		if pack, keep, err = pw.WriteKept(l.Repo.ObjectDir); err != nil {
			return nil
		}
		db.AddPack(pack)
	}
	var last *Applied
	if _, err := l.verifyRemoteTipEach(remote, tip, false, func(a *Applied) error { last = a; return nil }); err != nil || last == nil {
		keep()
		if pack != "" {
			gitstore.RemovePack(l.Repo.ObjectDir, pack)
		}
		return nil
	}
	l.moveTracking(remote, tip)
	keep()
	return &Appended{Applied: *last, Commit: tip}
}

// moveTracking moves the remote's tracking ref to tip, as a fetch that
// found tip there would (whatever it held: fetches force it).
func (l *Ledger) moveTracking(remote string, tip gitstore.ObjectID) {
	wl, err := l.lockWriter()
	if err != nil {
		return
	}
	defer wl.Release()
	ref := l.trackingRef(remote)
	cur, _ := l.Repo.ReadRef(ref)
	l.Repo.UpdateRef(wl, ref, cur, tip)
}
