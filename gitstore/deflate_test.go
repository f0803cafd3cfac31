package gitstore

import (
	"bytes"
	"compress/flate"
	"io"
	"strings"
	"testing"
)

// TestDeflateSmall checks deflateSmall against compress/flate's reader on
// inputs that reach each of its cases: empty and tiny inputs, matches of
// the shortest and longest lengths at the shortest and longest distances
// (and every length symbol between), text that compresses, random bytes
// that must be stored, and the largest input it takes. Stored output is
// the input and 5 bytes; compressible input must come out shorter than a
// quarter of it, or the matching is not doing its work.
func TestDeflateSmall(t *testing.T) {
	// far repeats its first 300 bytes at the far end of the window.
	head := odbRandom(9, 300)
	far := append(append(bytes.Clone(head), bytes.Repeat([]byte{'z'}, deflateSmallMax-600)...), head...)
	var lengths []byte
	for n := 3; n <= 258; n++ {
		lengths = append(lengths, strings.Repeat("x", n)...)
		lengths = append(lengths, byte(n), '|')
	}
	text := []byte(strings.Repeat("tree 6a21b8e4526025cf31f82848527cc3c19731b2ca\\nparent ", 100))
	cases := map[string]struct {
		src        []byte
		storedSize bool // the output must be a stored block
		shrinks    bool // the output must be shorter than a quarter of the input
	}{
		"empty":      {src: nil},
		"one":        {src: []byte{'a'}},
		"three":      {src: []byte("abc")},
		"four":       {src: []byte("abcd")},
		"run4":       {src: []byte("aaaaaaaa")},
		"run258":     {src: bytes.Repeat([]byte{'q'}, 259), shrinks: true},
		"run259":     {src: bytes.Repeat([]byte{'q'}, 260), shrinks: true},
		"lengths":    {src: lengths, shrinks: true},
		"far":        {src: far, shrinks: true},
		"text":       {src: text, shrinks: true},
		"random":     {src: odbRandom(4, 3000), storedSize: true},
		"max":        {src: bytes.Repeat([]byte("ab"), deflateSmallMax/2), shrinks: true},
		"maxrandom":  {src: odbRandom(5, deflateSmallMax), storedSize: true},
		"json":       {src: inflateCorpus()["json"]},
		"binaryids":  {src: bytes.Repeat(append([]byte("100644 0\x00"), odbRandom(6, 20)...), 40)},
		"skewedtail": {src: inflateCorpus()["skewed"][:deflateSmallMax]},
	}
	for name, c := range cases {
		got := deflateSmall([]byte("prefix"), c.src)
		if !bytes.HasPrefix(got, []byte("prefix")) {
			t.Errorf("%s: the bytes before were not kept", name)
			continue
		}
		out := got[len("prefix"):]
		back, err := io.ReadAll(flate.NewReader(bytes.NewReader(out)))
		if err != nil || !bytes.Equal(back, c.src) {
			t.Errorf("%s: compress/flate reads %d bytes, %v; want the %d given", name, len(back), err, len(c.src))
			continue
		}
		if len(out) > len(c.src)+5 {
			t.Errorf("%s: %d bytes out of %d, more than a stored block", name, len(out), len(c.src))
		}
		if c.storedSize && len(out) != len(c.src)+5 {
			t.Errorf("%s: %d bytes out of %d, not a stored block", name, len(out), len(c.src))
		}
		if c.shrinks && len(out) >= len(c.src)/4 {
			t.Errorf("%s: %d bytes out of %d", name, len(out), len(c.src))
		}
	}
}

// FuzzDeflateSmall checks that whatever deflateSmall writes, compress/flate
// and inflateZlib (in zlibAppend's wrapper) read back as the input.
func FuzzDeflateSmall(f *testing.F) {
	for _, src := range inflateCorpus() {
		f.Add(src[:min(len(src), deflateSmallMax)])
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		src = src[:min(len(src), deflateSmallMax)]
		back, err := io.ReadAll(flate.NewReader(bytes.NewReader(deflateSmall(nil, src))))
		if err != nil || !bytes.Equal(back, src) {
			t.Fatalf("compress/flate reads %d bytes, %v; want the %d given", len(back), err, len(src))
		}
		z := zlibAppend(nil, src)
		got, end, err := inflateZlib(z, uint64(len(src)))
		if err != nil || !bytes.Equal(got, src) || end != len(z) {
			t.Fatalf("inflateZlib reads %d bytes to %d of %d, %v; want the %d given", len(got), end, len(z), err, len(src))
		}
	})
}
