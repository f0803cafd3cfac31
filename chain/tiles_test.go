package chain

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"maps"
	"math/bits"
	"path"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/transparency-dev/merkle/compact"
)

type tileMemKV map[string][]byte

func (m tileMemKV) Get(key string) ([]byte, bool, error) {
	b, ok := m[key]
	return b, ok, nil
}

// tileTestLog is a log kept in tiles by AppendTiles, with our compact range
// and transparency-dev's alongside.
type tileTestLog struct {
	kv   tileMemKV
	size uint64
	rg   Range
	ref  *compact.Range
}

func newTileTestLog() *tileTestLog {
	return &tileTestLog{kv: tileMemKV{}, ref: merkleRefFactory.NewEmptyRange(0)}
}

func tileTestLocator(i uint64) (loc [20]byte) {
	binary.BigEndian.PutUint64(loc[12:], ^i)
	return loc
}

// append appends the next entry and returns the tiles that changed.
func (l *tileTestLog) append(t testing.TB) map[string][]byte {
	e := merkleTestEntry(l.size)
	changed, err := AppendTiles(l.kv, l.size, e, tileTestLocator(l.size))
	if err != nil {
		t.Fatalf("AppendTiles(%d): %v", l.size, err)
	}
	maps.Copy(l.kv, changed)
	l.size++
	l.rg.Append(LeafHash(e))
	if err := l.ref.Append(merkleRefHasher{}.HashLeaf(e[:]), nil); err != nil {
		t.Fatal(err)
	}
	return changed
}

func (l *tileTestLog) refRoot(t testing.TB) Hash {
	root, err := l.ref.GetRootHash(nil)
	if err != nil {
		t.Fatal(err)
	}
	if root == nil { // the reference leaves the empty tree to the hasher
		root = merkleRefHasher{}.EmptyRoot()
	}
	return Hash(root)
}

// checkAppend checks that changed holds exactly the level 0 tile of the last
// entry and one tile for each level L ≥ 1 with 16^L dividing the new size.
func (l *tileTestLog) checkAppend(t testing.TB, changed map[string][]byte) {
	t.Helper()
	want := map[string]bool{TilePath(0, (l.size-1)/16): true}
	for level := 1; l.size%(1<<(4*level)) == 0; level++ {
		want[TilePath(level, (l.size>>(4*level)-1)/16)] = true
	}
	if len(changed) != len(want) || len(changed) > 1+(bits.Len64(l.size)-1)/4 {
		t.Fatalf("append to size %d changed %d tiles, want %d", l.size, len(changed), len(want))
	}
	for p := range changed {
		if !want[p] {
			t.Fatalf("append to size %d changed %s", l.size, p)
		}
	}
}

// checkRoots checks that our compact range, the tiles and the reference
// agree on the current log.
func (l *tileTestLog) checkRoots(t testing.TB) {
	t.Helper()
	if err := l.rg.Validate(); err != nil {
		t.Fatal(err)
	}
	rd := TileNodeReader(l.kv, l.size)
	rg, err := RangeFromReader(rd, l.size)
	if err != nil {
		t.Fatalf("RangeFromReader(%d): %v", l.size, err)
	}
	refHashes := l.ref.Hashes()
	for i := range refHashes {
		if Hash(refHashes[i]) != l.rg.Hashes[i] || rg.Hashes[i] != l.rg.Hashes[i] {
			t.Fatalf("size %d: compact range hash %d differs", l.size, i)
		}
	}
	root, err := RootFromReader(rd, l.size)
	if err != nil || root != l.rg.Root() || root != l.refRoot(t) {
		t.Fatalf("size %d: roots differ: tiles %v (%v), range %v, reference %v", l.size, root, err, l.rg.Root(), l.refRoot(t))
	}
}

func TestTileLog(t *testing.T) {
	const max = 300
	l := newTileTestLog()
	roots := []Hash{EmptyRoot()}
	l.checkRoots(t)
	for l.size < max {
		l.checkAppend(t, l.append(t))
		l.checkRoots(t)
		roots = append(roots, l.rg.Root())
		// Proofs from a reader of exactly this size, as a caller makes them.
		rd := TileNodeReader(l.kv, l.size)
		for _, index := range []uint64{0, l.size / 2, l.size - 1} {
			p, err := InclusionProof(rd, index, l.size)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyInclusion(LeafHash(merkleTestEntry(index)), index, l.size, p, roots[l.size]); err != nil {
				t.Fatalf("VerifyInclusion(%d, %d): %v", index, l.size, err)
			}
		}
		for _, old := range []uint64{1, l.size / 3, l.size - 1} {
			p, err := ConsistencyProof(rd, old, l.size)
			if err != nil {
				t.Fatal(err)
			}
			if err := VerifyConsistency(old, l.size, roots[old], roots[l.size], p); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", old, l.size, err)
			}
		}
	}

	rd := TileNodeReader(l.kv, max)
	var leaves [][]byte
	for i := range uint64(max) {
		e, loc, err := EntryRecord(l.kv, max, i)
		if err != nil || e != merkleTestEntry(i) || loc != tileTestLocator(i) {
			t.Fatalf("EntryRecord(%d) = %v, %x, %v", i, e, loc, err)
		}
		leaf := LeafHash(e)
		leaves = append(leaves, leaf[:])
	}
	// Every node of the tiles equals the one computed from its leaves.
	ref := merkleSliceReader(leaves)
	for level := uint8(0); max>>level > 0; level++ {
		for index := range uint64(max >> level) {
			got, err := rd.Node(level, index)
			want, _ := ref.Node(level, index)
			if err != nil || got != want {
				t.Fatalf("Node(%d, %d) = %v, %v; want %v", level, index, got, err, want)
			}
		}
	}

	for size := uint64(0); size <= max; size++ {
		for index := range size {
			p, err := InclusionProof(rd, index, size)
			if err != nil {
				t.Fatal(err)
			}
			if (index*7+size)%17 == 0 {
				merkleCheckRefInclusion(t, rd, index, size, p)
				merkleTamperInclusion(t, Hash(leaves[index]), index, size, p, roots[size])
			}
			if err := VerifyInclusion(Hash(leaves[index]), index, size, p, roots[size]); err != nil {
				t.Fatalf("VerifyInclusion(%d, %d): %v", index, size, err)
			}
		}
		for old := uint64(0); old <= size; old++ {
			p, err := ConsistencyProof(rd, old, size)
			if err != nil {
				t.Fatal(err)
			}
			if (old*5+size)%17 == 0 {
				merkleCheckRefConsistency(t, rd, old, size, p)
				merkleTamperConsistency(t, old, size, p, roots[old], roots[size])
			}
			if err := VerifyConsistency(old, size, roots[old], roots[size], p); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", old, size, err)
			}
		}
	}
}

func TestTileLogLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("large log")
	}
	const max = 70000
	// Sizes around tile boundaries, and a spread of others.
	sizes := []uint64{1, 15, 16, 17, 255, 256, 257, 4095, 4096, 4097, 65535, 65536, 65537, max}
	for s := uint64(3); s < max; s = s*5/4 + 7 {
		sizes = append(sizes, s)
	}
	roots := map[uint64]Hash{}
	l := newTileTestLog()
	for l.size < max {
		l.checkAppend(t, l.append(t))
		for _, s := range sizes {
			if s == l.size {
				roots[s] = l.refRoot(t)
			}
		}
	}
	l.checkRoots(t)
	rd := TileNodeReader(l.kv, max)
	for i, size := range sizes {
		for _, s := range sizes {
			if s > size {
				continue
			}
			if got, err := RootFromReader(rd, s); err != nil || got != roots[s] {
				t.Fatalf("RootFromReader(%d) = %v, %v; want %v", s, got, err, roots[s])
			}
			p, err := ConsistencyProof(rd, s, size)
			if err != nil {
				t.Fatal(err)
			}
			merkleCheckRefConsistency(t, rd, s, size, p)
			if err := VerifyConsistency(s, size, roots[s], roots[size], p); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", s, size, err)
			}
			if (s+size)%5 == 0 {
				merkleTamperConsistency(t, s, size, p, roots[s], roots[size])
			}
		}
		for _, index := range []uint64{0, size - 1, size / 2, (uint64(i) * 7919) % size, size &^ 15, size &^ 255} {
			if index >= size {
				continue
			}
			leaf := LeafHash(merkleTestEntry(index))
			p, err := InclusionProof(rd, index, size)
			if err != nil {
				t.Fatal(err)
			}
			merkleCheckRefInclusion(t, rd, index, size, p)
			if err := VerifyInclusion(leaf, index, size, p, roots[size]); err != nil {
				t.Fatalf("VerifyInclusion(%d, %d): %v", index, size, err)
			}
			if index%2 == 0 {
				merkleTamperInclusion(t, leaf, index, size, p, roots[size])
			}
		}
	}
}

func TestTilePath(t *testing.T) {
	for _, tc := range []struct {
		level int
		n     uint64
		want  string
	}{
		{0, 0, "log/0/0"},
		{0, 0xf, "log/0/f"},
		{0, 0x10, "log/0/x1/0"},
		{0, 0x2f, "log/0/x2/f"},
		{0, 0x100, "log/0/x1/x0/0"},
		{2, 5, "log/2/5"},
		{15, 1<<64 - 1, "log/15/" + strings.Repeat("xf/", 15) + "f"},
	} {
		if got := TilePath(tc.level, tc.n); got != tc.want {
			t.Errorf("TilePath(%d, %#x) = %q, want %q", tc.level, tc.n, got, tc.want)
		}
	}
}

// TestTileDirs checks that tile paths are unique, never use a name as both
// file and directory, and keep directories small: at most 31 names directly
// under log/<L>/ (no "x0") and 32 below it (16 tiles, 16 subdirectories).
func TestTileDirs(t *testing.T) {
	dirs := map[string]map[string]bool{}
	files := map[string]bool{}
	ns := []uint64{1<<64 - 1, 1<<63 + 5, 0xabcdef}
	for n := range uint64(0x2100) {
		ns = append(ns, n)
	}
	for level := range 3 {
		for _, n := range ns {
			p := TilePath(level, n)
			if files[p] {
				t.Fatalf("duplicate path %s", p)
			}
			files[p] = true
			for d := p; d != "log"; d = path.Dir(d) {
				if dirs[path.Dir(d)] == nil {
					dirs[path.Dir(d)] = map[string]bool{}
				}
				dirs[path.Dir(d)][path.Base(d)] = true
			}
		}
	}
	for d, names := range dirs {
		if files[d] {
			t.Errorf("%s is both a tile and a directory", d)
		}
		limit := 32
		if strings.Count(d, "/") == 1 {
			limit = 31
		}
		if len(names) > limit && d != "log" {
			t.Errorf("directory %s has %d names", d, len(names))
		}
	}
}

func TestTileCorrupt(t *testing.T) {
	l := newTileTestLog()
	for l.size < 40 {
		l.append(t)
	}
	check := func(what string, kv KV) {
		t.Helper()
		if _, err := AppendTiles(kv, 40, Hash{}, [20]byte{}); !errors.Is(err, ErrCorruptTile) {
			t.Errorf("%s: AppendTiles error %v", what, err)
		}
		if _, _, err := EntryRecord(kv, 40, 39); !errors.Is(err, ErrCorruptTile) {
			t.Errorf("%s: EntryRecord error %v", what, err)
		}
		if _, err := RootFromReader(TileNodeReader(kv, 40), 40); !errors.Is(err, ErrCorruptTile) {
			t.Errorf("%s: RootFromReader error %v", what, err)
		}
	}
	kv := maps.Clone(l.kv)
	kv["log/0/2"] = kv["log/0/2"][:7*52]
	check("short tile", kv)
	kv["log/0/2"] = append(l.kv["log/0/2"], make([]byte, 52)...)
	check("long tile", kv)
	delete(kv, "log/0/2")
	check("missing tile", kv)
	kv = maps.Clone(l.kv)
	kv["log/1/0"] = append(kv["log/1/0"], make([]byte, 32)...)
	if _, err := TileNodeReader(kv, 40).Node(4, 1); !errors.Is(err, ErrCorruptTile) {
		t.Errorf("long level 1 tile: Node error %v", err)
	}
	// A tile that should not exist yet.
	kv = maps.Clone(l.kv)
	kv["log/0/3"] = make([]byte, 52)
	if _, err := AppendTiles(kv, 48, Hash{}, [20]byte{}); !errors.Is(err, ErrCorruptTile) {
		t.Errorf("unexpected tile: AppendTiles error %v", err)
	}

	rd := TileNodeReader(l.kv, 40)
	for _, n := range [][2]uint64{{0, 40}, {3, 5}, {4, 2}, {5, 1}, {6, 0}, {64, 0}, {255, 0}} {
		if _, err := rd.Node(uint8(n[0]), n[1]); err == nil {
			t.Errorf("Node(%d, %d) of size 40 succeeded", n[0], n[1])
		}
	}
	if _, _, err := EntryRecord(l.kv, 40, 40); err == nil {
		t.Error("EntryRecord beyond size succeeded")
	}
	if _, err := InclusionProof(rd, 40, 40); err == nil {
		t.Error("InclusionProof beyond size succeeded")
	}
	if _, err := ConsistencyProof(rd, 41, 40); err == nil {
		t.Error("ConsistencyProof with old > new succeeded")
	}
	if _, err := InclusionProof(rd, 3, 41); err == nil {
		t.Error("InclusionProof beyond the tiles succeeded")
	}
	failing := tileFailKV{}
	if _, err := AppendTiles(failing, 40, Hash{}, [20]byte{}); !errors.Is(err, errTileTestKV) {
		t.Errorf("KV error not propagated: %v", err)
	}
}

var errTileTestKV = errors.New("kv failure")

type tileFailKV struct{}

func (tileFailKV) Get(string) ([]byte, bool, error) { return nil, false, errTileTestKV }

// TestAppendTilesNoAlias checks that AppendTiles never writes into the
// stored tiles, even when their slices have spare capacity.
func TestAppendTilesNoAlias(t *testing.T) {
	orig := make([]byte, 52, 1024)
	kv := tileMemKV{"log/0/0": orig}
	changed, err := AppendTiles(kv, 1, merkleTestEntry(1), [20]byte{1})
	if err != nil {
		t.Fatal(err)
	}
	if len(changed["log/0/0"]) != 104 || !bytes.Equal(orig[:cap(orig)], make([]byte, cap(orig))) {
		t.Fatalf("AppendTiles wrote into the stored tile")
	}
}

var tileBenchLogs struct {
	sync.Mutex
	m map[uint64]tileMemKV
}

// tileBenchLog returns the tiles of a log of size entries, built once.
func tileBenchLog(b testing.TB, size uint64) tileMemKV {
	tileBenchLogs.Lock()
	defer tileBenchLogs.Unlock()
	if kv := tileBenchLogs.m[size]; kv != nil {
		return kv
	}
	kv := tileMemKV{}
	for i := range size {
		changed, err := AppendTiles(kv, i, merkleTestEntry(i), [20]byte{})
		if err != nil {
			b.Fatal(err)
		}
		maps.Copy(kv, changed)
	}
	if tileBenchLogs.m == nil {
		tileBenchLogs.m = map[uint64]tileMemKV{}
	}
	tileBenchLogs.m[size] = kv
	return kv
}

func BenchmarkRangeAppend(b *testing.B) {
	var r Range
	leaf := LeafHash(merkleTestEntry(0))
	for b.Loop() {
		r.Append(leaf)
	}
}

func BenchmarkAppendTiles(b *testing.B) {
	kv := tileMemKV{}
	var size uint64
	for b.Loop() {
		changed, err := AppendTiles(kv, size, merkleTestEntry(size), [20]byte{})
		if err != nil {
			b.Fatal(err)
		}
		maps.Copy(kv, changed)
		size++
	}
}

// The proof benchmarks use a fresh reader per proof, so each reads its tiles
// from the KV as a caller answering one request would.
func BenchmarkInclusionProof(b *testing.B) {
	for _, size := range []uint64{100_000, 1_000_000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			kv := tileBenchLog(b, size)
			index := uint64(0)
			for b.Loop() {
				index = (index + 7919) % size
				if _, err := InclusionProof(TileNodeReader(kv, size), index, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkConsistencyProof(b *testing.B) {
	for _, size := range []uint64{100_000, 1_000_000} {
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			kv := tileBenchLog(b, size)
			old := uint64(0)
			for b.Loop() {
				old = (old+7919)%(size-1) + 1
				if _, err := ConsistencyProof(TileNodeReader(kv, size), old, size); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// TestAppendTilesToWritesWhatAppendTilesReturns: AppendTilesTo setting each
// tile straight into the store it reads from (as a replay does) leaves,
// append after append over three tile levels, the store AppendTiles' map
// copied into it leaves, and hands each tile once, lowest level first.
func TestAppendTilesToWritesWhatAppendTilesReturns(t *testing.T) {
	viaMap, direct := tileMemKV{}, tileMemKV{}
	for i := range uint64(16*16*16 + 40) {
		changed, err := AppendTiles(viaMap, i, merkleTestEntry(i), tileTestLocator(i))
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(viaMap, changed)
		var paths []string
		err = AppendTilesTo(direct, i, merkleTestEntry(i), tileTestLocator(i), func(path string, data []byte) error {
			paths = append(paths, path)
			direct[path] = data
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
		if len(paths) != len(changed) || !slices.IsSortedFunc(paths, func(a, b string) int { return strings.Compare(a[:6], b[:6]) }) {
			t.Fatalf("append %d: AppendTilesTo set %v, AppendTiles changed %d tiles", i, paths, len(changed))
		}
		if !maps.EqualFunc(viaMap, direct, bytes.Equal) {
			t.Fatalf("append %d: the stores differ", i)
		}
	}
	if err := AppendTilesTo(tileMemKV{}, 0, Hash{}, [20]byte{}, func(string, []byte) error { return errTileTestKV }); !errors.Is(err, errTileTestKV) {
		t.Fatalf("an error of set gives %v", err)
	}
}

// TestAppendTilesToAllocations: an append that changes only the level 0
// tile allocates the new tile and its path, spelt once for the read and
// the set.
func TestAppendTilesToAllocations(t *testing.T) {
	kv := tileBenchLog(t, 21)
	n := testing.AllocsPerRun(100, func() {
		if err := AppendTilesTo(kv, 21, merkleTestEntry(21), [20]byte{}, func(string, []byte) error { return nil }); err != nil {
			t.Fatal(err)
		}
	})
	if n > 2 {
		t.Fatalf("AppendTilesTo made %v allocations, want 2", n)
	}
}
