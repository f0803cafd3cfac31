package gitstore

import (
	"fmt"
	"reflect"
	"testing"
)

// testTrees holds the content of test trees by id.
type testTrees map[ObjectID][]byte

// add stores the tree of ents (in the order given) and returns its id.
func (tt testTrees) add(ents ...TreeEntry) ObjectID {
	var data []byte
	for _, e := range ents {
		data = append(data, fmt.Sprintf("%o %s\x00", e.Mode, e.Name)...)
		data = append(data, e.ID[:]...)
	}
	id := HashObject(TreeObject, data)
	tt[id] = data
	return id
}

// testBlob is the id of the blob s.
func testBlob(s string) ObjectID { return HashObject(BlobObject, []byte(s)) }

// TestTreeDifferParsesOnce: diffing a chain of states newest first, each
// against its parent (as a received range is checked), reads every tree
// once although each is one diff's new tree and the next one's old tree,
// and names exactly what each state adds: its root, its changed subtree,
// the changed blobs.
func TestTreeDifferParsesOnce(t *testing.T) {
	objects := testTrees{}
	mktree, blob := objects.add, testBlob
	const states = 5
	var roots []ObjectID
	want := make([][]ObjectID, states)
	for k := 0; k < states; k++ {
		var cells []TreeEntry
		for c := 0; c < 4; c++ {
			v := "open"
			if c < k {
				v = "claimed"
			}
			cells = append(cells, TreeEntry{fmt.Sprintf("c%d", c), 0o100644, blob(fmt.Sprintf("c%d %s", c, v))})
		}
		sub := mktree(cells...)
		root := mktree(TreeEntry{"cells", modeTree, sub}, TreeEntry{"meta", 0o100644, blob(fmt.Sprint("meta ", k))})
		roots = append(roots, root)
		if k > 0 {
			want[k] = []ObjectID{root, sub, cells[k-1].ID, blob(fmt.Sprint("meta ", k))}
		}
	}
	reads := map[ObjectID]int{}
	d := NewTreeDiffer(func(id ObjectID) (ObjectType, []byte, error) {
		reads[id]++
		data, ok := objects[id]
		if !ok {
			return 0, nil, fmt.Errorf("no object %s", id)
		}
		return TreeObject, data, nil
	})
	for k := states - 1; k > 0; k-- {
		var got []ObjectID
		if err := d.Added(roots[k-1], roots[k], func(id, _ ObjectID, _ ObjectType, _ []byte) error {
			got = append(got, id)
			return nil
		}); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(got, want[k]) {
			t.Fatalf("state %d adds %v, want %v", k, got, want[k])
		}
	}
	for id, n := range reads {
		if n != 1 {
			t.Fatalf("tree %s read %d times", id, n)
		}
	}
	if len(reads) != 2*states {
		t.Fatalf("%d trees read, want the %d of the chain", len(reads), 2*states)
	}
}

// TestTreeDifferWalksRawTrees: diffing two 500-entry trees that differ in
// one blob, a name that changed kind (blob to tree, tree to blob) and a
// mode (same id) names exactly the changed blob, the new subtree and its
// blob, and the blob that replaced a tree, each with the object of the
// same kind the old tree holds at its path (its delta base: the old tree
// for the new one, the old blob for the changed one, none for the
// others); a malformed entry in either
// tree is an error; and a diff allocates nothing per entry (main parsed
// both trees into entries and mapped the old one by name: 1024
// allocations).
func TestTreeDifferWalksRawTrees(t *testing.T) {
	objects := testTrees{}
	mktree, blob := objects.add, testBlob
	inner := mktree(TreeEntry{"x", modeBlob, blob("x")})
	var old, cur []TreeEntry
	for c := 0; c < 500; c++ {
		name := fmt.Sprintf("c%03d", c)
		o := TreeEntry{name, modeBlob, blob(name + " open")}
		n := o
		switch c {
		case 7:
			n.ID = blob(name + " claimed")
		case 8:
			n.Mode = 0o100755 // same content, another mode: held
		case 9:
			n = TreeEntry{name, modeTree, inner}
		case 10:
			o = TreeEntry{name, modeTree, inner}
		}
		old, cur = append(old, o), append(cur, n)
	}
	a, b := mktree(old...), mktree(cur...)
	d := NewTreeDiffer(func(id ObjectID) (ObjectType, []byte, error) {
		data, ok := objects[id]
		if !ok {
			return 0, nil, fmt.Errorf("no object %s", id)
		}
		return TreeObject, data, nil
	})
	var got, bases []ObjectID
	if err := d.Added(a, b, func(id, base ObjectID, _ ObjectType, _ []byte) error {
		got, bases = append(got, id), append(bases, base)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	want := []ObjectID{b, cur[7].ID, inner, blob("x"), cur[10].ID}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("added %v, want %v", got, want)
	}
	// Each one's base is what a holds at its path as the same kind: none
	// where the kind changed.
	if want := []ObjectID{a, old[7].ID, {}, {}, {}}; !reflect.DeepEqual(bases, want) {
		t.Fatalf("bases %v, want %v", bases, want)
	}
	nop := func(ObjectID, ObjectID, ObjectType, []byte) error { return nil }
	// A malformed entry after b's last name, in either tree, is an error.
	for _, bad := range []ObjectID{a, b} { // the old tree, then the new one
		junk := append(append([]byte{}, objects[bad]...), "100644 zzz"...)
		id := HashObject(TreeObject, junk)
		objects[id] = junk
		x, y := id, b
		if bad == b {
			x, y = a, id
		}
		if err := d.Added(x, y, nop); err == nil {
			t.Fatalf("a diff with a malformed last entry in tree %s succeeded", bad)
		}
	}
	read := func(id ObjectID) (ObjectType, []byte, error) { return TreeObject, objects[id], nil }
	if n := testing.AllocsPerRun(20, func() { NewTreeDiffer(read).Added(a, b, nop) }); n > 8 {
		t.Fatalf("a diff of two 500-entry trees allocates %v times, want at most 8", n)
	}
}
