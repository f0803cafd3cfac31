package gitstore

import (
	"bytes"
	"compress/zlib"
	"crypto/sha1"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// odbRepo is a scratch git repository driven through the git CLI with a
// hermetic environment.
type odbRepo struct {
	t    testing.TB
	dir  string // work tree; the git directory is dir/.git
	home string
	env  []string // extra environment
}

func odbNewRepo(t testing.TB) *odbRepo {
	t.Helper()
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git not installed")
	}
	r := &odbRepo{t: t, dir: t.TempDir(), home: t.TempDir()}
	r.git(nil, "init", "-q", "-b", "main")
	return r
}

func (r *odbRepo) objects() string { return filepath.Join(r.dir, ".git", "objects") }

// run runs git and returns its stdout, stderr and error.
func (r *odbRepo) run(stdin []byte, args ...string) (stdout, stderr []byte, err error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = r.dir
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "GIT_") && !strings.HasPrefix(kv, "HOME=") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, "HOME="+r.home, "GIT_CONFIG_NOSYSTEM=1",
		"GIT_AUTHOR_NAME=Tally Test", "GIT_AUTHOR_EMAIL=test@example.com", "GIT_AUTHOR_DATE=1700000000 +0000",
		"GIT_CONFIG_COUNT=1", "GIT_CONFIG_KEY_0=pack.threads", "GIT_CONFIG_VALUE_0=1",
		"GIT_COMMITTER_NAME=Tally Test", "GIT_COMMITTER_EMAIL=test@example.com", "GIT_COMMITTER_DATE=1700000000 +0000")
	cmd.Env = append(cmd.Env, r.env...)
	var out, errb bytes.Buffer
	cmd.Stdin, cmd.Stdout, cmd.Stderr = bytes.NewReader(stdin), &out, &errb
	err = cmd.Run()
	return out.Bytes(), errb.Bytes(), err
}

func (r *odbRepo) git(stdin []byte, args ...string) []byte {
	r.t.Helper()
	out, errb, err := r.run(stdin, args...)
	if err != nil {
		r.t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, errb)
	}
	return out
}

func (r *odbRepo) commitFile(name, content string) {
	r.t.Helper()
	if err := os.MkdirAll(filepath.Dir(filepath.Join(r.dir, name)), 0o777); err != nil {
		r.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(r.dir, name), []byte(content), 0o666); err != nil {
		r.t.Fatal(err)
	}
	r.git(nil, "add", name)
	r.git(nil, "commit", "-q", "-m", "add "+name)
}

type odbGitObject struct {
	id   ObjectID
	typ  string
	data []byte
}

// catFile returns git's view of the given objects, or of all objects
// (alternates included) if ids is empty.
func (r *odbRepo) catFile(ids ...string) []odbGitObject {
	r.t.Helper()
	var out []byte
	if len(ids) == 0 {
		out = r.git(nil, "cat-file", "--batch-all-objects", "--batch")
	} else {
		out = r.git([]byte(strings.Join(ids, "\n")+"\n"), "cat-file", "--batch")
	}
	var objs []odbGitObject
	for len(out) > 0 {
		hdr, rest, _ := bytes.Cut(out, []byte{'\n'})
		f := strings.Fields(string(hdr))
		if len(f) != 3 {
			r.t.Fatalf("cat-file --batch: unexpected header %q", hdr)
		}
		id, err := ParseObjectID(f[0])
		n, err2 := strconv.Atoi(f[2])
		if err != nil || err2 != nil || len(rest) < n+1 {
			r.t.Fatalf("cat-file --batch: bad header %q", hdr)
		}
		objs = append(objs, odbGitObject{id, f[1], rest[:n]})
		out = rest[n+1:]
	}
	return objs
}

// odbCheckAll reads every object through db and compares it with git's output.
func odbCheckAll(t *testing.T, db *ObjectDB, objs []odbGitObject) {
	t.Helper()
	for _, o := range objs {
		typ, data, err := db.Read(o.id)
		if err != nil {
			t.Fatalf("Read(%s): %v", o.id, err)
		}
		if typ.String() != o.typ || !bytes.Equal(data, o.data) {
			t.Fatalf("Read(%s) = %s, %d bytes; git says %s, %d bytes", o.id, typ, len(data), o.typ, len(o.data))
		}
		if !db.Has(o.id) {
			t.Fatalf("Has(%s) = false", o.id)
		}
	}
}

func odbOpen(t testing.TB, dir string, alternates ...string) *ObjectDB {
	t.Helper()
	db, err := OpenObjectDB(dir, alternates)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func odbRandom(seed uint64, n int) []byte {
	rng := rand.New(rand.NewPCG(seed, 1))
	b := make([]byte, n)
	for i := range b {
		b[i] = byte(rng.Uint32())
	}
	return b
}

func TestObjectIDAndHash(t *testing.T) {
	r := odbNewRepo(t)
	const hexID = "e69de29bb2d1d6434b8b29ae775ad8c2e48c5391"
	id, err := ParseObjectID(strings.ToUpper(hexID))
	if err != nil || id.String() != hexID || id.IsZero() {
		t.Fatalf("ParseObjectID: %v, %v, %v", id, err, id.IsZero())
	}
	for _, bad := range []string{"", hexID[:39], hexID + "0", "g" + hexID[1:]} {
		if _, err := ParseObjectID(bad); err == nil {
			t.Errorf("ParseObjectID(%q) succeeded", bad)
		}
	}
	if !(ObjectID{}).IsZero() {
		t.Error("zero ID is not IsZero")
	}
	for typ := CommitObject; typ <= TagObject; typ++ {
		for _, data := range [][]byte{nil, []byte("hello\n"), odbRandom(1, 5000)} {
			want := strings.TrimSpace(string(r.git(data, "hash-object", "--literally", "-t", typ.String(), "--stdin")))
			if got := HashObject(typ, data).String(); got != want {
				t.Errorf("HashObject(%s, %d bytes) = %s, git says %s", typ, len(data), got, want)
			}
		}
	}
	if s := ObjectType(5).String(); s != "ObjectType(5)" {
		t.Errorf("ObjectType(5).String() = %q", s)
	}
}

func TestReadLoose(t *testing.T) {
	r := odbNewRepo(t)
	r.git(nil, "hash-object", "-w", "--stdin")
	r.git(odbRandom(2, 1<<20), "hash-object", "-w", "--stdin")
	r.commitFile("a.txt", "hello\n")
	r.commitFile("dir/b.txt", strings.Repeat("tally\n", 1000))
	r.git(nil, "tag", "-a", "-m", "release", "v1")
	if packs, _ := filepath.Glob(filepath.Join(r.objects(), "pack", "*.pack")); len(packs) != 0 {
		t.Fatalf("expected only loose objects, found %v", packs)
	}
	objs := r.catFile()
	if len(objs) < 9 {
		t.Fatalf("only %d objects", len(objs))
	}
	db := odbOpen(t, r.objects())
	odbCheckAll(t, db, objs)

	missing := HashObject(BlobObject, []byte("not stored"))
	if _, _, err := db.Read(missing); !errors.Is(err, ErrObjectNotFound) {
		t.Errorf("Read(missing) error = %v, want ErrObjectNotFound", err)
	}
	if db.Has(missing) {
		t.Error("Has(missing) = true")
	}
}

// odbDeltaRepo returns a repository with a long, delta-friendly history: a text
// file changed one line per commit, a growing directory, and a large binary
// file changed now and then, all written with git fast-import.
func odbDeltaRepo(t testing.TB, commits int) *odbRepo {
	r := odbNewRepo(t)
	lines := make([]string, 150)
	for i := range lines {
		lines[i] = fmt.Sprintf("line %d: the quick brown fox jumps over the lazy dog %d", i, i*7919)
	}
	big := odbRandom(3, 100<<10)
	var s bytes.Buffer
	file := func(path string, data []byte) {
		fmt.Fprintf(&s, "M 100644 inline %s\ndata %d\n%s\n", path, len(data), data)
	}
	for c := 1; c <= commits; c++ {
		lines[c*37%len(lines)] = fmt.Sprintf("line %d rewritten by commit %d", c*37%len(lines), c)
		msg := fmt.Sprintf("commit number %d\n\nChanges line %d of dir/file.txt.\n", c, c*37%len(lines))
		fmt.Fprintf(&s, "commit refs/heads/main\ncommitter T <t@example.com> %d +0000\ndata %d\n%s\n", 1700000000+c, len(msg), msg)
		file("dir/file.txt", []byte(strings.Join(lines, "\n")))
		if c%10 == 0 {
			file(fmt.Sprintf("dir/sub/n%05d.txt", c), []byte(fmt.Sprintf("note %d\n", c)))
		}
		if c%100 == 1 {
			copy(big[c*97%len(big):], fmt.Sprintf("edit %d", c))
			file("big.bin", big)
		}
	}
	r.git(s.Bytes(), "fast-import", "--quiet")
	return r
}

// odbPackEntries returns the entries of each pack in dir as listed by
// git verify-pack -v: object ID, offset and delta depth.
func odbPackEntries(r *odbRepo, idx string) (ids []string, offs []uint64, depths []int) {
	for _, line := range strings.Split(string(r.git(nil, "verify-pack", "-v", idx)), "\n") {
		f := strings.Fields(line)
		if len(f) < 5 || len(f[0]) != 40 {
			continue
		}
		off, _ := strconv.ParseUint(f[4], 10, 64)
		d := 0
		if len(f) == 7 {
			d, _ = strconv.Atoi(f[5])
		}
		ids, offs, depths = append(ids, f[0]), append(offs, off), append(depths, d)
	}
	return ids, offs, depths
}

// odbCountKinds maps the pack entry kinds at offs, per this package's decoder.
func odbCountKinds(t *testing.T, packPath string, offs []uint64) map[int8]int {
	data, err := os.ReadFile(packPath)
	if err != nil {
		t.Fatal(err)
	}
	m := &packMaps{data: data}
	kinds := map[int8]int{}
	for _, off := range offs {
		e, err := m.entry(off)
		if err != nil {
			t.Fatalf("entry at %d: %v", off, err)
		}
		kinds[e.kind]++
	}
	return kinds
}

func odbOnlyPack(t *testing.T, r *odbRepo) string {
	t.Helper()
	idx, _ := filepath.Glob(filepath.Join(r.objects(), "pack", "*.idx"))
	if len(idx) != 1 {
		t.Fatalf("want one pack, have %v", idx)
	}
	return idx[0]
}

func TestReadPackedDeltas(t *testing.T) {
	r := odbDeltaRepo(t, 2000)
	for _, tc := range []struct {
		name string
		kind int8
		args []string
	}{
		{"ofs", packOfsDelta, []string{"repack", "-adfq", "--depth=50", "--window=30"}},
		{"ref", packRefDelta, []string{"-c", "repack.useDeltaBaseOffset=false", "repack", "-adfq", "--depth=50", "--window=30"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			r.git(nil, tc.args...)
			idx := odbOnlyPack(t, r)
			_, offs, depths := odbPackEntries(r, idx)
			deep := 0
			for _, d := range depths {
				if d >= 20 {
					deep++
				}
			}
			kinds := odbCountKinds(t, strings.TrimSuffix(idx, ".idx")+".pack", offs)
			if deep < 100 || kinds[tc.kind] < 1000 {
				t.Fatalf("pack too shallow to test deltas: %d entries of depth ≥ 20, kinds %v", deep, kinds)
			}
			objs := r.catFile()
			db := odbOpen(t, r.objects())
			odbCheckAll(t, db, objs)

			// Concurrent readers, each in its own order, on a fresh database.
			db = odbOpen(t, r.objects())
			var wg sync.WaitGroup
			errs := make(chan error, 4)
			for g := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					rng := rand.New(rand.NewPCG(uint64(g), 0))
					for _, i := range rng.Perm(len(objs)) {
						typ, data, err := db.Read(objs[i].id)
						if err != nil || typ.String() != objs[i].typ || !bytes.Equal(data, objs[i].data) {
							errs <- fmt.Errorf("Read(%s) = %s, %d bytes, %v", objs[i].id, typ, len(data), err)
							return
						}
					}
				}()
			}
			wg.Wait()
			close(errs)
			for err := range errs {
				t.Error(err)
			}
		})
	}
}

// TestReadThinFixed reads a pack made by git index-pack --fix-thin from a thin
// pack: its REF_DELTA entries name bases that git appended after them.
func TestReadThinFixed(t *testing.T) {
	a := odbDeltaRepo(t, 300)
	thin := a.git([]byte("main\n^main~20\n"), "pack-objects", "--thin", "--revs", "--stdout", "-q")
	b := odbNewRepo(t)
	alt := filepath.Join(b.objects(), "info", "alternates")
	if err := os.WriteFile(alt, []byte(a.objects()+"\n"), 0o666); err != nil {
		t.Fatal(err)
	}
	b.git(thin, "index-pack", "--fix-thin", "--stdin")
	if err := os.Remove(alt); err != nil {
		t.Fatal(err)
	}
	idx := odbOnlyPack(t, b)
	ids, offs, _ := odbPackEntries(b, idx)
	kinds := odbCountKinds(t, strings.TrimSuffix(idx, ".idx")+".pack", offs)
	if kinds[packRefDelta] == 0 || kinds[packOfsDelta] != 0 {
		t.Fatalf("expected REF_DELTA entries only, kinds %v", kinds)
	}
	odbCheckAll(t, odbOpen(t, b.objects()), b.catFile(ids...))
}

// odbPackBytes builds a pack from raw entries (header and zlib data), returning
// the pack and its index with the entries named by ids.
func odbPackBytes(ids []ObjectID, entries [][]byte) (pack, idx []byte) {
	pack = binary.BigEndian.AppendUint32([]byte("PACK\x00\x00\x00\x02"), uint32(len(entries)))
	var ie []packIdxEntry
	for i, e := range entries {
		ie = append(ie, packIdxEntry{ids[i], crc32.ChecksumIEEE(e), uint64(len(pack))})
		pack = append(pack, e...)
	}
	sum := sha1.Sum(pack)
	return append(pack, sum[:]...), packIndexBytes(ie, sum)
}

// odbRawEntry returns a pack entry of the given kind holding payload, with
// prefix (a REF_DELTA's base) between the header and the zlib stream.
func odbRawEntry(kind int8, prefix, payload []byte) []byte {
	size := len(payload)
	e := []byte{byte(kind)<<4 | byte(size&15)}
	for size >>= 4; size > 0; size >>= 7 {
		e[len(e)-1] |= 0x80
		e = append(e, byte(size&0x7f))
	}
	e = append(e, prefix...)
	var z bytes.Buffer
	zw := zlib.NewWriter(&z)
	zw.Write(payload)
	zw.Close()
	return append(e, z.Bytes()...)
}

func odbInstallPack(t *testing.T, objects string, pack, idx []byte) {
	t.Helper()
	name := filepath.Join(objects, "pack", fmt.Sprintf("pack-%x", sha1.Sum(pack)))
	if err := os.WriteFile(name+".pack", pack, 0o444); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(name+".idx", idx, 0o444); err != nil {
		t.Fatal(err)
	}
}

// TestRefDeltaOtherPack reads a REF_DELTA whose base is a loose object, which
// git itself does not support, and checks that REF_DELTA cycles are errors.
func TestRefDeltaOtherPack(t *testing.T) {
	base := []byte(strings.Repeat("0123456789abcdefghij\n", 100)) // 2100 bytes
	delta := []byte{
		0xb4, 0x10, // source size 2100
		0xbc, 0x10, // target size 2108
		0xb0, 0xe8, 0x03, // copy 1000 bytes from 0
		0x08, 'I', 'N', 'S', 'E', 'R', 'T', 'E', 'D',
		0xb3, 0xe8, 0x03, 0x4c, 0x04, // copy 1100 bytes from 1000
	}
	target := append(append(bytes.Clone(base[:1000]), "INSERTED"...), base[1000:]...)

	// git reads the delta correctly when its base is in the same pack.
	r1 := odbNewRepo(t)
	baseID, _ := ParseObjectID(strings.TrimSpace(string(r1.git(base, "hash-object", "--stdin"))))
	targetID, _ := ParseObjectID(strings.TrimSpace(string(r1.git(target, "hash-object", "--stdin"))))
	pack, idx := odbPackBytes([]ObjectID{targetID, baseID},
		[][]byte{odbRawEntry(packRefDelta, baseID[:], delta), odbRawEntry(int8(BlobObject), nil, base)})
	odbInstallPack(t, r1.objects(), pack, idx)
	want := r1.catFile(targetID.String())
	if !bytes.Equal(want[0].data, target) {
		t.Fatalf("git reads the hand-built delta as %q", want[0].data)
	}
	odbCheckAll(t, odbOpen(t, r1.objects()), want)

	r2 := odbNewRepo(t)
	r2.git(base, "hash-object", "-w", "--stdin")
	pack, idx = odbPackBytes([]ObjectID{targetID}, [][]byte{odbRawEntry(packRefDelta, baseID[:], delta)})
	odbInstallPack(t, r2.objects(), pack, idx)
	odbCheckAll(t, odbOpen(t, r2.objects()), want)

	// x and y are deltas of each other.
	x, y := HashObject(BlobObject, []byte("x")), HashObject(BlobObject, []byte("y"))
	copyAll := []byte{1, 1, 0x90, 1}
	pack, idx = odbPackBytes([]ObjectID{x, y},
		[][]byte{odbRawEntry(packRefDelta, y[:], copyAll), odbRawEntry(packRefDelta, x[:], copyAll)})
	odbInstallPack(t, r2.objects(), pack, idx)
	db := odbOpen(t, r2.objects())
	if _, _, err := db.Read(x); err == nil || !strings.Contains(err.Error(), "delta chain longer") {
		t.Errorf("Read of a delta cycle: %v, want a depth error", err)
	}
	if _, _, err := db.Read(y); err == nil || !strings.Contains(err.Error(), "delta chain longer") {
		t.Errorf("Read of the other object of a delta cycle: %v, want a depth error", err)
	}
}

// TestLargeOffsets checks the large-offset table of an index against git
// show-index, without a 2 GiB pack.
func TestLargeOffsets(t *testing.T) {
	r := odbNewRepo(t)
	want := map[ObjectID]uint64{}
	var entries []packIdxEntry
	for i, off := range []uint64{12, 1<<31 - 1, 1 << 31, 5<<32 + 7, 1 << 40} {
		id := HashObject(BlobObject, []byte{byte(i)})
		want[id] = off
		entries = append(entries, packIdxEntry{id, uint32(i), off})
	}
	idx := packIndexBytes(entries, sha1.Sum(nil))
	for _, line := range strings.Split(strings.TrimSpace(string(r.git(idx, "show-index"))), "\n") {
		f := strings.Fields(line)
		id, _ := ParseObjectID(f[1])
		if off, _ := strconv.ParseUint(f[0], 10, 64); len(f) != 3 || want[id] != off {
			t.Errorf("git show-index: %q, want offset %d", line, want[id])
		}
	}
	x, err := packParseIndex(idx)
	if err != nil {
		t.Fatal(err)
	}
	for id, off := range want {
		if got, ok, err := x.find(id); !ok || err != nil || got != off {
			t.Errorf("find(%s) = %d, %v, %v; want %d", id, got, ok, err, off)
		}
	}
	if _, ok, _ := x.find(HashObject(BlobObject, nil)); ok {
		t.Error("found an absent object")
	}
	// Point the last name past the end of the large-offset table.
	last := entries[len(entries)-1]
	binary.BigEndian.PutUint32(idx[packIdxHeader+24*len(entries)+4*(len(entries)-1):], 1<<31|3)
	if _, _, err := x.find(last.id); err == nil {
		t.Error("large offset index out of range accepted")
	}
}

func TestAlternates(t *testing.T) {
	a := odbNewRepo(t)
	a.commitFile("a.txt", "in a\n")
	a.git(nil, "repack", "-adq")
	a.commitFile("a2.txt", "loose in a\n")
	b := &odbRepo{t: t, dir: filepath.Join(t.TempDir(), "b"), home: a.home}
	a.git(nil, "clone", "-q", "--shared", a.dir, b.dir)
	b.commitFile("b.txt", "in b\n")

	// A chain of 7 alternates behind a, each named relatively by the previous
	// one; git stops following info/alternates 5 levels below b.
	var ids []string
	prev := a
	for i := range 7 {
		c := odbNewRepo(t)
		id := strings.TrimSpace(string(c.git([]byte(fmt.Sprintf("chained %d\n", i)), "hash-object", "-w", "--stdin")))
		ref, err := filepath.Rel(prev.objects(), c.objects())
		if err != nil {
			t.Fatal(err)
		}
		alts := "# comment\n/does/not/exist\n" + ref + "\n" + b.objects() + "\n" // b closes a cycle
		if err := os.WriteFile(filepath.Join(prev.objects(), "info", "alternates"), []byte(alts), 0o666); err != nil {
			t.Fatal(err)
		}
		ids, prev = append(ids, id), c
	}
	extra := odbNewRepo(t)
	extraID := strings.TrimSpace(string(extra.git([]byte("extra\n"), "hash-object", "-w", "--stdin")))

	objs := b.catFile()
	if len(objs) < 9 {
		t.Fatalf("only %d objects", len(objs))
	}
	db := odbOpen(t, b.objects(), extra.objects())
	odbCheckAll(t, db, objs)
	found := 0
	for i, id := range ids {
		oid, _ := ParseObjectID(id)
		_, _, gitErr := b.run(nil, "cat-file", "-e", id)
		has := db.Has(oid)
		if has != (gitErr == nil) {
			t.Errorf("chained alternate %d: Has = %v, git cat-file -e error = %v", i, has, gitErr)
		}
		if has {
			found++
		}
	}
	if found == 0 || found == len(ids) {
		t.Errorf("found %d of %d chained alternates; the test needs some beyond git's depth limit", found, len(ids))
	}
	b.env = []string{"GIT_ALTERNATE_OBJECT_DIRECTORIES=" + extra.objects()}
	odbCheckAll(t, db, b.catFile(extraID))
}

func TestCorruptLoose(t *testing.T) {
	r := odbNewRepo(t)
	id := strings.TrimSpace(string(r.git([]byte("abc"), "hash-object", "-w", "--stdin")))
	path := filepath.Join(r.objects(), id[:2], id[2:])
	good, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	deflate := func(s string) []byte {
		var b bytes.Buffer
		zw := zlib.NewWriter(&b)
		zw.Write([]byte(s))
		zw.Close()
		return b.Bytes()
	}
	flipped := bytes.Clone(good)
	flipped[len(flipped)-1] ^= 1 // adler32
	oid, _ := ParseObjectID(id)
	// git cat-file does not check the size of loose blobs it streams, so it
	// serves as a reference only for the other kinds of damage.
	for name, tc := range map[string]struct {
		data      []byte
		gitErrors bool
	}{
		"truncated":    {good[:len(good)/2], true},
		"not zlib":     {[]byte("definitely not zlib"), true},
		"bad checksum": {flipped, true},
		"size short":   {deflate("blob 10\x00abc"), false},
		"size long":    {deflate("blob 2\x00abc"), false},
		"bad type":     {deflate("blub 3\x00abc"), true},
		"no nul":       {deflate("blob 3abc"), true},
		"empty":        {nil, true},
	} {
		os.Remove(path)
		if err := os.WriteFile(path, tc.data, 0o444); err != nil {
			t.Fatal(err)
		}
		if _, _, err := r.run(nil, "cat-file", "-p", id); tc.gitErrors && err == nil {
			t.Errorf("%s: git accepts the object", name)
		}
		db := odbOpen(t, r.objects())
		if _, _, err := db.Read(oid); err == nil || errors.Is(err, ErrObjectNotFound) {
			t.Errorf("%s: Read error = %v", name, err)
		}
	}
}

// TestCorruptPack damages every byte of a small pack and of its index in turn,
// and checks that reading never panics and that damaged headers are reported.
func TestCorruptPack(t *testing.T) {
	r := odbNewRepo(t)
	text := strings.Repeat("some text that deltas well\n", 80)
	r.commitFile("a.txt", text)
	r.commitFile("a.txt", text+"one more line\n")
	r.commitFile("b.bin", string(odbRandom(4, 300)))
	r.git(nil, "repack", "-adfq")
	objs := r.catFile()
	idxPath := odbOnlyPack(t, r)
	packPath := strings.TrimSuffix(idxPath, ".idx") + ".pack"
	for _, path := range []string{packPath, idxPath} {
		good, err := os.ReadFile(path)
		if err != nil {
			t.Fatal(err)
		}
		damage := func(data []byte) (failed int) {
			os.Remove(path)
			if err := os.WriteFile(path, data, 0o444); err != nil {
				t.Fatal(err)
			}
			db, err := OpenObjectDB(r.objects(), nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			for _, o := range objs {
				if _, _, err := db.Read(o.id); err != nil {
					failed++
				}
			}
			return failed
		}
		for i := range good {
			b := bytes.Clone(good)
			b[i] ^= 0xff
			damage(b)
		}
		if n := damage(good[:len(good)-1]); n != len(objs) {
			t.Errorf("%s truncated: %d of %d reads failed", filepath.Base(path), n, len(objs))
		}
		b := bytes.Clone(good)
		b[1] = 'X' // magic
		if n := damage(b); n != len(objs) {
			t.Errorf("%s with bad magic: %d of %d reads failed", filepath.Base(path), n, len(objs))
		}
		if damage(good) != 0 {
			t.Fatal("restored pack unreadable")
		}
	}
	db := odbOpen(t, r.objects())
	odbCheckAll(t, db, objs)
}

func TestApplyDelta(t *testing.T) {
	base := []byte("0123456789")
	for _, tc := range []struct {
		delta []byte
		want  string // "!" means an error is expected
	}{
		{[]byte{10, 11, 0x91, 2, 5, 3, 'a', 'b', 'c', 0x90, 3}, "23456abc012"},
		{[]byte{10, 0}, ""},
		{[]byte{10, 1, 1, 'x'}, "x"},
		{[]byte{9, 1, 1, 'x'}, "!"},               // wrong source size
		{[]byte{10, 2, 1, 'x'}, "!"},              // target shorter than declared
		{[]byte{10, 1, 2, 'x', 'y'}, "!"},         // target longer than declared
		{[]byte{10, 5, 0x91, 8, 5}, "!"},          // copy past the end of base
		{[]byte{10, 5, 0x80}, "!"},                // copy 0x10000 bytes
		{[]byte{10, 3, 5, 'a'}, "!"},              // insert past the end of the delta
		{[]byte{10, 1, 0}, "!"},                   // reserved opcode
		{[]byte{10, 1, 0x91}, "!"},                // truncated copy
		{[]byte{10}, "!"},                         // no target size
		{[]byte{0x8a, 0x80, 0x80, 0x80}, "!"},     // unterminated size
		{[]byte{10, 0xff, 0xff, 0xff, 0x7f}, "!"}, // implausible target size
	} {
		got, err := packApplyDelta(base, tc.delta)
		if tc.want == "!" {
			if err == nil {
				t.Errorf("packApplyDelta(%x) = %q, want error", tc.delta, got)
			}
		} else if err != nil || string(got) != tc.want {
			t.Errorf("packApplyDelta(%x) = %q, %v; want %q", tc.delta, got, err, tc.want)
		}
	}
}

// FuzzPackRead decodes arbitrary bytes as the entries of a pack.
func FuzzPackRead(f *testing.F) {
	f.Add(odbRawEntry(int8(BlobObject), nil, []byte("hello")), uint16(0))
	base := odbRawEntry(int8(BlobObject), nil, []byte("0123456789"))
	f.Add(append(bytes.Clone(base), odbRawEntry(packOfsDelta, []byte{byte(len(base))}, []byte{10, 3, 0x90, 3})...), uint16(len(base)))
	f.Add(odbRawEntry(packRefDelta, make([]byte, 20), []byte{0, 0}), uint16(0))
	idx, err := packParseIndex(packIndexBytes(nil, [20]byte{}))
	if err != nil {
		f.Fatal(err)
	}
	f.Fuzz(func(t *testing.T, entries []byte, off uint16) {
		data := append([]byte("PACK\x00\x00\x00\x02\x00\x00\x00\x01"), entries...)
		m := &packMaps{idx: idx, data: append(data, make([]byte, 20)...)}
		db := &ObjectDB{}
		loc := odbLoc{p: &packFile{}, m: m, off: 12 + uint64(off)}
		db.packRead(loc, 0, nil)
	})
}
