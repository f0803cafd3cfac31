package gitstore

import (
	"strings"
	"testing"
)

// TestTreeOrderIsGits builds, through the overlay, directories whose names
// sort differently as files and as directories ("b/" after "b.c" and before
// "b0"), in an order of writes unlike either, and has git re-sort each tree
// it wrote (git mktree of its own listing) and check the pack (git fsck
// --strict refuses an unsorted tree): both must agree with the overlay.
func TestTreeOrderIsGits(t *testing.T) {
	r := odbNewRepo(t)
	tr := NewTree(nil, ObjectID{})
	for _, p := range []string{"bc", "b/x", "b0", "b.c", "b-c", "c.d/e", "c", "c-d/f", "b/x.y/z", "b/x-y", "b/x0"} {
		if err := tr.Set(p, []byte(p+"\n")); err != nil {
			t.Fatal(err)
		}
	}
	w := NewPackWriter()
	root, err := tr.Hash(w)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.WriteTo(r.objects()); err != nil {
		t.Fatal(err)
	}
	r.git(nil, "update-ref", "refs/heads/main", string(r.git([]byte("tree\n"), "commit-tree", root.String(), "-m", "t")[:40]))
	r.git(nil, "fsck", "--strict", "--no-dangling")
	trees := []string{root.String()}
	for _, line := range strings.Split(string(r.git(nil, "ls-tree", "-r", "-t", root.String())), "\n") {
		if f := strings.Fields(line); len(f) == 4 && f[1] == "tree" {
			trees = append(trees, f[2])
		}
	}
	if len(trees) != 5 {
		t.Fatalf("git lists trees %v, want the root and 4 directories", trees)
	}
	for _, id := range trees {
		listing := r.git(nil, "ls-tree", id)
		if got := strings.TrimSpace(string(r.git(listing, "mktree"))); got != id {
			t.Errorf("tree %s:\n%s\ngit sorts it as %s", id, listing, got)
		}
	}
}
