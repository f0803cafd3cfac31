package gitstore

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

// TestTreePatchedEncodingIsAFreshOne holds the overlay's patched encodings
// (a node hashed again after only ids changed writes them into its last
// encoding) to encoding every node anew: after each round of random writes,
// overwrites and deletes, in directories of up to 40 entries three levels
// deep, over a stored tree read back from a real repository (with an
// executable file, whose overwrite changes its mode), the overlay's id must
// be that of a fresh overlay given the same files, and at the end git must
// list exactly those files and find every tree the overlay wrote well formed.
func TestTreePatchedEncodingIsAFreshOne(t *testing.T) {
	r := odbNewRepo(t)
	blob := strings.TrimSpace(string(r.git([]byte("x\n"), "hash-object", "-w", "--stdin")))
	sub := strings.TrimSpace(string(r.git([]byte("100755 blob "+blob+"\trun\n100644 blob "+blob+"\tf0\n"), "mktree")))
	start := strings.TrimSpace(string(r.git([]byte("040000 tree "+sub+"\td0\n100755 blob "+blob+"\tx\n"), "mktree")))
	startID, err := ParseObjectID(start)
	if err != nil {
		t.Fatal(err)
	}
	db := odbOpen(t, r.objects())
	files := map[string]string{"d0/run": "x\n", "d0/f0": "x\n", "x": "x\n"}
	modes := map[string]string{"d0/run": "100755", "d0/f0": "100644", "x": "100755"}
	tr := NewTree(db, startID)
	rng := rand.New(rand.NewPCG(15, 6))
	path := func() string {
		p := fmt.Sprintf("f%d", rng.IntN(40))
		for depth := rng.IntN(4); depth > 0; depth-- {
			p = fmt.Sprintf("d%d/", rng.IntN(3)) + p
		}
		return p
	}
	w := NewPackWriter()
	var root ObjectID
	for round := range 300 {
		for range (1 + rng.IntN(4)) * min(1, abs(round-150)) { // none at round 150
			p := path()
			switch rng.IntN(6) {
			case 0:
				if err := tr.Delete(p); err != nil {
					t.Fatal(err)
				}
				delete(files, p)
				delete(modes, p)
			default:
				data := fmt.Sprintf("%s %d\n", p, rng.IntN(1000))
				if err := tr.Set(p, []byte(data)); err != nil {
					continue // a directory there, or a file where p needs one
				}
				files[p], modes[p] = data, "100644"
			}
		}
		// An executable overwritten, alone in its round: its entry's mode,
		// so its node's encoding, changes (not its length).
		if round == 150 {
			if err := tr.Set("x", []byte("now 644\n")); err != nil {
				t.Fatal(err)
			}
			files["x"], modes["x"] = "now 644\n", "100644"
		}
		root, _ = tr.Hash(w)
		// The same files through a fresh overlay of the stored tree,
		// each of whose nodes is hashed once, so encoded whole.
		fresh := NewTree(db, startID)
		for _, p := range []string{"d0/run", "d0/f0", "x"} {
			if _, ok := files[p]; !ok {
				if err := fresh.Delete(p); err != nil {
					t.Fatal(err)
				}
			}
		}
		for _, p := range slices.Sorted(maps.Keys(files)) {
			if modes[p] == "100644" {
				if err := fresh.Set(p, []byte(files[p])); err != nil {
					t.Fatal(err)
				}
			}
		}
		if want, _ := fresh.Hash(nil); root != want {
			t.Fatalf("round %d: the overlay hashes to %s, a fresh one with the same files to %s", round, root, want)
		}
	}
	if _, err := w.WriteTo(r.objects()); err != nil {
		t.Fatal(err)
	}
	r.git(nil, "update-ref", "refs/heads/main", string(r.git([]byte("tree\n"), "commit-tree", root.String(), "-m", "t")[:40]))
	r.git(nil, "fsck", "--strict", "--no-dangling")
	got := map[string]string{}
	for _, line := range strings.Split(strings.TrimSpace(string(r.git(nil, "ls-tree", "-r", root.String()))), "\n") {
		meta, p, _ := strings.Cut(line, "\t")
		f := strings.Fields(meta)
		got[p] = f[0] + " " + string(r.git(nil, "cat-file", "blob", f[2]))
	}
	want := map[string]string{}
	for p, data := range files {
		want[p] = modes[p] + " " + data
	}
	if !maps.Equal(got, want) {
		t.Fatalf("git lists %d files, the overlay was given %d:\ngit: %v\nwant: %v", len(got), len(want), got, want)
	}
}

func abs(n int) int { return max(n, -n) }
