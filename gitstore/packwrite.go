package gitstore

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"

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
	// header: type in bits 4-6 of the first byte, size as little-endian base-128
	// starting with 4 bits, high bits set on all but the last byte
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
	w.entries = append(w.entries, buf.Bytes())
	w.ids = append(w.ids, id)
	if w.Progress != nil {
		w.Progress()
	}
}

// WriteTo writes the objects to objectDir/pack as pack-<hex>.pack and
// pack-<hex>.idx, where hex is the pack's checksum as in git, and returns
// "pack-<hex>". On return both files and their directory entries are durable.
func (w *PackWriter) WriteTo(objectDir string) (packName string, err error) {
	st, err := w.stage(objectDir)
	if err != nil {
		return "", err
	}
	defer st.abort()
	if err := st.sync(); err != nil {
		return "", err
	}
	if err := st.publish(); err != nil {
		return "", err
	}
	return st.name, nil
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
type stagedPack struct {
	dir, name string
	temps     [2]string   // .pack, .idx
	files     [2]*os.File // open until sync
}

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
		f, err := os.CreateTemp(st.dir, [2]string{"tmp_pack_*", "tmp_idx_*"}[i])
		if err != nil {
			st.abort()
			return nil, err
		}
		st.temps[i], st.files[i] = f.Name(), f
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

// sync makes the staged files' contents durable.
func (st *stagedPack) sync() error {
	for i, f := range st.files {
		if f == nil {
			continue
		}
		err := f.Sync()
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		st.files[i] = nil
		if err != nil {
			return err
		}
	}
	return nil
}

// publish renames the synced files into place and syncs the directory.
func (st *stagedPack) publish() error {
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

// abort removes whatever publish has not moved into place.
func (st *stagedPack) abort() {
	for i := range st.temps {
		if st.files[i] != nil {
			st.files[i].Close()
			st.files[i] = nil
		}
		if st.temps[i] != "" {
			os.Remove(st.temps[i])
			st.temps[i] = ""
		}
	}
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
