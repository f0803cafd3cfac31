package gitstore

import (
	"bytes"
	"compress/zlib"
	"encoding/binary"
	"fmt"
	"hash/adler32"
	"io"
	"math/rand/v2"
	"strings"
	"testing"

	kflate "github.com/klauspost/compress/flate"
	kzlib "github.com/klauspost/compress/zlib"
)

// zlibReference is what the pack reader did before inflateZlib, and still
// does for loose objects: compress/zlib read to size bytes, then to io.EOF.
// It returns the stream's length too: zlib reads a bytes.Reader (an
// io.ByteReader) exactly to the end of the stream's checksum.
func zlibReference(src []byte, size uint64) ([]byte, int, error) {
	r := bytes.NewReader(src)
	zr, err := zlib.NewReader(r)
	if err != nil {
		return nil, 0, err
	}
	data, err := odbInflateRest(zr, size, len(src))
	return data, len(src) - r.Len(), err
}

// inflateAgrees fails t unless inflateZlib and zlibReference both refuse
// src as holding size bytes, or both give the same bytes and find the
// stream ending at the same byte.
func inflateAgrees(t *testing.T, what string, src []byte, size uint64) bool {
	t.Helper()
	got, end, err := inflateZlib(src, size)
	want, wend, werr := zlibReference(src, size)
	if (err == nil) != (werr == nil) || !bytes.Equal(got, want) || (err == nil && end != wend) {
		t.Errorf("%s (%d compressed bytes, size %d): inflateZlib %d bytes ending at %d, %v; compress/zlib %d bytes ending at %d, %v",
			what, len(src), size, len(got), end, err, len(want), wend, werr)
		return false
	}
	return true
}

// inflateCorpus is contents of the kinds a repository holds, and ones that
// make every kind of deflate block and code: empty, tiny, text, JSON, random
// (stored blocks), long runs (overlapping copies), and skewed byte
// frequencies (literal codes longer than the decoder's table).
func inflateCorpus() map[string][]byte {
	rng := rand.New(rand.NewPCG(7, 15))
	skewed := make([]byte, 40000)
	for i := range skewed {
		b := 0
		for b < 255 && rng.IntN(5) != 0 {
			b++
		}
		skewed[i] = byte(b)
	}
	runs := bytes.Repeat([]byte("ab"), 5000)
	runs = append(runs, bytes.Repeat([]byte{'z'}, 70000)...)
	json := `{"actor":"bench","body":{"text":"x"},"kind":"note","nonce":"3f9a","prev":"e779d231c216103eefc71c06f014842eaf8ae4557eaccd404280a6a095b2d8bc","seq":19999,"ts":"2026-12-01T18:11:18.000000000Z","v":1}`
	return map[string][]byte{
		"empty":  nil,
		"byte":   {'x'},
		"json":   []byte(json),
		"text":   []byte(strings.Repeat("some text that compresses well, more or less\n", 400)),
		"random": odbRandom(3, 70000),
		"runs":   runs,
		"skewed": skewed,
		"mixed":  append(append(odbRandom(5, 3000), []byte(json)...), skewed[:5000]...),
	}
}

// inflateStreams compresses each corpus entry with the writers a
// repository's objects come from: compress/zlib at every kind of level
// (git and zlib make the same kinds of blocks), tally's own (zlibAppend),
// and klauspost's zlib and stateless deflate, which tally's packs were
// written with before.
func inflateStreams(t *testing.T) map[string][]byte {
	type writer func(w io.Writer, level int) (io.WriteCloser, error)
	writers := []struct {
		name   string
		new    writer
		levels []int
	}{
		{"zlib", func(w io.Writer, l int) (io.WriteCloser, error) { return zlib.NewWriterLevel(w, l) },
			[]int{zlib.HuffmanOnly, zlib.NoCompression, zlib.BestSpeed, zlib.DefaultCompression, zlib.BestCompression}},
		{"klauspost", func(w io.Writer, l int) (io.WriteCloser, error) { return kzlib.NewWriterLevel(w, l) },
			[]int{kzlib.BestSpeed, kzlib.DefaultCompression, kzlib.BestCompression}},
	}
	out := map[string][]byte{}
	for name, data := range inflateCorpus() {
		// klauspost's stateless deflate in a zlib wrapper, as appends
		// wrote small objects before deflateSmall (one block, or stored
		// blocks).
		b := bytes.NewBuffer([]byte{0x78, 0x01})
		kflate.StatelessDeflate(b, data, true, nil)
		b.Write(binary.BigEndian.AppendUint32(nil, adler32.Checksum(data)))
		out[name+"/stateless"] = b.Bytes()
		out[name+"/tally"] = zlibAppend(nil, data)
		for _, w := range writers {
			for _, level := range w.levels {
				var b bytes.Buffer
				zw, err := w.new(&b, level)
				if err != nil {
					t.Fatal(err)
				}
				zw.Write(data)
				zw.Close()
				out[fmt.Sprintf("%s/%s%d", name, w.name, level)] = b.Bytes()
			}
		}
	}
	return out
}

// TestInflateMatchesZlib: inflateZlib gives exactly what compress/zlib
// gives, and refuses exactly what it refuses, for streams of every kind,
// for a wrong size, and for every streams's damaged, truncated and
// extended copies.
func TestInflateMatchesZlib(t *testing.T) {
	long := false
	rng := rand.New(rand.NewPCG(1, 2))
	for name, src := range inflateStreams(t) {
		want, _, err := zlibReference(src, uint64(len(inflateCorpus()[strings.Split(name, "/")[0]])))
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		size := uint64(len(want))
		if !inflateAgrees(t, name, src, size) ||
			!inflateAgrees(t, name+" with bytes after it", append(bytes.Clone(src), 1, 2, 3), size) ||
			!inflateAgrees(t, name+" one byte short", src, size-min(size, 1)) ||
			!inflateAgrees(t, name+" one byte long", src, size+1) {
			continue
		}
		if d := (&inflater{src: src, pos: 2}); len(src) > 2 {
			if hdr, _ := d.take(3); hdr>>1 == 2 && d.dynamic() == nil && d.lit.max > huffPrimary {
				long = true
			}
		}
		for n := range len(src) {
			if n < 64 || rng.IntN(len(src)/64+1) == 0 {
				inflateAgrees(t, fmt.Sprintf("%s cut at %d", name, n), src[:n], size)
			}
		}
		for range 200 {
			b := bytes.Clone(src)
			i := rng.IntN(len(b))
			b[i] ^= byte(1 << rng.IntN(8))
			if !inflateAgrees(t, fmt.Sprintf("%s with byte %d changed", name, i), b, size) {
				break
			}
		}
	}
	if !long {
		t.Error("no stream had literal codes longer than the table: the long path went untested")
	}
}

// TestInflateRefusesDamage: what a damaged stream gives is an error, never
// wrong bytes: a changed checksum, a preset dictionary, a bad header.
func TestInflateRefusesDamage(t *testing.T) {
	src := inflateStreams(t)["json/zlib-1"]
	size := uint64(len(inflateCorpus()["json"]))
	if _, _, err := inflateZlib(src, size); err != nil {
		t.Fatal(err)
	}
	for what, change := range map[string]func(b []byte){
		"checksum": func(b []byte) { b[len(b)-1] ^= 1 },
		"dictionary": func(b []byte) { // FDICT set, FCHECK made right again
			b[1] = b[1]&0xc0 | 0x20
			b[1] |= byte((31 - (uint(b[0])<<8|uint(b[1]))%31) % 31)
		},
		"method": func(b []byte) { b[0] = 0x79 },
		"fcheck": func(b []byte) { b[1]++ },
	} {
		b := bytes.Clone(src)
		change(b)
		if out, _, err := inflateZlib(b, size); err == nil {
			t.Errorf("%s changed: inflated %d bytes without an error", what, len(out))
		}
		inflateAgrees(t, what+" changed", b, size)
	}
}

// FuzzInflate: on any bytes, inflateZlib agrees with compress/zlib, also
// with 16 bytes after them (as a pack's next entry follows a stream), where
// codesFast decodes all but the last symbols.
func FuzzInflate(f *testing.F) {
	for name, src := range inflateStreams(&testing.T{}) {
		if strings.HasPrefix(name, "json/") || strings.HasPrefix(name, "byte/") || strings.HasPrefix(name, "empty/") {
			want, _, _ := zlibReference(src, uint64(len(inflateCorpus()[strings.Split(name, "/")[0]])))
			f.Add(src, uint16(len(want)))
		}
	}
	f.Fuzz(func(t *testing.T, src []byte, size uint16) {
		inflateAgrees(t, "fuzzed", src, uint64(size))
		inflateAgrees(t, "fuzzed, 16 bytes after", append(bytes.Clone(src), "0123456789abcdef"...), uint64(size))
	})
}
