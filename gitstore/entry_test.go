package gitstore

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestReadEntryDecodeEntry: an object git packed whole is read with its
// pack entry exactly as git stored it (the bytes git's index names, by
// their CRC32), and DecodeEntry gives back the object from those bytes
// alone; a delta and a loose object get a new entry, which decodes too. A
// PackWriter given the decoded objects writes a pack git reads, with the
// entries copied byte for byte. DecodeEntry refuses what a copy must not
// carry: a delta, a stream cut short, bytes after the stream, a size the
// stream does not have, more than the limit.
func TestReadEntryDecodeEntry(t *testing.T) {
	r := odbDeltaRepo(t, 6)
	r.git(nil, "repack", "-a", "-d", "-q") // a packed history with deltas
	r.commitFile("loose.txt", "a loose blob\n")
	db := odbOpen(t, r.objects())
	pw := NewPackWriter()
	stored := 0
	for _, g := range r.catFile() {
		o, err := db.ReadEntry(g.id)
		if err != nil {
			t.Fatalf("ReadEntry(%s): %v", g.id, err)
		}
		if o.ID() != g.id || o.Type().String() != g.typ || !bytes.Equal(o.Data(), g.data) {
			t.Fatalf("ReadEntry(%s) = %s %s, %d bytes; git says %s, %d bytes", g.id, o.ID(), o.Type(), len(o.Data()), g.typ, len(g.data))
		}
		if o.entry != nil {
			stored++
		}
		d, err := DecodeEntry(o.Entry(), uint64(len(g.data)))
		if err != nil || d.ID() != g.id || !bytes.Equal(d.Data(), g.data) {
			t.Fatalf("DecodeEntry of %s's entry: %v", g.id, err)
		}
		pw.AddObject(d)
	}
	if all := len(r.catFile()); stored == 0 || stored == all {
		t.Fatalf("%d of %d objects read with their stored entry, want some (not the deltas, not the loose ones)", stored, all)
	}
	name, err := pw.WriteTo(r.objects())
	if err != nil {
		t.Fatal(err)
	}
	r.git(nil, "verify-pack", filepath.Join(r.objects(), "pack", name+".idx"))
	// Each stored entry is in the new pack byte for byte.
	pack, err := os.ReadFile(filepath.Join(r.objects(), "pack", name+".pack"))
	if err != nil {
		t.Fatal(err)
	}
	for _, g := range r.catFile() {
		if o, _ := db.ReadEntry(g.id); o != nil && o.entry != nil && !bytes.Contains(pack, o.entry) {
			t.Fatalf("the entry of %s was not copied as stored", g.id)
		}
	}

	blob := odbRawEntry(int8(BlobObject), nil, []byte("some content\n"))
	if o, err := DecodeEntry(blob, 100); err != nil || o.ID() != HashObject(BlobObject, []byte("some content\n")) {
		t.Fatalf("DecodeEntry of a blob: %v", err)
	}
	for name, bad := range map[string][]byte{
		"ref-delta":   odbRawEntry(packRefDelta, make([]byte, 20), []byte("\x0d\x0d\x90\x0d")),
		"ofs-delta":   odbRawEntry(packOfsDelta, []byte{1}, []byte("\x0d\x0d\x90\x0d")),
		"cut":         blob[:len(blob)-2],
		"after":       append(bytes.Clone(blob), 0),
		"size":        append([]byte{byte(BlobObject)<<4 | 14}, blob[1:]...),
		"flipped":     append(bytes.Clone(blob[:len(blob)-5]), blob[len(blob)-5]^1, blob[len(blob)-4], blob[len(blob)-3], blob[len(blob)-2], blob[len(blob)-1]),
		"empty":       nil,
		"over limit":  odbRawEntry(int8(BlobObject), nil, []byte(strings.Repeat("x", 101))),
		"bad type":    odbRawEntry(5, nil, []byte("x")),
		"no zlib":     {byte(BlobObject)<<4 | 1, 'x'},
		"header only": {byte(BlobObject)<<4 | 0x81},
	} {
		if o, err := DecodeEntry(bad, 100); err == nil {
			t.Errorf("%s: DecodeEntry took it as %s %s", name, o.Type(), o.ID())
		}
	}
}
