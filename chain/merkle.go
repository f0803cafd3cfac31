package chain

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"math/bits"

	"github.com/zeebo/blake3"
)

// The Merkle log follows RFC 9162 §2.1 (the RFC 6962 tree) with BLAKE3-256
// as the hash function. Its leaves are entry hashes:
//
//	leaf hash = BLAKE3-256(0x00 ‖ entry hash)
//	node hash = BLAKE3-256(0x01 ‖ left ‖ right)
//	root of the empty log = BLAKE3-256("")
//
// A node at level L with index N is the root of the perfect subtree over
// leaves [N·2^L, (N+1)·2^L); level 0 nodes are leaf hashes. The tree over n
// leaves splits at the largest power of two k < n, so its left subtree is
// perfect and its right one is the tree over the remaining n-k leaves.

// A Hash is a BLAKE3-256 digest.
type Hash [32]byte

// String returns h as 64 lowercase hex digits.
func (h Hash) String() string { return hex.EncodeToString(h[:]) }

// ParseHash parses the form produced by String; other spellings, such as
// uppercase hex, are rejected so that every hash has one text form.
func ParseHash(s string) (Hash, error) {
	var h Hash
	if len(s) != 2*len(h) {
		return Hash{}, fmt.Errorf("hash %q: want %d hex digits", s, 2*len(h))
	}
	// Lowercase digits alone are what String writes back unchanged (without
	// building it: the verifier parses every entry's prev).
	if !IsLowerHex(s, 2*len(h)) {
		return Hash{}, fmt.Errorf("hash %q: not lowercase hex", s)
	}
	hex.Decode(h[:], []byte(s))
	return h, nil
}

// AppendHex appends String's text of h to b, for a caller comparing or
// writing hashes in a loop without a string each (Meta.Encode writes about
// twenty an entry: hex.AppendEncode's byte at a time was 2% of a verify).
func (h Hash) AppendHex(b []byte) []byte {
	var out [2 * len(Hash{})]byte
	for i := 0; i < len(h); i += 4 {
		binary.BigEndian.PutUint64(out[2*i:], hexDigits(binary.BigEndian.Uint32(h[i:])))
	}
	return append(b, out[:]...)
}

// hexDigits returns the 8 lowercase hex digits of v, most significant first,
// as the bytes of a big-endian integer: each byte of v spread into 16 bits,
// its high nibble above its low one, then each nibble n made '0'+n, plus 39
// more ('a'-10) when n+6 carries into bit 4. No byte carries into the next.
func hexDigits(v uint32) uint64 {
	x := uint64(v)
	x = (x | x<<16) & 0x0000ffff0000ffff
	x = (x | x<<8) & 0x00ff00ff00ff00ff
	n := (x>>4&0x000f000f000f000f)<<8 | x&0x000f000f000f000f
	return n + 0x3030303030303030 + (n+0x0606060606060606)>>4&0x0101010101010101*39
}

// LeafHash returns the Merkle leaf hash of the entry whose hash is entryHash.
func LeafHash(entryHash Hash) Hash {
	var b [1 + len(Hash{})]byte
	copy(b[1:], entryHash[:])
	return blake3.Sum256(b[:])
}

// NodeHash returns the hash of the interior node with children l and r.
func NodeHash(l, r Hash) Hash {
	var b [1 + 2*len(Hash{})]byte
	b[0] = 1
	copy(b[1:], l[:])
	copy(b[1+len(l):], r[:])
	return blake3.Sum256(b[:])
}

var merkleEmptyRoot = Hash(blake3.Sum256(nil))

// EmptyRoot returns the root hash of the empty log.
func EmptyRoot() Hash { return merkleEmptyRoot }

// A Range is the compact range of a log of Size leaves: Hashes holds the
// roots of the perfect subtrees that cover leaves [0, Size), left to right
// and so largest first, one for each set bit of Size. It is all that is
// needed to append leaves and compute the root.
//
// Invariant: len(Hashes) == bits.OnesCount64(Size). A Range decoded from
// storage must be checked with Validate before use.
type Range struct {
	Size   uint64
	Hashes []Hash
}

// Validate reports whether r satisfies the Range invariant.
func (r Range) Validate() error {
	if want := bits.OnesCount64(r.Size); len(r.Hashes) != want {
		return fmt.Errorf("compact range of size %d has %d hashes, want %d", r.Size, len(r.Hashes), want)
	}
	return nil
}

// Append adds the leaf with hash leaf. Each trailing one bit of Size marks a
// subtree that the new leaf completes, so those subtrees are merged into
// one. Append modifies r.Hashes in place.
func (r *Range) Append(leaf Hash) {
	for s := r.Size; s&1 == 1; s >>= 1 {
		n := len(r.Hashes) - 1
		leaf = NodeHash(r.Hashes[n], leaf)
		r.Hashes = r.Hashes[:n]
	}
	r.Hashes = append(r.Hashes, leaf)
	r.Size++
}

// Root returns the root hash of the log r covers.
func (r Range) Root() Hash {
	if len(r.Hashes) == 0 {
		return EmptyRoot()
	}
	h := r.Hashes[len(r.Hashes)-1]
	for i := len(r.Hashes) - 2; i >= 0; i-- {
		h = NodeHash(r.Hashes[i], h)
	}
	return h
}

// A NodeReader returns node hashes of a log. Node(level, index) returns the
// hash of the perfect subtree over leaves [index·2^level, (index+1)·2^level),
// which must lie within the log.
type NodeReader interface {
	Node(level uint8, index uint64) (Hash, error)
}

// RangeFromReader returns the compact range of the first size leaves of the
// log r reads.
func RangeFromReader(r NodeReader, size uint64) (Range, error) {
	rg := Range{Size: size, Hashes: make([]Hash, 0, bits.OnesCount64(size))}
	var start uint64
	for level := 63; level >= 0; level-- {
		if size>>level&1 == 0 {
			continue
		}
		h, err := r.Node(uint8(level), start>>level)
		if err != nil {
			return Range{}, err
		}
		rg.Hashes = append(rg.Hashes, h)
		start += 1 << level
	}
	return rg, nil
}

// RootFromReader returns the root hash of the first size leaves of the log r
// reads.
func RootFromReader(r NodeReader, size uint64) (Hash, error) {
	rg, err := RangeFromReader(r, size)
	if err != nil {
		return Hash{}, err
	}
	return rg.Root(), nil
}

// merkleSplit returns the level of the left subtree of a tree of n ≥ 2
// leaves: the exponent of the largest power of two less than n.
func merkleSplit(n uint64) uint8 { return uint8(bits.Len64(n-1) - 1) }

// merkleSubtree returns MTH(D[lo:hi]) for a subtree that the RFC 9162
// recursion reaches, for which lo is a multiple of the power of two ≥ hi-lo.
// Such a subtree is the fold of the perfect subtrees for the set bits of
// hi-lo, largest (leftmost) first, so it is built right to left.
func merkleSubtree(r NodeReader, lo, hi uint64) (Hash, error) {
	var h Hash
	for level, first := 0, true; hi > lo; level++ {
		if (hi-lo)>>level&1 == 0 {
			continue
		}
		hi -= 1 << level
		x, err := r.Node(uint8(level), hi>>level)
		if err != nil {
			return Hash{}, err
		}
		if first {
			h, first = x, false
		} else {
			h = NodeHash(x, h)
		}
	}
	return h, nil
}

// InclusionProof returns the RFC 9162 §2.1.3.1 inclusion proof of leaf index
// in the log of the given size, read through r: the sibling hashes on the
// path from the leaf to the root, bottom first.
func InclusionProof(r NodeReader, index, size uint64) ([]Hash, error) {
	if index >= size {
		return nil, fmt.Errorf("inclusion proof: index %d is not below size %d", index, size)
	}
	return merklePath(r, make([]Hash, 0, bits.Len64(size-1)), index, 0, size)
}

// merklePath appends PATH(index-lo, D[lo:hi]) to p.
func merklePath(r NodeReader, p []Hash, index, lo, hi uint64) ([]Hash, error) {
	if hi-lo == 1 {
		return p, nil
	}
	level := merkleSplit(hi - lo)
	mid := lo + 1<<level
	var sib Hash
	var err error
	if index < mid {
		if p, err = merklePath(r, p, index, lo, mid); err == nil {
			sib, err = merkleSubtree(r, mid, hi)
		}
	} else {
		if p, err = merklePath(r, p, index, mid, hi); err == nil {
			sib, err = r.Node(level, lo>>level)
		}
	}
	if err != nil {
		return nil, err
	}
	return append(p, sib), nil
}

// ConsistencyProof returns the RFC 9162 §2.1.4.1 consistency proof between
// the log's first oldSize leaves and its first newSize leaves, read through
// r. The proof is empty if oldSize is 0 or equal to newSize.
func ConsistencyProof(r NodeReader, oldSize, newSize uint64) ([]Hash, error) {
	if oldSize > newSize {
		return nil, fmt.Errorf("consistency proof: old size %d exceeds new size %d", oldSize, newSize)
	}
	if oldSize == 0 || oldSize == newSize {
		return []Hash{}, nil
	}
	return merkleSubproof(r, make([]Hash, 0, bits.Len64(newSize)+1), oldSize, 0, newSize, true)
}

// merkleSubproof appends SUBPROOF(m-lo, D[lo:hi], complete) to p.
func merkleSubproof(r NodeReader, p []Hash, m, lo, hi uint64, complete bool) ([]Hash, error) {
	if m == hi {
		if complete {
			return p, nil
		}
		h, err := merkleSubtree(r, lo, hi)
		if err != nil {
			return nil, err
		}
		return append(p, h), nil
	}
	level := merkleSplit(hi - lo)
	mid := lo + 1<<level
	var sib Hash
	var err error
	if m <= mid {
		if p, err = merkleSubproof(r, p, m, lo, mid, complete); err == nil {
			sib, err = merkleSubtree(r, mid, hi)
		}
	} else {
		if p, err = merkleSubproof(r, p, m, mid, hi, false); err == nil {
			sib, err = r.Node(level, lo>>level)
		}
	}
	if err != nil {
		return nil, err
	}
	return append(p, sib), nil
}

// ErrInvalidProof is wrapped by the errors of VerifyInclusion and
// VerifyConsistency when a proof does not verify.
var ErrInvalidProof = errors.New("invalid Merkle proof")

// VerifyInclusion checks that proof proves that leaf (a leaf hash, not an
// entry hash) is leaf number index of the log of the given size and root,
// using the algorithm of RFC 9162 §2.1.3.2.
func VerifyInclusion(leaf Hash, index, size uint64, proof []Hash, root Hash) error {
	if index >= size {
		return fmt.Errorf("%w: index %d is not below size %d", ErrInvalidProof, index, size)
	}
	fn, sn, r := index, size-1, leaf
	for _, p := range proof {
		if sn == 0 {
			return fmt.Errorf("%w: inclusion proof too long", ErrInvalidProof)
		}
		if fn&1 == 1 || fn == sn {
			r = NodeHash(p, r)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			r = NodeHash(r, p)
		}
		fn, sn = fn>>1, sn>>1
	}
	if sn != 0 {
		return fmt.Errorf("%w: inclusion proof too short", ErrInvalidProof)
	}
	if r != root {
		return fmt.Errorf("%w: inclusion proof does not lead to root %v", ErrInvalidProof, root)
	}
	return nil
}

// VerifyConsistency checks that proof proves that the log of size oldSize
// and root oldRoot is a prefix of the log of size newSize and root newRoot,
// using the algorithm of RFC 9162 §2.1.4.2. Equal sizes need an empty proof
// and equal roots; old size 0 needs an empty proof and the empty root.
func VerifyConsistency(oldSize, newSize uint64, oldRoot, newRoot Hash, proof []Hash) error {
	switch {
	case oldSize > newSize:
		return fmt.Errorf("%w: old size %d exceeds new size %d", ErrInvalidProof, oldSize, newSize)
	case oldSize == newSize || oldSize == 0:
		if len(proof) != 0 {
			return fmt.Errorf("%w: consistency proof from size %d to %d must be empty", ErrInvalidProof, oldSize, newSize)
		}
		if oldSize == 0 && oldRoot != EmptyRoot() || oldSize != 0 && oldRoot != newRoot {
			return fmt.Errorf("%w: root mismatch at size %d", ErrInvalidProof, oldSize)
		}
		return nil
	case len(proof) == 0:
		return fmt.Errorf("%w: empty consistency proof", ErrInvalidProof)
	}
	// The proof omits the old root when it is itself a node of the new tree.
	seed, rest := proof[0], proof[1:]
	if oldSize&(oldSize-1) == 0 {
		seed, rest = oldRoot, proof
	}
	fn, sn := oldSize-1, newSize-1
	for fn&1 == 1 {
		fn, sn = fn>>1, sn>>1
	}
	fr, sr := seed, seed
	for _, c := range rest {
		if sn == 0 {
			return fmt.Errorf("%w: consistency proof too long", ErrInvalidProof)
		}
		if fn&1 == 1 || fn == sn {
			fr, sr = NodeHash(c, fr), NodeHash(c, sr)
			for fn&1 == 0 && fn != 0 {
				fn, sn = fn>>1, sn>>1
			}
		} else {
			sr = NodeHash(sr, c)
		}
		fn, sn = fn>>1, sn>>1
	}
	switch {
	case sn != 0:
		return fmt.Errorf("%w: consistency proof too short", ErrInvalidProof)
	case fr != oldRoot:
		return fmt.Errorf("%w: consistency proof does not lead to old root %v", ErrInvalidProof, oldRoot)
	case sr != newRoot:
		return fmt.Errorf("%w: consistency proof does not lead to new root %v", ErrInvalidProof, newRoot)
	}
	return nil
}
