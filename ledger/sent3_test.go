package ledger

import (
	"bytes"
	"encoding/base64"
	"encoding/binary"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// form3Fixture is a chain of entries (rangeHistory) on a server, and a
// client's store holding the same chain up to have and nothing after.
type form3Fixture struct {
	have, tip gitstore.ObjectID
	client    *gitstore.ObjectDB
	f2, f3    []string // the range's lines in forms 2 and 3
}

func newForm3Fixture(t *testing.T, n int, extra func(int, *gitstore.Tree)) *form3Fixture {
	t.Helper()
	server, client := testrepo.New(t), testrepo.New(t)
	commits := rangeHistory(t, server, n, extra)
	if rangeHistory(t, client, 0, extra)[0] != commits[0] {
		t.Fatal("the client's chain is not the server's")
	}
	repo, err := gitstore.Open(client)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { repo.Close() })
	db, err := repo.Objects()
	if err != nil {
		t.Fatal(err)
	}
	x := &form3Fixture{have: commits[0], tip: commits[n], client: db}
	x.f2 = rangeLines(sendRange(t, server, x.have, x.tip, 2))
	x.f3 = rangeLines(sendRange(t, server, x.have, x.tip, 3))
	return x
}

func rangeLines(b []byte) []string { return strings.Split(strings.TrimSuffix(string(b), "\n"), "\n") }

// parse is parseSent of lines by this fixture's client.
func (x *form3Fixture) parse(lines []string) *sentParser {
	return parseSent(lines, x.have, x.tip, x.client.ReadEntry)
}

// deltaLines are the indexes of lines's delta lines.
func deltaLines(lines []string) []int {
	var at []int
	for i, l := range lines {
		if strings.HasPrefix(l, sentDelta+" ") {
			at = append(at, i)
		}
	}
	return at
}

// TestSentRangeForm3: a form 3 range holds the same objects as form 2
// (the same ids, the same contents, as many), oldest entry first, the
// changed trees and the growing tile as deltas, in fewer bytes; and a client that holds only the chain up to have has every
// delta's base: stored, or earlier in the range.
func TestSentRangeForm3(t *testing.T) {
	x := newForm3Fixture(t, 6, nil)
	if h2, h3 := strings.Fields(x.f2[0]), strings.Fields(x.f3[0]); h3[1] != "3" || h3[4] != h2[4] {
		t.Fatalf("form 3 header %q beside form 2's %q", x.f3[0], x.f2[0])
	}
	n2, n3 := len(strings.Join(x.f2, "\n")), len(strings.Join(x.f3, "\n"))
	if d := len(deltaLines(x.f3)); d < 6*3 || n3 >= n2 {
		t.Fatalf("form 3: %d delta lines, %d bytes against form 2's %d", d, n3, n2)
	}
	p2, p3 := x.parse(x.f2), x.parse(x.f3)
	if p2 == nil || p3 == nil {
		t.Fatalf("the client refused a range: form 2 %v, form 3 %v", p2 != nil, p3 != nil)
	}
	for id, o := range p2.objs {
		if o3 := p3.objs[id]; o3 == nil || o3.Type() != o.Type() || !bytes.Equal(o3.Data(), o.Data()) {
			t.Fatalf("object %s of form 2 is not in form 3", id)
		}
	}
	if len(p3.objs) != len(p2.objs) || len(p3.bases) == 0 {
		t.Fatalf("form 3 gave %d objects, form 2 %d; %d stored bases", len(p3.objs), len(p2.objs), len(p3.bases))
	}
	// Oldest first: the first object line is the first entry's commit.
	first, err := base64.StdEncoding.DecodeString(strings.Fields(x.f3[1])[1])
	if err != nil {
		t.Fatal(err)
	}
	if o, err := gitstore.DecodeEntry(first, 1<<20); err != nil || o.Type() != gitstore.CommitObject || !strings.Contains(string(o.Data()), "parent "+x.have.String()) {
		t.Fatalf("form 3 starts with %v (%v), want the commit after have", o, err)
	}
}

// editDelta returns line, a delta line, with its delta passed through f.
func editDelta(t *testing.T, line string, f func(src, dst uint64, ops []byte) []byte) string {
	t.Helper()
	fields := strings.Fields(line)
	d, err := base64.StdEncoding.DecodeString(fields[2])
	if err != nil {
		t.Fatal(err)
	}
	src, n1 := binary.Uvarint(d)
	dst, n2 := binary.Uvarint(d[n1:])
	fields[2] = base64.StdEncoding.EncodeToString(f(src, dst, d[n1+n2:]))
	return strings.Join(fields, " ")
}

func deltaHeader(src, dst uint64) []byte {
	return binary.AppendUvarint(binary.AppendUvarint(nil, src), dst)
}

// TestParseSentForm3Refuses: a form 3 range whose delta lines were changed
// is refused whole (nil: nothing taken, the client fetches), without a
// panic: a delta on a base the client lacks (an id nobody has, or an
// object of the range that comes after it), one whose base or result size
// lies, one that copies past its base, one declaring a result over the
// bound (refused from its header: the parse allocates far less than the
// bound), a line cut short, a delta line in a form 2 range. A delta
// changed into another valid one makes an object nobody needs: the range
// parses, without the object the server meant. Untouched, it parses.
func TestParseSentForm3Refuses(t *testing.T) {
	x := newForm3Fixture(t, 4, nil)
	p := x.parse(x.f3)
	if p == nil {
		t.Fatal("the untouched range was refused")
	}
	// the last delta line whose base is an object of the range (the
	// newest entry's cells tree: its parent entry changed it too)
	last := 0
	for _, i := range deltaLines(x.f3) {
		if base, _ := gitstore.ParseObjectID(strings.Fields(x.f3[i])[1]); p.objs[base] != nil {
			last = i
		}
	}
	nobody := gitstore.HashObject(gitstore.BlobObject, []byte("nobody has this"))
	for name, edit := range map[string]func(l []string) []string{
		"base unknown": func(l []string) []string {
			l[last] = strings.Replace(l[last], strings.Fields(l[last])[1], nobody.String(), 1)
			return l
		},
		"base after it": func(l []string) []string {
			moved := l[last]
			l = slices.Delete(l, last, last+1)
			return slices.Insert(l, 1, moved)
		},
		"base size lies": func(l []string) []string {
			l[last] = editDelta(t, l[last], func(src, dst uint64, ops []byte) []byte { return append(deltaHeader(src+1, dst), ops...) })
			return l
		},
		"result size lies (more)": func(l []string) []string {
			l[last] = editDelta(t, l[last], func(src, dst uint64, ops []byte) []byte { return append(deltaHeader(src, dst+1), ops...) })
			return l
		},
		"result size lies (less)": func(l []string) []string {
			l[last] = editDelta(t, l[last], func(src, dst uint64, ops []byte) []byte { return append(deltaHeader(src, dst-1), ops...) })
			return l
		},
		"copy past the base": func(l []string) []string {
			l[last] = editDelta(t, l[last], func(src, dst uint64, ops []byte) []byte {
				// copy 2 bytes from the base's last byte: four offset bytes, one size byte
				d := append(deltaHeader(src, dst+2), ops...)
				d = binary.LittleEndian.AppendUint32(append(d, 0x9f), uint32(src-1))
				return append(d, 2)
			})
			return l
		},
		"cut": func(l []string) []string {
			l[last] = l[last][:len(l[last])-4]
			return l
		},
		"not base64": func(l []string) []string {
			l[last] = l[last][:len(l[last])-1]
			return l
		},
		"delta in form 2": func(l []string) []string {
			l[0] = strings.Replace(l[0], sentHeader+" 3 ", sentHeader+" 2 ", 1)
			return l
		},
	} {
		if p := x.parse(edit(slices.Clone(x.f3))); p != nil {
			t.Errorf("%s: the range was taken (%d objects)", name, len(p.objs))
		}
	}
	if last == 0 {
		t.Fatal("no delta line has its base in the range")
	}
	// A result over the bound, and plausible to a pack reader (one copy
	// instruction per byte of its base makes that many bytes): refused from
	// the header, before the result is allocated.
	huge := slices.Clone(x.f3)
	huge[last] = editDelta(t, huge[last], func(src, _ uint64, ops []byte) []byte {
		return append(append(deltaHeader(src, sentMaxBytes+1), ops...), bytes.Repeat([]byte{0x90, 0x01}, sentMaxBytes/int(src))...)
	})
	var taken *sentParser
	if alloc := testrepo.Allocated(func() { taken = x.parse(huge) }); taken != nil || alloc > sentMaxBytes/2 {
		t.Errorf("a delta declaring more than the bound: taken %v, %d bytes allocated", taken != nil, alloc)
	}
	// A valid delta that makes other content: taken, without the object
	// the server sent there.
	flipped := slices.Clone(x.f3)
	flipped[last] = editDelta(t, flipped[last], func(src, dst uint64, ops []byte) []byte {
		return append(deltaHeader(src, dst+1), append(slices.Clone(ops), 1, 'x')...) // one byte more inserted
	})
	q := x.parse(flipped)
	if q == nil {
		t.Fatal("a range with another valid delta was refused at parsing")
	}
	missing := 0
	for id := range p.objs {
		if q.objs[id] == nil {
			missing++
		}
	}
	if missing != 1 {
		t.Fatalf("a changed delta left %d of the server's objects out, want 1", missing)
	}
}

// TestSentRangeStoredBases: the bases a form 3 range takes from the
// client's store are bounded apart from its contents (each read once, in
// all sentMaxBytes at most). Two blobs of 700 KB at have, cut to 100 KB in
// the next entry: the sequencer sends the first as a delta on the stored
// one and the second whole (both as deltas would take 1.4 MB of stored
// bases), and the client takes it; a range that sends both as deltas is
// refused.
func TestSentRangeStoredBases(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	big := map[string][]byte{"big/a": make([]byte, 700_000), "big/b": make([]byte, 700_000)}
	for _, b := range big {
		for i := range b {
			b[i] = byte(rnd.Uint32())
		}
	}
	names := []string{"big/a", "big/b"}
	x := newForm3Fixture(t, 1, func(k int, tr *gitstore.Tree) {
		for _, name := range names {
			b := big[name]
			if k > 0 {
				b = b[:100_000]
			}
			must(t, tr.Set(name, b))
		}
	})
	kind := map[string]string{}
	var whole int
	for i, l := range x.f3 {
		f := strings.Fields(l)
		for _, name := range names {
			cut := gitstore.HashObject(gitstore.BlobObject, big[name][:100_000])
			switch {
			case f[0] == sentDelta && f[1] == gitstore.HashObject(gitstore.BlobObject, big[name]).String():
				kind[name] = "delta"
			case f[0] == sentEntry && decodesTo(l, cut):
				kind[name], whole = "whole", i
			}
		}
	}
	if kind["big/a"] != "delta" || kind["big/b"] != "whole" {
		t.Fatalf("the cut blobs were sent as %v, want big/a a delta and big/b whole", kind)
	}
	if x.parse(x.f3) == nil {
		t.Fatal("the client refused the sequencer's range")
	}
	both := slices.Clone(x.f3)
	b := big["big/b"]
	both[whole] = sentDelta + " " + gitstore.HashObject(gitstore.BlobObject, b).String() + " " +
		base64.StdEncoding.EncodeToString(gitstore.EncodeDelta(b, b[:100_000]))
	if p := x.parse(both); p != nil {
		t.Fatal("a range taking 1.4 MB of stored bases was taken")
	}
}

// decodesTo reports whether entry line l holds object id.
func decodesTo(l string, id gitstore.ObjectID) bool {
	e, err := base64.StdEncoding.DecodeString(strings.Fields(l)[1])
	if err != nil {
		return false
	}
	o, err := gitstore.DecodeEntry(e, 1<<20)
	return err == nil && o.ID() == id
}

// A delta is sent only where its line is shorter than the object's entry
// line: a blob rewritten with new random bytes at every entry (a delta of
// it is all insert, longer than its compressed entry) goes as an entry
// each time, while the trees around it still go as deltas.
func TestSentRangeForm3DeltaOnlyWhenShorter(t *testing.T) {
	const n = 4
	noise := func(k int) []byte {
		b := make([]byte, 512)
		r := rand.New(rand.NewPCG(uint64(k), 1))
		for i := range b {
			b[i] = byte(r.Uint32())
		}
		return b
	}
	x := newForm3Fixture(t, n, func(k int, tr *gitstore.Tree) { must(t, tr.Set("noise", noise(k))) })
	want := map[gitstore.ObjectID]bool{}
	for k := 1; k <= n; k++ {
		want[gitstore.HashObject(gitstore.BlobObject, noise(k))] = true
	}
	asEntries := 0
	for _, l := range x.f3 {
		f := strings.Fields(l)
		if len(f) != 2 || f[0] != sentEntry {
			continue
		}
		b, err := base64.StdEncoding.DecodeString(f[1])
		if err != nil {
			t.Fatal(err)
		}
		if o, err := gitstore.DecodeEntry(b, 1<<20); err == nil && want[o.ID()] {
			asEntries++
		}
	}
	if asEntries != n || len(deltaLines(x.f3)) < n {
		t.Fatalf("%d of the %d random blobs went as entries (want all), beside %d delta lines", asEntries, n, len(deltaLines(x.f3)))
	}
	if x.parse(x.f3) == nil {
		t.Fatal("the client refused the range")
	}
}
