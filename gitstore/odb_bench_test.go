package gitstore

import (
	"bytes"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
)

// odbBenchBlob returns a small text object of about size bytes, distinct for each i.
func odbBenchBlob(i, size int) []byte {
	b := fmt.Appendf(nil, "object %d\n", i)
	for len(b) < size {
		b = fmt.Appendf(b, "ledger line %d of object %d\n", len(b), i)
	}
	return b[:size]
}

// odbFastImportBlobs returns a git fast-import stream of n small blobs and one
// commit holding the file known.txt with content known.
func odbFastImportBlobs(n int, known string) []byte {
	var s bytes.Buffer
	for i := range n {
		b := odbBenchBlob(i, 20+i%200)
		fmt.Fprintf(&s, "blob\ndata %d\n%s\n", len(b), b)
	}
	fmt.Fprintf(&s, "commit refs/heads/main\ncommitter T <t@example.com> 1700000000 +0000\ndata 4\nbig\nM 100644 inline known.txt\ndata %d\n%s\n", len(known), known)
	return s.Bytes()
}

func BenchmarkReadLoose(b *testing.B) {
	r := odbNewRepo(b)
	id, _ := ParseObjectID(strings.TrimSpace(string(r.git(odbBenchBlob(1, 500), "hash-object", "-w", "--stdin"))))
	db := odbOpen(b, r.objects())
	for b.Loop() {
		if _, _, err := db.Read(id); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkReadPacked(b *testing.B) {
	r := odbNewRepo(b)
	r.git(odbFastImportBlobs(1000, "known\n"), "fast-import", "--quiet")
	var ids []ObjectID
	for _, line := range strings.Fields(string(r.git(nil, "cat-file", "--batch-all-objects", "--batch-check=%(objectname)"))) {
		id, _ := ParseObjectID(line)
		ids = append(ids, id)
	}
	db := odbOpen(b, r.objects())
	i := 0
	for b.Loop() {
		if _, _, err := db.Read(ids[i%len(ids)]); err != nil {
			b.Fatal(err)
		}
		i++
	}
}

// BenchmarkReadDeltaHistory reads every object of a 500-commit history packed
// with deep delta chains (~2,100 objects), in hash order, on a fresh ObjectDB
// per pass, against one git cat-file --batch-all-objects --batch.
func BenchmarkReadDeltaHistory(b *testing.B) {
	r := odbDeltaRepo(b, 500)
	r.git(nil, "repack", "-adfq", "--depth=50", "--window=30")
	objs := r.catFile()
	b.Run("tally", func(b *testing.B) {
		for b.Loop() {
			db, err := OpenObjectDB(r.objects(), nil)
			if err != nil {
				b.Fatal(err)
			}
			for _, o := range objs {
				if _, _, err := db.Read(o.id); err != nil {
					b.Fatal(err)
				}
			}
			db.Close()
		}
	})
	b.Run("git-cat-file-batch", func(b *testing.B) {
		for b.Loop() {
			r.git(nil, "cat-file", "--batch-all-objects", "--batch")
		}
	})
}

// BenchmarkFirstLookupBigRepo measures opening the object database of a
// repository of 3k and 300k packed objects and reading one object, as a tally
// command does once per run, against git cat-file -p of the same object. Set
// TALLY_BIG_BENCH=1 to run it (building the repositories takes a few seconds).
func BenchmarkFirstLookupBigRepo(b *testing.B) {
	if os.Getenv("TALLY_BIG_BENCH") != "1" {
		b.Skip("set TALLY_BIG_BENCH=1 to build a 300k-object repository")
	}
	const known = "the object looked up\n"
	id := HashObject(BlobObject, []byte(known))
	for _, n := range []int{3000, 300000} {
		r := odbNewRepo(b)
		r.git(odbFastImportBlobs(n, known), "fast-import", "--quiet")
		b.Run(fmt.Sprintf("objects=%d/tally-open-and-read", n), func(b *testing.B) {
			for b.Loop() {
				db, err := OpenObjectDB(r.objects(), nil)
				if err != nil {
					b.Fatal(err)
				}
				if _, data, err := db.Read(id); err != nil || string(data) != known {
					b.Fatal(data, err)
				}
				db.Close()
			}
		})
		b.Run(fmt.Sprintf("objects=%d/tally-read-warm", n), func(b *testing.B) {
			db := odbOpen(b, r.objects())
			for b.Loop() {
				if _, _, err := db.Read(id); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(fmt.Sprintf("objects=%d/git-cat-file-p", n), func(b *testing.B) {
			for b.Loop() {
				cmd := exec.Command("git", "cat-file", "-p", id.String())
				cmd.Dir = r.dir
				if out, err := cmd.Output(); err != nil || string(out) != known {
					b.Fatal(string(out), err)
				}
			}
		})
	}
}

// BenchmarkPackWriterWrite writes one pack of 15 objects of 100-800 bytes, the
// size of one tally append, fsyncs included.
func BenchmarkPackWriterWrite(b *testing.B) {
	dir := b.TempDir()
	n, size := 0, 0
	for b.Loop() {
		w := NewPackWriter()
		for range 15 {
			w.Add(BlobObject, odbBenchBlob(n, 100+n*97%700))
			n++
		}
		name, err := w.WriteTo(dir)
		if err != nil {
			b.Fatal(err)
		}
		if fi, err := os.Stat(dir + "/pack/" + name + ".pack"); err == nil {
			size += int(fi.Size())
		}
	}
	b.ReportMetric(float64(size)/float64(b.N), "packbytes/op")
}

// BenchmarkReceiveObjects is a client's work on the objects of a sent
// range (ledger.parseSent and takeSent, FORMAT.md §9b) before the pack is
// written: 8 entries' worth of tally objects, each entry a tree of 500
// cells (about 15 KiB, what a 500-cell plan's cells directory is) and 10
// objects of 100-800 bytes, received as their contents (form 1: hashed,
// then compressed into the pack) or as pack entries (form 2: inflated and
// hashed, then copied).
func BenchmarkReceiveObjects(b *testing.B) {
	var objs []*Object
	for n := range 8 {
		var tree []byte
		for c := range 500 {
			tree = fmt.Appendf(tree, "100644 c%03d\x00", c)
			id := HashObject(BlobObject, fmt.Appendf(nil, "cell %d of entry %d", c, n))
			tree = append(tree, id[:]...)
		}
		objs = append(objs, NewObject(TreeObject, tree))
		for i := range 10 {
			objs = append(objs, NewObject(BlobObject, odbBenchBlob(n*10+i, 100+(n*10+i)*97%700)))
		}
	}
	b.Run("form=1", func(b *testing.B) {
		for b.Loop() {
			w := NewPackWriter()
			for _, o := range objs {
				w.AddObject(NewObject(o.Type(), o.Data()))
			}
		}
	})
	b.Run("form=2", func(b *testing.B) {
		for b.Loop() {
			w := NewPackWriter()
			for _, o := range objs {
				d, err := DecodeEntry(o.Entry(), 1<<20)
				if err != nil {
					b.Fatal(err)
				}
				w.AddObject(d)
			}
		}
	})
}
