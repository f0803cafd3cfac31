package gitstore

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/klauspost/compress/zlib"
)

// packZlibLevel is the default level. git repack reuses the compressed data,
// so the size is kept for good. The writer is klauspost/compress's zlib, not
// the standard library's: at the default level the standard compressor
// clears 640 KiB of hash tables on every Reset, which is most of the cost of
// a small object (a plan of 100k cells writes 100k of them); this one resets
// in constant time and, on cell blobs, took a quarter of the CPU time for a
// 5% smaller output. Reading stays with the standard library, which inflated
// them as fast.
const packZlibLevel = zlib.DefaultCompression

var packZlibWriters = sync.Pool{New: func() any {
	zw, _ := zlib.NewWriterLevel(nil, packZlibLevel)
	return zw
}}

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
	size := uint64(len(data))
	hdr := []byte{byte(t)<<4 | byte(size&15)}
	for size >>= 4; size > 0; size >>= 7 {
		hdr[len(hdr)-1] |= 0x80
		hdr = append(hdr, byte(size&0x7f))
	}
	buf := bytes.NewBuffer(hdr)
	zw := packZlibWriters.Get().(*zlib.Writer)
	zw.Reset(buf)
	zw.Write(data) // writes to a bytes.Buffer cannot fail
	zw.Close()
	packZlibWriters.Put(zw)
	return buf.Bytes()
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
	st.abort() // closes the published files
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
	return st.name, st.abort, nil
}

// write stages, syncs and publishes the pack, with a .keep if protect.
func (w *PackWriter) write(objectDir string, protect bool) (*stagedPack, error) {
	st, err := w.stage(objectDir)
	if err != nil {
		return nil, err
	}
	if err = st.sync(); err == nil {
		err = st.publish(protect)
	}
	if err != nil {
		st.abort()
		return nil, err
	}
	return st, nil
}

// stagedPack is a pack written under temporary names, not yet synced or
// visible. Splitting writing, syncing and publishing lets a caller sync the
// pack together with other files (one journal commit instead of several).
//
// Git and ObjectDB ignore a .pack without an .idx, so publish renames the .pack
// first and the .idx after it, then syncs the directory: after a crash there is
// either no pack, an ignored .pack, or a complete pack. A file already present
// under the final name has the same contents (the name is the checksum) and is
// kept.
//
// Beside git gc. The temporaries are named packTempPrefix+"pack-*" and
// packTempPrefix+"idx-*" (see packTempPrefix). From before the pack is
// visible until release, a "<name>.keep" holding packKeepText protects it
// from `git repack -a -d` (git gc --prune=now), which deletes the packs it
// listed at its start once it has packed what the refs reach: a pack whose
// ref is not moved yet would lose its objects. git lists a pack only once
// its .idx exists, and the .keep is created before, so every repack that
// lists the pack sees the .keep. Each temporary and the .keep are held open
// with an flock until renamed or removed, which is how RemoveStaleTemps tells
// a killed writer's leftovers from a live writer's files.
type stagedPack struct {
	dir, name string
	temps     [2]string   // .pack, .idx
	files     [2]*os.File // open and flocked until renamed or removed
	keep      *os.File    // this process's <name>.keep, open and flocked until release
}

// packTempPrefix starts the names of tally's temporary files in objects/pack.
// git prune removes every "tmp_*" file there (remove_temporary_files: all of
// them with --prune=now, whoever is writing them), git gc removes an ".idx"
// with no ".pack" of the same base name, and git repack removes only its own
// ".tmp-<pid>-pack*"; a name without "tmp_" and without a dot is only ever
// counted as garbage by `git count-objects -v`.
const packTempPrefix = "tally-tmp-"

// packKeepText is the content of the .keep files tally creates, by which
// RemoveStaleTemps knows them from the .keep files of git and of users.
const packKeepText = "tally: protects a pack until its ref is updated\n"

// staleTempAge is how old a leftover must be before RemoveStaleTemps
// considers it: a live writer holds its files for milliseconds, and its flock
// is checked as well.
const staleTempAge = 10 * time.Minute

func (w *PackWriter) stage(objectDir string) (*stagedPack, error) {
	if len(w.entries) == 0 {
		return nil, errors.New("gitstore: no objects to pack")
	}
	size := 12 + sha1.Size
	for _, e := range w.entries {
		size += len(e)
	}
	pack := make([]byte, 0, size) // one allocation however many objects
	pack = append(pack, "PACK\x00\x00\x00\x02"...)
	pack = binary.BigEndian.AppendUint32(pack, uint32(len(w.entries)))
	idx := make([]packIdxEntry, len(w.entries))
	for i, e := range w.entries {
		idx[i] = packIdxEntry{w.ids[i], crc32.ChecksumIEEE(e), uint64(len(pack))}
		pack = append(pack, e...)
	}
	sum := sha1.Sum(pack)
	pack = append(pack, sum[:]...)
	st := &stagedPack{dir: filepath.Join(objectDir, "pack"), name: "pack-" + hex.EncodeToString(sum[:])}
	if err := os.MkdirAll(st.dir, 0o777); err != nil {
		return nil, err
	}
	for i, data := range [2][]byte{pack, packIndexBytes(idx, sum)} {
		f, err := os.CreateTemp(st.dir, packTempPrefix+[2]string{"pack-*", "idx-*"}[i])
		if err != nil {
			st.abort()
			return nil, err
		}
		st.temps[i], st.files[i] = f.Name(), f
		if err := flockNow(f); err != nil {
			st.abort()
			return nil, err
		}
		if _, err := f.Write(data); err != nil {
			st.abort()
			return nil, err
		}
		if err := f.Chmod(0o444); err != nil {
			st.abort()
			return nil, err
		}
	}
	return st, nil
}

// flockNow takes an exclusive flock on f, which nobody else holds.
func flockNow(f *os.File) error {
	for {
		if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// sync makes the staged files' contents durable. Both files are synced at
// once: the writes reach the device together, where one fsync after the
// other waits for two round trips (the .idx was a full fsync latency of
// every append). Durability is the same: publish runs only after both. The
// files stay open: their flocks mark them live until release.
func (st *stagedPack) sync() error {
	var errs [2]error
	var wg sync.WaitGroup
	for i, f := range st.files {
		if f == nil {
			continue
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = f.Sync()
		}()
	}
	wg.Wait()
	if errs[0] != nil {
		return errs[0]
	}
	return errs[1]
}

// publish renames the synced files into place and syncs the directory. With
// protect, it first protects the pack with a .keep, which stays until
// release, once the ref that reaches the pack's objects has moved (or will
// not).
func (st *stagedPack) publish(protect bool) error {
	var keep *os.File
	var err error
	if protect {
		keep, err = os.OpenFile(filepath.Join(st.dir, st.name+".keep"), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o444)
	}
	switch {
	case !protect:
	case errors.Is(err, fs.ErrExist):
		// someone else's keep (git's, or a writer of the same pack): it
		// protects the pack as well, and is not ours to remove
	case err != nil:
		return err
	default:
		st.keep = keep
		if err := flockNow(keep); err != nil {
			return err
		}
		if _, err := keep.WriteString(packKeepText); err != nil {
			return err
		}
	}
	for i, ext := range []string{".pack", ".idx"} {
		final := filepath.Join(st.dir, st.name+ext)
		if _, err := os.Lstat(final); err == nil {
			continue
		}
		if err := os.Rename(st.temps[i], final); err != nil {
			return err
		}
		st.temps[i] = ""
	}
	return syncDir(st.dir)
}

// abort removes whatever publish has not moved into place, and the .keep.
func (st *stagedPack) abort() {
	for i := range st.temps {
		if st.temps[i] != "" {
			os.Remove(st.temps[i])
			st.temps[i] = ""
		}
		if st.files[i] != nil {
			st.files[i].Close()
			st.files[i] = nil
		}
	}
	st.release()
}

// release removes this process's .keep: the pack is now git's to repack (its
// objects reachable from a ref) or to prune (they are not). The removal need
// not be durable: a .keep that reappears after a crash is a stale one.
func (st *stagedPack) release() {
	if st.keep != nil {
		os.Remove(st.keep.Name())
		st.keep.Close()
		st.keep = nil
	}
}

// RemoveStaleTemps removes what writers killed while writing a pack left in
// objectDir/pack: temporaries named packTempPrefix+"*" and .keep files holding
// packKeepText, once older than staleTempAge and not flocked — a live writer
// holds an flock on each of them until it renames or removes it, and the
// kernel drops the flock of a killed one. Nothing else is touched: not git's
// "tmp_*" files, nor any other .keep. It returns how many files it removed.
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
		temp := strings.HasPrefix(name, packTempPrefix)
		if !temp && !strings.HasSuffix(name, ".keep") {
			continue
		}
		if fi, err := e.Info(); err != nil || !fi.Mode().IsRegular() || time.Since(fi.ModTime()) < staleTempAge {
			continue
		}
		if removeUnlocked(filepath.Join(dir, name), !temp) {
			removed++
		}
	}
	return removed, nil
}

// removeUnlocked removes path if no process holds an flock on it (and, with
// keepOnly, if it holds packKeepText). The flock is taken on the file found
// at path, and the name still naming that file is checked before the
// removal, so a file renamed away or replaced meanwhile is left alone.
func removeUnlocked(path string, keepOnly bool) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	if flockNow(f) != nil {
		return false // a live writer's
	}
	if keepOnly {
		b, err := io.ReadAll(io.LimitReader(f, int64(len(packKeepText))+1))
		if err != nil || string(b) != packKeepText {
			return false
		}
	}
	held, err1 := f.Stat()
	now, err2 := os.Lstat(path)
	if err1 != nil || err2 != nil || !os.SameFile(held, now) {
		return false
	}
	return os.Remove(path) == nil
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
