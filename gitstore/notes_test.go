package gitstore

import (
	"slices"
	"strings"
	"testing"
)

// TestUnionNotes: notes written by git itself (git notes append) in two
// histories are merged line by line: theirs' text stays first and whole,
// ours' missing lines follow in ours' order, a line keep refuses stays out,
// a note only ours has is kept at ours' path, and one at a fan-out path in
// theirs stays there (one note path per object). MergeNotes then makes the
// local ref hold both: a merge commit whose tree git itself reads back.
func TestUnionNotes(t *testing.T) {
	r := odbNewRepo(t)
	r.commitFile("a", "a")
	a := strings.TrimSpace(string(r.git(nil, "rev-parse", "HEAD")))
	r.commitFile("b", "b")
	b := strings.TrimSpace(string(r.git(nil, "rev-parse", "HEAD")))
	r.commitFile("c", "c")
	c := strings.TrimSpace(string(r.git(nil, "rev-parse", "HEAD")))

	// theirs: a note on a (flat) and one on c at a fan-out path.
	r.git(nil, "notes", "--ref", "theirs", "append", "-m", "t1", a)
	repo, err := Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	db, err := repo.Objects()
	if err != nil {
		t.Fatal(err)
	}
	treeOfRef := func(ref string) ObjectID {
		id, err := repo.ReadRef(ref)
		if err != nil {
			t.Fatal(err)
		}
		cm, err := db.ReadCommit(id)
		if err != nil {
			t.Fatal(err)
		}
		return cm.Tree
	}
	theirs := NewTree(db, treeOfRef("refs/notes/theirs"))
	if err := theirs.Set(c[:2]+"/"+c[2:], []byte("t3\n")); err != nil {
		t.Fatal(err)
	}
	pw := NewPackWriter()
	theirTree, err := theirs.Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	pack, err := pw.WriteTo(repo.ObjectDir)
	if err != nil {
		t.Fatal(err)
	}
	db.AddPack(pack)

	// ours: the same note on a plus two lines, one keep refuses; a note
	// only on b; a line on c.
	for _, m := range []string{"o1", "t1", "secret", "o2"} {
		r.git(nil, "notes", "--ref", "ours", "append", "-m", m, a)
	}
	r.git(nil, "notes", "--ref", "ours", "append", "-m", "o-b", b)
	r.git(nil, "notes", "--ref", "ours", "append", "-m", "o-c", c)
	ourTree := treeOfRef("refs/notes/ours")

	keep := func(obj, line string) bool { return line != "secret" }
	out, gained, err := UnionNotes(db, theirTree, ourTree, keep)
	if err != nil {
		t.Fatal(err)
	}
	slices.Sort(gained)
	if want := slices.Sorted(slices.Values([]string{a, b, c})); !slices.Equal(gained, want) {
		t.Fatalf("gained %v, want %v", gained, want)
	}
	for path, want := range map[string]string{
		a:                   "t1\no1\no2\n", // git's blank separator lines are no note lines
		b:                   "o-b\n",
		c[:2] + "/" + c[2:]: "t3\no-c\n",
	} {
		if got, ok, err := out.Get(path); err != nil || !ok || string(got) != want {
			t.Errorf("%s: %q (%v %v), want %q", path, got, ok, err, want)
		}
	}
	if _, ok, _ := out.Get(c); ok {
		t.Errorf("note of c also at the flat path: two note paths for one object")
	}

	// MergeNotes: the local ref "ours" takes in theirs; git reads both.
	theirCommit := pw2Commit(t, repo, db, theirTree)
	if err := repo.MergeNotes(t.TempDir()+"/notes.lock", "refs/notes/ours", theirCommit, Ident{Name: "t", Email: "t", When: 1, TZ: "+0000"}); err != nil {
		t.Fatal(err)
	}
	note := string(r.git(nil, "notes", "--ref", "ours", "show", c))
	if note != "t3\no-c\n" {
		t.Errorf("git notes show c after MergeNotes: %q", note)
	}
	parents := strings.Fields(string(r.git(nil, "log", "-1", "--format=%P", "refs/notes/ours")))
	if len(parents) != 2 || parents[0] != theirCommit.String() {
		t.Errorf("merge parents %v, want theirs first then ours", parents)
	}
}

// pw2Commit writes a notes commit of tree and returns it.
func pw2Commit(t *testing.T, repo *Repo, db *ObjectDB, tree ObjectID) ObjectID {
	t.Helper()
	pw := NewPackWriter()
	id := pw.Add(CommitObject, (&Commit{Tree: tree, Author: Ident{Name: "t", Email: "t", When: 1, TZ: "+0000"}, Committer: Ident{Name: "t", Email: "t", When: 1, TZ: "+0000"}, Message: "theirs\n"}).Encode())
	pack, err := pw.WriteTo(repo.ObjectDir)
	if err != nil {
		t.Fatal(err)
	}
	db.AddPack(pack)
	return id
}
