package gitstore

import (
	"bytes"
	"cmp"
	"errors"
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Git file modes tally writes.
const (
	modeTree = 0o40000
	modeBlob = 0o100644
)

// Tree is a mutable overlay over a git tree: reads fall through to the object
// database lazily, writes stay in memory until Hash. Only the directories on the
// paths that were read or changed are ever loaded, so the cost of an update is
// proportional to the depth and width of the touched paths, never to the size
// of the whole tree. A Tree is not safe for concurrent use.
type Tree struct {
	db   *ObjectDB
	root *treeNode
	// fresh, once TrackNew is called, holds the ids of the blobs Set since
	// the last Hash or HashNew.
	fresh map[ObjectID]bool
}

type treeNode struct {
	id      ObjectID // the stored tree this node equals when !dirty
	loaded  bool
	dirty   bool
	entries []treeEntry // sorted in git tree order
	// enc is the tree object this node was last hashed as, kept while its
	// entries keep their names, modes and order (nil once one is
	// inserted, removed or changes mode): hashing the node again after
	// only ids changed, as when one tile of a directory of 32 is
	// rewritten, writes the new ids into it (treeEntry.at) instead of
	// encoding every entry anew. The bytes hashed are the same.
	enc []byte
}

type treeEntry struct {
	name string
	mode uint32
	id   ObjectID
	at   int       // offset of id in its node's enc, while that is not nil
	sub  *treeNode // subtree, once loaded or created
	data []byte    // blob content set in this overlay
}

// sortKey is git's tree order: directories compare as if their name ended in '/'.
func (e *treeEntry) sortKey() string {
	if e.mode == modeTree {
		return e.name + "/"
	}
	return e.name
}

// treeOrder compares name a (a directory's if aDir) with b in git's tree
// order, as their sortKeys would compare, without building either key: the
// searches of every tree write would otherwise allocate one per probe.
// Names may be strings or a tree's raw bytes (TreeDiffer): the conversions
// below are only compared, which Go does without copying.
func treeOrder[S ~string | ~[]byte](a S, aDir bool, b S, bDir bool) int {
	n := min(len(a), len(b))
	switch pa, pb := a[:n], b[:n]; {
	case string(pa) < string(pb):
		return -1
	case string(pa) > string(pb):
		return 1
	}
	// One is a prefix of the other. Names hold no '/', so the keys differ
	// at n unless the names are equal and both or neither are directories.
	next := func(s S, dir bool) int {
		switch {
		case n < len(s):
			return int(s[n])
		case dir:
			return '/'
		}
		return -1
	}
	return cmp.Compare(next(a, aDir), next(b, bDir))
}

// search returns the index of the first entry not before name (a
// directory's if dir) in git's tree order.
func (n *treeNode) search(name string, dir bool) int {
	return sort.Search(len(n.entries), func(i int) bool {
		e := &n.entries[i]
		return treeOrder(e.name, e.mode == modeTree, name, dir) >= 0
	})
}

// NewTree returns an overlay over the stored tree id; a zero id is the empty tree.
func NewTree(db *ObjectDB, id ObjectID) *Tree {
	n := &treeNode{id: id, loaded: id.IsZero()}
	return &Tree{db: db, root: n}
}

func (t *Tree) load(n *treeNode) error {
	if n.loaded {
		return nil
	}
	if t.db == nil {
		return fmt.Errorf("tree %s: no object database", n.id)
	}
	typ, data, err := t.db.Read(n.id)
	if err != nil {
		return err
	}
	if typ != TreeObject {
		return fmt.Errorf("object %s is a %s, not a tree", n.id, typ)
	}
	entries, err := ParseTree(data)
	if err != nil {
		return fmt.Errorf("tree %s: %w", n.id, err)
	}
	n.entries = make([]treeEntry, len(entries))
	for i, e := range entries {
		n.entries[i] = treeEntry{name: e.Name, mode: e.Mode, id: e.ID}
	}
	n.loaded = true
	return nil
}

// find returns the index of name in n (as a file or directory), or -1.
func (n *treeNode) find(name string) int {
	for _, dir := range [2]bool{false, true} {
		i := n.search(name, dir)
		if i < len(n.entries) && n.entries[i].name == name {
			return i
		}
	}
	return -1
}

func (t *Tree) subtree(e *treeEntry) (*treeNode, error) {
	if e.mode != modeTree {
		return nil, fmt.Errorf("%s is not a directory", e.name)
	}
	if e.sub == nil {
		e.sub = &treeNode{id: e.id}
	}
	return e.sub, t.load(e.sub)
}

// dir walks to the directory holding the last element of path. With create,
// missing directories are made and every node on the way is marked dirty.
func (t *Tree) dir(path string, create bool) (*treeNode, string, error) {
	n := t.root
	if err := t.load(n); err != nil {
		return nil, "", err
	}
	if create {
		n.dirty = true
	}
	for {
		name, rest, more := strings.Cut(path, "/")
		if !more {
			return n, name, nil
		}
		path = rest
		i := n.find(name)
		if i < 0 {
			if !create {
				return nil, "", nil
			}
			n.insert(treeEntry{name: name, mode: modeTree, sub: &treeNode{loaded: true}})
			i = n.find(name)
		}
		sub, err := t.subtree(&n.entries[i])
		if err != nil {
			return nil, "", err
		}
		if create {
			sub.dirty = true
		}
		n = sub
	}
}

func (n *treeNode) insert(e treeEntry) {
	i := n.search(e.name, e.mode == modeTree)
	n.enc = nil
	n.entries = append(n.entries, treeEntry{})
	copy(n.entries[i+1:], n.entries[i:])
	n.entries[i] = e
}

func validPath(path string) error {
	if path == "" || strings.HasPrefix(path, "/") || strings.HasSuffix(path, "/") || strings.Contains(path, "//") {
		return fmt.Errorf("bad tree path %q", path)
	}
	return nil
}

// Get returns the blob at path; ok is false if there is none.
func (t *Tree) Get(path string) (data []byte, ok bool, err error) {
	if err := validPath(path); err != nil {
		return nil, false, err
	}
	n, name, err := t.dir(path, false)
	if err != nil || n == nil {
		return nil, false, err
	}
	i := n.find(name)
	if i < 0 || n.entries[i].mode == modeTree {
		return nil, false, nil
	}
	e := &n.entries[i]
	if e.data != nil {
		return e.data, true, nil
	}
	typ, data, err := t.db.Read(e.id)
	if err != nil {
		return nil, false, err
	}
	if typ != BlobObject {
		return nil, false, fmt.Errorf("%s: object %s is a %s, not a blob", path, e.id, typ)
	}
	return data, true, nil
}

// List returns the names in directory dir ("" for the root); directories carry
// a trailing '/'. A missing directory lists as empty.
func (t *Tree) List(dir string) ([]string, error) {
	n := t.root
	if err := t.load(n); err != nil {
		return nil, err
	}
	if dir != "" {
		// dir walks to the parent of its last element, so walk to a child of dir.
		d, _, err := t.dir(dir+"/_", false)
		if err != nil || d == nil {
			return nil, err
		}
		n = d
	}
	names := make([]string, len(n.entries))
	for i := range n.entries {
		names[i] = n.entries[i].sortKey()
	}
	return names, nil
}

// Set stores data as the blob at path, creating directories as needed.
func (t *Tree) Set(path string, data []byte) error {
	_, err := t.SetID(path, data)
	return err
}

// SetID is Set that also returns the blob's id, for a caller that needs it
// beside the tree (the ledger's Merkle tiles record the entry blob's id):
// hashing the blob again would cost a second SHA-1 of it.
func (t *Tree) SetID(path string, data []byte) (ObjectID, error) {
	if err := validPath(path); err != nil {
		return ObjectID{}, err
	}
	n, name, err := t.dir(path, true)
	if err != nil {
		return ObjectID{}, err
	}
	e := treeEntry{name: name, mode: modeBlob, id: HashObject(BlobObject, data), data: data}
	if t.fresh != nil {
		t.fresh[e.id] = true
	}
	if i := n.find(name); i >= 0 {
		old := &n.entries[i]
		if old.mode == modeTree {
			return ObjectID{}, fmt.Errorf("%s is a directory", path)
		}
		if old.mode != e.mode {
			n.enc = nil // the encoding spells the mode, not only the id
		}
		e.at = old.at
		n.entries[i] = e
		return e.id, nil
	}
	n.insert(e)
	return e.id, nil
}

// Delete removes the blob at path, and directories it leaves empty.
func (t *Tree) Delete(path string) error {
	if err := validPath(path); err != nil {
		return err
	}
	parts := strings.Split(path, "/")
	var walk func(n *treeNode, i int) (bool, error)
	walk = func(n *treeNode, i int) (bool, error) {
		j := n.find(parts[i])
		if j < 0 {
			return false, nil
		}
		if i < len(parts)-1 {
			sub, err := t.subtree(&n.entries[j])
			if err != nil {
				return false, err
			}
			removed, err := walk(sub, i+1)
			if err != nil || !removed {
				return removed, err
			}
			n.dirty = true
			if len(sub.entries) > 0 {
				return true, nil
			}
		} else if n.entries[j].mode == modeTree {
			return false, fmt.Errorf("%s is a directory", path)
		}
		n.entries = append(n.entries[:j], n.entries[j+1:]...)
		n.enc = nil
		n.dirty = true
		return true, nil
	}
	if err := t.load(t.root); err != nil {
		return err
	}
	_, err := walk(t.root, 0)
	return err
}

// Hash computes the id of the tree as modified. With pw non-nil, every new tree
// and blob is added to it. Afterwards the overlay is clean: its nodes equal the
// objects just computed.
func (t *Tree) Hash(pw *PackWriter) (ObjectID, error) {
	if pw == nil {
		return t.hash(nil, nil), nil
	}
	return t.hash(pw.add, nil), nil
}

// TrackNew makes the tree remember the blobs Set from now on, for HashNew.
func (t *Tree) TrackNew() { t.fresh = map[ObjectID]bool{} }

// HashNew is Hash(nil) that also calls each with the id of every object new
// in the tree since the last Hash or HashNew: the tree of each changed
// directory, and each blob Set since then (TrackNew must have been called
// before those Sets) that the tree still holds. Every object of the tree
// that was not in it at the previous hash is thus named once; an object the
// tree already held may be named again.
func (t *Tree) HashNew(each func(ObjectID)) (ObjectID, error) {
	id := t.hash(nil, each)
	clear(t.fresh)
	return id, nil
}

// hash computes the ids of the changed directories, handing every new tree
// and blob to add (if not nil) and naming the new ones to each (if not nil).
func (t *Tree) hash(add func(ObjectID, ObjectType, []byte), each func(ObjectID)) ObjectID {
	var hash func(n *treeNode) ObjectID
	hash = func(n *treeNode) ObjectID {
		if !n.dirty {
			return n.id
		}
		for i := range n.entries {
			e := &n.entries[i]
			switch {
			case e.sub != nil:
				e.id = hash(e.sub)
			case e.data != nil:
				if add != nil {
					add(e.id, BlobObject, e.data) // e.id: Set hashed it
				}
				if each != nil && t.fresh[e.id] {
					each(e.id)
				}
			}
		}
		if n.enc != nil {
			for i := range n.entries {
				e := &n.entries[i]
				copy(n.enc[e.at:e.at+len(e.id)], e.id[:])
			}
		} else {
			n.enc = n.encode()
		}
		n.id = HashObject(TreeObject, n.enc)
		if add != nil {
			add(n.id, TreeObject, n.enc) // the PackWriter compresses it at once
		}
		if each != nil {
			each(n.id)
		}
		n.dirty = false
		return n.id
	}
	return hash(t.root)
}

// encode returns n's tree object, recording where each entry's id is in it.
func (n *treeNode) encode() []byte {
	size := 0
	for i := range n.entries {
		size += len(modeString(n.entries[i].mode)) + len(n.entries[i].name) + 2 + len(ObjectID{})
	}
	buf := make([]byte, 0, size)
	for i := range n.entries {
		e := &n.entries[i]
		buf = append(append(buf, modeString(e.mode)...), ' ')
		buf = append(append(buf, e.name...), 0)
		e.at = len(buf)
		buf = append(buf, e.id[:]...)
	}
	return buf
}

// Pending returns how many objects Hash will give its PackWriter at most:
// the changed directories and the blobs in them. It is a bound, not an exact
// count, because the PackWriter skips objects it already holds.
func (t *Tree) Pending() int {
	var count func(n *treeNode) int
	count = func(n *treeNode) int {
		if !n.dirty {
			return 0
		}
		c := 1
		for i := range n.entries {
			if e := &n.entries[i]; e.sub != nil {
				c += count(e.sub)
			} else if e.data != nil {
				c++
			}
		}
		return c
	}
	return count(t.root)
}

// modeString spells a mode as git does in trees (octal, no leading zero).
func modeString(m uint32) string {
	switch m {
	case modeTree:
		return "40000"
	case modeBlob:
		return "100644"
	}
	return strconv.FormatUint(uint64(m), 8)
}

// TreeEntry is one parsed entry of a stored tree.
type TreeEntry struct {
	Name string
	Mode uint32
	ID   ObjectID
}

// IsDir reports whether the entry is a subtree.
func (e TreeEntry) IsDir() bool { return e.Mode == modeTree }

// ParseTree parses a tree object's content.
func ParseTree(data []byte) ([]TreeEntry, error) {
	var out []TreeEntry
	for len(data) > 0 {
		mode, name, id, rest, err := nextTreeEntry(data)
		if err != nil {
			return nil, err
		}
		out = append(out, TreeEntry{Name: string(name), Mode: mode, ID: id})
		data = rest
	}
	return out, nil
}

// FindTreeEntry returns the entry called name in a tree object's content,
// which must parse as ParseTree's does, without building the other
// entries: a verify looks up the entry blob in every ledger commit's tree.
func FindTreeEntry(data []byte, name string) (e TreeEntry, ok bool, err error) {
	for len(data) > 0 {
		mode, n, id, rest, err := nextTreeEntry(data)
		if err != nil {
			return TreeEntry{}, false, err
		}
		if !ok && string(n) == name {
			e, ok = TreeEntry{Name: name, Mode: mode, ID: id}, true
		}
		data = rest
	}
	return e, ok, nil
}

// nextTreeEntry parses the first entry of a tree object's content.
func nextTreeEntry(data []byte) (mode uint32, name []byte, id ObjectID, rest []byte, err error) {
	sp := bytes.IndexByte(data, ' ')
	if sp <= 0 {
		return 0, nil, id, nil, errors.New("malformed tree entry mode")
	}
	var m uint64
	switch string(data[:sp]) { // the modes tally writes, without the parse's allocation
	case "100644":
		m = modeBlob
	case "40000":
		m = modeTree
	default:
		if m, err = strconv.ParseUint(string(data[:sp]), 8, 32); err != nil {
			return 0, nil, id, nil, fmt.Errorf("malformed tree entry mode %q", data[:sp])
		}
	}
	data = data[sp+1:]
	nul := bytes.IndexByte(data, 0)
	if nul <= 0 || len(data) < nul+1+20 {
		return 0, nil, id, nil, errors.New("malformed tree entry name")
	}
	copy(id[:], data[nul+1:nul+21])
	return uint32(m), data[:nul], id, data[nul+21:], nil
}

// DiffTrees returns the paths of blobs that differ between trees a and b
// (added, removed or changed), sorted. Equal subtrees are skipped by id, so the
// cost is proportional to what changed.
func DiffTrees(db *ObjectDB, a, b ObjectID) ([]string, error) {
	var out []string
	read := func(id ObjectID) ([]TreeEntry, error) {
		if id.IsZero() {
			return nil, nil
		}
		typ, data, err := db.Read(id)
		if err != nil {
			return nil, err
		}
		if typ != TreeObject {
			return nil, fmt.Errorf("object %s is a %s, not a tree", id, typ)
		}
		return ParseTree(data)
	}
	var walk func(prefix string, a, b ObjectID) error
	walk = func(prefix string, a, b ObjectID) error {
		if a == b {
			return nil
		}
		ea, err := read(a)
		if err != nil {
			return err
		}
		eb, err := read(b)
		if err != nil {
			return err
		}
		type pair struct{ a, b *TreeEntry }
		byName := map[string]*pair{}
		var names []string
		for i := range ea {
			byName[ea[i].Name] = &pair{a: &ea[i]}
			names = append(names, ea[i].Name)
		}
		for i := range eb {
			if p, ok := byName[eb[i].Name]; ok {
				p.b = &eb[i]
			} else {
				byName[eb[i].Name] = &pair{b: &eb[i]}
				names = append(names, eb[i].Name)
			}
		}
		for _, name := range names {
			p := byName[name]
			path := prefix + name
			var ta, tb, fa, fb ObjectID
			if p.a != nil {
				if p.a.IsDir() {
					ta = p.a.ID
				} else {
					fa = p.a.ID
				}
			}
			if p.b != nil {
				if p.b.IsDir() {
					tb = p.b.ID
				} else {
					fb = p.b.ID
				}
			}
			if fa != fb || (p.a != nil && p.b != nil && !p.a.IsDir() && !p.b.IsDir() && p.a.Mode != p.b.Mode) {
				out = append(out, path)
			}
			if err := walk(path+"/", ta, tb); err != nil {
				return err
			}
		}
		return nil
	}
	if err := walk("", a, b); err != nil {
		return nil, err
	}
	sort.Strings(out)
	return out, nil
}

// DB returns the object database the overlay reads from.
func (t *Tree) DB() *ObjectDB { return t.db }

// TreeDiffer names the objects a tree adds to another (Added) through read,
// which may serve objects not yet stored (a received range,
// ledger.Request). It keeps every tree it read, so that a walk diffing
// each ledger entry's tree against its parent's — every tree is one diff's
// new tree and the next diff's old one — reads and checks each once, and it
// diffs two trees by walking both contents side by side in git's tree
// order, building no entry and copying no name: with a 500-cell plan's
// 15 KiB cells tree in every entry, parsing each tree into entries and a
// map of the old one by name was most of the allocation of a sent range,
// on the server that sends it and on the client that takes it.
type TreeDiffer struct {
	read  func(ObjectID) (ObjectType, []byte, error)
	trees map[ObjectID][]byte // content of each tree read
}

// NewTreeDiffer returns a TreeDiffer reading trees through read.
func NewTreeDiffer(read func(ObjectID) (ObjectType, []byte, error)) *TreeDiffer {
	return &TreeDiffer{read: read, trees: map[ObjectID][]byte{}}
}

// tree returns the content of tree id (none for the zero id), reading it
// through read the first time only.
func (d *TreeDiffer) tree(id ObjectID) ([]byte, error) {
	if id.IsZero() {
		return nil, nil
	}
	if data, ok := d.trees[id]; ok {
		return data, nil
	}
	typ, data, err := d.read(id)
	if err != nil {
		return nil, err
	}
	if typ != TreeObject {
		return nil, fmt.Errorf("object %s is a %s, not a tree", id, typ)
	}
	d.trees[id] = data
	return data, nil
}

// Added calls each for every object tree b reaches that tree a does not
// hold at the same path: b itself (unless equal to a), then each subtree
// and blob whose id differs from a's entry of that name, depth first.
// Trees come with their content (data, as read), blobs with nil; blobs are
// never read. Each comes with base, the object a holds at its path as the
// same kind (tree or blob; a itself for b), zero where a holds none: what
// a delta of it is taken against (a sent range of form 3). A tree read
// once is not read again, by this call or a later one. With a holding
// everything it reaches, the objects of b missing from a store are among
// those named.
//
// An entry of b is skipped only when the walk meets an entry of a with the
// same name, kind and id, so trees out of git's order (which neither git
// nor tally writes) can only make it name more, never fewer.
func (d *TreeDiffer) Added(a, b ObjectID, each func(id, base ObjectID, t ObjectType, data []byte) error) error {
	if a == b {
		return nil
	}
	tb, err := d.tree(b)
	if err != nil {
		return err
	}
	if err := each(b, a, TreeObject, tb); err != nil {
		return err
	}
	ta, err := d.tree(a)
	if err != nil {
		return err
	}
	// a's entry at the walk (inA: there is one), and b's. Both trees are
	// parsed to their end, a's after b's last entry too, so a malformed
	// entry of either is an error, as ParseTree's.
	var (
		aMode uint32
		aName []byte
		aID   ObjectID
		inA   bool
	)
	nextA := func() (err error) {
		if inA = len(ta) > 0; inA {
			aMode, aName, aID, ta, err = nextTreeEntry(ta)
		}
		return err
	}
	if err := nextA(); err != nil {
		return err
	}
	for len(tb) > 0 {
		mode, name, id, rest, err := nextTreeEntry(tb)
		if err != nil {
			return err
		}
		tb = rest
		dir := mode == modeTree
		c := 1
		for inA {
			if c = treeOrder(aName, aMode == modeTree, name, dir); c >= 0 {
				break
			}
			if err := nextA(); err != nil {
				return err
			}
		}
		var base ObjectID // a's entry of the same name and kind
		if inA && c == 0 {
			if aID == id {
				continue
			}
			base = aID
		}
		if !dir {
			if err := each(id, base, BlobObject, nil); err != nil {
				return err
			}
			continue
		}
		if err := d.Added(base, id, each); err != nil {
			return err
		}
	}
	for inA {
		if err := nextA(); err != nil {
			return err
		}
	}
	return nil
}
