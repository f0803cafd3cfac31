package ledger_test

import (
	"os"
	"path/filepath"
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
	idxs, _ := filepath.Glob(filepath.Join(gitDir(t, dir), "objects", "pack", "*.idx"))
	for _, idx := range idxs {
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
			continue
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
		b[(at+end)/2] ^= 0x01
		os.Chmod(pack, 0o644)
		if err := os.WriteFile(pack, b, 0o444); err != nil {
			t.Fatal(err)
		}
		return pack
	}
	t.Fatalf("object %s is in no pack", id)
	return ""
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
