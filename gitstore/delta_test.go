package gitstore_test

import (
	"bytes"
	"errors"
	"fmt"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestEncodeDelta: EncodeDelta's delta, applied to its base, gives the
// target back, whatever the two share (nothing, all, a start, an end, a
// middle), across the instruction limits (inserts over 127 bytes, copies
// over 64 KiB); a 500-cell tree with one entry changed becomes a delta of
// a few dozen bytes.
func TestEncodeDelta(t *testing.T) {
	big := bytes.Repeat([]byte("0123456789abcdef"), 10000) // 160,000 bytes: copies of 64 KiB and more
	var tree []byte
	for c := range 500 {
		id := gitstore.HashObject(gitstore.BlobObject, fmt.Appendf(nil, "cell %d", c))
		tree = append(fmt.Appendf(tree, "100644 c%03d\x00", c), id[:]...)
	}
	changed := bytes.Clone(tree)
	copy(changed[len(changed)/2:], "twenty changed bytes")
	for _, tc := range []struct {
		name         string
		base, target []byte
		maxDelta     int
	}{
		{"empty", nil, nil, 2},
		{"from nothing", nil, []byte("new content"), 14},
		{"to nothing", []byte("old content"), nil, 2},
		{"equal", big, big, 16},
		{"nothing shared", []byte("abc"), []byte("xyz"), 6},
		{"appended", big[:1000], big[:1300], 310},
		{"cut", big, big[:5000], 10},
		{"long insert", big[:10], append(bytes.Clone(big[:10]), big[:1000]...), 1020},
		{"one entry changed", tree, changed, 40},
		{"prefix of the other", []byte("aaaa"), []byte("aaaaaaaa"), 12},
		{"overlapping ends", []byte("abab"), []byte("ab"), 6},
	} {
		d := gitstore.EncodeDelta(tc.base, tc.target)
		got, err := gitstore.ApplyDelta(tc.base, d, uint64(len(tc.target)))
		if err != nil || !bytes.Equal(got, tc.target) {
			t.Errorf("%s: applying the delta %x gave %d bytes (%v), want the %d of the target", tc.name, d, len(got), err, len(tc.target))
		}
		if len(d) > tc.maxDelta {
			t.Errorf("%s: delta of %d bytes, want at most %d", tc.name, len(d), tc.maxDelta)
		}
	}
}

// TestApplyDeltaBound: a delta of a few bytes that declares a result over
// the bound is refused from its header, allocating nothing near its
// declared size; one within the bound but lying about its sizes, or
// copying past its base, is refused too.
func TestApplyDeltaBound(t *testing.T) {
	base := bytes.Repeat([]byte{'x'}, 4096)
	// base 4096 bytes, result 8 MiB: plausible to the pack reader (whose
	// bound is the delta's length times the base's), refused here.
	huge := append([]byte{0x80, 0x20, 0x80, 0x80, 0x80, 0x04}, bytes.Repeat([]byte{0x90, 0x10}, 1024)...)
	alloc := testrepo.Allocated(func() {
		if _, err := gitstore.ApplyDelta(base, huge, 1<<20); !errors.Is(err, gitstore.ErrDeltaTooBig) {
			t.Errorf("a delta declaring 8 MiB under a 1 MiB bound: %v, want gitstore.ErrDeltaTooBig", err)
		}
	})
	if alloc > 4096 {
		t.Errorf("refusing a delta over the bound allocated %d bytes", alloc)
	}
	for name, d := range map[string][]byte{
		"base size lies":   {0x81, 0x20, 3, 0x90, 3},
		"result size lies": {0x80, 0x20, 4, 0x90, 3},
		"copy past base":   {0x80, 0x20, 4, 0x93, 0xff, 0x0f, 4},
		"no header":        {0x80},
	} {
		if out, err := gitstore.ApplyDelta(base, d, 1<<20); err == nil {
			t.Errorf("%s: applied to %q, want an error", name, out)
		}
	}
}

// FuzzApplyDelta applies arbitrary deltas to arbitrary bases under a bound
// of at most 64 KiB: no panic, a result only of exactly the declared size
// and within the bound, and never an allocation of much more than the
// bound (Go rounds a large allocation up to whole pages).
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("0123456789"), []byte{10, 11, 0x91, 2, 5, 3, 'a', 'b', 'c', 0x90, 3}, uint16(100))
	f.Add([]byte("abc"), []byte{3, 3, 0x90, 3}, uint16(3))
	f.Add([]byte{}, []byte{0, 0}, uint16(0))
	f.Add([]byte("abc"), []byte{3, 0xff, 0xff, 0x03, 0x90, 3}, uint16(10)) // declares 64 KiB, bound 10
	f.Fuzz(func(t *testing.T, base, delta []byte, max uint16) {
		var out []byte
		var err error
		alloc := testrepo.Allocated(func() { out, err = gitstore.ApplyDelta(base, delta, uint64(max)) })
		if alloc > uint64(max)+8192 {
			t.Fatalf("allocated %d bytes under a bound of %d", alloc, max)
		}
		if err != nil {
			return
		}
		if _, n, _ := gitstore.DeltaSizes(delta); uint64(len(out)) != n || len(out) > int(max) {
			t.Fatalf("result of %d bytes, the delta declares %d, the bound is %d", len(out), n, max)
		}
	})
}

// FuzzEncodeDelta: EncodeDelta's delta of any two contents applies back to
// the target.
func FuzzEncodeDelta(f *testing.F) {
	f.Add([]byte("tree 100644 a\x00"), []byte("tree 100644 b\x00"))
	f.Add([]byte{}, []byte("x"))
	f.Fuzz(func(t *testing.T, base, target []byte) {
		got, err := gitstore.ApplyDelta(base, gitstore.EncodeDelta(base, target), uint64(len(target)))
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("round trip: %d bytes (%v), want %d", len(got), err, len(target))
		}
	})
}

// TestDeltaObjectEntry: an object made from a delta is named by the hash
// of the result, and its pack entry, uncompressed (several stored blocks
// past 64 KiB), decodes as the same object (what a pack reader and git
// read back).
func TestDeltaObjectEntry(t *testing.T) {
	for _, n := range []int{0, 1, 0xffff, 0x10000, 200000} {
		target := bytes.Repeat([]byte("tree entry "), n/11+1)[:n]
		base := gitstore.NewObject(gitstore.TreeObject, []byte("something else"))
		o, err := gitstore.DeltaObject(base, gitstore.EncodeDelta(base.Data(), target), uint64(n))
		if err != nil {
			t.Fatalf("%d bytes: %v", n, err)
		}
		if o.ID() != gitstore.HashObject(gitstore.TreeObject, target) || o.Type() != gitstore.TreeObject || !bytes.Equal(o.Data(), target) {
			t.Fatalf("%d bytes: object %s of type %s, want the target's", n, o.ID(), o.Type())
		}
		d, err := gitstore.DecodeEntry(o.Entry(), uint64(n))
		if err != nil || d.ID() != o.ID() {
			t.Fatalf("%d bytes: its entry decodes to %v, %v", n, d, err)
		}
		if len(o.Entry()) > n+32+n/0xffff*5 {
			t.Fatalf("%d bytes: entry of %d bytes", n, len(o.Entry()))
		}
	}
	if _, err := gitstore.DeltaObject(gitstore.NewObject(gitstore.BlobObject, nil), []byte{0, 5, 5, 'a', 'b', 'c', 'd', 'e'}, 4); !errors.Is(err, gitstore.ErrDeltaTooBig) {
		t.Fatalf("a result over the bound: %v", err)
	}
}
