package gitstore

import (
	"encoding/binary"
	"errors"
	"hash/adler32"
	"math/bits"
	"sync"
)

// inflateZlib decodes src, which starts with a zlib stream (RFC 1950) of
// deflate data (RFC 1951) that inflates to exactly size bytes, and returns
// those bytes with the length of the stream (its Adler-32 included). It fails if the header is not zlib's (or asks for a preset
// dictionary), if the deflate data is malformed or ends early, if it
// inflates to more or fewer than size bytes, or if the Adler-32 after it
// differs from that of the bytes: it accepts exactly the streams
// compress/zlib reads to size bytes and then to io.EOF (odbInflateRest),
// and gives the same bytes. Bytes after the stream are not read (in a pack,
// the next entry).
//
// It exists for speed on the small objects a ledger is made of (a commit,
// a tree, an entry of a few hundred bytes), where compress/flate spends
// more time building and clearing its Huffman tables (a 512-entry table
// and allocated link tables per code, per stream) than decoding, and
// copies every byte through its window: this one sizes each table to its
// code's longest length (at most 2^9 entries; longer codes, rare in small
// streams, are decoded canonically bit by bit), allocates nothing but the
// result, and decodes into the result itself, which holds the whole
// window since the size is known.
func inflateZlib(src []byte, size uint64) ([]byte, int, error) {
	if len(src) < 2 {
		return nil, 0, errInflateEOF
	}
	cmf, flg := src[0], src[1]
	if cmf&0x0f != 8 || cmf>>4 > 7 || (uint(cmf)<<8|uint(flg))%31 != 0 {
		return nil, 0, errors.New("zlib: invalid header")
	}
	if flg&0x20 != 0 {
		return nil, 0, errors.New("zlib: invalid dictionary")
	}
	d := inflaters.Get().(*inflater)
	defer inflaters.Put(d)
	d.src, d.pos, d.bits, d.nbits = src, 2, 0, 0
	out := make([]byte, 0, size)
	out, err := d.inflate(out)
	d.src = nil
	if err != nil {
		return nil, 0, err
	}
	if uint64(len(out)) != size {
		return nil, 0, errors.New("flate: stream shorter than its object")
	}
	// The checksum follows the deflate data at the next byte boundary.
	p := d.pos - int(d.nbits/8)
	if p+4 > len(src) {
		return nil, 0, errInflateEOF
	}
	if binary.BigEndian.Uint32(src[p:]) != adler32.Checksum(out) {
		return nil, 0, errors.New("zlib: invalid checksum")
	}
	return out, p + 4, nil
}

var (
	errInflateEOF     = errors.New("flate: unexpected end of stream")
	errInflateCorrupt = errors.New("flate: corrupt stream")
	errInflateLong    = errors.New("flate: stream longer than its object")
)

// inflaters holds decoders for reuse: their tables are 2.5 KiB that each
// small object would otherwise allocate.
var inflaters = sync.Pool{New: func() any { return new(inflater) }}

// inflater is the state of one decode: the input and a bit buffer holding
// its next bits, least significant first. The buffer's bits above nbits are
// either zero or the stream's next bits in place (refill loads whole words),
// so or-ing those in again changes nothing.
type inflater struct {
	src   []byte
	pos   int // next byte of src to load into bits
	bits  uint64
	nbits uint

	lit, dist, clen huffman
	lens            [maxLitCodes + maxDistCodes]uint8
}

const (
	maxLitCodes  = 286 // of the 288 literal/length symbols, the last two never occur
	maxDistCodes = 30  // likewise of 32 distance symbols
	huffPrimary  = 9   // bits of the largest table; longer codes take the slow path
	huffLong     = 15  // an entry's length field marking a longer code's prefix
)

// huffman decodes one canonical Huffman code. table, indexed by the next
// tbits bits of the stream, holds symbol<<4 | length for each code of at
// most tbits bits (repeated for every value of the bits after it), 0 where
// no code starts (an incomplete code), and huffLong where only longer codes
// do; those are decoded from count and syms, the symbols in code order
// (built with the table, which is filled in that order).
type huffman struct {
	tbits, max uint
	mask       uint64 // 1<<tbits - 1
	count      [16]uint16
	syms       [288]uint16
	table      [1 << huffPrimary]uint16
}

// init builds h for the code lengths lens (0: the symbol does not occur).
// As zlib and compress/flate do, it refuses an over-subscribed code, and an
// incomplete one but for a single code of length 1; a code with no symbols
// is accepted here and fails when used.
func (h *huffman) init(lens []uint8) bool {
	var count [16]uint16
	for _, n := range lens {
		count[n]++
	}
	return h.initCounted(lens, &count)
}

// initCounted is init for a caller that counted the symbols of each length
// (count[n], n ≥ 1; count[0] is ignored) as it read lens: a dynamic block
// counts a run of equal lengths at once, where counting them here cost a
// quarter of building the table.
func (h *huffman) initCounted(lens []uint8, count *[16]uint16) bool {
	h.count = *count
	h.count[0] = 0
	h.max = 0
	left := 1
	for n := 1; n < 16; n++ {
		left = left<<1 - int(h.count[n])
		if left < 0 {
			return false
		}
		if h.count[n] != 0 {
			h.max = uint(n)
		}
	}
	if h.max == 0 {
		h.tbits, h.mask = 0, 0
		h.table[0] = 0
		return true
	}
	if left > 0 && !(h.max == 1 && h.count[1] == 1) {
		return false
	}
	h.tbits = min(h.max, huffPrimary)
	h.mask = 1<<h.tbits - 1
	// The symbols in code order: by length, then symbol (symLong's, and
	// the order the table is filled in).
	var offs [16]uint16
	for n := 1; n < 15; n++ {
		offs[n+1] = offs[n] + h.count[n]
	}
	for s, n := range lens {
		if n != 0 {
			h.syms[offs[n]] = uint16(s)
			offs[n]++
		}
	}
	// Canonical codes: of each length, consecutive in symbol order,
	// starting where the shorter ones end; written bit-reversed (the
	// stream sends a code's first bit first). The table is built by
	// doubling: once table[:1<<n] decodes every code of at most n bits
	// (each in every slot its bits lead to), a copy of it above itself
	// does so for n+1 bits but the codes of length n+1, which are then
	// written one slot each. Slots no code reaches keep the first one's
	// value: 0 where no code starts (an incomplete code), huffLong where
	// only longer codes do.
	h.table[0] = 0
	if h.max > huffPrimary {
		h.table[0] = huffLong
	}
	code, i := 0, 0
	for n := 1; n <= int(h.tbits); n++ {
		half := 1 << (n - 1)
		copy(h.table[half:2*half], h.table[:half])
		for range h.count[n] {
			h.table[bits.Reverse16(uint16(code))>>(16-n)] = h.syms[i]<<4 | uint16(n)
			code++
			i++
		}
		code <<= 1
	}
	return true
}

// refill loads bytes until the buffer holds at least 57 bits or the input
// is exhausted.
func (d *inflater) refill() {
	if d.pos+8 <= len(d.src) {
		d.bits |= binary.LittleEndian.Uint64(d.src[d.pos:]) << d.nbits
		k := (63 - d.nbits) >> 3
		d.pos += int(k)
		d.nbits += k << 3
		return
	}
	for d.nbits <= 56 && d.pos < len(d.src) {
		d.bits |= uint64(d.src[d.pos]) << d.nbits
		d.pos++
		d.nbits += 8
	}
}

// take consumes and returns the next n (at most 16) bits, low bit first.
func (d *inflater) take(n uint) (uint, error) {
	if d.nbits < n {
		d.refill()
		if d.nbits < n {
			return 0, errInflateEOF
		}
	}
	v := uint(d.bits & (1<<n - 1))
	d.bits >>= n
	d.nbits -= n
	return v, nil
}

// sym decodes the next symbol of h.
func (d *inflater) sym(h *huffman) (int, error) {
	if d.nbits >= 15 {
		if s, ok := d.symFast(h); ok {
			return s, nil
		}
	}
	return d.symSlow(h)
}

// symFast decodes the next symbol of h from the table, if the buffer holds
// 15 bits or more and the table holds the symbol's code (ok).
func (d *inflater) symFast(h *huffman) (s int, ok bool) {
	e := h.table[d.bits&h.mask&(1<<huffPrimary-1)]
	if n := uint(e & 15); n-1 < huffPrimary {
		d.bits >>= n
		d.nbits -= n
		return int(e >> 4), true
	}
	return 0, false
}

// symSlow is sym after a refill, for any entry.
func (d *inflater) symSlow(h *huffman) (int, error) {
	if d.nbits < 15 {
		d.refill()
	}
	e := h.table[d.bits&h.mask&(1<<huffPrimary-1)]
	n := uint(e & 15)
	if n == huffLong {
		return d.symLong(h)
	}
	if n == 0 {
		return 0, errInflateCorrupt
	}
	if n > d.nbits {
		return 0, errInflateEOF
	}
	d.bits >>= n
	d.nbits -= n
	return int(e >> 4), nil
}

// symLong decodes a symbol whose code is longer than h's table, one bit at
// a time against the count of codes of each length (as zlib's puff does).
func (d *inflater) symLong(h *huffman) (int, error) {
	code, first, index := 0, 0, 0
	for n := uint(1); n <= h.max; n++ {
		if n > d.nbits {
			return 0, errInflateEOF
		}
		code |= int(d.bits>>(n-1)) & 1
		c := int(h.count[n])
		if code-first < c {
			d.bits >>= n
			d.nbits -= n
			return int(h.syms[index+code-first]), nil
		}
		index += c
		first = (first + c) << 1
		code <<= 1
	}
	return 0, errInflateCorrupt
}

var (
	lenBase   = [29]uint16{3, 4, 5, 6, 7, 8, 9, 10, 11, 13, 15, 17, 19, 23, 27, 31, 35, 43, 51, 59, 67, 83, 99, 115, 131, 163, 195, 227, 258}
	lenExtra  = [29]uint8{0, 0, 0, 0, 0, 0, 0, 0, 1, 1, 1, 1, 2, 2, 2, 2, 3, 3, 3, 3, 4, 4, 4, 4, 5, 5, 5, 5, 0}
	distBase  = [30]uint16{1, 2, 3, 4, 5, 7, 9, 13, 17, 25, 33, 49, 65, 97, 129, 193, 257, 385, 513, 769, 1025, 1537, 2049, 3073, 4097, 6145, 8193, 12289, 16385, 24577}
	distExtra = [30]uint8{0, 0, 0, 0, 1, 1, 2, 2, 3, 3, 4, 4, 5, 5, 6, 6, 7, 7, 8, 8, 9, 9, 10, 10, 11, 11, 12, 12, 13, 13}
	// codeOrder is the order in which a dynamic block sends the lengths
	// of the code-length code.
	codeOrder = [19]uint8{16, 17, 18, 0, 8, 7, 9, 6, 10, 5, 11, 4, 12, 3, 13, 2, 14, 1, 15}
)

// fixedCodes are the literal/length and distance codes of fixed blocks,
// built on first use.
var fixedCodes = sync.OnceValue(func() *[2]huffman {
	var h [2]huffman
	var lens [288]uint8
	for i := range lens {
		switch {
		case i < 144:
			lens[i] = 8
		case i < 256:
			lens[i] = 9
		case i < 280:
			lens[i] = 7
		default:
			lens[i] = 8
		}
	}
	h[0].init(lens[:])
	for i := range 32 {
		lens[i] = 5
	}
	h[1].init(lens[:32])
	return &h
})

// inflate decodes the deflate blocks into out, whose capacity is the size
// the stream must inflate to, up to and including the final block.
func (d *inflater) inflate(out []byte) ([]byte, error) {
	for {
		hdr, err := d.take(3)
		if err != nil {
			return nil, err
		}
		switch hdr >> 1 {
		case 0:
			out, err = d.stored(out)
		case 1:
			f := fixedCodes()
			out, err = d.codes(out, &f[0], &f[1])
		case 2:
			if err = d.dynamic(); err == nil {
				out, err = d.codes(out, &d.lit, &d.dist)
			}
		default:
			err = errInflateCorrupt
		}
		if err != nil {
			return nil, err
		}
		if hdr&1 != 0 {
			return out, nil
		}
	}
}

// stored copies a stored block: from the next byte boundary, its length,
// that length's complement, and the bytes.
func (d *inflater) stored(out []byte) ([]byte, error) {
	d.bits >>= d.nbits & 7
	d.nbits &^= 7
	p := d.pos - int(d.nbits/8)
	d.bits, d.nbits, d.pos = 0, 0, p
	if p+4 > len(d.src) {
		return nil, errInflateEOF
	}
	n := int(binary.LittleEndian.Uint16(d.src[p:]))
	if uint16(n) != ^binary.LittleEndian.Uint16(d.src[p+2:]) {
		return nil, errInflateCorrupt
	}
	p += 4
	if p+n > len(d.src) {
		return nil, errInflateEOF
	}
	if n > cap(out)-len(out) {
		return nil, errInflateLong
	}
	d.pos = p + n
	return append(out, d.src[p:p+n]...), nil
}

// dynamic reads a dynamic block's header into d.lit and d.dist.
func (d *inflater) dynamic() error {
	v, err := d.take(14)
	if err != nil {
		return err
	}
	nlit, ndist, ncode := int(v&31)+257, int(v>>5&31)+1, int(v>>10)+4
	if nlit > maxLitCodes || ndist > maxDistCodes {
		return errInflateCorrupt
	}
	var cl [19]uint8
	for i := range ncode {
		n, err := d.take(3)
		if err != nil {
			return err
		}
		cl[codeOrder[i]] = uint8(n)
	}
	if !d.clen.init(cl[:]) {
		return errInflateCorrupt
	}
	lens := d.lens[:nlit+ndist]
	// count[0] counts the literal/length code's lengths, count[1] the
	// distance code's (a run may cross from one to the other).
	var count [2][16]uint16
	for i := 0; i < len(lens); {
		s, err := d.sym(&d.clen)
		if err != nil {
			return err
		}
		if s < 16 {
			lens[i] = uint8(s)
			if i < nlit {
				count[0][s]++
			} else {
				count[1][s]++
			}
			i++
			continue
		}
		var rep, val uint
		switch s {
		case 16:
			if i == 0 {
				return errInflateCorrupt
			}
			val = uint(lens[i-1])
			rep, err = d.take(2)
			rep += 3
		case 17:
			rep, err = d.take(3)
			rep += 3
		default:
			rep, err = d.take(7)
			rep += 11
		}
		if err != nil {
			return err
		}
		if i+int(rep) > len(lens) {
			return errInflateCorrupt
		}
		inLit := uint16(max(0, min(nlit-i, int(rep))))
		count[0][val] += inLit
		count[1][val] += uint16(rep) - inLit
		for range rep {
			lens[i] = uint8(val)
			i++
		}
	}
	if lens[256] == 0 { // the block could never end
		return errInflateCorrupt
	}
	if !d.lit.initCounted(lens[:nlit], &count[0]) || !d.dist.initCounted(lens[nlit:], &count[1]) {
		return errInflateCorrupt
	}
	return nil
}

// codes decodes a compressed block's symbols with the codes lit and dist:
// codesFast as far as it goes, then one symbol (symbol) where it cannot,
// and again.
func (d *inflater) codes(out []byte, lit, dist *huffman) ([]byte, error) {
	for {
		var done bool
		var err error
		if out, done, err = d.codesFast(out, lit, dist); done || err != nil {
			return out, err
		}
		if out, done, err = d.symbol(out, lit, dist); done || err != nil {
			return out, err
		}
	}
}

// symbol decodes one symbol of a compressed block, and the copy a length
// symbol makes; done is true at the block's end.
func (d *inflater) symbol(out []byte, lit, dist *huffman) ([]byte, bool, error) {
	if d.nbits < 15 {
		d.refill()
	}
	s, ok := 0, false
	if d.nbits >= 15 {
		s, ok = d.symFast(lit)
	}
	if !ok {
		var err error
		if s, err = d.symSlow(lit); err != nil {
			return nil, false, err
		}
	}
	if s < 256 {
		if len(out) == cap(out) {
			return nil, false, errInflateLong
		}
		return append(out, byte(s)), false, nil
	}
	if s == 256 {
		return out, true, nil
	}
	s -= 257
	if s >= len(lenBase) {
		return nil, false, errInflateCorrupt
	}
	x, err := d.take(uint(lenExtra[s]))
	if err != nil {
		return nil, false, err
	}
	length := int(lenBase[s]) + int(x)
	ds, err := d.sym(dist)
	if err != nil {
		return nil, false, err
	}
	if ds >= len(distBase) {
		return nil, false, errInflateCorrupt
	}
	if x, err = d.take(uint(distExtra[ds])); err != nil {
		return nil, false, err
	}
	distance := int(distBase[ds]) + int(x)
	if distance > len(out) {
		return nil, false, errInflateCorrupt
	}
	if length > cap(out)-len(out) {
		return nil, false, errInflateLong
	}
	// The copy may overlap what it writes (distance < length): copy
	// distance bytes at a time, each pass reading only bytes written.
	from, to := len(out)-distance, len(out)+length
	out = out[:to]
	for p := to - length; p < to; {
		p += copy(out[p:to], out[from:p])
	}
	return out, false, nil
}

// codesFast decodes symbols of a compressed block as symbol would, with
// the same refusals, while the bit buffer holds 48 bits, enough for a
// literal/length code (at most 15 bits), its extra bits (5), a distance
// code (15) and its extra bits (13), or the input has the 8 bytes to
// refill it, which is all of a packed object's stream but its last
// symbols (a pack entry is followed by more entries or the pack's
// trailer): nothing within a symbol then checks for the end of the input,
// and the decoder's state stays in locals. A code longer than its table
// (or none) is left to symbol. It returns done at the end of the block, or
// not done at a symbol boundary, its state in d for symbol to go on from.
func (d *inflater) codesFast(out []byte, lit, dist *huffman) ([]byte, bool, error) {
	src, p, bits, nb := d.src, d.pos, d.bits, d.nbits
	buf, o := out[:cap(out)], len(out)
	// The tables and masks in locals too: the stores into buf could
	// otherwise be to them, for all the compiler knows.
	litTable, litMask := &lit.table, lit.mask&(1<<huffPrimary-1)
	distTable, distMask := &dist.table, dist.mask&(1<<huffPrimary-1)
	for {
		if nb < 48 {
			if p+8 > len(src) {
				break
			}
			bits |= binary.LittleEndian.Uint64(src[p:]) << nb
			k := (63 - nb) >> 3
			p += int(k)
			nb += k << 3
		}
		e := litTable[bits&litMask]
		n := uint(e & 15)
		if n-1 >= huffPrimary {
			break // a longer code, or none: symbol's
		}
		s := int(e >> 4)
		if s < 256 {
			if o == len(buf) {
				return nil, false, errInflateLong
			}
			bits >>= n
			nb -= n
			buf[o] = byte(s)
			o++
			continue
		}
		if s == 256 {
			d.bits, d.nbits, d.pos = bits>>n, nb-n, p
			return buf[:o], true, nil
		}
		s -= 257
		if s >= len(lenBase) {
			return nil, false, errInflateCorrupt
		}
		x := uint(lenExtra[s])
		ed := distTable[bits>>n>>x&distMask]
		nd := uint(ed & 15)
		if nd-1 >= huffPrimary {
			break // a longer distance code, or none: symbol's, from the length's code
		}
		bits >>= n
		length := int(lenBase[s]) + int(bits&(1<<x-1))
		bits >>= x + nd
		nb -= n + x + nd
		ds := int(ed >> 4)
		if ds >= len(distBase) {
			return nil, false, errInflateCorrupt
		}
		x = uint(distExtra[ds])
		distance := int(distBase[ds]) + int(bits&(1<<x-1))
		bits >>= x
		nb -= x
		if distance > o {
			return nil, false, errInflateCorrupt
		}
		if length > len(buf)-o {
			return nil, false, errInflateLong
		}
		// As in symbol: an overlapping copy goes distance bytes at a time.
		from, to := o-distance, o+length
		for q := o; q < to; {
			q += copy(buf[q:to], buf[from:q])
		}
		o = to
	}
	d.bits, d.nbits, d.pos = bits, nb, p
	return buf[:o], false, nil
}
