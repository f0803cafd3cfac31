package chain

import (
	"errors"
	"fmt"
	"strconv"
)

// The Merkle log's node hashes are stored in tiles, so that a proof reads
// O(log n) small blobs and an append rewrites few: the level 0 tile, plus
// the level L tile for each L ≥ 1 such that 16^L divides the new size, so at
// most 1+⌊log16(new size)⌋ tiles.
//
// Tile (L, N) holds the hashes of the complete tree nodes at level 4L with
// indexes [16N, 16N+16), in index order. A tile of a log of n leaves thus
// holds min(16, n>>4L - 16N) records; a tile with no records does not exist,
// and a partial tile is rewritten as it grows. The nodes at levels 4L+1 to
// 4L+3 are not stored: each is the root of 2, 4 or 8 consecutive records of
// one tile at level L.
//
// A level 0 record is 52 bytes: the 32-byte entry hash (whose leaf hash is
// LeafHash of it) followed by a 20-byte entry locator, opaque here (tally
// stores the git blob id of the entry). A record at level L ≥ 1 is the
// 32-byte hash of the level 4L node, the root of the 16 nodes of a full tile
// at level L-1. Tile content is its records concatenated.
const (
	tileHeight    = 4
	tileWidth     = 1 << tileHeight
	tileEntrySize = len(Hash{}) + 20
	tileHashSize  = len(Hash{})
)

// ErrCorruptTile is wrapped by errors reporting tiles whose stored length
// contradicts the log size.
var ErrCorruptTile = errors.New("corrupt Merkle tile")

// A KV reads tiles by path (see TilePath). Get reports whether the key
// exists; the caller may retain the returned bytes but does not modify them.
type KV interface {
	Get(key string) ([]byte, bool, error)
}

// TilePath returns the path of tile (level, n) in the log tree:
// "log/<level>/" followed by the lowercase hex digits of n without leading
// zeros, each digit but the last written as "x<digit>/". For example,
// tile (0, 0x2f) is "log/0/x2/f" and tile (0, 0x100) is "log/0/x1/x0/0".
// A directory thus holds at most 16 tiles and 16 subdirectories.
func TilePath(level int, n uint64) string {
	b := make([]byte, 0, len("log/00/")+3*16)
	b = strconv.AppendInt(append(b, "log/"...), int64(level), 10)
	return string(appendHexPath(append(b, '/'), n))
}

// HexPath returns dir, "/" and n's path as TilePath writes it ("x<digit>/"
// before each hex digit but the last): HexPath("d", 0x2f) is "d/x2/f". A
// directory of such paths holds at most 16 blobs and 16 subdirectories, so
// writing the path of one n rewrites O(log n) small trees.
func HexPath(dir string, n uint64) string {
	b := make([]byte, 0, len(dir)+1+3*16)
	return string(appendHexPath(append(append(b, dir...), '/'), n))
}

// appendHexPath appends the lowercase hex digits of n without leading
// zeros, each but the last written as "x<digit>/".
func appendHexPath(b []byte, n uint64) []byte {
	digits := strconv.AppendUint(make([]byte, 0, 16), n, 16)
	for _, d := range digits[:len(digits)-1] {
		b = append(b, 'x', d, '/')
	}
	return append(b, digits[len(digits)-1])
}

// tileRecordSize returns the record size of tiles at the given level.
func tileRecordSize(level int) int {
	if level == 0 {
		return tileEntrySize
	}
	return tileHashSize
}

// tileRecords returns the number of records of tile (level, n) in a log of
// the given size.
func tileRecords(size uint64, level int, n uint64) int {
	nodes := size >> (tileHeight * level)
	if n > nodes/tileWidth {
		return 0
	}
	return int(min(nodes-n*tileWidth, tileWidth))
}

// tileRead reads tile (level, n) of a log of the given size, checking that
// its length is the one the size implies.
func tileRead(kv KV, size uint64, level int, n uint64) ([]byte, error) {
	return tileReadAt(kv, TilePath(level, n), size, level, n)
}

// tileReadAt is tileRead for a caller that has the tile's path already.
func tileReadAt(kv KV, path string, size uint64, level int, n uint64) ([]byte, error) {
	data, ok, err := kv.Get(path)
	if err != nil {
		return nil, fmt.Errorf("reading tile %s: %w", path, err)
	}
	if !ok {
		data = nil
	}
	if want := tileRecords(size, level, n) * tileRecordSize(level); len(data) != want {
		return nil, fmt.Errorf("%w: %s has %d bytes, want %d for log size %d", ErrCorruptTile, path, len(data), want, size)
	}
	return data, nil
}

// tileNode returns the tree node hash of record i of a tile at level.
func tileNode(level int, data []byte, i int) Hash {
	if level == 0 {
		return LeafHash(Hash(data[i*tileEntrySize:]))
	}
	return Hash(data[i*tileHashSize:])
}

// tileSubtree returns the root of the perfect subtree whose bottom nodes are
// the count records of a tile at level starting at record i; count is a
// power of two no larger than the tile width.
func tileSubtree(level int, data []byte, i, count int) Hash {
	var h [tileWidth]Hash
	for j := range count {
		h[j] = tileNode(level, data, i+j)
	}
	for ; count > 1; count /= 2 {
		for j := range count / 2 {
			h[j] = NodeHash(h[2*j], h[2*j+1])
		}
	}
	return h[0]
}

// AppendTiles returns the tiles, by path, that change when the entry with
// hash entryHash and the given locator is appended to a log of size entries
// whose tiles kv holds: the level 0 tile gains a record, and each tile that
// this fills contributes its root as a new record to the tile above it.
func AppendTiles(kv KV, size uint64, entryHash Hash, locator [20]byte) (map[string][]byte, error) {
	changed := make(map[string][]byte, 2)
	err := AppendTilesTo(kv, size, entryHash, locator, func(path string, data []byte) error {
		changed[path] = data
		return nil
	})
	if err != nil {
		return nil, err
	}
	return changed, nil
}

// AppendTilesTo is AppendTiles handing each changed tile to set, lowest
// level first, instead of returning a map (a map an entry was a third of
// what the tiles of a replayed entry allocated). set may write the tile
// into kv: each level's tile is read before it is set, and a tile set is
// never read again. A changed tile is always a new slice; the stored one is
// never written to.
func AppendTilesTo(kv KV, size uint64, entryHash Hash, locator [20]byte, set func(path string, data []byte) error) error {
	if size+1 == 0 {
		return errors.New("append tiles: log is full")
	}
	var rec [tileEntrySize]byte
	copy(rec[copy(rec[:], entryHash[:]):], locator[:])
	next := rec[:]
	// index is the index of the new node at level 4·level; it is complete only
	// after the append, so the old tile holds index%16 records.
	for level, index := 0, size; ; level, index = level+1, index/tileWidth {
		n := index / tileWidth
		path := TilePath(level, n)
		old, err := tileReadAt(kv, path, size, level, n)
		if err != nil {
			return err
		}
		data := append(old[:len(old):len(old)], next...)
		if err := set(path, data); err != nil {
			return err
		}
		if index%tileWidth != tileWidth-1 {
			return nil
		}
		root := tileSubtree(level, data, 0, tileWidth)
		next = root[:]
	}
}

// TileNodeReader returns a NodeReader for the log of size entries whose tiles
// kv holds. Node reads the hash of a level 4L node from a tile at level L and
// computes one at level 4L+1..4L+3 from 2..8 records of a single tile. The
// reader caches the tiles it reads; it is not safe for concurrent use.
func TileNodeReader(kv KV, size uint64) NodeReader {
	return &tileReader{kv: kv, size: size, cache: make(map[[2]uint64][]byte)}
}

type tileReader struct {
	kv    KV
	size  uint64
	cache map[[2]uint64][]byte // by tile level and index
}

func (t *tileReader) Node(level uint8, index uint64) (Hash, error) {
	if level >= 64 || index >= t.size>>level {
		return Hash{}, fmt.Errorf("node (%d, %d) is not a complete node of a log of size %d", level, index, t.size)
	}
	tl, sub := int(level/tileHeight), level%tileHeight
	first := index << sub // first record, indexed among all tile level tl records
	data, err := t.tile(tl, first/tileWidth)
	if err != nil {
		return Hash{}, err
	}
	return tileSubtree(tl, data, int(first%tileWidth), 1<<sub), nil
}

func (t *tileReader) tile(level int, n uint64) ([]byte, error) {
	key := [2]uint64{uint64(level), n}
	if data, ok := t.cache[key]; ok {
		return data, nil
	}
	data, err := tileRead(t.kv, t.size, level, n)
	if err != nil {
		return nil, err
	}
	t.cache[key] = data
	return data, nil
}

// EntryRecord returns the entry hash and locator of entry seq of the log of
// size entries whose tiles kv holds.
func EntryRecord(kv KV, size, seq uint64) (entryHash Hash, locator [20]byte, err error) {
	if seq >= size {
		return Hash{}, locator, fmt.Errorf("entry %d is beyond log size %d", seq, size)
	}
	data, err := tileRead(kv, size, 0, seq/tileWidth)
	if err != nil {
		return Hash{}, locator, err
	}
	rec := data[int(seq%tileWidth)*tileEntrySize:]
	return Hash(rec), [20]byte(rec[len(Hash{}):]), nil
}
