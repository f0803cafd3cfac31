package gitstore

import (
	"bytes"
	"math/rand/v2"
	"slices"
	"testing"
)

// A large index finds every name and no other, by the 256-entry fanout
// before its fine fanout is built and by the fine one after, including the
// names at the edges of the fine fanout's runs (first bits all zero or all
// one, runs of one name and empty runs); an index whose names are out of
// order still looks up within its bounds.
func TestFineFanoutFindsWhatTheFanoutFinds(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	var entries []packIdxEntry
	add := func(id ObjectID) {
		entries = append(entries, packIdxEntry{id: id, off: uint64(12 + len(entries))})
	}
	var lowest, highest ObjectID
	for i := range highest {
		highest[i] = 0xff
	}
	add(lowest)
	add(highest)
	for len(entries) < fineFanoutMin+5000 {
		var id ObjectID
		for i := range id {
			id[i] = byte(rng.Uint32())
		}
		add(id)
	}
	// A run of names sharing their first 8 bytes: the search compares them in full.
	for i := range 20 {
		id := entries[2].id
		id[19] ^= byte(i + 1)
		add(id)
	}
	want := map[ObjectID]uint64{}
	for _, e := range entries {
		want[e.id] = e.off
	}
	x, err := packParseIndex(packIndexBytes(entries, [20]byte{}))
	if err != nil {
		t.Fatal(err)
	}
	if x.fine == nil {
		t.Fatalf("an index of %d names has no fine fanout", x.n)
	}
	absent := func(id ObjectID) ObjectID {
		for {
			id[19]++
			if _, ok := want[id]; !ok {
				return id
			}
		}
	}
	check := func(stage string) {
		for id, off := range want {
			if got, ok, err := x.find(id); !ok || err != nil || got != off {
				t.Fatalf("%s: find(%s) = %d, %v, %v; want %d", stage, id, got, ok, err, off)
			}
			if _, ok, _ := x.find(absent(id)); ok {
				t.Fatalf("%s: found an absent neighbour of %s", stage, id)
			}
		}
	}
	check("before the fine fanout") // len(want) lookups: more than n/16, so it is built here
	start := x.fine.start.Load()
	if start == nil {
		t.Fatal("the fine fanout was not built")
	}
	runs := map[uint32]int{} // run length: how many
	for k := range len(*start) - 1 {
		runs[min((*start)[k+1]-(*start)[k], 2)]++
	}
	if runs[0] == 0 || runs[1] == 0 || runs[2] == 0 {
		t.Fatalf("runs of 0, 1 and more names: %v; the test needs each", runs)
	}
	check("by the fine fanout")

	// Out of order: swap the first and last names. Lookups stay in bounds.
	b := packIndexBytes(entries, [20]byte{})
	names := b[packIdxHeader : packIdxHeader+20*len(entries)]
	first, last := bytes.Clone(names[:20]), bytes.Clone(names[len(names)-20:])
	copy(names, last)
	copy(names[len(names)-20:], first)
	y, err := packParseIndex(b)
	if err != nil {
		t.Fatal(err)
	}
	y.fine.build(y)
	if ys := *y.fine.start.Load(); !slices.IsSorted(ys) || ys[len(ys)-1] != uint32(y.n) {
		t.Fatalf("fine fanout of a disordered index is not monotone within it")
	}
	for id := range want {
		if i, ok := y.position(id); ok && !bytes.Equal(names[20*i:20*i+20], id[:]) {
			t.Fatalf("position(%s) = %d, a different name", id, i)
		}
	}
}
