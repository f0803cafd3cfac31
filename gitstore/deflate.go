package gitstore

import (
	"encoding/binary"
	"math/bits"
)

// deflateSmallMax is the largest input deflateSmall takes: one window
// (RFC 1951 distances reach 32 KiB back), so that every position fits the
// match table's uint16.
const deflateSmallMax = 1<<15 - 1

// deflateHashBits sizes deflateSmall's match table: 2^11 positions, 4 KiB
// on the stack, cleared per object in a few hundred stores.
const deflateHashBits = 11

// deflateSmall appends to dst the deflate data (RFC 1951) of src, at most
// deflateSmallMax bytes, as one final block: a fixed-Huffman block of
// greedy LZ77 matches (of 4 to 258 bytes, found through a hash of their
// first four) or, where that would not be shorter, a stored block: the
// output is never longer than len(src)+5 bytes.
//
// It exists for the dozen objects of a few hundred bytes an append writes,
// mostly hashes and text around them, where a general compressor's cost is
// setting itself up: klauspost's stateless deflate spent ≈ 50k instructions
// an object building Huffman tables (a note's largest user-space cost) and
// still stored most of them whole, and its package initializers and pools
// were a dozen page faults of every process. Here nothing is allocated but
// dst's growth and nothing is built per object; what the fixed code gives
// up against a dynamic one (hexadecimal text takes 8 bits a digit) the
// packs a ledger is made of hardly had: see PERFORMANCE.md at b45f87f, "Append, third
// pass".
func deflateSmall(dst, src []byte) []byte {
	start := len(dst)
	stored := len(src) + 5                             // a stored block's header and the bytes
	w := bitWriter{out: dst, bits: 1 | 1<<1, nbits: 3} // BFINAL, BTYPE 01: fixed Huffman codes
	var table [1 << deflateHashBits]uint16
	i := 0
	for i+4 <= len(src) && len(w.out)-start < stored {
		v := binary.LittleEndian.Uint32(src[i:])
		h := v * 0x1e35a7bd >> (32 - deflateHashBits)
		cand := int(table[h]) - 1
		table[h] = uint16(i + 1)
		if cand < 0 || binary.LittleEndian.Uint32(src[cand:]) != v {
			w.put(literalCode(src[i]))
			i++
			continue
		}
		n := 4
		for n < 258 && i+n < len(src) && src[cand+n] == src[i+n] {
			n++
		}
		w.fixedMatch(n, i-cand)
		i += n
	}
	for ; i < len(src) && len(w.out)-start < stored; i++ {
		w.put(literalCode(src[i]))
	}
	w.fixedSym(256) // end of block
	w.flush()
	if len(w.out)-start < stored {
		return w.out
	}
	return deflateStored(w.out[:start], src)
}

// deflateStored appends to dst the deflate data of src as stored blocks
// (BTYPE 00, at most 65,535 bytes each, the last one final): src itself
// between 5-byte headers, nothing compressed.
func deflateStored(dst, src []byte) []byte {
	for {
		n := min(len(src), 0xffff)
		final := byte(0)
		if n == len(src) {
			final = 1
		}
		dst = append(dst, final, byte(n), byte(n>>8), ^byte(n), ^byte(n>>8)) // BFINAL, BTYPE 00; LEN, NLEN
		dst, src = append(dst, src[:n]...), src[n:]
		if final == 1 {
			return dst
		}
	}
}

// bitWriter appends bits to out, least significant first, as deflate
// packs them; up to 31 of them wait in bits until flush.
type bitWriter struct {
	out   []byte
	bits  uint64
	nbits uint
}

// put writes the n (at most 32) low bits of v.
func (w *bitWriter) put(v uint64, n uint) {
	w.bits |= v << w.nbits
	w.nbits += n
	if w.nbits >= 32 {
		w.out = binary.LittleEndian.AppendUint32(w.out, uint32(w.bits))
		w.bits >>= 32
		w.nbits -= 32
	}
}

// flush writes the waiting bits, the last byte padded with zeros.
func (w *bitWriter) flush() {
	for ; w.nbits > 0; w.nbits -= min(w.nbits, 8) {
		w.out = append(w.out, byte(w.bits))
		w.bits >>= 8
	}
}

// literalCode is byte b's code in the fixed code of RFC 1951 3.2.6, and
// its length: 0x30+b in 8 bits below 144, else 0x100+b in 9. Huffman codes
// are sent first bit first, hence reversed; 0x100+b reversed in 9 bits is
// b reversed in 8, then the 1.
func literalCode(b byte) (uint64, uint) {
	if b < 144 {
		return uint64(bits.Reverse8(0x30 + b)), 8
	}
	return uint64(bits.Reverse8(b))<<1 | 1, 9
}

// fixedSym writes symbol s of 256–285 (end of block, lengths) in the
// fixed code: s-256 in 7 bits below 280, else 0xc0+s-280 in 8.
func (w *bitWriter) fixedSym(s int) {
	if s < 280 {
		w.put(uint64(bits.Reverse8(uint8(s-256)<<1)), 7)
	} else {
		w.put(uint64(bits.Reverse8(uint8(0xc0+s-280))), 8)
	}
}

// fixedMatch writes a match of n (3–258) bytes at distance d (1–32768):
// its length symbol and extra bits, then its 5-bit distance code and
// extra bits, by the inflater's tables (lenBase, distBase).
func (w *bitWriter) fixedMatch(n, d int) {
	l := len(lenBase) - 1
	for int(lenBase[l]) > n {
		l--
	}
	w.fixedSym(257 + l)
	w.put(uint64(n-int(lenBase[l])), uint(lenExtra[l]))
	c := len(distBase) - 1
	for int(distBase[c]) > d {
		c--
	}
	w.put(uint64(bits.Reverse16(uint16(c))>>11), 5)
	w.put(uint64(d-int(distBase[c])), uint(distExtra[c]))
}
