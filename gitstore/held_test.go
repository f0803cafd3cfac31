package gitstore

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
)

// TestHoldServesStoredObjects: while held, a stored object is read from the
// held copy (its pack entry damaged on disk, Read and a Cursor still give
// its content), each read a copy the caller owns; released, it is read from
// the pack again, and the damage is an error.
func TestHoldServesStoredObjects(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "objects")
	if err := os.MkdirAll(filepath.Join(dir, "pack"), 0o755); err != nil {
		t.Fatal(err)
	}
	content := odbRandom(7, 4096)
	o := NewObject(BlobObject, content)
	pw := NewPackWriter()
	pw.AddObject(o)
	name, err := pw.WriteTo(dir)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "pack", name+".pack")
	pack, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	pack[12+2+100] ^= 0xff // inside the blob's zlib stream
	if err := os.WriteFile(path, pack, 0o644); err != nil {
		t.Fatal(err)
	}
	db := odbOpen(t, dir)
	release := db.Hold(map[ObjectID]*Object{o.ID(): o})
	for i := 0; i < 2; i++ {
		typ, data, err := db.Read(o.ID())
		if err != nil || typ != BlobObject || !bytes.Equal(data, content) {
			t.Fatalf("held Read: %v, %v, %d bytes equal %v", typ, err, len(data), bytes.Equal(data, content))
		}
		data[0] ^= 0xff // the caller's own copy
		typ, data, _, err = db.Cursor().ReadWhere(o.ID())
		if err != nil || typ != BlobObject || !bytes.Equal(data, content) {
			t.Fatalf("held Cursor read: %v, %v", typ, err)
		}
	}
	release()
	if _, _, err := db.Read(o.ID()); err == nil {
		t.Fatal("released, the damaged pack entry read without an error")
	}
}
