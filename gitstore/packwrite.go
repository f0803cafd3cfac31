package gitstore

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/adler32"
	"hash/crc32"
	"io"
	"io/fs"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"
)

// packZlibWriters holds compress/zlib writers, at git's default level, for
// objects too large for deflateSmall: few (a large tree or plan blob), so
// that the writer's Reset clearing 640 KiB of match tables costs little,
// and git repack reuses their compressed data, so the size is kept.
var packZlibWriters = sync.Pool{New: func() any { return zlib.NewWriter(nil) }}

// zlibStored appends the zlib stream (RFC 1950) of data, uncompressed
// (deflateStored), to dst.
func zlibStored(dst, data []byte) []byte {
	dst = append(dst, 0x78, 0x01) // as zlibAppend's small streams
	dst = deflateStored(dst, data)
	return binary.BigEndian.AppendUint32(dst, adler32.Checksum(data))
}

// zlibAppend appends the zlib stream (RFC 1950) of data to dst.
func zlibAppend(dst, data []byte) []byte {
	if len(data) > deflateSmallMax {
		buf := bytes.NewBuffer(dst)
		zw := packZlibWriters.Get().(*zlib.Writer)
		zw.Reset(buf)
		zw.Write(data) // writes to a bytes.Buffer cannot fail
		zw.Close()
		packZlibWriters.Put(zw)
		return buf.Bytes()
	}
	dst = append(dst, 0x78, 0x01) // deflate, 32 KiB window, FLEVEL 0: no preset dictionary
	dst = deflateSmall(dst, data)
	return binary.BigEndian.AppendUint32(dst, adler32.Checksum(data))
}

// PackWriter collects objects and writes them as one pack without deltas.
// Objects are compressed as they are added, so the caller may reuse the data.
type PackWriter struct {
	entries [][]byte // pack entries: type and size header, then the zlib stream
	ids     []ObjectID
	seen    map[ObjectID]bool
	// Progress, while set, is called after each object added (not for one
	// it already holds), for a caller that shows how far a large tree write
	// (Tree.Hash, counted beforehand by Tree.Pending) has come.
	Progress func()
}

// NewPackWriter returns an empty PackWriter.
func NewPackWriter() *PackWriter { return &PackWriter{seen: make(map[ObjectID]bool)} }

// Len returns the number of distinct objects added.
func (w *PackWriter) Len() int { return len(w.ids) }

// Add adds an object and returns its ID. Adding an object twice has no effect.
func (w *PackWriter) Add(t ObjectType, data []byte) ObjectID {
	id := HashObject(t, data)
	w.add(id, t, data)
	return id
}

// add is Add for an object whose id the caller already computed (Tree.Set
// hashes every blob it stores; hashing it again is the cost of an append
// batch that revisits a directory).
func (w *PackWriter) add(id ObjectID, t ObjectType, data []byte) {
	if w.seen[id] {
		return
	}
	w.seen[id] = true
	w.push(id, encodeEntry(t, data))
}

// encodeEntry is the pack entry of an object stored whole: its type and
// size header (packEntryHeader), then its content as one zlib stream.
func encodeEntry(t ObjectType, data []byte) []byte {
	return zlibAppend(entryHeader(t, data), data)
}

// encodeStoredEntry is encodeEntry with the content left uncompressed
// (zlibStored).
func encodeStoredEntry(t ObjectType, data []byte) []byte {
	return zlibStored(entryHeader(t, data), data)
}

// entryHeader is the type and size header of a pack entry of data, with
// room for the zlib stream that follows.
func entryHeader(t ObjectType, data []byte) []byte {
	size := uint64(len(data))
	// One allocation for a small object: a header of at most 10 bytes,
	// zlib's 6 and a stored block's 5 around the bytes.
	e := make([]byte, 1, 21+len(data)+len(data)/0xffff*5)
	e[0] = byte(t)<<4 | byte(size&15)
	for size >>= 4; size > 0; size >>= 7 {
		e[len(e)-1] |= 0x80
		e = append(e, byte(size&0x7f))
	}
	return e
}

// AddObject adds o, whose id its constructor computed (NewObject,
// DecodeEntry) or its store gave (ObjectDB.ReadEntry), and returns the id.
// An object that arrived as a pack entry is stored as that entry,
// unchanged: neither hashed nor compressed again. Adding an object twice has
// no effect.
func (w *PackWriter) AddObject(o *Object) ObjectID {
	if !w.seen[o.id] {
		w.seen[o.id] = true
		w.push(o.id, o.Entry())
	}
	return o.id
}

// addStored adds object id as another pack stores it: entry is that pack's
// entry (type and size header, then the zlib stream), of an object stored
// whole (not as a delta), and is copied. A merge of packs (Compact) copies
// objects this way rather than inflating and compressing each again.
func (w *PackWriter) addStored(id ObjectID, entry []byte) {
	if !w.seen[id] {
		w.seen[id] = true
		w.push(id, bytes.Clone(entry))
	}
}

// push appends a new object's pack entry.
func (w *PackWriter) push(id ObjectID, entry []byte) {
	w.entries = append(w.entries, entry)
	w.ids = append(w.ids, id)
	if w.Progress != nil {
		w.Progress()
	}
}

// WriteTo writes the objects to objectDir/pack as pack-<hex>.pack and
// pack-<hex>.idx, where hex is the pack's checksum as in git, and returns
// "pack-<hex>". On return both files and their directory entries are durable.
//
// WriteTo is for packs that no `git repack -a -d` can find unreferenced
// before they are used: a compaction's merge of objects the old packs still
// hold. A pack whose objects a ref will reach only later (after a push, say)
// is written with WriteKept.
func (w *PackWriter) WriteTo(objectDir string) (packName string, err error) {
	st, err := w.write(objectDir, false)
	if err != nil {
		return "", err
	}
	st.release()
	return st.name, nil
}

// WriteKept is WriteTo for a pack whose objects no ref reaches until the
// caller moves one, possibly seconds later (after a push): the pack is
// published under a .keep (stagedPack), so that a `git repack -a -d` in the
// meantime keeps it instead of deleting objects nothing references yet.
// release removes the .keep; call it once the ref that reaches the pack has
// moved, or once the pack is no longer wanted (before RemovePack). A process
// killed before release leaves a .keep that RemoveStaleTemps removes.
func (w *PackWriter) WriteKept(objectDir string) (packName string, release func(), err error) {
	st, err := w.write(objectDir, true)
	if err != nil {
		return "", nil, err
	}
	return st.name, st.release, nil
}

// write stages, syncs and publishes the pack, with a .keep if protect.
func (w *PackWriter) write(objectDir string, protect bool) (*stagedPack, error) {
	st, err := w.stage(objectDir, protect, nil)
	if err != nil {
		return nil, err
	}
	if _, err = syncWritten(st, nil, false); err == nil {
		err = st.publish(protect)
	}
	if err != nil {
		st.abort()
		return nil, err
	}
	return st, nil
}

// stagedPack is a pack written, not yet synced or visible. Splitting
// writing, syncing and publishing lets a caller sync the pack together with
// other files (one round of fsyncs instead of several).
//
// The pack is written under a final name, or into a spare (Spares) made
// before the writer lock, the .idx under a temporary one (a spare too):
// git and ObjectDB read a pack only through its .idx, so only the .idx must
// appear whole, by a rename, once both files are synced; then the directory
// is synced. After a crash there is either no pack, temporaries, a .pack
// (or .keep) without .idx, which RemoveStaleTemps removes, or a complete
// pack. A pack already complete under the final name has the same contents
// (the name is the checksum) and is kept; a .pack there without .idx may be
// a killed writer's, cut short, and this pack is then written under a
// temporary name and renamed over it before the .idx, as a pack written
// into a spare is.
//
// Beside git gc. `git repack -a -d` (git gc --prune=now) lists every
// "*.pack" in the directory at its start, with or without .idx, as kept if
// its ".keep" exists then, and at its end deletes the listed packs that were
// not kept, whatever it found reachable: a pack whose ref is not moved yet
// would lose its objects. So a protected pack (publish(true)) is born as its
// "<name>.keep" — the file's first name is the .keep, holding the pack —
// and gets its ".pack" name by a hard link (git only asks whether the .keep
// exists): no repack ever lists it unkept, and the .keep costs no file of
// its own; a pack under a temporary name is linked as its .keep before it
// is renamed to its .pack name (publish). release removes the .keep once
// the ref that reaches the pack has moved. The temporaries are named
// packTempPrefix+"spare-*", "pack-*" and "idx-*" (see packTempPrefix). The pack file and the .idx's
// temporary are held open with an flock until release, which is how
// RemoveStaleTemps tells a killed writer's leftovers from a live writer's.
type stagedPack struct {
	dir, name string
	temps     [2]string   // .pack, .idx: the temporary names publish renames ("" once renamed, or none)
	files     [2]*os.File // open and flocked until release
	bornKeep  bool        // the pack was created as this writer's .keep
	unlisted  []string    // final names this writer created, removed by abort until the .idx is published
	keep      string      // this process's <name>.keep, until release
	size      int64       // the pack's length if this writer wrote it, else 0
}

// packTempPrefix starts the names of tally's temporary files in objects/pack.
// git prune removes every "tmp_*" file there (remove_temporary_files: all of
// them with --prune=now, whoever is writing them), git gc removes an ".idx"
// with no ".pack" of the same base name, and git repack removes only its own
// ".tmp-<pid>-pack*"; a name without "tmp_" and without a dot is only ever
// counted as garbage by `git count-objects -v`.
const packTempPrefix = "tally-tmp-"

// packKeepText is the content of the .keep files tally wrote before a pack
// was born as its .keep; RemoveStaleTemps still knows them.
const packKeepText = "tally: protects a pack until its ref is updated\n"

// staleTempAge is how old a leftover must be before RemoveStaleTemps
// considers it: a live writer holds its files for milliseconds, and its flock
// is checked as well.
const staleTempAge = 10 * time.Minute

// The CRC-32 of each object in a pack's index is taken byte by byte for a
// small pack (below smallPackBytes): crc32.IEEETable itself, on amd64, first
// builds the 8 KiB slicing table its hardware path keeps for short inputs,
// 38k instructions and two fresh pages of memory, more than the few KiB of a
// note's pack cost byte at a time. byteCRCTable is the same polynomial's
// table under another address, which crc32.Update reads byte by byte.
const smallPackBytes = 64 << 10

var byteCRCTable = sync.OnceValue(func() *crc32.Table {
	t := *crc32.IEEETable
	return &t
})

// Bytes is the pack stream of the objects added (what WriteTo stores as the
// .pack), for a push that sends it without storing it.
func (w *PackWriter) Bytes() []byte {
	pack, _, _ := w.pack()
	return pack
}

// pack lays the entries out as a pack (version 2, the entries in the order
// added) and returns it with each entry's index record and its checksum.
func (w *PackWriter) pack() ([]byte, []packIdxEntry, [sha1.Size]byte) {
	size := 12 + sha1.Size
	for _, e := range w.entries {
		size += len(e)
	}
	pack := make([]byte, 0, size) // one allocation however many objects
	pack = append(pack, "PACK\x00\x00\x00\x02"...)
	pack = binary.BigEndian.AppendUint32(pack, uint32(len(w.entries)))
	idx := make([]packIdxEntry, len(w.entries))
	crcs := crc32.IEEETable
	if size < smallPackBytes {
		crcs = byteCRCTable()
	}
	for i, e := range w.entries {
		idx[i] = packIdxEntry{w.ids[i], crc32.Update(0, crcs, e), uint64(len(pack))}
		pack = append(pack, e...)
	}
	sum := sha1.Sum(pack)
	return append(pack, sum[:]...), idx, sum
}

// stage writes the pack and its index, into spares where sp holds them
// (Spares: the pack then written as a temporary, as over a leftover).
func (w *PackWriter) stage(objectDir string, protect bool, sp *Spares) (*stagedPack, error) {
	if len(w.entries) == 0 {
		return nil, errors.New("gitstore: no objects to pack")
	}
	pack, idx, sum := w.pack()
	st := &stagedPack{dir: filepath.Join(objectDir, "pack"), name: "pack-" + hex.EncodeToString(sum[:])}
	if err := os.MkdirAll(st.dir, 0o777); err != nil {
		return nil, err
	}
	final := filepath.Join(st.dir, st.name)
	var f *os.File
	var err error
	switch havePack := fileExists(final + ".pack"); {
	case havePack && fileExists(final+".idx"):
		// Complete already: hold its flock as a writer does, for the .keep
		// publish links to it (RemoveStaleTemps).
		if f, err = openFile(final+".pack", os.O_RDONLY, 0); err != nil {
			return nil, err
		}
		st.files[0], pack = f, nil
	case !havePack && sp.Len() > 0:
		// A spare, flocked already: written as a temporary, which publish
		// links as the .keep and renames to the .pack.
		f = sp.take()
		st.files[0], st.temps[0] = f, f.Name()
	case !havePack:
		born := final + ".pack"
		if protect {
			born = final + ".keep"
		}
		f, err = openFile(born, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o444)
		if err == nil {
			st.files[0], st.bornKeep, st.unlisted = f, protect, []string{born}
			break
		}
		if !errors.Is(err, fs.ErrExist) {
			return nil, err
		}
		fallthrough // someone else's .keep: a temporary, as for a leftover .pack
	default:
		if f, err = createTemp(st.dir, packTempPrefix+"pack-"); err != nil {
			return nil, err
		}
		st.files[0], st.temps[0] = f, f.Name()
	}
	if err := lockFreeNow(st.files[0]); err != nil { // a spare's is held already: taking it again is a no-op
		st.abort()
		return nil, err
	}
	if pack == nil {
		return st, nil
	}
	if err := writeReadOnly(st.files[0], pack, st.temps[0] != ""); err != nil {
		st.abort()
		return nil, err
	}
	st.size = int64(len(pack))
	if f = sp.take(); f == nil {
		if f, err = createTemp(st.dir, packTempPrefix+"idx-"); err != nil {
			st.abort()
			return nil, err
		}
		if err := lockFreeNow(f); err != nil {
			st.files[1], st.temps[1] = f, f.Name()
			st.abort()
			return nil, err
		}
	}
	st.files[1], st.temps[1] = f, f.Name()
	if err := writeReadOnly(f, packIndexBytes(idx, sum), true); err != nil {
		st.abort()
		return nil, err
	}
	return st, nil
}

// writeReadOnly writes data to f, and makes it read-only if chmod (a file
// created read-only already is).
func writeReadOnly(f *os.File, data []byte, chmod bool) error {
	if _, err := f.Write(data); err != nil {
		return err
	}
	if chmod {
		return f.Chmod(0o444)
	}
	return nil
}

// fileExists reports whether path names a file (or anything else).
func fileExists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// lockFreeNow takes an exclusive lock (lockfile.go) on f, which nobody
// else holds: one held elsewhere is an error.
func lockFreeNow(f *os.File) error {
	busy, err := lockNow(f)
	if busy {
		return errors.New("locked by another process")
	}
	return err
}

// publish makes the synced pack visible and syncs the directory: the
// pack gets its .pack name (a link to the .keep it was born as, or the
// rename of a temporary over a leftover), then the .idx is renamed into
// place. With protect the pack has a .keep from before its .pack name
// exists (or, complete already, from now); it stays until release, once the
// ref that reaches the pack's objects has moved (or will not).
func (st *stagedPack) publish(protect bool) error {
	final := filepath.Join(st.dir, st.name)
	if st.bornKeep {
		st.keep = final + ".keep"
	} else if protect {
		switch err := linkOrCopy(st.files[0], final+".keep"); {
		case errors.Is(err, fs.ErrExist):
			// someone else's keep (git's, or a writer of the same pack): it
			// protects the pack as well, and is not ours to remove
		case err != nil:
			return err
		default:
			st.keep = final + ".keep"
		}
	}
	if st.files[1] == nil {
		return nil // complete already, directory entries included
	}
	if st.bornKeep {
		if err := linkOrCopy(st.files[0], final+".pack"); err != nil {
			return err
		}
		st.unlisted = append(st.unlisted, final+".pack")
	}
	for i, ext := range []string{".pack", ".idx"} {
		if st.temps[i] == "" {
			continue
		}
		if err := renameFile(st.temps[i], final+ext); err != nil {
			return err
		}
		st.temps[i] = ""
	}
	st.unlisted = nil
	return syncDir(st.dir)
}

// link gives a file a second name; a variable so that a test can stand
// for a filesystem without hard links.
var link = os.Link

// linkOrCopy gives the pack file src the second name dst, which must not
// exist (fs.ErrExist if it does): a hard link, or, where the filesystem has
// none (FAT, some network and FUSE mounts; git's own object writes fall back
// from linking there too), a copy created with O_EXCL and synced before it
// returns, so that the .idx renamed after it never names a pack that a
// power cut could lose. git reads a .pack only through its .idx and only
// tests whether a .keep exists, so neither name is read while the copy is
// being written.
func linkOrCopy(src *os.File, dst string) error {
	err := link(src.Name(), dst)
	if err == nil || errors.Is(err, fs.ErrExist) {
		return err
	}
	f, cerr := os.OpenFile(dst, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	if cerr != nil {
		return errors.Join(err, cerr)
	}
	_, cerr = io.Copy(f, io.NewSectionReader(src, 0, math.MaxInt64))
	if cerr == nil {
		cerr = f.Sync()
	}
	if e := f.Close(); cerr == nil {
		cerr = e
	}
	if cerr != nil {
		os.Remove(dst)
		return errors.Join(err, cerr)
	}
	return nil
}

// abort removes whatever publish has not made visible (the pack's final
// names included), and releases the pack.
func (st *stagedPack) abort() {
	for _, path := range append(st.temps[:], st.unlisted...) {
		if path != "" {
			os.Remove(path)
		}
		if path == st.keep {
			st.keep = "" // the pack was born as it
		}
	}
	st.temps, st.unlisted = [2]string{}, nil
	st.release()
}

// release removes this process's .keep and drops the flocks: the pack is now
// git's to repack (its objects reachable from a ref) or to prune (they are
// not). The removal need not be durable: a .keep that reappears after a crash
// is a stale one.
func (st *stagedPack) release() {
	if st.keep != "" {
		os.Remove(st.keep)
		st.keep = ""
	}
	for i, f := range st.files {
		if f != nil {
			f.Close()
			st.files[i] = nil
		}
	}
}

// RemoveStaleTemps removes what writers killed while writing a pack left in
// objectDir/pack: temporaries named packTempPrefix+"*" and tally's .keep
// files (holding a pack, as the pack is born, or packKeepText, as older
// versions wrote them), with the "pack-*.pack" that is the very same file
// as such a .keep while its ".idx" is missing, once older than
// staleTempAge and not flocked — a live writer holds an flock on each of
// them until release, and the kernel drops the flock of a killed one.
// Nothing else is touched: not git's "tmp_*" files, nor any other .keep,
// nor a .pack without .idx that is no tally .keep's (git renames its .pack
// and then its .idx, and the pack's age says nothing of how long ago it
// began that). It returns how many files it removed.
func RemoveStaleTemps(objectDir string) (int, error) {
	dir := filepath.Join(objectDir, "pack")
	ents, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	} else if err != nil {
		return 0, err
	}
	removed := 0
	for _, e := range ents {
		name := e.Name()
		keep := strings.HasSuffix(name, ".keep")
		if !keep && !strings.HasPrefix(name, packTempPrefix) {
			continue
		}
		if fi, err := e.Info(); err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < staleTempAge {
			continue
		}
		removed += removeUnlocked(filepath.Join(dir, name), keep)
	}
	return removed, nil
}

// removeUnlocked removes path if no process holds an flock on it and, for a
// .keep, if it is tally's; a .keep holding a pack takes with it the .pack
// that is the same file, unless that pack has its .idx (then it was
// published, and only the .keep is left over). The flock is taken on the
// file found at path, and the name still naming that file is checked before
// the removal, so a file renamed away or replaced meanwhile is left alone.
// It returns how many files it removed.
func removeUnlocked(path string, keep bool) int {
	f, err := os.Open(path)
	if err != nil {
		return 0
	}
	defer f.Close()
	if lockFreeNow(f) != nil {
		return 0 // a live writer's
	}
	held, err := f.Stat()
	if err != nil {
		return 0
	}
	removed := 0
	if keep {
		b, err := io.ReadAll(io.LimitReader(f, int64(len(packKeepText))+1))
		if err != nil || !(string(b) == packKeepText || strings.HasPrefix(string(b), "PACK")) {
			return 0
		}
		base := strings.TrimSuffix(path, ".keep")
		if pack, err := os.Lstat(base + ".pack"); err == nil && os.SameFile(held, pack) && !fileExists(base+".idx") && os.Remove(base+".pack") == nil {
			removed++
		}
	}
	if now, err := os.Lstat(path); err != nil || !os.SameFile(held, now) {
		return removed
	}
	if os.Remove(path) == nil {
		removed++
	}
	return removed
}

type packIdxEntry struct {
	id  ObjectID
	crc uint32 // CRC32 of the pack entry as stored
	off uint64
}

// packIndexBytes returns the version 2 index (see packIndex) of the pack with
// checksum packSum holding entries, which it sorts.
func packIndexBytes(entries []packIdxEntry, packSum [20]byte) []byte {
	slices.SortFunc(entries, func(a, b packIdxEntry) int { return bytes.Compare(a.id[:], b.id[:]) })
	b := make([]byte, 0, packIdxHeader+28*len(entries)+40)
	b = append(b, "\377tOc\x00\x00\x00\x02"...)
	var fanout [256]uint32
	for _, e := range entries {
		fanout[e.id[0]]++
	}
	var total uint32
	for _, n := range fanout {
		total += n
		b = binary.BigEndian.AppendUint32(b, total)
	}
	for _, e := range entries {
		b = append(b, e.id[:]...)
	}
	for _, e := range entries {
		b = binary.BigEndian.AppendUint32(b, e.crc)
	}
	var large []uint64
	for _, e := range entries {
		if e.off < 1<<31 {
			b = binary.BigEndian.AppendUint32(b, uint32(e.off))
		} else {
			b = binary.BigEndian.AppendUint32(b, 1<<31|uint32(len(large)))
			large = append(large, e.off)
		}
	}
	for _, off := range large {
		b = binary.BigEndian.AppendUint64(b, off)
	}
	b = append(b, packSum[:]...)
	sum := sha1.Sum(b)
	return append(b, sum[:]...)
}

// RemovePack deletes the pack packName ("pack-<hex>") from objectDir: first the
// .idx, so that no new reader picks the pack up, then the .pack. Missing files
// are not an error.
func RemovePack(objectDir, packName string) error {
	if !packValidName(packName) {
		return fmt.Errorf("gitstore: invalid pack name %q", packName)
	}
	for _, ext := range []string{".idx", ".pack"} {
		err := os.Remove(filepath.Join(objectDir, "pack", packName+ext))
		if err != nil && !errors.Is(err, fs.ErrNotExist) {
			return err
		}
	}
	return nil
}

// packValidName reports whether name is "pack-" and 40 lowercase hex digits.
func packValidName(name string) bool {
	h, ok := strings.CutPrefix(name, "pack-")
	_, err := hex.DecodeString(h)
	return ok && len(h) == 40 && err == nil && strings.ToLower(h) == h
}
