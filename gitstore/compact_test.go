package gitstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// bareObjectDB opens the object directory of a new bare repository,
// closed when the test ends.
func bareObjectDB(t *testing.T) (objects string, db *ObjectDB) {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	objects = dir + "/objects"
	db, err := OpenObjectDB(objects, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return objects, db
}

// Compaction keeps the number of packs bounded as single-append packs pile
// up, and every object stays readable — by git, not only by this package.
func TestCompactBoundsPacksAndKeepsObjects(t *testing.T) {
	objects, db := bareObjectDB(t)
	dir := filepath.Dir(objects)
	rng := rand.New(rand.NewPCG(1, 1))
	want := map[ObjectID][]byte{}
	maxPacks := 0
	// Progress counts the packs of each round up to its total; a new round
	// starts only after the last one reached its total.
	calls, prevDone, prevTotal := 0, 0, 0
	progress := func(done, total int) {
		calls++
		if done < 1 || done > total || (done <= prevDone && prevDone != prevTotal) {
			t.Errorf("progress %d/%d after %d/%d", done, total, prevDone, prevTotal)
		}
		prevDone, prevTotal = done, total
	}
	for i := 0; i < 300; i++ {
		pw := NewPackWriter()
		for j := 0; j < 1+rng.IntN(20); j++ {
			data := []byte(fmt.Sprintf("append %d object %d %x", i, j, rng.Uint64()))
			if rng.IntN(8) == 0 {
				data = bytes.Repeat(data, 200) // some bigger packs
			}
			want[pw.Add(BlobObject, data)] = data
		}
		if _, err := pw.WriteTo(objects); err != nil {
			t.Fatal(err)
		}
		if i%5 == 4 {
			if _, err := Compact(db, objects, progress); err != nil {
				t.Fatal(err)
			}
			packs, _ := filepath.Glob(objects + "/pack/*.idx")
			maxPacks = max(maxPacks, len(packs))
		}
	}
	if calls == 0 || prevDone != prevTotal {
		t.Errorf("%d progress calls, the last at %d/%d", calls, prevDone, prevTotal)
	}
	if maxPacks > 24 {
		t.Errorf("up to %d packs after compaction; the level rule allows at most 3 per level", maxPacks)
	}
	packs, _, _ := compactCandidates(objects)
	levels := map[int]int{}
	for _, p := range packs {
		levels[p.level]++
		if levels[p.level] >= compactLevelFanout {
			t.Errorf("level %d still holds %d packs", p.level, levels[p.level])
		}
	}
	// git sees every object, byte for byte.
	var in strings.Builder
	for id := range want {
		in.WriteString(id.String() + "\n")
	}
	cmd := exec.Command("git", "--git-dir", dir, "cat-file", "--batch")
	cmd.Stdin = strings.NewReader(in.String())
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git cat-file: %v", err)
	}
	if strings.Contains(string(out), "missing") {
		t.Fatal("git misses objects after compaction")
	}
	for id, data := range want {
		typ, got, err := db.Read(id)
		if err != nil || typ != BlobObject || !bytes.Equal(got, data) {
			t.Fatalf("read %s after compaction: %v", id, err)
		}
	}
	if out, err := exec.Command("git", "--git-dir", dir, "fsck", "--strict", "--no-dangling").CombinedOutput(); err != nil {
		t.Fatalf("git fsck: %v %s", err, out)
	}
}

func TestCompactLevels(t *testing.T) {
	for _, c := range []struct {
		size  int64
		level int
	}{{1, 0}, {16 << 10, 0}, {16<<10 + 1, 1}, {64 << 10, 1}, {64<<10 + 1, 2}, {256 << 10, 2}, {256<<10 + 1, 3}, {1 << 20, 3}, {1<<20 + 1, 4}} {
		if got := compactLevel(c.size); got != c.level {
			t.Errorf("compactLevel(%d) = %d, want %d", c.size, got, c.level)
		}
	}
	// Four packs at level 0 are picked; three are not; a level-1 quartet takes
	// the level-0 packs along.
	mk := func(levels ...int) []compactPack {
		var ps []compactPack
		for i, l := range levels {
			ps = append(ps, compactPack{name: fmt.Sprint(i), level: l, size: int64(l*100 + i)})
		}
		return ps
	}
	if _, ok := compactPick(mk(0, 0, 0, 1, 1)); ok {
		t.Error("picked with three packs per level")
	}
	if p, ok := compactPick(mk(0, 0, 0, 0, 1)); !ok || len(p) != 4 {
		t.Errorf("pick = %v, %v; want the four level-0 packs", p, ok)
	}
	if p, ok := compactPick(mk(0, 1, 1, 1, 1, 2)); !ok || len(p) != 5 {
		t.Errorf("pick = %v, %v; want level 0 and the four level-1 packs", p, ok)
	}
}

// packEntryBytes returns the stored bytes of each entry of the pack at path
// (without extension), by object id: from its offset to the next entry's or
// to the pack's trailer.
func packEntryBytes(t *testing.T, path string) map[ObjectID][]byte {
	t.Helper()
	ib, err := os.ReadFile(path + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(path + ".pack")
	if err != nil {
		t.Fatal(err)
	}
	x, err := packParseIndex(ib)
	if err != nil {
		t.Fatal(err)
	}
	offs := map[uint64]ObjectID{}
	var sorted []uint64
	for i := 0; i < x.n; i++ {
		off, _, err := x.offset(i)
		if err != nil {
			t.Fatal(err)
		}
		var id ObjectID
		copy(id[:], ib[packIdxHeader+20*i:])
		offs[off] = id
		sorted = append(sorted, off)
	}
	slices.Sort(sorted)
	out := map[ObjectID][]byte{}
	for k, off := range sorted {
		end := uint64(len(data) - 20)
		if k+1 < len(sorted) {
			end = sorted[k+1]
		}
		out[offs[off]] = data[off:end]
	}
	return out
}

// A merge copies each object stored whole as its pack stores it, byte for
// byte, where it used to inflate and compress every object again (nearly all
// of a compaction's CPU). The packs here are git's, written uncompressed
// (pack.compression=0), which tally's compressor would never reproduce, and
// with deltas, which the merge resolves and stores whole. git reads every
// object of the merged pack the same as before.
func TestCompactCopiesStoredEntries(t *testing.T) {
	r := odbNewRepo(t)
	text := strings.Repeat("a line of text that deltas well against its neighbours\n", 40)
	for i := 0; i < compactLevelFanout; i++ {
		r.commitFile("a.txt", fmt.Sprintf("%s%d\n", text, i))
		r.commitFile("a.txt", fmt.Sprintf("%s%d and one more line\n", text, i))
		r.git(nil, "-c", "pack.compression=0", "repack", "-dq", "--window=10", "--depth=10")
	}
	before := r.catFile()
	packs, _ := filepath.Glob(filepath.Join(r.objects(), "pack", "*.idx"))
	if len(packs) != compactLevelFanout {
		t.Fatalf("%d packs, want %d", len(packs), compactLevelFanout)
	}
	stored := map[ObjectID][]byte{} // the entries stored whole, as git wrote them
	deltas := 0
	for _, idx := range packs {
		for id, e := range packEntryBytes(t, strings.TrimSuffix(idx, ".idx")) {
			if kind := e[0] >> 4 & 7; kind == packOfsDelta || kind == packRefDelta {
				deltas++
			} else if _, dup := stored[id]; !dup {
				stored[id] = e
			}
		}
	}
	if deltas == 0 {
		t.Fatal("git wrote no deltas: the test would not cover them")
	}
	db := odbOpen(t, r.objects())
	rep, err := Compact(db, r.objects(), nil)
	if err != nil {
		t.Fatal(err)
	}
	after, _ := filepath.Glob(filepath.Join(r.objects(), "pack", "*.idx"))
	if rep.Written != 1 || len(after) != 1 {
		t.Fatalf("compaction wrote %d packs, %d left; want the %d merged into one", rep.Written, len(after), compactLevelFanout)
	}
	merged := packEntryBytes(t, strings.TrimSuffix(after[0], ".idx"))
	for id, e := range stored {
		if !bytes.Equal(merged[id], e) {
			t.Fatalf("object %s: merged entry of %d bytes differs from the %d stored", id, len(merged[id]), len(e))
		}
	}
	for id, e := range merged {
		if kind := e[0] >> 4 & 7; kind == packOfsDelta || kind == packRefDelta {
			t.Fatalf("object %s is a delta in the merged pack", id)
		}
	}
	if got := r.catFile(); !slices.EqualFunc(got, before, func(a, b odbGitObject) bool {
		return a.id == b.id && a.typ == b.typ && bytes.Equal(a.data, b.data)
	}) {
		t.Fatalf("git reads %d objects after the merge, %d before, or different ones", len(got), len(before))
	}
	r.git(nil, "fsck", "--strict", "--no-dangling")
}

// A pack entry whose bytes are not what its index recorded is refused, and
// nothing is merged away. Here the entry of object A was overwritten with a
// valid entry of the same length holding B: a merge that inflated it kept B
// under B's id and dropped A with the old pack.
func TestCompactRefusesDamagedEntry(t *testing.T) {
	dir := t.TempDir()
	objects := filepath.Join(dir, "objects")
	if err := os.MkdirAll(filepath.Join(objects, "pack"), 0o777); err != nil {
		t.Fatal(err)
	}
	var damaged ObjectID
	for i := 0; i < compactLevelFanout; i++ {
		a, b := odbRandom(uint64(10+i), 300), odbRandom(uint64(20+i), 300)
		ea, eb := odbRawEntry(int8(BlobObject), nil, a), odbRawEntry(int8(BlobObject), nil, b)
		ida := HashObject(BlobObject, a)
		pack, idx := odbPackBytes([]ObjectID{ida}, [][]byte{ea})
		if i == 1 {
			if len(ea) != len(eb) {
				t.Fatalf("entries of %d and %d bytes", len(ea), len(eb))
			}
			copy(pack[12:], eb)
			damaged = ida
		}
		odbInstallPack(t, objects, pack, idx)
	}
	before, _ := filepath.Glob(filepath.Join(objects, "pack", "*"))
	db := odbOpen(t, objects)
	if _, err := Compact(db, objects, nil); err == nil || !strings.Contains(err.Error(), "CRC32") {
		t.Fatalf("Compact = %v, want the damaged entry refused", err)
	}
	after, _ := filepath.Glob(filepath.Join(objects, "pack", "*"))
	if !slices.Equal(before, after) {
		t.Fatalf("packs %v after the refused merge, want %v", after, before)
	}
	if !db.Has(damaged) {
		t.Fatalf("object %s is gone", damaged)
	}
}

// A pack that a rescan retires (another process's compaction removed it)
// stays mapped while a HoldRetired is in force, whatever reads end
// meanwhile, and is unmapped when the hold ends: a writer under the writer
// lock leaves the unmapping for after its release.
func TestHoldRetiredDefersUnmap(t *testing.T) {
	objects, db := bareObjectDB(t)
	write := func(data string) (ObjectID, string) {
		pw := NewPackWriter()
		id := pw.Add(BlobObject, []byte(data))
		name, err := pw.WriteTo(objects)
		if err != nil {
			t.Fatal(err)
		}
		return id, name
	}
	old, oldPack := write("in the pack compaction removes")
	if _, _, err := db.Read(old); err != nil {
		t.Fatal(err)
	}
	mapped := func() bool {
		db.mu.Lock()
		defer db.mu.Unlock()
		for _, p := range append(slices.Clone(db.packs), db.retired...) {
			if filepath.Base(p.path) == oldPack && p.m.Load() != nil {
				return true
			}
		}
		return false
	}
	if !mapped() {
		t.Fatal("the pack read is not mapped")
	}
	end := db.HoldRetired()
	if err := RemovePack(objects, oldPack); err != nil {
		t.Fatal(err)
	}
	fresh, _ := write("in a pack written since")
	if _, _, err := db.Read(fresh); err != nil { // a miss: the rescan retires the removed pack
		t.Fatal(err)
	}
	if db.retiredN.Load() != 1 || !mapped() {
		t.Fatalf("during the hold: %d packs retired, the removed one mapped %v; want 1 and true", db.retiredN.Load(), mapped())
	}
	end()
	if db.retiredN.Load() != 0 || mapped() {
		t.Fatalf("after the hold: %d packs retired, the removed one mapped %v; want 0 and false", db.retiredN.Load(), mapped())
	}
}
