package gitstore

import (
	"math/bits"
	"math/rand/v2"
	"slices"
	"testing"
)

// sealKeysBySort is sealKeys as seal computed it before: every key built,
// then one slices.Sort.
func sealKeysBySort(x packIndex, end uint64, posBits int) ([]uint64, []uint32, bool) {
	keys, crcs := make([]uint64, x.n), make([]uint32, x.n)
	for i := range keys {
		off, _, err := x.offset(i)
		if err != nil || off < 12 || off >= end {
			return nil, nil, false
		}
		keys[i], crcs[i] = off<<posBits|uint64(i), x.crc(i)
	}
	slices.Sort(keys)
	return keys, crcs, true
}

// sealKeys gives exactly the sorted keys of a sort of all of them, for
// offsets spread evenly, crowded into a few buckets before a huge entry,
// repeated (a damaged index), past 4 GiB (the large-offset table), at the
// edges of the pack's entries and outside them.
func TestSealKeysAreTheSortedKeys(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 4))
	type layout struct {
		name string
		n    int
		end  uint64
		off  func(i int) uint64
	}
	layouts := []layout{
		{"even", 50000, 30 << 20, func(int) uint64 { return 12 + rng.Uint64N(30<<20-12) }},
		{"in pack order", 20000, 8 << 20, func(i int) uint64 { return 12 + uint64(i)*400 }},
		{"crowded before a huge entry", 20000, 1 << 30, func(int) uint64 { return 12 + rng.Uint64N(4096) }},
		{"repeated", 10000, 1 << 20, func(int) uint64 { return 12 + rng.Uint64N(100) }},
		{"past 4 GiB", 5000, 6 << 30, func(int) uint64 { return 12 + rng.Uint64N(6<<30-12) }},
		{"edges", 3, 100, func(i int) uint64 { return []uint64{12, 99, 50}[i] }},
		{"one", 1, 100, func(int) uint64 { return 40 }},
		{"two alike", 2, 100, func(int) uint64 { return 40 }},
		{"none", 0, 100, nil},
		{"below the header", 1000, 1 << 20, func(i int) uint64 { return max(12+uint64(i)*100-uint64(i/999)*1000, 11) }},
		{"at the trailer", 1000, 1 << 20, func(i int) uint64 { return 12 + uint64(i)*100 + uint64(i/999)<<20 }},
	}
	for _, l := range layouts {
		var entries []packIdxEntry
		seen := map[ObjectID]bool{}
		for i := range l.n {
			var id ObjectID
			for !seen[id] {
				for j := range id {
					id[j] = byte(rng.Uint32())
				}
				seen[id] = true
			}
			entries = append(entries, packIdxEntry{id: id, crc: rng.Uint32(), off: l.off(i)})
		}
		slices.SortFunc(entries, func(a, b packIdxEntry) int { return slices.Compare(a.id[:], b.id[:]) })
		x, err := packParseIndex(packIndexBytes(entries, [20]byte{}))
		if err != nil {
			t.Fatal(err)
		}
		posBits := bits.Len(uint(x.n))
		wantKeys, wantCRCs, wantOK := sealKeysBySort(x, l.end, posBits)
		keys, crcs, ok := sealKeys(x, l.end, posBits)
		if ok != wantOK || !slices.Equal(keys, wantKeys) || !slices.Equal(crcs, wantCRCs) {
			t.Errorf("%s: sealKeys gives ok %v and %d keys, a sort ok %v and %d keys, or other keys or CRCs", l.name, ok, len(keys), wantOK, len(wantKeys))
		}
	}
}
