package gitstore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// Compaction keeps the number of packs bounded as single-append packs pile
// up, and every object stays readable — by git, not only by this package.
func TestCompactBoundsPacksAndKeepsObjects(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("git", "init", "-q", "--bare", dir).CombinedOutput(); err != nil {
		t.Fatalf("git init: %v %s", err, out)
	}
	objects := dir + "/objects"
	db, err := OpenObjectDB(objects, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
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
