package gitstore

import (
	"bufio"
	"bytes"
	"cmp"
	"compress/zlib"
	"container/list"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"math/bits"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"
)

// ErrObjectNotFound reports that an object is in none of the database's directories.
var ErrObjectNotFound = errors.New("gitstore: object not found")

var errODBClosed = errors.New("gitstore: object database is closed")

const (
	odbMaxAlternateDepth = 5     // as in git
	packMaxDeltaDepth    = 10000 // git writes at most 4095; more means a cycle or garbage
	packHits             = 8     // packs of recent lookups searched first (ObjectDB.hits)
	packCacheEntries     = 256
	sealWindow           = 16 << 20 // bytes of a pack packMaps.seal reads before letting them go
	packCacheBytes       = 8 << 20

	// packMaxInflateRatio bounds the size a header may claim for n compressed bytes.
	// Deflate cannot expand data more than ~1032 times, so a larger claim is corrupt
	// and must not drive an allocation.
	packMaxInflateRatio = 1100

	packOfsDelta = 6
	packRefDelta = 7

	packIdxHeader = 8 + 256*4 // magic, version, fanout
)

// ObjectDB reads objects from a git object directory and its alternates.
//
// A lookup tries loose objects, then packs, newest first. Pack indexes and packs
// are mapped on first search, so opening costs one directory listing per object
// directory, and a lookup costs O(log n) in the size of each pack searched,
// independent of how many objects the repository holds.
//
// An ObjectDB is safe for concurrent use, except that Close must not overlap
// other calls.
type ObjectDB struct {
	dirs  []string // primary object directory, then alternates; absolute, distinct, existing
	cache packCache

	mu      sync.Mutex
	packs   []*packFile // newest first; replaced, never modified, so callers may keep a snapshot
	retired []*packFile // dropped by a rescan but perhaps still in use by a reader; unmapped by Close
	closed  bool

	// lastHit is the pack of the latest successful lookup, searched first
	// (after a Cursor's own): objects read together (a ledger commit and
	// its tree) were written together.
	lastHit atomic.Pointer[packFile]

	readers  sync.RWMutex // held shared by every read; see releaseRetired
	retiredN atomic.Int32 // len(retired)
	holds    atomic.Int32 // HoldRetired calls not yet ended: no pack is unmapped meanwhile

	held atomic.Pointer[map[ObjectID]*Object] // stored objects served from memory (Hold); nil if none
}

// OpenObjectDB opens the object directory objectDir. alternates lists further
// object directories (from GIT_ALTERNATE_OBJECT_DIRECTORIES); those named in
// info/alternates files are followed too, up to 5 levels deep as in git. Missing
// alternates are skipped.
func OpenObjectDB(objectDir string, alternates []string) (*ObjectDB, error) {
	dir, err := filepath.Abs(objectDir)
	if err != nil {
		return nil, err
	}
	if fi, err := os.Stat(dir); err != nil {
		return nil, fmt.Errorf("gitstore: object directory: %w", err)
	} else if !fi.IsDir() {
		return nil, fmt.Errorf("gitstore: object directory %s is not a directory", dir)
	}
	db := &ObjectDB{dirs: odbAlternates(dir, alternates)}
	if _, err := db.rescan(); err != nil {
		return nil, err
	}
	return db, nil
}

// odbAlternates returns dir followed by its alternates in breadth-first order.
// Relative entries of an info/alternates file are relative to the object
// directory holding it; extra entries are relative to the working directory.
func odbAlternates(dir string, extra []string) []string {
	type alt struct {
		dir   string
		depth int // depth of the entries in its info/alternates
	}
	dirs := []string{dir}
	queue := []alt{{dir, 0}}
	push := func(p string, depth int) {
		p, err := filepath.Abs(p)
		if err != nil || depth > odbMaxAlternateDepth || slices.Contains(dirs, p) {
			return
		}
		if fi, err := os.Stat(p); err != nil || !fi.IsDir() {
			return
		}
		dirs = append(dirs, p)
		queue = append(queue, alt{p, depth + 1})
	}
	for _, p := range extra {
		push(p, 0)
	}
	for i := 0; i < len(queue); i++ {
		b, err := readFile(filepath.Join(queue[i].dir, "info", "alternates"))
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			line = strings.TrimSpace(line)
			if line == "" || line[0] == '#' {
				continue
			}
			if line[0] == '"' {
				if u, err := strconv.Unquote(line); err == nil {
					line = u
				}
			}
			if !filepath.IsAbs(line) {
				line = filepath.Join(queue[i].dir, line)
			}
			push(line, queue[i].depth)
		}
	}
	return dirs
}

// rescan replaces the pack list with the packs now present. A pack still present
// keeps its packFile, and so its mappings.
func (db *ObjectDB) rescan() (changed bool, err error) {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return false, errODBClosed
	}
	old := make(map[string]*packFile, len(db.packs))
	for _, p := range db.packs {
		old[p.path] = p
	}
	var packs []*packFile
	for _, dir := range db.dirs {
		found, err := packList(filepath.Join(dir, "pack"))
		if err != nil {
			return false, err
		}
		for _, p := range found {
			if o := old[p.path]; o != nil {
				p = o
				delete(old, p.path)
			} else {
				changed = true
			}
			packs = append(packs, p)
		}
	}
	for _, p := range old {
		db.retired = append(db.retired, p)
		changed = true
	}
	db.retiredN.Store(int32(len(db.retired)))
	sort.SliceStable(packs, func(i, j int) bool { return packs[i].mtime.After(packs[j].mtime) })
	db.packs = packs
	return changed, nil
}

// releaseRetired unmaps the packs rescans dropped, once no read is in
// progress: a long-lived reader (an MCP server, a hook) would otherwise keep
// every pack it ever saw mapped. Reads hold db.readers shared; this only
// tries the exclusive lock, so it never delays a read.
func (db *ObjectDB) releaseRetired() {
	if db.retiredN.Load() == 0 || db.holds.Load() > 0 || !db.readers.TryLock() {
		return
	}
	defer db.readers.Unlock()
	db.mu.Lock()
	retired := db.retired
	db.retired = nil
	db.retiredN.Store(0)
	db.mu.Unlock()
	for _, p := range retired {
		db.lastHit.CompareAndSwap(p, nil)
		p.unmap()
	}
}

// HoldRetired keeps the packs rescans retire mapped until the returned
// func is called, which unmaps them (releaseRetired). A writer holds them
// while it holds the writer lock: unmapping the packs another process's
// compaction replaced is the writer's to pay, after the release, not the
// next writer's to wait for.
func (db *ObjectDB) HoldRetired() (end func()) {
	db.holds.Add(1)
	return func() {
		db.holds.Add(-1)
		db.releaseRetired()
	}
}

// packDirEntry is a pack of a pack directory that has both its .pack and
// its .idx.
type packDirEntry struct {
	base  string // "pack-<hex>"
	size  int64  // of the .pack
	mtime time.Time
	git   bool // a .keep, .promisor or .mtimes file beside it: git manages it
}

// listPackDir lists the packs in packDir, in name order: one directory
// read, and a stat of each .pack for its size and time.
func listPackDir(packDir string) ([]packDirEntry, error) {
	d, err := openFile(packDir, os.O_RDONLY|oDirectory, 0)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	} else if err != nil {
		return nil, err
	}
	ents, err := d.Readdirnames(-1)
	d.Close()
	if err != nil {
		return nil, err
	}
	slices.Sort(ents) // in name order, as os.ReadDir lists them
	names := make(map[string]bool, len(ents))
	for _, e := range ents {
		names[e] = true
	}
	git := func(base string) bool { return names[base+".keep"] || names[base+".promisor"] || names[base+".mtimes"] }
	var bases []string
	for _, e := range ents {
		if base, ok := strings.CutSuffix(e, ".pack"); ok && names[base+".idx"] {
			bases = append(bases, base)
		}
	}
	// packDir is clean and a base a plain name: filepath.Join's Clean of
	// the whole path again was 2.5k instructions a pack.
	var out []packDirEntry
	for _, base := range bases {
		fi, err := os.Lstat(packDir + "/" + base + ".pack")
		if err != nil {
			continue // deleted since listed
		}
		out = append(out, packDirEntry{base: base, size: fi.Size(), mtime: fi.ModTime(), git: git(base)})
	}
	return out, nil
}

// packList lists the packs in packDir that have both an .idx and a .pack.
func packList(packDir string) ([]*packFile, error) {
	ents, err := listPackDir(packDir)
	if err != nil {
		return nil, err
	}
	packs := make([]*packFile, len(ents))
	for i, e := range ents {
		packs[i] = &packFile{path: packDir + "/" + e.base, mtime: e.mtime, size: e.size, git: e.git}
	}
	return packs, nil
}

// AddPack makes the pack packName ("pack-<hex>", as returned by PackWriter.WriteTo)
// in the primary object directory visible to lookups at once, ahead of all others.
func (db *ObjectDB) AddPack(packName string) error {
	if !packValidName(packName) {
		return fmt.Errorf("gitstore: invalid pack name %q", packName)
	}
	path := filepath.Join(db.dirs[0], "pack", packName)
	if _, err := os.Stat(path + ".idx"); err != nil {
		return err
	}
	fi, err := os.Stat(path + ".pack")
	if err != nil {
		return err
	}
	return db.addPack(path, fi.ModTime(), fi.Size())
}

// addPack is AddPack for the pack at path ("<dir>/pack/pack-<hex>", without
// its extension) whose modification time and size the caller knows: the
// writer that has just published it (UpdateRefWithPack), without two stats.
func (db *ObjectDB) addPack(path string, mtime time.Time, size int64) error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return errODBClosed
	}
	for _, p := range db.packs {
		if p.path == path {
			return nil
		}
	}
	db.packs = append([]*packFile{{path: path, mtime: mtime, size: size}}, db.packs...)
	return nil
}

// Close unmaps all packs. Slices returned by Read do not refer to the mappings
// and stay valid.
func (db *ObjectDB) Close() error {
	db.mu.Lock()
	defer db.mu.Unlock()
	if db.closed {
		return nil
	}
	db.closed = true
	for _, list := range [][]*packFile{db.packs, db.retired} {
		for _, p := range list {
			p.unmap()
		}
	}
	db.packs, db.retired = nil, nil
	return nil
}

// odbLoc is where an object is stored: a loose file or a pack entry.
type odbLoc struct {
	loose *os.File // the open loose object, or nil for a packed one
	p     *packFile
	m     *packMaps
	off   uint64
	pos   int  // the object's position in m's index
	noOff bool // off was not looked up (locate without withOff)
}

// locate finds id. Before reporting a miss it rescans the pack directories once
// and retries, so that packs written by others, or rewritten by git repack or
// git gc, since the last scan are seen. A loose object is returned open, so
// that git prune-packed deleting it cannot make it vanish before it is read.
// hint and withOff are packFind's.
func (db *ObjectDB) locate(id ObjectID, hint **packFile, withOff bool) (odbLoc, error) {
	// A repack replaces packs while we look: rescan after a miss, again as long
	// as the set of packs keeps changing, so a miss means the object is gone
	// rather than that we looked between a deletion and its replacement.
	const maxRescans = 5
	for rescans := 0; ; rescans++ {
		// Packs first, as git does: tally writes packs, and a pack lookup is a
		// binary search in memory where a loose lookup is a failed open.
		final := rescans == maxRescans
		loc, err := db.packFind(id, final, hint, withOff)
		if err == nil {
			return loc, nil
		}
		hex := id.String() // only now: spelling it costs as much as a pack lookup
		for _, dir := range db.dirs {
			f, err := openFile(filepath.Join(dir, hex[:2], hex[2:]), os.O_RDONLY, 0)
			if err == nil {
				return odbLoc{loose: f}, nil
			} else if !errors.Is(err, fs.ErrNotExist) {
				return odbLoc{}, err
			}
		}
		if !errors.Is(err, ErrObjectNotFound) {
			return loc, err
		}
		if !final {
			changed, rerr := db.rescan()
			if rerr != nil {
				return odbLoc{}, rerr
			}
			if changed || rescans == 0 {
				continue
			}
		}
		return loc, fmt.Errorf("%w: %s", ErrObjectNotFound, id)
	}
}

// packFind searches the packs, first *hint if hint is not nil, which it sets
// to the pack it finds id in. A pack that cannot be opened is skipped; unless
// final, the search then reports a miss so that the caller rescans: the pack may
// have been replaced. When final, an unusable pack's error takes precedence over
// a miss, because the object may be in it. Without withOff it does not read
// the object's pack offset (loc.noOff), for a caller that may not need it
// (checkLoc): a read of the index's offset table is a cache miss of its own.
func (db *ObjectDB) packFind(id ObjectID, final bool, hint **packFile, withOff bool) (odbLoc, error) {
	db.mu.Lock()
	packs, closed := db.packs, db.closed
	db.mu.Unlock()
	if closed {
		return odbLoc{}, errODBClosed
	}
	var bad error
	// The cursor's pack, if it is still one of ours, then the shared guess.
	var tried [2]*packFile
	if hint != nil && slices.Contains(packs, *hint) {
		tried[0] = *hint
	}
	if last := db.lastHit.Load(); last != tried[0] {
		tried[1] = last
	}
	for _, p := range tried {
		if p == nil {
			continue
		}
		if m, err := p.maps(); err == nil {
			if loc, ok, err := m.find(id, withOff); err == nil && ok {
				if hint != nil {
					*hint = p
				}
				loc.p = p
				return loc, nil
			}
		}
	}
	for _, p := range packs {
		if p == tried[0] || p == tried[1] {
			continue // searched above; a pack that failed to map there is retried by the next rescan
		}
		m, err := p.maps()
		if err != nil {
			if bad == nil && !errors.Is(err, fs.ErrNotExist) {
				bad = err
			}
			continue
		}
		loc, ok, err := m.find(id, withOff)
		if err != nil {
			return odbLoc{}, fmt.Errorf("gitstore: %s.idx: %w", p.path, err)
		}
		if ok {
			db.lastHit.Store(p)
			if hint != nil {
				*hint = p
			}
			loc.p = p
			return loc, nil
		}
	}
	if bad != nil && final {
		return odbLoc{}, bad
	}
	return odbLoc{}, ErrObjectNotFound
}

// find looks id up in m's index: its position and, with withOff, its
// pack offset (the index's find). The location's pack is the caller's to set.
func (m *packMaps) find(id ObjectID, withOff bool) (loc odbLoc, ok bool, err error) {
	i, ok := m.idx.position(id)
	if !ok {
		return odbLoc{}, false, nil
	}
	loc = odbLoc{m: m, pos: i, noOff: !withOff}
	if withOff {
		loc.off, ok, err = m.idx.offset(i)
	}
	return loc, ok, err
}

// Has reports whether the database holds id. Like a failed Read, a miss
// costs a listing of the pack directories.
func (db *ObjectDB) Has(id ObjectID) bool {
	db.readers.RLock()
	defer db.endRead()
	loc, err := db.locate(id, nil, true)
	if loc.loose != nil {
		loc.loose.Close()
	}
	return err == nil
}

// Read returns the type and contents of object id. The caller owns the slice.
func (db *ObjectDB) Read(id ObjectID) (ObjectType, []byte, error) {
	db.readers.RLock()
	defer db.endRead()
	return db.read(id, 0, nil)
}

// A Cursor reads objects for one sequence of related lookups, such as the
// commits of a walk along history or the objects of one entry after
// another: it searches first the pack its previous lookup found an object
// in, ahead of the database's shared guess, which concurrent readers of
// different parts of a long history (verify's segments) would otherwise
// keep displacing, each then searching most packs on most lookups. A
// Cursor is not safe for concurrent use; its database is.
type Cursor struct {
	db   *ObjectDB
	last *packFile
}

// Cursor returns a new cursor on db.
func (db *ObjectDB) Cursor() *Cursor { return &Cursor{db: db} }

// Read is ObjectDB.Read.
func (c *Cursor) Read(id ObjectID) (ObjectType, []byte, error) {
	t, data, _, err := c.ReadWhere(id)
	return t, data, err
}

// CheckStored reports whether object id is stored intact, by the checksums
// git's storage records rather than by inflating and re-hashing it: a
// loose object must hash to its id; a packed object's entry, and the entry
// of each delta base it is built from, must have the CRC32 its pack index
// records for it (the CRC32 of the entry's bytes, from its offset to the
// next entry's or to the pack's trailer), and that index must be intact:
// its last 20 bytes the SHA-1 of the rest. The first check that
// meets a pack checks its index and all its entries in one pass (seal).
// This detects damage to the stored bytes, a flipped byte in a pack entry,
// an index or a loose object, as git fsck does; it does not detect a pack
// rewritten together with an index whose checksums match it.
func (c *Cursor) CheckStored(id ObjectID) error {
	c.db.readers.RLock()
	defer c.db.endRead()
	return c.db.checkStored(id, 0, &c.last)
}

// Where is the pack entry a Cursor read an object from (ReadWhere), so that
// checking the stored object (CheckStoredWhere) needs no second lookup.
// The zero Where is unknown: a loose object, or none read.
type Where struct {
	p   *packFile
	m   *packMaps
	off uint64
}

// ReadWhere is Read that also says where the object was stored.
func (c *Cursor) ReadWhere(id ObjectID) (ObjectType, []byte, Where, error) {
	c.db.readers.RLock()
	defer c.db.endRead()
	if o := c.db.heldObject(id); o != nil {
		return o.typ, bytes.Clone(o.data), Where{}, nil // unknown: a check looks it up
	}
	loc, err := c.db.locate(id, &c.last, true)
	if err != nil {
		return 0, nil, Where{}, err
	}
	if loc.loose != nil {
		t, data, err := looseRead(loc.loose, id)
		return t, data, Where{}, err
	}
	t, data, err := c.db.packRead(loc, 0, &c.last)
	return t, data, Where{loc.p, loc.m, loc.off}, err
}

// CheckStoredWhere is CheckStored for object id, which ReadWhere read from
// w: the entry it read is the one checked, without looking id up again.
func (c *Cursor) CheckStoredWhere(id ObjectID, w Where) error {
	c.db.readers.RLock()
	defer c.db.endRead()
	// A pack retired by a rescan since the read is unmapped only while no
	// read holds db.readers: if w's mapping is still its pack's now, it
	// stays mapped until this check ends; otherwise look id up again.
	if w.m == nil || w.p.m.Load() != w.m {
		return c.db.checkStored(id, 0, &c.last)
	}
	return c.db.checkLoc(odbLoc{p: w.p, m: w.m, off: w.off}, id, 0, &c.last)
}

// checkStored is CheckStored for an object needed as a delta base at the
// given depth (hint is packFind's).
func (db *ObjectDB) checkStored(id ObjectID, depth int, hint **packFile) error {
	loc, err := db.locate(id, hint, false)
	if err != nil {
		return err
	}
	return db.checkLoc(loc, id, depth, hint)
}

// checkLoc is checkStored for object id found at loc. A packed copy that
// fails does not decide while another pack holds an intact copy (FORMAT.md
// §10, step 9): which pack a lookup meets first is no part of the answer.
func (db *ObjectDB) checkLoc(loc odbLoc, id ObjectID, depth int, hint **packFile) error {
	err := db.checkCopy(loc, id, depth, hint)
	if err == nil || loc.loose != nil {
		return err
	}
	db.mu.Lock()
	packs := db.packs
	db.mu.Unlock()
	for _, p := range packs {
		if p == loc.p {
			continue
		}
		m, merr := p.maps()
		if merr != nil {
			continue
		}
		if other, ok, ferr := m.find(id, false); ferr == nil && ok {
			other.p = p
			if db.checkCopy(other, id, depth, hint) == nil {
				return nil
			}
		}
	}
	return err
}

// checkCopy is checkLoc for the one copy of id at loc.
func (db *ObjectDB) checkCopy(loc odbLoc, id ObjectID, depth int, hint **packFile) error {
	if loc.loose != nil {
		t, data, err := looseRead(loc.loose, id)
		if err == nil && HashObject(t, data) != id {
			err = fmt.Errorf("gitstore: loose object %s is damaged: its content hashes to %s", id, HashObject(t, data))
		}
		return err
	}
	m := loc.m
	m.sealOnce.Do(m.seal)
	if m.sealErr == nil && m.damaged == nil && m.external == nil {
		return nil // every entry intact, none based outside the pack: no need of loc.off
	}
	if loc.noOff {
		var err error
		if loc.off, _, err = m.idx.offset(loc.pos); err != nil {
			return fmt.Errorf("gitstore: %s.idx: %w", loc.p.path, err)
		}
	}
	switch base, external := m.external[loc.off]; {
	case m.sealErr != nil:
		return fmt.Errorf("gitstore: %s: %w", loc.p.path, m.sealErr)
	case m.damaged[loc.off]:
		return fmt.Errorf("gitstore: %s.pack at %d: the entry, or a delta base in the pack, does not match the CRC32 its index records", loc.p.path, loc.off)
	case external && depth >= packMaxDeltaDepth:
		return fmt.Errorf("gitstore: %s.pack: delta chain longer than %d", loc.p.path, packMaxDeltaDepth)
	case external:
		if err := db.checkStored(base, depth+1, hint); err != nil {
			return fmt.Errorf("gitstore: %s.pack at %d: delta base: %w", loc.p.path, loc.off, err)
		}
	}
	return nil
}

// sealKeys returns seal's keys, off<<posBits | position for each of x's
// entries, sorted, and the CRC32 of each position; ok is false if an
// offset is not inside the pack's entries, [12, end).
//
// The keys are placed by a counting pass over the offsets into buckets of
// about four entries by their offsets' high bits (an entry is a few hundred
// bytes, spread over the pack), and each bucket is then sorted: the order of
// slices.Sort of all keys, at a pass over the offsets instead of the
// comparisons of a sort of a million keys. The offset table is read twice;
// the index's checksum was checked before, and the second read's offsets are
// checked as the first's.
func sealKeys(x packIndex, end uint64, posBits int) (keys []uint64, crcs []uint32, ok bool) {
	shift := uint(max(bits.Len64(end)-bits.Len(uint(x.n/4)), 0))
	start := make([]uint32, end>>shift+2) // start[b+1]: how many fall in bucket b, then where b ends
	crcs = make([]uint32, x.n)
	for i := range crcs {
		off, _, err := x.offset(i)
		if err != nil || off < 12 || off >= end {
			return nil, nil, false
		}
		start[off>>shift+1]++
		crcs[i] = x.crc(i)
	}
	for b := 1; b < len(start); b++ {
		start[b] += start[b-1]
	}
	keys = make([]uint64, x.n)
	for i := range keys {
		off, _, err := x.offset(i)
		if err != nil || off < 12 || off >= end {
			return nil, nil, false
		}
		b := off >> shift
		if int(start[b]) >= len(keys) {
			return nil, nil, false // not the offsets counted
		}
		keys[start[b]] = off<<posBits | uint64(i)
		start[b]++
	}
	// Now start[b] is where bucket b ends and start[b-1] where it begins.
	lo := uint32(0)
	for _, hi := range start[:len(start)-1] {
		if hi-lo > 1 {
			slices.Sort(keys[lo:hi])
		}
		lo = hi
	}
	// Had the second read not given the offsets counted, a slot would be
	// left 0 (below any offset) or a key in another's bucket.
	if x.n > 0 && (keys[0]>>posBits < 12 || !slices.IsSorted(keys)) {
		return nil, nil, false
	}
	return keys, crcs, true
}

// seal checks the index's own checksum, then every entry of the pack, in
// pack order, against the CRC32 the index records for it, and finds the
// entries that fail or whose delta bases in the pack do: one sequential
// pass over the pack, after which checking an object costs its lookup.
// The index and pack pages it reads leave the resident set as it goes (see
// DropResident), so that checking a pack of any size needs 12 bytes of
// memory per object (16 more per delta) and not the pack's size.
func (m *packMaps) seal() {
	x := m.idx
	h := sha1.New()
	for i := 0; i < len(x.data)-20; i += sealWindow {
		h.Write(x.data[i:min(i+sealWindow, len(x.data)-20)])
		dropResident(x.data[i:min(i+sealWindow, len(x.data))])
	}
	if !bytes.Equal(h.Sum(nil), x.data[len(x.data)-20:]) {
		m.sealErr = errors.New("pack index does not match its checksum")
		return
	}
	// The entries by offset, as keys offset<<posBits | position in one
	// slice of integers: fast to sort, and each entry ends where the next
	// one starts.
	posBits := bits.Len(uint(x.n))
	if bits.Len(uint(len(m.data)))+posBits > 64 {
		m.sealErr = errors.New("pack too large to check")
		return
	}
	keys, crcs, ok := sealKeys(x, uint64(len(m.data)-20), posBits)
	if !ok {
		m.sealErr = errors.New("pack index offset out of range")
		return
	}
	dropResident(x.data)
	bad := func(off uint64) {
		if m.damaged == nil {
			m.damaged = map[uint64]bool{}
		}
		m.damaged[off] = true
	}
	// A delta is bad if its base in the pack is: the links are followed
	// after the pass, until no more entries turn out bad (a ref-delta's
	// base may follow it, in a thin pack fixed by git index-pack).
	type link struct{ off, base uint64 }
	var later []link
	page := uint64(os.Getpagesize())
	var dropped uint64 // the pack's pages below this were let go
	for k, key := range keys {
		if off := key >> posBits; off-dropped >= sealWindow {
			dropResident(m.data[dropped : off&^(page-1)])
			dropped = off &^ (page - 1)
		}
		off, pos := key>>posBits, int(key&(1<<posBits-1))
		end := uint64(len(m.data) - 20)
		if k+1 < len(keys) {
			end = keys[k+1] >> posBits
		}
		e, err := m.entry(off)
		if err != nil || end <= off || crc32.ChecksumIEEE(m.data[off:end]) != crcs[pos] {
			bad(off)
			continue
		}
		switch e.kind {
		case packOfsDelta:
			if _, ok := slices.BinarySearchFunc(keys[:k], e.base, func(key, base uint64) int {
				return cmp.Compare(key>>posBits, base)
			}); ok {
				later = append(later, link{off, e.base})
			} else {
				bad(off)
			}
		case packRefDelta:
			if boff, ok, err := x.find(e.baseID); err != nil {
				bad(off)
			} else if ok {
				later = append(later, link{off, boff})
			} else {
				if m.external == nil {
					m.external = map[uint64]ObjectID{}
				}
				m.external[off] = e.baseID
			}
		}
	}
	for changed := true; changed; {
		changed = false
		for _, l := range later {
			if m.damaged[l.base] && !m.damaged[l.off] {
				bad(l.off)
				changed = true
			}
		}
	}
	dropResident(m.data)
}

func (db *ObjectDB) endRead() {
	db.readers.RUnlock()
	db.releaseRetired()
}

// read reads id, which is needed as a delta base at the given depth
// (hint is packFind's).
func (db *ObjectDB) read(id ObjectID, depth int, hint **packFile) (ObjectType, []byte, error) {
	if o := db.heldObject(id); o != nil {
		return o.typ, bytes.Clone(o.data), nil
	}
	loc, err := db.locate(id, hint, true)
	if err != nil {
		return 0, nil, err
	}
	if loc.loose == nil {
		return db.packRead(loc, depth, hint)
	}
	return looseRead(loc.loose, id)
}

// looseRead reads and closes f, the loose object id.
func looseRead(f *os.File, id ObjectID) (ObjectType, []byte, error) {
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return 0, nil, err
	}
	buf := make([]byte, fi.Size())
	if _, err := io.ReadFull(f, buf); err != nil {
		return 0, nil, err
	}
	t, data, err := looseDecode(buf)
	if err != nil {
		return 0, nil, fmt.Errorf("gitstore: loose object %s: %w", id, err)
	}
	return t, data, nil
}

// looseDecode decodes a loose object file, zlib("<type> <size>\x00" + data).
func looseDecode(buf []byte) (ObjectType, []byte, error) {
	zr, err := looseZlibReader(buf)
	if err != nil {
		return 0, nil, err
	}
	defer looseZlibPool.Put(zr)
	hdr := make([]byte, 32) // longer than any valid header
	n := 0
	for ; n == 0 || hdr[n-1] != 0; n++ {
		if n == len(hdr) {
			return 0, nil, errors.New("header too long")
		}
		if _, err := io.ReadFull(zr, hdr[n:n+1]); err != nil {
			return 0, nil, fmt.Errorf("reading header: %w", err)
		}
	}
	name, size, _ := bytes.Cut(hdr[:n-1], []byte{' '})
	t := looseParseType(name)
	sz, err := strconv.ParseUint(string(size), 10, 63)
	if t == 0 || err != nil {
		return 0, nil, fmt.Errorf("malformed header %q", hdr[:n-1])
	}
	data, err := odbInflateRest(zr, sz, len(buf))
	return t, data, err
}

// odbInflateRest reads exactly size more bytes from zr, a zlib stream of
// compressed bytes, and requires the stream to end there with a valid checksum.
func odbInflateRest(zr io.Reader, size uint64, compressed int) ([]byte, error) {
	if size > uint64(compressed)*packMaxInflateRatio+64 {
		return nil, fmt.Errorf("implausible size %d", size)
	}
	buf := make([]byte, size)
	if _, err := io.ReadFull(zr, buf); err != nil {
		return nil, fmt.Errorf("inflating %d bytes: %w", size, err)
	}
	if n, err := zr.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return nil, fmt.Errorf("zlib stream longer than %d bytes or corrupt (%v)", size, err)
	}
	return buf, nil
}

// packInflate inflates a pack entry's zlib stream (src, from the stream's
// start to the end of what may hold it), which must hold exactly size
// bytes: odbInflateRest's rule, by inflateZlib. It returns the content and
// the stream's length, where the entry ends.
func packInflate(src []byte, size uint64) ([]byte, int, error) {
	if size > uint64(len(src))*packMaxInflateRatio+64 {
		return nil, 0, fmt.Errorf("implausible size %d", size)
	}
	body, n, err := inflateZlib(src, size)
	if err != nil {
		return nil, 0, fmt.Errorf("inflating %d bytes: %w", size, err)
	}
	return body, n, nil
}

// looseZlibPool holds zlib readers (which implement zlib.Resetter) for
// reuse: each carries ~40 KiB of inflate state. Pack entries are inflated by
// inflateZlib (packInflate); compress/zlib reads loose objects, whose size
// is known only once their header is inflated.
var looseZlibPool sync.Pool

func looseZlibReader(src []byte) (io.ReadCloser, error) {
	r := bytes.NewReader(src)
	if zr, ok := looseZlibPool.Get().(io.ReadCloser); ok {
		if err := zr.(zlib.Resetter).Reset(r, nil); err != nil {
			looseZlibPool.Put(zr)
			return nil, err
		}
		return zr, nil
	}
	return zlib.NewReader(r)
}

// packFile is a pack and its index, mapped on first use. The mappings stay valid
// until ObjectDB.Close even if git deletes the files.
type packFile struct {
	path  string // without the .idx or .pack extension
	mtime time.Time
	size  int64      // of the .pack, when listed
	git   bool       // git manages it (packDirEntry.git)
	mu    sync.Mutex // serializes mapping
	m     atomic.Pointer[packMaps]
}

// packMaps is a mapped pack and index whose headers have been validated and which
// belong together (same object count, same pack checksum).
type packMaps struct {
	idx  packIndex
	data []byte // the whole .pack file

	// The storage checks (CheckStored) need the index intact and each
	// entry's extent; both are found once, on the first such check.
	sealOnce sync.Once
	sealErr  error               // the index fails its checksum
	damaged  map[uint64]bool     // offsets of the entries that fail their CRC32, or whose base in the pack does
	external map[uint64]ObjectID // offsets of the ref-deltas whose base is in another pack, and that base
}

func (p *packFile) maps() (*packMaps, error) {
	if m := p.m.Load(); m != nil {
		return m, nil
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.m.Load(); m != nil {
		return m, nil
	}
	idx, err := packMmap(p.path + ".idx")
	if err != nil {
		return nil, err
	}
	data, err := packMmap(p.path + ".pack")
	if err != nil {
		unmapFile(idx)
		return nil, err
	}
	x, err := packParseIndex(idx)
	if err == nil && (len(data) < 32 || string(data[:4]) != "PACK" || binary.BigEndian.Uint32(data[4:]) != 2) {
		err = errors.New("not a version 2 pack")
	}
	if err == nil && (uint64(binary.BigEndian.Uint32(data[8:])) != uint64(x.n) || !bytes.Equal(data[len(data)-20:], x.packSum())) {
		err = errors.New("pack does not match its index")
	}
	if err != nil {
		unmapFile(idx)
		unmapFile(data)
		return nil, fmt.Errorf("gitstore: %s: %w", p.path, err)
	}
	m := &packMaps{idx: x, data: data}
	p.m.Store(m)
	return m, nil
}

func (p *packFile) unmap() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if m := p.m.Swap(nil); m != nil {
		unmapFile(m.idx.data)
		unmapFile(m.data)
	}
}

// packIndex is a pack index, version 2: magic and version, the 256-entry fanout
// (fanout[b] = number of names whose first byte is ≤ b), n sorted names, n CRC32s,
// n 4-byte offsets (high bit set: index into the next table), the table of 8-byte
// offsets, the pack checksum and the index checksum.
//
// packParseIndex checks only the header, fanout and total size, so that opening
// does not read the whole file; offsets are checked where used.
type packIndex struct {
	data []byte
	n    int
	fine *fineFanout // nil for an index of fewer than fineFanoutMin names
}

// fineFanoutMin is the least number of names for which an index gets a
// fineFanout: below it the names fit in a few hundred kilobytes, near enough
// to the CPU that the fanout and interpolation find them in few misses.
const fineFanoutMin = 1 << 14

// fineFanout is a finer fanout of a large index, built on the first lookup
// after n/16 of them (a command that looks up a few objects never pays the
// pass over the names): start[k] is the position of the first name whose
// first bits, read as an integer, are at least k, for about one slot per
// four names (at most 2^20 slots, 4 MiB). A lookup then reads one slot,
// usually in cache, and one run of about four names, where the 256-entry
// fanout leaves an interpolation that misses the cache on each of its
// probes across megabytes of names. The table is a function of the names
// alone; for names out of order (a damaged index, which the storage checks
// refuse by its checksum) it stays monotone and within the index, so a
// lookup is as safe as the fanout's binary search, finding or not.
type fineFanout struct {
	lookups atomic.Int64
	once    sync.Once
	start   atomic.Pointer[[]uint32] // set once built
	bits    uint                     // the table has 2^bits+1 slots
}

// build fills the table from x's names.
func (f *fineFanout) build(x packIndex) {
	names := x.data[packIdxHeader : packIdxHeader+20*x.n]
	start := make([]uint32, 1<<f.bits+1)
	k := 0
	for i := 0; i < x.n; i++ {
		for p := int(binary.BigEndian.Uint32(names[20*i:]) >> (32 - f.bits)); k <= p; k++ {
			start[k] = uint32(i)
		}
	}
	for ; k < len(start); k++ {
		start[k] = uint32(x.n)
	}
	f.start.Store(&start)
}

// bounds returns the positions [lo, hi) of the names whose first b bits are
// id's: b is the fine fanout's once it is built, else 8, the index's own
// fanout.
func (x packIndex) bounds(id ObjectID) (lo, hi int, b uint) {
	if f := x.fine; f != nil {
		t := f.start.Load()
		if t == nil && f.lookups.Add(1) > int64(x.n/16) {
			f.once.Do(func() { f.build(x) })
			t = f.start.Load()
		}
		if t != nil {
			k := binary.BigEndian.Uint32(id[:4]) >> (32 - f.bits)
			return int((*t)[k]), int((*t)[k+1]), f.bits
		}
	}
	if id[0] > 0 {
		lo = int(binary.BigEndian.Uint32(x.data[8+4*(int(id[0])-1):]))
	}
	return lo, int(binary.BigEndian.Uint32(x.data[8+4*int(id[0]):])), 8
}

func packParseIndex(b []byte) (packIndex, error) {
	if len(b) < packIdxHeader+40 || string(b[:4]) != "\377tOc" || binary.BigEndian.Uint32(b[4:]) != 2 {
		return packIndex{}, errors.New("not a version 2 pack index")
	}
	var n uint32
	for i := 0; i < 256; i++ {
		c := binary.BigEndian.Uint32(b[8+4*i:])
		if c < n {
			return packIndex{}, errors.New("corrupt pack index fanout")
		}
		n = c
	}
	if rest := len(b) - packIdxHeader - 40 - 28*int(n); rest < 0 || rest%8 != 0 {
		return packIndex{}, errors.New("pack index has the wrong size")
	}
	x := packIndex{data: b, n: int(n)}
	if n >= fineFanoutMin {
		x.fine = &fineFanout{bits: uint(min(bits.Len32(n/4), 20))}
	}
	return x, nil
}

func (x packIndex) packSum() []byte { return x.data[len(x.data)-40 : len(x.data)-20] }

// find returns the pack offset of id.
//
// Names are SHA-1 values, spread evenly, so the search interpolates: it
// probes where id's first 8 bytes, read as an integer, fall between the
// bounds known so far (at first those the fanout implies, or the finer one
// of a large index: fineFanout), which takes a
// few probes where a binary search of a large index takes twenty cache
// misses. After a few probes it finishes as a binary search, so that no
// arrangement of names makes it slower than one.
func (x packIndex) find(id ObjectID) (off uint64, ok bool, err error) {
	i, ok := x.position(id)
	if !ok {
		return 0, false, nil
	}
	return x.offset(i)
}

// position returns id's position among the index's names.
func (x packIndex) position(id ObjectID) (int, bool) {
	lo, hi, b := x.bounds(id)
	names := x.data[packIdxHeader : packIdxHeader+20*x.n]
	// Names compare by their first 8 bytes as an integer, and in full
	// only when those are equal (one comparison in millions, or a hit).
	key := binary.BigEndian.Uint64(id[:8])
	compare := func(i int) (int, uint64) {
		k := binary.BigEndian.Uint64(names[20*i:])
		c := cmp.Compare(k, key)
		if c == 0 {
			c = bytes.Compare(names[20*i+8:20*i+20], id[8:])
		}
		return c, k
	}
	loKey := key >> (64 - b) << (64 - b) // bounds of the names in [lo, hi)
	hiKey := loKey | (1<<(64-b) - 1)
	for probes := 0; hi-lo > 8 && probes < 4; probes++ {
		mid := lo + int(float64(key-loKey)/(float64(hiKey-loKey)+1)*float64(hi-lo))
		mid = max(lo, min(mid, hi-1))
		switch c, k := compare(mid); {
		case c < 0:
			lo, loKey = mid+1, k
		case c > 0:
			hi, hiKey = mid, k
		default:
			return mid, true
		}
	}
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		switch c, _ := compare(mid); {
		case c < 0:
			lo = mid + 1
		case c > 0:
			hi = mid
		default:
			return mid, true
		}
	}
	return 0, false
}

// crc returns the CRC32 the index records for the i'th name's pack entry.
func (x packIndex) crc(i int) uint32 {
	return binary.BigEndian.Uint32(x.data[packIdxHeader+20*x.n+4*i:])
}

// offset returns the pack offset of the i'th name.
func (x packIndex) offset(i int) (uint64, bool, error) {
	offsets := packIdxHeader + 24*x.n
	o := binary.BigEndian.Uint32(x.data[offsets+4*i:])
	if o&0x80000000 == 0 {
		return uint64(o), true, nil
	}
	large := offsets + 4*x.n + 8*int(o&0x7fffffff)
	if large+8 > len(x.data)-40 {
		return 0, false, errors.New("large offset index out of range")
	}
	return binary.BigEndian.Uint64(x.data[large:]), true, nil
}

// packEntry is the decoded header of a pack entry.
type packEntry struct {
	kind   int8   // an ObjectType, packOfsDelta or packRefDelta
	size   uint64 // inflated size of the object or delta
	start  int    // offset of the zlib stream
	base   uint64 // offset of the base, for packOfsDelta
	baseID ObjectID
}

func (m *packMaps) entry(off uint64) (packEntry, error) {
	end := uint64(len(m.data) - 20)
	if off < 12 || off >= end {
		return packEntry{}, errors.New("entry offset out of range")
	}
	b := m.data[off:end]
	var e packEntry
	var i int
	var err error
	if e.kind, e.size, i, err = packEntryHeader(b); err != nil {
		return e, err
	}
	var c byte
	switch e.kind {
	case packOfsDelta:
		// big-endian base-128, each continuation adding one so encodings are unique
		var rel uint64
		for more := true; more; {
			if i == len(b) || rel >= 1<<56 {
				return e, errors.New("corrupt delta base offset")
			}
			c = b[i]
			i++
			rel = rel<<7 | uint64(c&0x7f)
			if more = c&0x80 != 0; more {
				rel++
			}
		}
		if rel == 0 || rel > off-12 {
			return e, errors.New("delta base offset out of range")
		}
		e.base = off - rel
	case packRefDelta:
		if i+20 > len(b) {
			return e, errors.New("truncated delta base name")
		}
		copy(e.baseID[:], b[i:])
		i += 20
	case int8(CommitObject), int8(TreeObject), int8(BlobObject), int8(TagObject):
	default:
		return e, fmt.Errorf("bad entry type %d", e.kind)
	}
	e.start = int(off) + i
	return e, nil
}

// packEntryHeader decodes the type and size header that starts the pack
// entry b: the type in bits 4-6 of the first byte, the size as
// little-endian base-128 starting with its 4 low bits, the high bit set on
// all bytes but the last. n is the header's length.
func packEntryHeader(b []byte) (kind int8, size uint64, n int, err error) {
	if len(b) == 0 {
		return 0, 0, 0, errors.New("empty entry")
	}
	c := b[0]
	kind, size, n = int8(c>>4&7), uint64(c&15), 1
	for shift := 4; c&0x80 != 0; shift += 7 {
		if n == len(b) || shift > 57 {
			return kind, size, n, errors.New("corrupt entry header")
		}
		c = b[n]
		n++
		size |= uint64(c&0x7f) << shift
	}
	return kind, size, n, nil
}

// packRead returns the object at loc, resolving its delta chain. Each base met on
// the way is cached, so reading the other objects of a chain costs one delta
// application each.
func (db *ObjectDB) packRead(loc odbLoc, depth int, hint **packFile) (ObjectType, []byte, error) {
	type link struct {
		off   uint64
		delta []byte
	}
	var chain []link
	var t ObjectType
	var data []byte
	off := loc.off
	for t == 0 {
		if depth+len(chain) > packMaxDeltaDepth {
			return 0, nil, fmt.Errorf("gitstore: %s.pack: delta chain longer than %d", loc.p.path, packMaxDeltaDepth)
		}
		if ct, cd, ok := db.cache.get(loc.p, off); ok {
			if t, data = ct, cd; len(chain) == 0 {
				data = bytes.Clone(cd)
			}
			break
		}
		e, err := loc.m.entry(off)
		var body []byte
		if err == nil {
			body, _, err = packInflate(loc.m.data[e.start:len(loc.m.data)-20], e.size)
		}
		if err != nil {
			return 0, nil, fmt.Errorf("gitstore: %s.pack at %d: %w", loc.p.path, off, err)
		}
		switch e.kind {
		case packOfsDelta:
			chain = append(chain, link{off, body})
			off = e.base
		case packRefDelta:
			chain = append(chain, link{off, body})
			if boff, ok, err := loc.m.idx.find(e.baseID); err == nil && ok {
				off = boff
			} else if t, data, err = db.read(e.baseID, depth+len(chain), hint); err != nil {
				return 0, nil, fmt.Errorf("gitstore: %s.pack at %d: delta base: %v", loc.p.path, off, err)
			}
		default:
			t, data = ObjectType(e.kind), body
			if len(chain) > 0 {
				db.cache.add(loc.p, off, t, data)
			}
		}
	}
	for i := len(chain) - 1; i >= 0; i-- {
		var err error
		if data, err = packApplyDelta(data, chain[i].delta); err != nil {
			return 0, nil, fmt.Errorf("gitstore: %s.pack at %d: %w", loc.p.path, chain[i].off, err)
		}
		if i > 0 {
			db.cache.add(loc.p, chain[i].off, t, data)
		}
	}
	return t, data, nil
}

// packApplyDelta applies a git delta to base: the source and target sizes as
// little-endian base-128 numbers, then instructions that either copy a range of
// base (high bit set; bits 0-3 and 4-6 say which offset and size bytes follow; size
// 0 means 0x10000) or insert the next 1-127 bytes of the delta. Any disagreement
// between the sizes, the ranges and the data is an error.
func packApplyDelta(base, delta []byte) ([]byte, error) {
	srcSize, delta, ok := packDeltaSize(delta)
	if !ok || srcSize != uint64(len(base)) {
		return nil, errors.New("delta source size mismatch")
	}
	dstSize, delta, ok := packDeltaSize(delta)
	// no instruction byte yields more than max(len(base), 127) bytes
	if !ok || dstSize > uint64(len(delta))*uint64(max(len(base), 0x7f)) {
		return nil, errors.New("implausible delta target size")
	}
	out := make([]byte, 0, dstSize)
	for len(delta) > 0 {
		op := delta[0]
		delta = delta[1:]
		switch {
		case op&0x80 != 0:
			var off, n uint64
			for bit := 0; bit < 7; bit++ {
				if op&(1<<bit) == 0 {
					continue
				}
				if len(delta) == 0 {
					return nil, errors.New("truncated delta copy")
				}
				if bit < 4 {
					off |= uint64(delta[0]) << (8 * bit)
				} else {
					n |= uint64(delta[0]) << (8 * (bit - 4))
				}
				delta = delta[1:]
			}
			if n == 0 {
				n = 0x10000
			}
			if off+n > uint64(len(base)) || n > dstSize-uint64(len(out)) {
				return nil, errors.New("delta copy out of range")
			}
			out = append(out, base[off:off+n]...)
		case op != 0:
			if int(op) > len(delta) || uint64(op) > dstSize-uint64(len(out)) {
				return nil, errors.New("delta insert out of range")
			}
			out = append(out, delta[:op]...)
			delta = delta[op:]
		default:
			return nil, errors.New("reserved delta opcode 0")
		}
	}
	if uint64(len(out)) != dstSize {
		return nil, errors.New("delta target size mismatch")
	}
	return out, nil
}

func packDeltaSize(b []byte) (uint64, []byte, bool) {
	var n uint64
	for i := 0; i < len(b) && i < 10; i++ {
		n |= uint64(b[i]&0x7f) << (7 * i)
		if b[i]&0x80 == 0 {
			return n, b[i+1:], true
		}
	}
	return 0, nil, false
}

// packCache is an LRU cache of delta bases, keyed by pack entry. Cached slices
// are shared and must not be modified.
type packCache struct {
	mu    sync.Mutex
	lru   list.List // of *packCacheEntry, most recently used first
	items map[packCacheKey]*list.Element
	bytes int
}

type packCacheKey struct {
	p   *packFile
	off uint64
}

type packCacheEntry struct {
	key  packCacheKey
	t    ObjectType
	data []byte
}

func (c *packCache) get(p *packFile, off uint64) (ObjectType, []byte, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[packCacheKey{p, off}]
	if !ok {
		return 0, nil, false
	}
	c.lru.MoveToFront(el)
	e := el.Value.(*packCacheEntry)
	return e.t, e.data, true
}

func (c *packCache) add(p *packFile, off uint64, t ObjectType, data []byte) {
	if len(data) > packCacheBytes/8 {
		return // would evict too much
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	k := packCacheKey{p, off}
	if _, ok := c.items[k]; ok {
		return
	}
	if c.items == nil {
		c.items = make(map[packCacheKey]*list.Element)
	}
	c.items[k] = c.lru.PushFront(&packCacheEntry{k, t, data})
	c.bytes += len(data)
	for c.lru.Len() > packCacheEntries || c.bytes > packCacheBytes {
		e := c.lru.Remove(c.lru.Back()).(*packCacheEntry)
		delete(c.items, e.key)
		c.bytes -= len(e.data)
	}
}

// DropResident lets the kernel take the pages of the mapped packs and their
// indexes out of this process's resident set. They stay in the page cache,
// and a later read of them faults them back in from there, so nothing read
// changes; a long scan (a full verify reads every ledger object) calls it
// now and then so that its RSS does not grow with the size of the packs and
// indexes it has read. The mappings are read-only, so no data is lost.
func (db *ObjectDB) DropResident() {
	db.readers.RLock() // a retired pack is not unmapped while we hold it
	defer db.endRead()
	db.mu.Lock()
	packs := db.packs
	db.mu.Unlock()
	for _, p := range packs {
		if m := p.m.Load(); m != nil {
			dropResident(m.data)
			dropResident(m.idx.data)
		}
	}
}

// ErrObjectTooLarge is ReadAtMost's refusal of an object larger than its
// bound.
var ErrObjectTooLarge = errors.New("gitstore: object too large")

// ReadAtMost is Read for an object that must be at most max bytes, read
// from what someone else chose to store (a pushed request): the size its
// header declares is checked before anything of the content is read or
// allocated, so a larger object costs its header only (ErrObjectTooLarge).
func (db *ObjectDB) ReadAtMost(id ObjectID, max uint64) (ObjectType, []byte, error) {
	db.readers.RLock()
	defer db.endRead()
	if o := db.heldObject(id); o != nil {
		if uint64(len(o.data)) > max {
			return 0, nil, fmt.Errorf("%w: %s has %d bytes, at most %d", ErrObjectTooLarge, id, len(o.data), max)
		}
		return o.typ, bytes.Clone(o.data), nil
	}
	loc, err := db.locate(id, nil, true)
	if err != nil {
		return 0, nil, err
	}
	if loc.loose != nil {
		return looseReadAtMost(loc.loose, id, max)
	}
	e, err := loc.m.entry(loc.off)
	if err != nil {
		return 0, nil, fmt.Errorf("gitstore: %s.pack at %d: %w", loc.p.path, loc.off, err)
	}
	size := e.size
	if e.kind == packOfsDelta || e.kind == packRefDelta {
		// The object's size is the delta's result size, in its header.
		if e.size > max {
			return 0, nil, fmt.Errorf("%w: %s is a delta of %d bytes, at most %d", ErrObjectTooLarge, id, e.size, max)
		}
		delta, _, err := packInflate(loc.m.data[e.start:len(loc.m.data)-20], e.size)
		if err != nil {
			return 0, nil, fmt.Errorf("gitstore: %s.pack at %d: %w", loc.p.path, loc.off, err)
		}
		_, rest, ok1 := packDeltaSize(delta)
		result, _, ok2 := packDeltaSize(rest)
		if !ok1 || !ok2 {
			return 0, nil, fmt.Errorf("gitstore: %s.pack at %d: corrupt delta header", loc.p.path, loc.off)
		}
		size = result
	}
	if size > max {
		return 0, nil, fmt.Errorf("%w: %s has %d bytes, at most %d", ErrObjectTooLarge, id, size, max)
	}
	return db.packRead(loc, 0, nil)
}

// looseReadAtMost reads and closes f, the loose object id, when its header
// declares at most max bytes: the file is inflated as a stream, its header
// first, so a larger object costs a few bytes read.
func looseReadAtMost(f *os.File, id ObjectID, max uint64) (ObjectType, []byte, error) {
	defer f.Close()
	zr, err := zlib.NewReader(bufio.NewReader(f))
	if err != nil {
		return 0, nil, fmt.Errorf("gitstore: loose object %s: %w", id, err)
	}
	br := bufio.NewReaderSize(zr, 64)
	hdr, err := br.ReadSlice(0)
	if err != nil || len(hdr) > 32 {
		return 0, nil, fmt.Errorf("gitstore: loose object %s: malformed header", id)
	}
	name, size, _ := bytes.Cut(hdr[:len(hdr)-1], []byte{' '})
	t := looseParseType(name)
	sz, err := strconv.ParseUint(string(size), 10, 63)
	if t == 0 || err != nil {
		return 0, nil, fmt.Errorf("gitstore: loose object %s: malformed header %q", id, hdr)
	}
	if sz > max {
		return 0, nil, fmt.Errorf("%w: %s has %d bytes, at most %d", ErrObjectTooLarge, id, sz, max)
	}
	data := make([]byte, sz)
	if _, err := io.ReadFull(br, data); err != nil {
		return 0, nil, fmt.Errorf("gitstore: loose object %s: inflating %d bytes: %w", id, sz, err)
	}
	if n, err := br.Read(make([]byte, 1)); n != 0 || err != io.EOF {
		return 0, nil, fmt.Errorf("gitstore: loose object %s: longer than %d bytes or corrupt (%v)", id, sz, err)
	}
	return t, data, nil
}
