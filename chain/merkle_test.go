package chain

import (
	"encoding/hex"
	"errors"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/transparency-dev/merkle/compact"
	"github.com/transparency-dev/merkle/proof"
	"github.com/zeebo/blake3"
)

// merkleRefHasher is an independent BLAKE3 instance of transparency-dev's
// merkle.LogHasher, so that its compact ranges and verifiers cross-check ours.
type merkleRefHasher struct{}

func (merkleRefHasher) EmptyRoot() []byte { return blake3.New().Sum(nil) }
func (merkleRefHasher) Size() int         { return 32 }

func (merkleRefHasher) HashLeaf(leaf []byte) []byte {
	h := blake3.New()
	h.Write([]byte{0})
	h.Write(leaf)
	return h.Sum(nil)
}

func (merkleRefHasher) HashChildren(l, r []byte) []byte {
	h := blake3.New()
	h.Write([]byte{1})
	h.Write(l)
	h.Write(r)
	return h.Sum(nil)
}

var merkleRefFactory = &compact.RangeFactory{Hash: merkleRefHasher{}.HashChildren}

// merkleRefMTH is RFC 9162's MTH over leaf hashes, straight from its
// recursive definition.
func merkleRefMTH(leaves [][]byte) []byte {
	switch n := len(leaves); n {
	case 0:
		return merkleRefHasher{}.EmptyRoot()
	case 1:
		return leaves[0]
	default:
		k := 1
		for k*2 < n {
			k *= 2
		}
		return merkleRefHasher{}.HashChildren(merkleRefMTH(leaves[:k]), merkleRefMTH(leaves[k:]))
	}
}

// merkleSliceReader answers Node from leaf hashes by recomputing MTH.
type merkleSliceReader [][]byte

func (s merkleSliceReader) Node(level uint8, index uint64) (Hash, error) {
	lo, hi := index<<level, (index+1)<<level
	if hi > uint64(len(s)) {
		return Hash{}, errors.New("node out of range")
	}
	return Hash(merkleRefMTH(s[lo:hi])), nil
}

func merkleTestEntry(i uint64) Hash {
	return blake3.Sum256([]byte{byte(i), byte(i >> 8), byte(i >> 16), byte(i >> 24)})
}

func TestHashes(t *testing.T) {
	var e Hash
	copy(e[:], "entry-hash-entry-hash-entry-hash")
	ref := merkleRefHasher{}
	if got := LeafHash(e); string(got[:]) != string(ref.HashLeaf(e[:])) {
		t.Errorf("LeafHash mismatch")
	}
	l, r := LeafHash(e), merkleTestEntry(7)
	if got := NodeHash(l, r); string(got[:]) != string(ref.HashChildren(l[:], r[:])) {
		t.Errorf("NodeHash mismatch")
	}
	if got := EmptyRoot(); string(got[:]) != string(ref.EmptyRoot()) {
		t.Errorf("EmptyRoot mismatch")
	}
	if got := (Range{}).Root(); got != EmptyRoot() {
		t.Errorf("empty Range root = %v", got)
	}
}

func TestParseHash(t *testing.T) {
	h := merkleTestEntry(1)
	if got, err := ParseHash(h.String()); err != nil || got != h {
		t.Errorf("ParseHash(%v) = %v, %v", h, got, err)
	}
	for _, s := range []string{"", h.String()[1:], h.String() + "0", strings.ToUpper(h.String()), "g" + h.String()[1:]} {
		if _, err := ParseHash(s); err == nil {
			t.Errorf("ParseHash(%q) succeeded", s)
		}
	}
}

func TestRangeValidate(t *testing.T) {
	for _, tc := range []struct {
		r  Range
		ok bool
	}{
		{Range{}, true},
		{Range{Size: 1, Hashes: make([]Hash, 1)}, true},
		{Range{Size: 6, Hashes: make([]Hash, 2)}, true},
		{Range{Size: 6, Hashes: make([]Hash, 1)}, false},
		{Range{Size: 0, Hashes: make([]Hash, 1)}, false},
		{Range{Size: 1<<64 - 1, Hashes: make([]Hash, 64)}, true},
	} {
		if err := tc.r.Validate(); (err == nil) != tc.ok {
			t.Errorf("Range{%d, %d hashes}.Validate() = %v", tc.r.Size, len(tc.r.Hashes), err)
		}
	}
}

// TestProofsAgainstReference checks, for every size up to 70 and every
// index and old size, that the proofs built from independently computed
// nodes equal transparency-dev's, and that both verifiers accept them.
func TestProofsAgainstReference(t *testing.T) {
	const max = 70
	var leaves [][]byte
	roots := []Hash{EmptyRoot()}
	for i := range uint64(max) {
		l := LeafHash(merkleTestEntry(i))
		leaves = append(leaves, l[:])
		roots = append(roots, Hash(merkleRefMTH(leaves)))
	}
	rd := merkleSliceReader(leaves)
	for size := uint64(0); size <= max; size++ {
		if got, err := RootFromReader(rd, size); err != nil || got != roots[size] {
			t.Fatalf("RootFromReader(%d) = %v, %v; want %v", size, got, err, roots[size])
		}
		for index := range size {
			p, err := InclusionProof(rd, index, size)
			if err != nil {
				t.Fatal(err)
			}
			merkleCheckRefInclusion(t, rd, index, size, p)
			if err := VerifyInclusion(Hash(leaves[index]), index, size, p, roots[size]); err != nil {
				t.Fatalf("VerifyInclusion(%d, %d): %v", index, size, err)
			}
			if err := proof.VerifyInclusion(merkleRefHasher{}, index, size, leaves[index], merkleBytes(p), roots[size][:]); err != nil {
				t.Fatalf("reference VerifyInclusion(%d, %d): %v", index, size, err)
			}
		}
		for old := uint64(0); old <= size; old++ {
			p, err := ConsistencyProof(rd, old, size)
			if err != nil {
				t.Fatal(err)
			}
			merkleCheckRefConsistency(t, rd, old, size, p)
			if err := VerifyConsistency(old, size, roots[old], roots[size], p); err != nil {
				t.Fatalf("VerifyConsistency(%d, %d): %v", old, size, err)
			}
			if err := proof.VerifyConsistency(merkleRefHasher{}, old, size, merkleBytes(p), roots[old][:], roots[size][:]); err != nil {
				t.Fatalf("reference VerifyConsistency(%d, %d): %v", old, size, err)
			}
		}
	}
}

func merkleBytes(hs []Hash) [][]byte {
	b := make([][]byte, len(hs))
	for i := range hs {
		b[i] = hs[i][:]
	}
	return b
}

// merkleRefProof builds a proof the transparency-dev way: fetch the node IDs
// it names and rehash the ephemeral node.
func merkleRefProof(t testing.TB, rd NodeReader, nodes proof.Nodes) []Hash {
	hs := make([][]byte, len(nodes.IDs))
	for i, id := range nodes.IDs {
		h, err := rd.Node(uint8(id.Level), id.Index)
		if err != nil {
			t.Fatal(err)
		}
		hs[i] = h[:]
	}
	hs, err := nodes.Rehash(hs, merkleRefHasher{}.HashChildren)
	if err != nil {
		t.Fatal(err)
	}
	out := make([]Hash, len(hs))
	for i := range hs {
		out[i] = Hash(hs[i])
	}
	return out
}

func merkleEqual(a, b []Hash) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func merkleCheckRefInclusion(t testing.TB, rd NodeReader, index, size uint64, p []Hash) {
	t.Helper()
	nodes, err := proof.Inclusion(index, size)
	if err != nil {
		t.Fatal(err)
	}
	if want := merkleRefProof(t, rd, nodes); !merkleEqual(p, want) {
		t.Fatalf("InclusionProof(%d, %d) = %v, reference %v", index, size, p, want)
	}
}

func merkleCheckRefConsistency(t testing.TB, rd NodeReader, old, size uint64, p []Hash) {
	t.Helper()
	nodes, err := proof.Consistency(old, size)
	if err != nil {
		t.Fatal(err)
	}
	if want := merkleRefProof(t, rd, nodes); !merkleEqual(p, want) {
		t.Fatalf("ConsistencyProof(%d, %d) = %v, reference %v", old, size, p, want)
	}
}

// merkleTamperInclusion checks that our verifier and the reference reject
// every single-bit change of each proof element, proofs one element longer
// or shorter, and a wrong index or size.
func merkleTamperInclusion(t testing.TB, leaf Hash, index, size uint64, p []Hash, root Hash) {
	t.Helper()
	reject := func(what string, leaf Hash, index, size uint64, p []Hash) {
		t.Helper()
		if VerifyInclusion(leaf, index, size, p, root) == nil {
			t.Fatalf("VerifyInclusion(%d, %d) accepted %s", index, size, what)
		}
		if proof.VerifyInclusion(merkleRefHasher{}, index, size, leaf[:], merkleBytes(p), root[:]) == nil {
			t.Fatalf("reference VerifyInclusion(%d, %d) accepted %s", index, size, what)
		}
	}
	for i := range p {
		q := append([]Hash(nil), p...)
		q[i][i%32] ^= 1
		reject("flipped element", leaf, index, size, q)
	}
	bad := leaf
	bad[0] ^= 0x80
	reject("wrong leaf", bad, index, size, p)
	reject("extra element", leaf, index, size, append(append([]Hash(nil), p...), root))
	if len(p) > 0 {
		reject("truncated proof", leaf, index, size, p[:len(p)-1])
	}
	if size > 1 {
		reject("wrong index", leaf, (index+1)%size, size, p)
	}
}

func merkleTamperConsistency(t testing.TB, old, size uint64, p []Hash, oldRoot, newRoot Hash) {
	t.Helper()
	reject := func(what string, p []Hash, oldRoot, newRoot Hash) {
		t.Helper()
		if VerifyConsistency(old, size, oldRoot, newRoot, p) == nil {
			t.Fatalf("VerifyConsistency(%d, %d) accepted %s", old, size, what)
		}
		if proof.VerifyConsistency(merkleRefHasher{}, old, size, merkleBytes(p), oldRoot[:], newRoot[:]) == nil {
			t.Fatalf("reference VerifyConsistency(%d, %d) accepted %s", old, size, what)
		}
	}
	for i := range p {
		q := append([]Hash(nil), p...)
		q[i][31-i%32] ^= 4
		reject("flipped element", q, oldRoot, newRoot)
	}
	if old == 0 {
		return // any log extends the empty one
	}
	o, n := oldRoot, newRoot
	o[5] ^= 1
	n[9] ^= 1
	reject("wrong old root", p, o, newRoot)
	reject("wrong new root", p, oldRoot, n)
	if old < size {
		reject("extra element", append(append([]Hash(nil), p...), newRoot), oldRoot, newRoot)
		reject("truncated proof", p[:len(p)-1], oldRoot, newRoot)
	}
}

// TestParseHashIsTheRoundTrip: ParseHash accepts exactly the strings its
// earlier definition did (hex.Decode succeeding and String giving s back),
// without allocating, and AppendHex writes String's text, on every hash's
// text with each digit replaced by every byte, and on other lengths.
func TestParseHashIsTheRoundTrip(t *testing.T) {
	roundTrip := func(s string) (Hash, bool) {
		var h Hash
		if len(s) != 2*len(h) {
			return Hash{}, false
		}
		_, err := hex.Decode(h[:], []byte(s))
		return h, err == nil && h.String() == s
	}
	var inputs []string
	for seed := range 8 {
		h := LeafHash(Hash{byte(seed)})
		if got := string(h.AppendHex([]byte("x"))); got != "x"+h.String() {
			t.Fatalf("AppendHex gives %q, want x%s", got, h)
		}
		s := h.String()
		inputs = append(inputs, s, s[1:], s+"0", strings.ToUpper(s))
		for _, pos := range []int{0, 31, 63} {
			for c := range 256 {
				inputs = append(inputs, s[:pos]+string([]byte{byte(c)})+s[pos+1:])
			}
		}
	}
	if s := LeafHash(Hash{}).String(); testing.AllocsPerRun(10, func() { ParseHash(s) }) != 0 {
		t.Fatal("ParseHash allocates: it built the hash's string to compare")
	}
	for _, s := range inputs {
		want, wok := roundTrip(s)
		got, err := ParseHash(s)
		if wok != (err == nil) || want != got && wok {
			t.Fatalf("ParseHash(%q) = %s, %v; the round trip gives %s, %v", s, got, err, want, wok)
		}
	}
}

// TestAdvanceCopiesTheRangeOnce: Meta.Advance leaves the meta it advances
// as it was (a verifier's segments share it) and gives the root of the
// range with the new leaf, in two allocations (the meta and its range)
// whatever the log's size: a copy of the range that then grew to take the
// new hash was a third at every size where the range gets longer.
func TestAdvanceCopiesTheRangeOnce(t *testing.T) {
	m, _ := DecodeMeta(nil, false)
	var ref Range
	for i := range uint64(300) {
		e := &Entry{Seq: i, Kind: KindNote, TS: "2026-12-01T00:00:00.000Z"}
		h := merkleTestEntry(i)
		before := slices.Clone(m.Range)
		if allocs := testing.AllocsPerRun(10, func() { m.Advance(e, h) }); allocs > 2 {
			t.Fatalf("size %d: Advance made %v allocations, want 2", i, allocs)
		}
		next, err := m.Advance(e, h)
		if err != nil {
			t.Fatal(err)
		}
		ref.Append(LeafHash(h))
		if !slices.Equal(m.Range, before) || next.Root != ref.Root() || !slices.Equal(next.Range, ref.Hashes) {
			t.Fatalf("size %d: Advance changed the old range or gave the wrong one", i)
		}
		m = next
	}
}

// AppendHex writes what hex.EncodeToString does, for every byte value at
// every place of a hash and for random hashes, after any prefix.
func TestAppendHexIsHexEncoding(t *testing.T) {
	check := func(h Hash) {
		t.Helper()
		if got, want := string(h.AppendHex([]byte("x"))), "x"+hex.EncodeToString(h[:]); got != want {
			t.Fatalf("AppendHex gives %s, want %s", got, want)
		}
	}
	for i := range len(Hash{}) {
		for v := range 256 {
			var h Hash
			h[i] = byte(v)
			check(h)
			for j := range h {
				h[j] ^= 0xff
			}
			check(h)
		}
	}
	rng := rand.New(rand.NewPCG(5, 6))
	for range 10000 {
		var h Hash
		for j := range h {
			h[j] = byte(rng.Uint32())
		}
		check(h)
	}
}
