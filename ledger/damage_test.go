package ledger_test

import (
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
)

// flipStoredByte flips one byte in the middle of the stored pack entry of
// object id (found with git show-index, the entry's extent ending where the
// next one starts) and returns the pack's path.
func flipStoredByte(t *testing.T, dir, id string) string {
	t.Helper()
	return flipPackedByte(t, dir, id, func(start, end int64) int64 { return (start + end) / 2 })
}

// flipPackedByte is flipStoredByte flipping the byte pick(start, end) of the
// entry's extent [start, end).
func flipPackedByte(t *testing.T, dir, id string, pick func(start, end int64) int64) string {
	t.Helper()
	idxs, _ := filepath.Glob(filepath.Join(gitDir(t, dir), "objects", "pack", "*.idx"))
	for _, idx := range idxs {
		if pack := flipIndexedByte(t, dir, idx, id, pick); pack != "" {
			return pack
		}
	}
	t.Fatalf("object %s is in no pack", id)
	return ""
}

// flipIndexedByte is flipPackedByte in the pack of the index idx only; it
// returns "" if that pack does not hold id.
func flipIndexedByte(t *testing.T, dir, idx, id string, pick func(start, end int64) int64) string {
	t.Helper()
	ib, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	out, err := gitTry(dir, ib, "show-index")
	if err != nil {
		t.Fatal(err)
	}
	var offs []int64
	at := int64(-1)
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		fields := strings.Fields(line)
		off, _ := strconv.ParseInt(fields[0], 10, 64)
		offs = append(offs, off)
		if fields[1] == id {
			at = off
		}
	}
	if at < 0 {
		return ""
	}
	pack := strings.TrimSuffix(idx, ".idx") + ".pack"
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	end := int64(len(b) - 20)
	sort.Slice(offs, func(i, j int) bool { return offs[i] < offs[j] })
	for _, o := range offs {
		if o > at {
			end = o
			break
		}
	}
	b[pick(at, end)] ^= 0x01
	replaceFile(t, pack, b)
	return pack
}

// One flipped byte in an old state object of the ledger (the meta blob of
// entry 3, in its pack): git fsck and git cat-file fail on it, and so must
// verify --full, naming the entry whose state holds it, with CORRUPT.
func TestVerifyFullDetectsDamagedStoredObject(t *testing.T) {
	t.Parallel()
	dir, commits := buildRepo(t, 8)
	verifyOK(t, dir, true)
	meta := strings.TrimSpace(gitIn(t, dir, nil, "rev-parse", commits[3]+":meta"))
	if meta == strings.TrimSpace(gitIn(t, dir, nil, "rev-parse", commits[4]+":meta")) {
		t.Fatal("entries 3 and 4 share their meta blob")
	}
	flipStoredByte(t, dir, meta)
	if out, err := gitTry(dir, nil, "fsck", "--strict", "--no-progress"); err == nil {
		t.Fatalf("git fsck passes the damaged pack:\n%s", out)
	}
	if out, err := gitTry(dir, nil, "cat-file", "-p", meta); err == nil {
		t.Fatalf("git cat-file reads the damaged object: %s", out)
	}
	verifyFails(t, dir, "CORRUPT", 3, "--full")
}

// flipFileByte flips the byte at(content) of the file at path.
func flipFileByte(t *testing.T, path string, at func([]byte) int) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	b[at(b)] ^= 0x01
	replaceFile(t, path, b)
}

// replaceFile writes data over the (read-only) file at path.
func replaceFile(t *testing.T, path string, data []byte) {
	t.Helper()
	os.Chmod(path, 0o644)
	if err := os.WriteFile(path, data, 0o444); err != nil {
		t.Fatal(err)
	}
}

// introducedAt maps every object of the ledger's states (each commit, its
// tree and all trees and blobs under it, as git ls-tree lists them) to the
// position of the first entry whose state holds it.
func introducedAt(t *testing.T, dir string, commits []string) map[string]int {
	t.Helper()
	at := map[string]int{}
	for seq, c := range commits {
		ids := []string{c, gitIn(t, dir, nil, "rev-parse", c+"^{tree}")}
		for _, line := range strings.Split(gitIn(t, dir, nil, "ls-tree", "-r", "-t", c), "\n") {
			if f := strings.Fields(line); len(f) >= 3 {
				ids = append(ids, f[2])
			}
		}
		for _, id := range ids {
			if _, ok := at[id]; !ok {
				at[id] = seq
			}
		}
	}
	return at
}

// onlyPack repacks the repository into one pack (with deltas when deltas,
// else none: git's own delta choices would make an object a base of
// another at random) and returns the paths of its .idx and .pack.
func onlyPack(t *testing.T, dir string, deltas bool) (idx, pack string) {
	t.Helper()
	args := []string{"repack", "-adfq", "--window=0"}
	if deltas {
		args = []string{"repack", "-adfq", "--depth=50", "--window=50"}
	}
	gitIn(t, dir, nil, args...)
	idxs, _ := filepath.Glob(filepath.Join(gitDir(t, dir), "objects", "pack", "*.idx"))
	if len(idxs) != 1 {
		t.Fatalf("repacked into %v", idxs)
	}
	return idxs[0], strings.TrimSuffix(idxs[0], ".idx") + ".pack"
}

// Damage wherever git keeps a ledger object: each is refused by verify
// --full with CORRUPT at the first entry whose state relies on the damaged
// bytes (FORMAT.md §10, step 9), and git fsck fails on each as well.
func TestVerifyFullDetectsDamagedStorage(t *testing.T) {
	t.Parallel()
	meta := func(t *testing.T, dir string, commits []string) string {
		return gitIn(t, dir, nil, "rev-parse", commits[3]+":meta")
	}
	for _, tc := range []struct {
		name   string
		damage func(t *testing.T, dir string, commits []string) (seq int)
	}{
		// The pack entry of entry 3's meta blob (tally's own packs, no
		// deltas): its header's first byte and its zlib stream's last.
		{"entry-header", func(t *testing.T, dir string, commits []string) int {
			flipPackedByte(t, dir, meta(t, dir, commits), func(start, _ int64) int64 { return start })
			return 3
		}},
		{"entry-end", func(t *testing.T, dir string, commits []string) int {
			flipPackedByte(t, dir, meta(t, dir, commits), func(_, end int64) int64 { return end - 1 })
			return 3
		}},
		// After git repack -f, the middle of an object that git stores as
		// a delta base: every object built on it is damaged too, and the
		// first entry holding any of them fails.
		{"delta-base", func(t *testing.T, dir string, commits []string) int {
			idx, _ := onlyPack(t, dir, true)
			at := introducedAt(t, dir, commits)
			baseOf := map[string]string{}
			for _, line := range strings.Split(gitIn(t, dir, nil, "verify-pack", "-v", idx), "\n") {
				if f := strings.Fields(line); len(f) == 7 && len(f[0]) == 40 {
					baseOf[f[0]] = f[6]
				}
			}
			var base string
			for _, b := range baseOf {
				if _, isDelta := baseOf[b]; isDelta {
					base = b // a base that is itself a delta: a chain of three
					break
				}
			}
			if base == "" {
				t.Fatal("git made no delta chain of three objects")
			}
			seq := len(commits)
			for id, n := range at {
				for cur := id; cur != ""; cur = baseOf[cur] {
					if cur == base {
						seq = min(seq, n)
					}
				}
			}
			flipStoredByte(t, dir, base)
			return seq
		}},
		// The index: the CRC32 it records for the meta blob's entry, and
		// its own checksum. Either makes the whole pack untrustworthy.
		{"index-crc", func(t *testing.T, dir string, commits []string) int {
			idx, _ := onlyPack(t, dir, false)
			flipFileByte(t, idx, func(b []byte) int {
				var pos int
				for i, line := range strings.Split(gitIn(t, dir, b, "show-index"), "\n") {
					if strings.Fields(line)[1] == meta(t, dir, commits) {
						pos = i
					}
				}
				n := int(binary.BigEndian.Uint32(b[8+4*255:]))
				return 8 + 256*4 + 20*n + 4*pos // fanout, names, then the CRC32s
			})
			return 0
		}},
		{"index-checksum", func(t *testing.T, dir string, commits []string) int {
			idx, _ := onlyPack(t, dir, false)
			flipFileByte(t, idx, func(b []byte) int { return len(b) - 1 })
			return 0
		}},
		// A loose object: every pack unpacked, then a byte in the middle of
		// the meta blob's file.
		{"loose", func(t *testing.T, dir string, commits []string) int {
			_, pack := onlyPack(t, dir, false)
			b, err := os.ReadFile(pack)
			if err != nil {
				t.Fatal(err)
			}
			os.Remove(pack)
			os.Remove(strings.TrimSuffix(pack, ".pack") + ".idx")
			gitIn(t, dir, b, "unpack-objects", "-q")
			id := meta(t, dir, commits)
			flipFileByte(t, filepath.Join(gitDir(t, dir), "objects", id[:2], id[2:]), func(b []byte) int { return len(b) / 2 })
			return 3
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, commits := buildRepo(t, 8)
			verifyOK(t, dir, true)
			seq := tc.damage(t, dir, commits)
			if out, err := gitTry(dir, nil, "fsck", "--strict", "--no-progress"); err == nil {
				t.Fatalf("git fsck passes the damage:\n%s", out)
			}
			verifyFails(t, dir, "CORRUPT", seq, "--full")
		})
	}
}

// A full verify checks the root tree and the entry blob of each entry at
// the pack entry it read them from, without looking them up again
// (gitstore.Cursor.CheckStoredWhere). An entry whose bytes still inflate
// but whose CRC32 the index (its own checksum made right again) records
// otherwise is damage that reads do not see: an incremental verify passes,
// and verify --full must refuse it with CORRUPT at the entry, on that path
// as on the lookup's.
func TestVerifyFullChecksReadObjectsWhereRead(t *testing.T) {
	t.Parallel()
	for _, object := range []string{"^{tree}", ":entry"} {
		t.Run(object, func(t *testing.T) {
			t.Parallel()
			dir, commits := buildRepo(t, 8)
			verifyOK(t, dir, true)
			idx, _ := onlyPack(t, dir, false)
			id := strings.TrimSpace(gitIn(t, dir, nil, "rev-parse", commits[3]+object))
			seq := introducedAt(t, dir, commits)[id]
			if seq != 3 {
				t.Fatalf("%s%s is first in entry %d", commits[3], object, seq)
			}
			damageCRC(t, dir, idx, id)
			os.Remove(filepath.Join(gitDir(t, dir), "tally", "verified"))
			verifyOK(t, dir, false)
			verifyFails(t, dir, "CORRUPT", 3, "--full")
		})
	}
}

// damageCRC flips a bit of the CRC32 that the pack index idx records for
// object id and makes the index's checksum right again: git still reads the
// object, and git verify-pack fails.
func damageCRC(t *testing.T, dir, idx, id string) {
	t.Helper()
	b, err := os.ReadFile(idx)
	if err != nil {
		t.Fatal(err)
	}
	pos := -1
	for i, line := range strings.Split(strings.TrimSpace(gitIn(t, dir, b, "show-index")), "\n") {
		if strings.Fields(line)[1] == id {
			pos = i
		}
	}
	if pos < 0 {
		t.Fatalf("%s is not in %s", id, idx)
	}
	n := int(binary.BigEndian.Uint32(b[8+4*255:]))
	b[8+256*4+20*n+4*pos] ^= 0x01 // fanout, names, then the CRC32s
	sum := sha1.Sum(b[:len(b)-20])
	copy(b[len(b)-20:], sum[:])
	replaceFile(t, idx, b)
	if out, err := gitTry(dir, nil, "cat-file", "-p", id); err != nil {
		t.Fatalf("git cannot read %s, so the damage is not to the CRC alone: %v\n%s", id, err, out)
	}
	if out, err := gitTry(dir, nil, "verify-pack", idx); err == nil {
		t.Fatalf("git verify-pack passes the damaged index:\n%s", out)
	}
}

// With several damaged objects in one range, verify --full names the one
// that checking each entry's objects in turn meets first, whatever else
// fails after it and whenever it checks them: the oldest entry's, and of
// one entry's the object its state holds below the other (a blob before
// the tree holding it); a later entry that cannot even be read does not
// hide an earlier damaged object that can.
func TestVerifyFullNamesTheFirstDamagedObject(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name    string
		damaged []string // revisions whose stored objects are damaged by their CRC32
		unread  string   // a revision whose stored bytes are damaged so that it cannot be read
		seq     int
		named   string // the revision the error names
	}{
		{"two entries", []string{"6:meta", "3:meta"}, "", 3, "3:meta"},
		{"a blob and its tree", []string{"5^{tree}", "5:meta"}, "", 5, "5:meta"},
		{"a tree read ahead, then a later blob", []string{"5:meta", "4^{tree}"}, "", 4, "4^{tree}"},
		{"an entry read ahead, then a later blob", []string{"5:meta", "4:entry"}, "", 4, "4:entry"},
		{"a later entry unreadable", []string{"3:meta"}, "7:entry", 3, "3:meta"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			dir, commits := buildRepo(t, 10)
			idx, _ := onlyPack(t, dir, false)
			rev := func(r string) string {
				n, _ := strconv.Atoi(r[:1])
				return strings.TrimSpace(gitIn(t, dir, nil, "rev-parse", commits[n]+r[1:]))
			}
			at := introducedAt(t, dir, commits)
			for _, r := range append(slices.Clone(tc.damaged), tc.unread) {
				if r != "" && strconv.Itoa(at[rev(r)]) != r[:1] {
					t.Fatalf("%s is first in entry %d", r, at[rev(r)])
				}
			}
			for _, r := range tc.damaged {
				damageCRC(t, dir, idx, rev(r))
			}
			if tc.unread != "" {
				flipStoredByte(t, dir, rev(tc.unread))
				if out, err := gitTry(dir, nil, "cat-file", "-p", rev(tc.unread)); err == nil {
					t.Fatalf("git cat-file reads the damaged %s: %s", tc.unread, out)
				}
			}
			r := verifyFails(t, dir, "CORRUPT", tc.seq, "--full")
			msg, _ := r.JSON["error"].(map[string]any)["message"].(string)
			for _, d := range append(slices.Clone(tc.damaged), tc.unread) {
				if d != "" && strings.Contains(msg, rev(d)) != (d == tc.named) {
					t.Errorf("the error names %s: %v, want %v: %s", d, !(d == tc.named), d == tc.named, msg)
				}
			}
		})
	}
}
