package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"
)

// odbTreeEntry formats one tree entry.
func odbTreeEntry(mode, name string, id ObjectID) string {
	return mode + " " + name + "\x00" + string(id[:])
}

// odbSampleObjects adds a small history to w: blobs, nested trees, a commit and
// an annotated tag, and returns them by ID and the commit and tag IDs.
func odbSampleObjects(w *PackWriter, seed string) (objs map[ObjectID][]byte, types map[ObjectID]ObjectType, commit, tag ObjectID) {
	objs, types = map[ObjectID][]byte{}, map[ObjectID]ObjectType{}
	add := func(t ObjectType, data string) ObjectID {
		id := w.Add(t, []byte(data))
		objs[id], types[id] = []byte(data), t
		return id
	}
	hello := add(BlobObject, "hello "+seed+"\n")
	empty := add(BlobObject, "")
	text := add(BlobObject, strings.Repeat("tally ledger line "+seed+"\n", 40))
	bin := add(BlobObject, string(odbRandom(5, 64<<10)))
	sub := add(TreeObject, odbTreeEntry("100644", "bin", bin)+odbTreeEntry("100644", "empty", empty))
	root := add(TreeObject, odbTreeEntry("100644", "hello.txt", hello)+odbTreeEntry("40000", "sub", sub)+odbTreeEntry("100644", "text.txt", text))
	commit = add(CommitObject, fmt.Sprintf("tree %s\nauthor A U Thor <a@example.com> 1700000000 +0000\ncommitter A U Thor <a@example.com> 1700000000 +0000\n\nrecord %s\n", root, seed))
	tag = add(TagObject, fmt.Sprintf("object %s\ntype commit\ntag v-%s\ntagger A U Thor <a@example.com> 1700000000 +0000\n\nrelease\n", commit, seed))
	return objs, types, commit, tag
}

func TestPackWriter(t *testing.T) {
	r := odbNewRepo(t)
	before := odbOpen(t, r.objects()) // opened before the pack exists
	w := NewPackWriter()
	objs, types, commit, tag := odbSampleObjects(w, "one")
	if w.Len() != len(objs) || len(objs) != 8 {
		t.Fatalf("Len() = %d, want %d distinct of 8", w.Len(), len(objs))
	}
	if id := w.Add(BlobObject, []byte("hello one\n")); w.Len() != len(objs) || objs[id] == nil {
		t.Fatalf("re-adding an object: Len() = %d, id %s", w.Len(), id)
	}
	name, err := w.WriteTo(r.objects())
	if err != nil {
		t.Fatal(err)
	}
	if !packValidName(name) {
		t.Fatalf("pack name %q", name)
	}
	base := filepath.Join(r.objects(), "pack", name)
	if left, _ := filepath.Glob(filepath.Join(r.objects(), "pack", "tmp_*")); len(left) != 0 {
		t.Errorf("temporary files left: %v", left)
	}

	// git agrees on the pack's contents, checksums and index.
	out := string(r.git(nil, "verify-pack", "-v", base+".idx"))
	var listed []ObjectID
	for _, line := range strings.Split(out, "\n") {
		f := strings.Fields(line)
		if len(f) >= 5 && len(f[0]) == 40 {
			id, _ := ParseObjectID(f[0])
			listed = append(listed, id)
			if len(f) != 5 || f[1] != types[id].String() {
				t.Errorf("verify-pack: %q", line)
			}
		}
	}
	if len(listed) != len(objs) {
		t.Errorf("verify-pack lists %d objects, want %d:\n%s", len(listed), len(objs), out)
	}
	r.git(nil, "index-pack", "-o", filepath.Join(r.dir, "git.idx"), base+".pack")
	gitIdx, _ := os.ReadFile(filepath.Join(r.dir, "git.idx"))
	ourIdx, _ := os.ReadFile(base + ".idx")
	if !bytes.Equal(gitIdx, ourIdx) {
		t.Error("git index-pack writes a different index for the pack")
	}
	r.git(nil, "update-ref", "refs/heads/x", commit.String())
	r.git(nil, "update-ref", "refs/tags/v-one", tag.String())
	r.git(nil, "symbolic-ref", "HEAD", "refs/heads/x")
	if stdout, stderr, err := r.run(nil, "fsck", "--strict", "--full", "--no-dangling"); err != nil || len(stdout)+len(stderr) != 0 {
		t.Errorf("git fsck: %v\n%s%s", err, stdout, stderr)
	}
	var ids []string
	for id := range objs {
		ids = append(ids, id.String())
	}
	gitObjs := r.catFile(ids...)
	for _, o := range gitObjs {
		if o.typ != types[o.id].String() || !bytes.Equal(o.data, objs[o.id]) {
			t.Errorf("git cat-file %s: %s, %d bytes; added %s, %d bytes", o.id, o.typ, len(o.data), types[o.id], len(objs[o.id]))
		}
	}
	odbCheckAll(t, odbOpen(t, r.objects()), gitObjs)
	if err := before.AddPack(name); err != nil {
		t.Fatal(err)
	}
	odbCheckAll(t, before, gitObjs)

	// Writing the same pack again keeps the existing files.
	fi, _ := os.Stat(base + ".pack")
	if again, err := w.WriteTo(r.objects()); err != nil || again != name {
		t.Fatalf("second WriteTo = %q, %v", again, err)
	}
	if fi2, _ := os.Stat(base + ".pack"); !os.SameFile(fi, fi2) {
		t.Error("second WriteTo replaced the pack")
	}

	if err := RemovePack(r.objects(), name); err != nil {
		t.Fatal(err)
	}
	if left, _ := filepath.Glob(base + ".*"); len(left) != 0 {
		t.Errorf("RemovePack left %v", left)
	}
	if _, _, err := r.run(nil, "cat-file", "-e", commit.String()); err == nil {
		t.Error("git still finds the commit after RemovePack")
	}
	if odbOpen(t, r.objects()).Has(commit) {
		t.Error("ObjectDB still finds the commit after RemovePack")
	}
	if err := RemovePack(r.objects(), name); err != nil {
		t.Errorf("RemovePack of a missing pack: %v", err)
	}
	if err := RemovePack(r.objects(), "../../x"); err == nil {
		t.Error("RemovePack accepts a path")
	}
	if _, err := NewPackWriter().WriteTo(r.objects()); err == nil {
		t.Error("WriteTo of no objects succeeded")
	}
}

// TestRescan checks that an open ObjectDB sees packs written after it listed
// the pack directory, and survives git repack deleting the packs it listed.
func TestRescan(t *testing.T) {
	r := odbNewRepo(t)
	r.commitFile("one.txt", "one\n")
	r.git(nil, "repack", "-adq")
	db := odbOpen(t, r.objects())
	odbCheckAll(t, db, r.catFile())

	// The new objects exist only in a pack that replaced the one db mapped.
	r.commitFile("two.txt", "two\n")
	r.git(nil, "repack", "-adq")
	if loose := r.git(nil, "count-objects"); !strings.HasPrefix(string(loose), "0 objects") {
		t.Fatalf("loose objects remain: %s", loose)
	}
	odbCheckAll(t, db, r.catFile())

	// The pack db2 listed, but did not open, is deleted before its first lookup.
	db2 := odbOpen(t, r.objects())
	r.commitFile("three.txt", "three\n")
	r.git(nil, "repack", "-adq")
	odbCheckAll(t, db2, r.catFile())

	// A pack written by this process, not announced with AddPack.
	w := NewPackWriter()
	objs, _, _, tag := odbSampleObjects(w, "rescan")
	if _, err := w.WriteTo(r.objects()); err != nil {
		t.Fatal(err)
	}
	var ids []string
	for id := range objs {
		ids = append(ids, id.String())
	}
	odbCheckAll(t, db, r.catFile(ids...))
	odbCheckAll(t, db2, r.catFile(ids...))

	// Both survive git gc folding everything into one pack.
	r.git(nil, "update-ref", "refs/tags/x", tag.String())
	r.git(nil, "gc", "-q", "--prune=now")
	all := r.catFile()
	if n := len(all); n < len(objs)+9 {
		t.Fatalf("only %d objects after gc", n)
	}
	odbCheckAll(t, db, all)
	odbCheckAll(t, db2, all)

	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if _, _, err := db.Read(all[0].id); err == nil {
		t.Error("Read after Close succeeded")
	}
}

// TestPackWriterMany checks dedup and ordering with more objects than fit
// one fanout bucket, against git verify-pack.
func TestPackWriterMany(t *testing.T) {
	r := odbNewRepo(t)
	w := NewPackWriter()
	var want []string
	for i := range 1000 {
		id := w.Add(BlobObject, []byte(fmt.Sprint(i%700)))
		if i < 700 {
			want = append(want, id.String())
		}
	}
	if w.Len() != 700 {
		t.Fatalf("Len() = %d, want 700", w.Len())
	}
	name, err := w.WriteTo(r.objects())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, line := range strings.Split(string(r.git(nil, "verify-pack", "-v", filepath.Join(r.objects(), "pack", name+".idx"))), "\n") {
		if f := strings.Fields(line); len(f) == 5 && f[1] == "blob" {
			got = append(got, f[0])
		}
	}
	slices.Sort(got)
	slices.Sort(want)
	if !slices.Equal(got, want) {
		t.Errorf("verify-pack lists %d objects, want %d", len(got), len(want))
	}
	db := odbOpen(t, r.objects())
	for _, o := range r.catFile(want...) {
		if _, data, err := db.Read(o.id); err != nil || !bytes.Equal(data, o.data) {
			t.Fatalf("Read(%s) = %q, %v; git says %q", o.id, data, err, o.data)
		}
	}
	if _, _, err := db.Read(HashObject(BlobObject, []byte("700"))); !errors.Is(err, ErrObjectNotFound) {
		t.Errorf("Read(absent) error = %v", err)
	}
}

// A .pack without .idx under the name a writer is about to publish — a
// killed writer's, cut short — is replaced, not taken for the complete pack:
// git verifies the published pack and every object reads back, protected
// (UpdateRefWithPack) or not (WriteTo).
func TestPackWriterReplacesLeftoverPack(t *testing.T) {
	for _, protect := range []bool{false, true} {
		t.Run(fmt.Sprintf("protect=%v", protect), func(t *testing.T) {
			scratch, r := odbNewRepo(t), odbNewRepo(t)
			w := NewPackWriter()
			objs, _, commit, _ := odbSampleObjects(w, "leftover")
			name, err := w.WriteTo(scratch.objects())
			if err != nil {
				t.Fatal(err)
			}
			whole, err := os.ReadFile(filepath.Join(scratch.objects(), "pack", name+".pack"))
			if err != nil {
				t.Fatal(err)
			}
			base := filepath.Join(r.objects(), "pack", name)
			if err := os.MkdirAll(filepath.Dir(base), 0o755); err != nil {
				t.Fatal(err)
			}
			if err := os.WriteFile(base+".pack", whole[:len(whole)/2], 0o444); err != nil {
				t.Fatal(err)
			}
			if protect {
				if _, err := r.appendPack(t, commit, w); err != nil {
					t.Fatal(err)
				}
			} else if _, err := w.WriteTo(r.objects()); err != nil {
				t.Fatal(err)
			}
			if got, err := os.ReadFile(base + ".pack"); err != nil || !bytes.Equal(got, whole) {
				t.Fatalf("the published .pack is %d bytes (%v), want the whole %d", len(got), err, len(whole))
			}
			r.git(nil, "verify-pack", base+".idx")
			db := odbOpen(t, r.objects())
			for id, data := range objs {
				if _, got, err := db.Read(id); err != nil || !bytes.Equal(got, data) {
					t.Errorf("object %s after replacing the leftover: %v", id, err)
				}
			}
			if left, _ := filepath.Glob(filepath.Join(r.objects(), "pack", "*tmp*")); len(left) != 0 {
				t.Errorf("temporaries left: %v", left)
			}
		})
	}
}

// RemoveStaleTemps removes what a killed writer leaves now that a pack is
// born under its final name: an old .pack without .idx and an old .keep
// holding a pack; it keeps a young or flocked one (a live writer's), a pack
// with its .idx, and a .keep that is not tally's.
func TestRemoveStaleTempsPackWithoutIdx(t *testing.T) {
	packDir := filepath.Join(t.TempDir(), "pack")
	if err := os.MkdirAll(packDir, 0o755); err != nil {
		t.Fatal(err)
	}
	old := time.Now().Add(-time.Hour)
	file := func(hexDigit, ext, content string, age time.Time) string {
		p := filepath.Join(packDir, "pack-"+strings.Repeat(hexDigit, 40)+ext)
		if err := os.WriteFile(p, []byte(content), 0o444); err != nil {
			t.Fatal(err)
		}
		if err := os.Chtimes(p, age, age); err != nil {
			t.Fatal(err)
		}
		return p
	}
	born := file("a", ".keep", "PACK\x00\x00\x00\x02", old) // linked as its .pack, killed before the .idx
	linked := strings.TrimSuffix(born, ".keep") + ".pack"
	if err := os.Link(born, linked); err != nil {
		t.Fatal(err)
	}
	gone := []string{
		born, linked,
		file("b", ".keep", "PACK\x00\x00\x00\x02", old), // a pack born as its .keep, never linked
	}
	kept := []string{
		file("9", ".pack", "PACK\x00\x00\x00\x02", old),                    // no tally .keep's: a git's, between its renames or killed
		file("c", ".pack", "PACK", old), file("c", ".idx", "\377tOc", old), // complete
		file("d", ".pack", "PACK", time.Now()), // young
		file("e", ".keep", "receive-pack 42 on h", old),
	}
	live := file("f", ".pack", "PACK", old)
	f, err := os.Open(live)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := lockFreeNow(f); err != nil {
		t.Fatal(err)
	}
	kept = append(kept, live)
	n, err := RemoveStaleTemps(filepath.Dir(packDir))
	if err != nil || n != len(gone) {
		t.Errorf("RemoveStaleTemps = %d, %v; want %d", n, err, len(gone))
	}
	for _, p := range gone {
		if _, err := os.Lstat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s remains (%v)", filepath.Base(p), err)
		}
	}
	for _, p := range kept {
		if _, err := os.Lstat(p); err != nil {
			t.Errorf("%s removed: %v", filepath.Base(p), err)
		}
	}
}

// On a filesystem without hard links a pack born as its .keep gets its
// .pack name as a copy: the append still lands, git reads every object
// through the published index, the .keep is there until the ref has moved
// and gone after, and nothing temporary is left.
func TestPackWriterWithoutHardLinks(t *testing.T) {
	link = func(string, string) error { return &os.LinkError{Op: "link", Err: syscall.EPERM} }
	t.Cleanup(func() { link = os.Link })
	r := odbNewRepo(t)
	w := NewPackWriter()
	objs, _, commit, _ := odbSampleObjects(w, "nolinks")
	name, err := r.appendPack(t, commit, w)
	if err != nil {
		t.Fatalf("append without hard links: %v", err)
	}
	base := filepath.Join(r.objects(), "pack", name)
	if fileExists(base + ".keep") {
		t.Errorf("%s.keep remains after the ref moved", name)
	}
	r.git(nil, "verify-pack", base+".idx")
	for id := range objs {
		r.git(nil, "cat-file", "-e", id.String())
	}
	if got := strings.TrimSpace(string(r.git(nil, "rev-parse", "refs/heads/x"))); got != commit.String() {
		t.Fatalf("refs/heads/x = %s, want %s", got, commit)
	}
	if left, _ := filepath.Glob(filepath.Join(r.objects(), "pack", "*tmp*")); len(left) != 0 {
		t.Errorf("temporaries left: %v", left)
	}
}

// appendPack creates refs/heads/x at commit with w's objects as an append
// does (UpdateRefWithPack under the writer lock) and returns the pack's name.
func (r *odbRepo) appendPack(t *testing.T, commit ObjectID, w *PackWriter) (string, error) {
	t.Helper()
	repo, err := Open(r.dir)
	if err != nil {
		t.Fatal(err)
	}
	wl, err := AcquireWriterLock(filepath.Join(r.dir, ".git", "tally", "writer.lock"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer wl.Release()
	return repo.UpdateRefWithPack(wl, "refs/heads/x", ObjectID{}, commit, w)
}
