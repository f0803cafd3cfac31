package gitstore

import (
	"fmt"
	"reflect"
	"testing"
)

// TestTreeDifferParsesOnce: diffing a chain of states newest first, each
// against its parent (as a received range is checked), reads every tree
// once although each is one diff's new tree and the next one's old tree,
// and names exactly what each state adds: its root, its changed subtree,
// the changed blobs.
func TestTreeDifferParsesOnce(t *testing.T) {
	objects := map[ObjectID][]byte{}
	mktree := func(ents ...TreeEntry) ObjectID {
		var data []byte
		for _, e := range ents {
			data = append(data, fmt.Sprintf("%o %s\x00", e.Mode, e.Name)...)
			data = append(data, e.ID[:]...)
		}
		id := HashObject(TreeObject, data)
		objects[id] = data
		return id
	}
	blob := func(s string) ObjectID { return HashObject(BlobObject, []byte(s)) }
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
		if err := d.Added(roots[k-1], roots[k], func(id ObjectID, _ ObjectType, _ []byte) error {
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
