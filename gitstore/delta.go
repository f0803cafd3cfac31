package gitstore

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math/bits"
)

// Git deltas outside packs: a sequencer sends a changed tree or blob as a
// delta against the object its parent entry holds at the same path (a sent
// range of form 3, FORMAT.md §9b), which the client applies with the
// applier that reads a pack's deltas (packApplyDelta). The format is git's
// pack delta: the base's size and the result's size as little-endian
// base-128 numbers, then copy and insert instructions.

// ErrDeltaTooBig is the error of a delta whose result would exceed the
// bound its caller gave.
var ErrDeltaTooBig = errors.New("gitstore: delta result over the bound")

// DeltaSizes returns the base size and the result size delta declares (ok
// false when its header does not decode).
func DeltaSizes(delta []byte) (base, result uint64, ok bool) {
	base, rest, ok := packDeltaSize(delta)
	if !ok {
		return 0, 0, false
	}
	result, _, ok = packDeltaSize(rest)
	return base, result, ok
}

// ApplyDelta applies delta to base, as a pack's delta is applied, where
// the result may be at most max bytes: a delta declaring a larger one is
// refused from its header, before anything is allocated, so that a delta
// of a few bytes cannot make its reader allocate gigabytes. Any
// disagreement between the declared sizes, the instructions and base is an
// error; the result is exactly the declared size.
func ApplyDelta(base, delta []byte, max uint64) ([]byte, error) {
	_, n, ok := DeltaSizes(delta)
	if !ok {
		return nil, errors.New("gitstore: delta header does not decode")
	}
	if n > max {
		return nil, fmt.Errorf("%w: %d bytes, at most %d", ErrDeltaTooBig, n, max)
	}
	return packApplyDelta(base, delta)
}

// DeltaObject is the object delta makes of base (ApplyDelta, the result at
// most max bytes), of base's type and named by the hash of the result. Its
// pack entry keeps the content uncompressed (a stored deflate block): the
// object arrived as a few bytes of delta, and compressing what is mostly
// hashes only to store it cost a client more than receiving the delta
// saved (PERFORMANCE.md at b45f87f, "Sequenced claims, tree deltas"); git gc
// deltifies and compresses such objects again.
func DeltaObject(base *Object, delta []byte, max uint64) (*Object, error) {
	data, err := ApplyDelta(base.data, delta, max)
	if err != nil {
		return nil, err
	}
	o := NewObject(base.typ, data)
	o.entry = encodeStoredEntry(o.typ, data)
	return o, nil
}

// Instruction limits of EncodeDelta: an insert carries at most 127 bytes
// (its opcode is the count), a copy at most 64 KiB (git's own encoder's
// limit, which every reader takes; 0x10000 is written as no size bytes).
const (
	deltaMaxInsert = 0x7f
	deltaMaxCopy   = 0x10000
)

// EncodeDelta returns a delta that makes target of base: the bytes both
// share at their start and at their end copied from base, the rest of
// target inserted. It looks for nothing else, so it is made for a target
// that differs from base in one place or a few close together (a ledger
// tree whose one entry changed, a tile with hashes appended); any reader
// of git deltas applies it.
func EncodeDelta(base, target []byte) []byte {
	pre := commonPrefix(base, target)
	suf := commonSuffix(base[pre:], target[pre:])
	mid := target[pre : len(target)-suf]
	d := make([]byte, 0, 24+len(mid)+len(mid)/deltaMaxInsert)
	d = binary.AppendUvarint(d, uint64(len(base))) // git's delta sizes are uvarints
	d = binary.AppendUvarint(d, uint64(len(target)))
	d = appendDeltaCopy(d, 0, pre)
	for len(mid) > 0 {
		n := min(len(mid), deltaMaxInsert)
		d = append(append(d, byte(n)), mid[:n]...)
		mid = mid[n:]
	}
	return appendDeltaCopy(d, len(base)-suf, suf)
}

// appendDeltaCopy appends the copy instructions of base[off:off+n]: an
// opcode with the high bit set whose bits 0-3 and 4-6 say which bytes of
// the offset and the size follow (zero bytes are left out).
func appendDeltaCopy(d []byte, off, n int) []byte {
	for n > 0 {
		c := min(n, deltaMaxCopy)
		op, at := len(d), uint64(off)
		d = append(d, 0x80)
		for bit := range 4 {
			if b := byte(at >> (8 * bit)); b != 0 {
				d[op] |= 1 << bit
				d = append(d, b)
			}
		}
		for bit := range 3 {
			if b := byte(c >> (8 * bit)); b != 0 && c != deltaMaxCopy {
				d[op] |= 1 << (4 + bit)
				d = append(d, b)
			}
		}
		off, n = off+c, n-c
	}
	return d
}

// commonPrefix is the length of the longest common prefix of a and b,
// compared eight bytes at a time (a sequencer compares every changed tree
// of a range with its base).
func commonPrefix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		if x := binary.LittleEndian.Uint64(a[i:]) ^ binary.LittleEndian.Uint64(b[i:]); x != 0 {
			return i + bits.TrailingZeros64(x)/8
		}
	}
	for i < n && a[i] == b[i] {
		i++
	}
	return i
}

// commonSuffix is the length of the longest common suffix of a and b.
func commonSuffix(a, b []byte) int {
	n := min(len(a), len(b))
	i := 0
	for ; i+8 <= n; i += 8 {
		x := binary.BigEndian.Uint64(a[len(a)-i-8:]) ^ binary.BigEndian.Uint64(b[len(b)-i-8:])
		if x != 0 {
			return i + bits.TrailingZeros64(x)/8 // the last bytes are the low ones
		}
	}
	for i < n && a[len(a)-1-i] == b[len(b)-1-i] {
		i++
	}
	return i
}
