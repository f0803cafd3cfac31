package gitstore

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// storedEntry is one object of a pack as git verify-pack -v lists it.
type storedEntry struct {
	id        ObjectID
	off, size uint64 // the entry's extent in the pack
	base      string // the delta base's id, "" for a whole object
}

// verifyPackEntries lists the pack's entries by git's own reading of it.
func verifyPackEntries(t *testing.T, r *odbRepo, idx string) []storedEntry {
	t.Helper()
	var out []storedEntry
	for _, line := range strings.Split(string(r.git(nil, "verify-pack", "-v", idx)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || len(f[0]) != 40 {
			continue
		}
		id, err := ParseObjectID(f[0])
		if err != nil {
			t.Fatal(err)
		}
		e := storedEntry{id: id}
		e.size, _ = strconv.ParseUint(f[3], 10, 64)
		e.off, _ = strconv.ParseUint(f[4], 10, 64)
		if len(f) == 7 {
			e.base = f[6]
		}
		out = append(out, e)
	}
	return out
}

// storedFailures opens a fresh database on r and returns the set of objects
// of objs whose CheckStored fails.
func storedFailures(t *testing.T, r *odbRepo, objs []odbGitObject) map[ObjectID]bool {
	t.Helper()
	db, err := OpenObjectDB(r.objects(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	failed := map[ObjectID]bool{}
	for _, o := range objs {
		if db.Cursor().CheckStored(o.id) != nil {
			failed[o.id] = true
		}
	}
	return failed
}

// eachFlip calls check(i, size) with byte i of the file at path (of size
// bytes) flipped, for every byte in turn, and then restores the file.
func eachFlip(t *testing.T, path string, check func(i, size int)) {
	t.Helper()
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for i := range good {
		b := bytes.Clone(good)
		b[i] ^= 0x01
		rewrite(t, path, b)
		check(i, len(good))
	}
	rewrite(t, path, good)
}

// rewrite replaces the read-only file at path with data.
func rewrite(t *testing.T, path string, data []byte) {
	t.Helper()
	os.Remove(path)
	if err := os.WriteFile(path, data, 0o444); err != nil {
		t.Fatal(err)
	}
}

// Every single flipped byte of a pack with ofs-deltas and of its index is
// found by CheckStored without inflating anything: a byte of an entry fails
// exactly the objects that git's own listing says are stored in that entry
// or built on it as delta bases, and nothing else; a byte of the pack's
// header or trailer, or of the index anywhere, fails every object.
func TestCheckStoredEveryByte(t *testing.T) {
	for _, tc := range []struct {
		name string
		args []string
	}{
		{"ofs", []string{"repack", "-adfq", "--depth=50", "--window=30"}},
		{"ref", []string{"-c", "repack.useDeltaBaseOffset=false", "repack", "-adfq", "--depth=50", "--window=30"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r := odbNewRepo(t)
			text := strings.Repeat("some text that deltas well\n", 40)
			for i := range 4 {
				r.commitFile("a.txt", text+strings.Repeat("one more line\n", i))
			}
			r.commitFile("b.bin", string(odbRandom(4, 300)))
			r.git(nil, tc.args...)
			objs := r.catFile()
			idxPath := odbOnlyPack(t, r)
			packPath := strings.TrimSuffix(idxPath, ".idx") + ".pack"
			entries := verifyPackEntries(t, r, idxPath)
			if len(entries) != len(objs) {
				t.Fatalf("verify-pack lists %d objects, cat-file %d", len(entries), len(objs))
			}
			// Which objects a damaged entry takes down: its own and, through
			// the delta links git lists, every object built on it.
			byID := map[string]storedEntry{}
			deltas := 0
			for _, e := range entries {
				byID[e.id.String()] = e
				if e.base != "" {
					deltas++
				}
			}
			if deltas < 3 {
				t.Fatalf("only %d deltas in the pack", deltas)
			}
			dependsOn := func(e storedEntry, owner ObjectID) bool {
				for ; ; e = byID[e.base] {
					if e.id == owner {
						return true
					}
					if e.base == "" {
						return false
					}
				}
			}
			if f := storedFailures(t, r, objs); len(f) != 0 {
				t.Fatalf("intact pack: %d objects fail", len(f))
			}
			eachFlip(t, packPath, func(i, size int) {
				failed := storedFailures(t, r, objs)
				var owner *storedEntry
				for k := range entries {
					if e := &entries[k]; uint64(i) >= e.off && uint64(i) < e.off+e.size {
						owner = e
					}
				}
				for _, e := range entries {
					want := owner == nil || dependsOn(e, owner.id)
					if failed[e.id] != want {
						t.Fatalf("pack byte %d of %d flipped: CheckStored(%s) failed %v, want %v", i, size, e.id, failed[e.id], want)
					}
				}
			})
			eachFlip(t, idxPath, func(i, size int) {
				if failed := storedFailures(t, r, objs); len(failed) != len(objs) {
					t.Fatalf("index byte %d of %d flipped: %d of %d objects fail", i, size, len(failed), len(objs))
				}
			})
			if f := storedFailures(t, r, objs); len(f) != 0 {
				t.Fatalf("restored pack: %d objects fail", len(f))
			}
		})
	}
}

// A flipped byte anywhere in a loose object fails that object only.
func TestCheckStoredLoose(t *testing.T) {
	r := odbNewRepo(t)
	r.commitFile("a.txt", strings.Repeat("loose text\n", 50))
	objs := r.catFile()
	hex := strings.TrimSpace(string(r.git(nil, "rev-parse", "HEAD:a.txt")))
	id, err := ParseObjectID(hex)
	if err != nil {
		t.Fatal(err)
	}
	eachFlip(t, filepath.Join(r.objects(), hex[:2], hex[2:]), func(i, size int) {
		if failed := storedFailures(t, r, objs); len(failed) != 1 || !failed[id] {
			t.Fatalf("loose byte %d of %d flipped: failures %v, want only %s", i, size, failed, id)
		}
	})
}
