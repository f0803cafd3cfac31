package gitstore

import (
	"slices"
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

// TestSetIDIsGitsBlobID: the id SetID returns is the one git gives the
// blob, and the tree it leaves is the tree Set leaves, for new paths, for
// overwrites and with TrackNew (which then names the blob to HashNew).
func TestSetIDIsGitsBlobID(t *testing.T) {
	r := odbNewRepo(t)
	viaSet, viaID := NewTree(nil, ObjectID{}), NewTree(nil, ObjectID{})
	viaID.TrackNew()
	for i, p := range []string{"entry", "log/0/x1/f", "entry", "meta", "log/0/x1/f"} {
		data := []byte(strings.Repeat(p, i+1) + "\n")
		if err := viaSet.Set(p, data); err != nil {
			t.Fatal(err)
		}
		id, err := viaID.SetID(p, data)
		if err != nil {
			t.Fatal(err)
		}
		if git := strings.TrimSpace(string(r.git(data, "hash-object", "--stdin"))); id.String() != git {
			t.Fatalf("SetID(%s) = %s, git hash-object gives %s", p, id, git)
		}
		var named []ObjectID
		got, _ := viaID.HashNew(func(n ObjectID) { named = append(named, n) })
		want, _ := viaSet.Hash(nil)
		if got != want {
			t.Fatalf("after %s: SetID's tree %s, Set's %s", p, got, want)
		}
		if !slices.Contains(named, id) {
			t.Fatalf("HashNew named %v, not the blob %s SetID made", named, id)
		}
	}
	if _, err := viaID.SetID("log", []byte("x")); err == nil {
		t.Fatal("SetID over a directory succeeded")
	}
}
