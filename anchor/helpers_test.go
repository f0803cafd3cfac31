package anchor_test

// Helpers shared by the anchor tests: logs kept in map-backed Merkle tiles
// (as chain's own tests do), and an independent BLAKE3 instance of
// transparency-dev/merkle's LogHasher to check tally's proofs with someone
// else's verifier.

import (
	"encoding/binary"
	"maps"
	"testing"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally/chain"
)

type memKV map[string][]byte

func (m memKV) Get(key string) ([]byte, bool, error) {
	b, ok := m[key]
	return b, ok, nil
}

// memLog is a log of entry hashes in map-backed tiles with its chain meta.
type memLog struct {
	kv   memKV
	meta *chain.Meta
	rg   chain.Range
}

func newMemLog(origin string) *memLog {
	return &memLog{kv: memKV{}, meta: &chain.Meta{V: 1, Origin: origin, Root: chain.EmptyRoot(), Range: []chain.Hash{}}}
}

// entryHash is the entry hash of entry i of branch b: logs of the same
// branch agree, logs of different branches differ from their first entry on.
func entryHash(b byte, i uint64) chain.Hash {
	var x [9]byte
	x[0] = b
	binary.BigEndian.PutUint64(x[1:], i)
	return chain.Hash(blake3.Sum256(x[:]))
}

// grow appends entries of branch b until the log has size entries.
func (l *memLog) grow(t testing.TB, b byte, size uint64) *memLog {
	for l.meta.Size < size {
		h := entryHash(b, l.meta.Size)
		changed, err := chain.AppendTiles(l.kv, l.meta.Size, h, [20]byte{b})
		if err != nil {
			t.Fatal(err)
		}
		maps.Copy(l.kv, changed)
		l.rg.Append(chain.LeafHash(h))
		l.meta.Size++
	}
	l.meta.Range, l.meta.Root = l.rg.Hashes, l.rg.Root()
	return l
}

// fork returns a copy of the log.
func (l *memLog) fork() *memLog {
	m := *l.meta
	return &memLog{kv: maps.Clone(l.kv), meta: &m, rg: chain.Range{Size: l.rg.Size, Hashes: append([]chain.Hash(nil), l.rg.Hashes...)}}
}

// refHasher is RFC 6962 with BLAKE3, written against transparency-dev's
// merkle.LogHasher interface without using package chain.
type refHasher struct{}

func (refHasher) EmptyRoot() []byte { return blake3.New().Sum(nil) }
func (refHasher) Size() int         { return 32 }
func (refHasher) HashLeaf(leaf []byte) []byte {
	h := blake3.New()
	h.Write([]byte{0})
	h.Write(leaf)
	return h.Sum(nil)
}
func (refHasher) HashChildren(l, r []byte) []byte {
	h := blake3.New()
	h.Write([]byte{1})
	h.Write(l)
	h.Write(r)
	return h.Sum(nil)
}
