package pathspec

import (
	"math/bits"
	"math/rand"
	"strings"
	"testing"
)

// The random tests draw from tiny alphabets so that patterns and paths collide
// often. Paths use 'x', which no pattern names, to stand for "any other
// character", and '.' so that the "." and ".." rules are exercised.
const (
	globChars = "ab.*?"
	pathChars = "ab.x"
)

// randPattern returns a random normalized pattern of 1 to maxSegs segments,
// each "**" or a glob of 1 to maxGlob characters from chars.
func randPattern(r *rand.Rand, maxSegs, maxGlob int, chars string) string {
	for {
		segs := make([]string, 1+r.Intn(maxSegs))
		for i := range segs {
			if r.Intn(4) == 0 {
				segs[i] = "**"
				continue
			}
			b := make([]byte, 1+r.Intn(maxGlob))
			for k := range b {
				b[k] = chars[r.Intn(len(chars))]
			}
			segs[i] = string(b)
		}
		if n, err := Normalize(strings.Join(segs, "/")); err == nil {
			return n
		}
	}
}

func randSegment(r *rand.Rand) string {
	b := make([]byte, 1+r.Intn(3))
	for k := range b {
		b[k] = pathChars[r.Intn(len(pathChars))]
	}
	return string(b)
}

// randPath returns a random string shaped like a path; it may be unclean
// (contain "." or ".." segments).
func randPath(r *rand.Rand) string {
	segs := make([]string, 1+r.Intn(4))
	for i := range segs {
		segs[i] = randSegment(r)
	}
	return strings.Join(segs, "/")
}

// instantiate returns a random string that is likely to match pattern: each
// wildcard is replaced by random text of a fitting shape, and a few segments
// may follow. It may be unclean (empty, "." or ".." segments).
func instantiate(r *rand.Rand, pattern string) string {
	var segs []string
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" {
			for k := r.Intn(3); k > 0; k-- {
				segs = append(segs, randSegment(r))
			}
			continue
		}
		var sb strings.Builder
		for _, c := range seg {
			switch c {
			case '?':
				sb.WriteByte(pathChars[r.Intn(len(pathChars))])
			case '*':
				for k := r.Intn(3); k > 0; k-- {
					sb.WriteByte(pathChars[r.Intn(len(pathChars))])
				}
			default:
				sb.WriteRune(c)
			}
		}
		segs = append(segs, sb.String())
	}
	for k := r.Intn(3) - 1; k > 0; k-- {
		segs = append(segs, randSegment(r))
	}
	return strings.Join(segs, "/")
}

// Match agrees with the reference matcher on random patterns and paths, and a
// literal path that a pattern matches overlaps that pattern.
func TestMatchMatchesReference(t *testing.T) {
	r := rand.New(rand.NewSource(1))
	matched := 0
	const n = 60000
	for range n {
		p := randPattern(r, 4, 3, globChars)
		path := randPath(r)
		if r.Intn(2) == 0 {
			path = instantiate(r, p)
		}
		got, want := Match(p, path), refMatch(p, path)
		if got != want {
			t.Fatalf("Match(%q, %q) = %v, reference says %v", p, path, got, want)
		}
		if !got {
			continue
		}
		matched++
		if _, ok := Overlap(p, path); !ok {
			t.Fatalf("Match(%q, %q) but Overlap(%[1]q, %[2]q) is false", p, path)
		}
	}
	if matched < n/5 || matched > n*4/5 {
		t.Fatalf("only %d of %d cases matched; the generators are too lopsided to test anything", matched, n)
	}
}

// On random pattern pairs: Overlap is symmetric in ok; every witness is a clean
// path that both patterns match; every pattern overlaps itself; and whenever a
// sampled path matches both patterns, Overlap reports true (soundness).
func TestOverlapProperties(t *testing.T) {
	r := rand.New(rand.NewSource(2))
	var overlapping, sampledCommon int
	const n = 40000
	for range n {
		a := randPattern(r, 4, 3, globChars)
		b := randPattern(r, 4, 3, globChars)
		w, ok := Overlap(a, b)
		if _, ok2 := Overlap(b, a); ok != ok2 {
			t.Fatalf("Overlap(%q, %q) = %v but Overlap(%[2]q, %[1]q) = %v", a, b, ok, ok2)
		}
		if ok {
			overlapping++
			checkWitness(t, a, b, w)
		}
		if w, ok := Overlap(a, a); !ok {
			t.Fatalf("Overlap(%q, %[1]q) = false", a)
		} else {
			checkWitness(t, a, a, w)
		}
		for k := range 10 {
			var path string
			switch k % 3 {
			case 0:
				path = instantiate(r, a)
			case 1:
				path = instantiate(r, b)
			default:
				path = randPath(r)
			}
			if refMatch(a, path) && refMatch(b, path) {
				sampledCommon++
				if !ok {
					t.Fatalf("%q matches %q and %q, but Overlap is false", path, a, b)
				}
			}
		}
	}
	if overlapping < n/10 || overlapping > n*9/10 || sampledCommon < n/10 {
		t.Fatalf("%d of %d pairs overlap, %d sampled common paths: generators too lopsided", overlapping, n, sampledCommon)
	}
}

func checkWitness(t *testing.T, a, b, w string) {
	t.Helper()
	if !refMatch(a, w) || !refMatch(b, w) {
		t.Fatalf("Overlap(%q, %q) witness %q does not match both (reference)", a, b, w)
	}
	if !Match(a, w) || !Match(b, w) {
		t.Fatalf("Overlap(%q, %q) witness %q does not match both (Match)", a, b, w)
	}
}

// TestOverlapExhaustive decides Overlap by brute force for every normalized
// pattern of at most two segments whose globs have at most two characters from
// "a.*?" (about 340 patterns, all pairs), by enumerating every clean path of up
// to maxLen characters over "a./".
//
// The enumeration is complete for these patterns, so the test checks both
// directions. Paths need no letter but 'a': a character that both patterns
// match by wildcards can be replaced by 'a' without changing either match or
// making a "." or ".." segment. Length: a shortest common path has at most
// three segments (G1/G2 against **/G3 may need G1'/G2'/G3'); a segment taken
// from one glob needs at most 2 characters, and one matched by two globs at
// most 3 (".*" and "*." meet first at "..."); the worst cases are 2+1+2+1+2 =
// 8 and 3+1+3 = 7 characters.
func TestOverlapExhaustive(t *testing.T) {
	const maxLen = 8
	var clean []string
	for level, prev := 0, []string{""}; level < maxLen; level++ {
		var next []string
		for _, p := range prev {
			for _, c := range "a./" {
				q := p + string(c)
				next = append(next, q)
				if refMatch("**", q) {
					clean = append(clean, q)
				}
			}
		}
		prev = next
	}

	segs := []string{"**"}
	for _, c1 := range "a.*?" {
		segs = append(segs, string(c1))
		for _, c2 := range "a.*?" {
			segs = append(segs, string(c1)+string(c2))
		}
	}
	seen := map[string]bool{}
	var pool []string
	for _, s1 := range segs {
		for _, spec := range append([]string{s1}, func() (two []string) {
			for _, s2 := range segs {
				two = append(two, s1+"/"+s2)
			}
			return two
		}()...) {
			if p, err := Normalize(spec); err == nil && !seen[p] {
				seen[p] = true
				pool = append(pool, p)
			}
		}
	}

	words := (len(clean) + 63) / 64
	sets := make([][]uint64, len(pool))
	for i, p := range pool {
		sets[i] = make([]uint64, words)
		for k, path := range clean {
			if refMatch(p, path) {
				sets[i][k/64] |= 1 << (k % 64)
			}
		}
	}
	overlapping := 0
	for i := range pool {
		for j := i; j < len(pool); j++ {
			common := -1
			for k := 0; k < words && common < 0; k++ {
				if x := sets[i][k] & sets[j][k]; x != 0 {
					common = k*64 + bits.TrailingZeros64(x)
				}
			}
			w, ok := Overlap(pool[i], pool[j])
			switch {
			case common >= 0 && !ok:
				t.Fatalf("%q matches %q and %q, but Overlap is false", clean[common], pool[i], pool[j])
			case common < 0 && ok:
				t.Fatalf("Overlap(%q, %q) = %q, true, but no path of up to %d characters matches both", pool[i], pool[j], w, maxLen)
			case ok:
				overlapping++
				checkWitness(t, pool[i], pool[j], w)
			}
		}
	}
	t.Logf("%d patterns, %d clean paths, %d overlapping pairs", len(pool), len(clean), overlapping)
}

func FuzzOverlap(f *testing.F) {
	for _, s := range [][2]string{
		{"src/**/*.go", "src/pkg/a.go"}, {".*", "?"}, {".?", "?."}, {"a/**/b", "**/c"},
		{"*", "*"}, {"**", "**"}, {"a/*/c", "a/b"}, {"é*", "?"}, {"./x//", "x/**/"},
	} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, a, b string) {
		Overlap(a, b) // unnormalized input: any answer, but no panic
		Match(a, b)
		na, err := Normalize(a)
		if err != nil {
			return
		}
		if Match(na, b) != refMatch(na, b) {
			t.Fatalf("Match(%q, %q) disagrees with the reference", na, b)
		}
		nb, err := Normalize(b)
		if err != nil {
			return
		}
		w, ok := Overlap(na, nb)
		if _, ok2 := Overlap(nb, na); ok != ok2 {
			t.Fatalf("Overlap(%q, %q) not symmetric", na, nb)
		}
		if ok {
			checkWitness(t, na, nb, w)
		}
	})
}

func FuzzNormalize(f *testing.F) {
	for _, s := range []string{".", "./a//b/", "a/**/**/b", "a/./b", "a**", " a", "\xff"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Normalize(s)
		if err != nil {
			return
		}
		if n2, err := Normalize(n); err != nil || n2 != n {
			t.Fatalf("Normalize(%q) = %q, but Normalize(%[2]q) = %q, %v", s, n, n2, err)
		}
		w, ok := Overlap(n, n)
		if !ok {
			t.Fatalf("Overlap(%q, %[1]q) = false", n)
		}
		checkWitness(t, n, n, w)
	})
}

func BenchmarkOverlap(b *testing.B) {
	half := MaxLen / 2
	for _, c := range []struct{ name, a, b string }{
		{"glob-vs-file", "src/**/*.go", "src/pkg/a.go"},
		{"disjoint-dirs", "src/**", "docs/**"},
		{"two-globstars", "**/*_test.go", "internal/**/store/*.go"},
		{"worst-MaxLen-segment", strings.Repeat("*a", half), strings.Repeat("*b", half)},
		{"worst-MaxLen-segments", strings.Repeat("**/a/", MaxLen/5) + "b", strings.Repeat("**/a/", MaxLen/5) + "c"},
	} {
		b.Run(c.name, func(b *testing.B) {
			for b.Loop() {
				Overlap(c.a, c.b)
			}
		})
	}
}

func BenchmarkMatch(b *testing.B) {
	for b.Loop() {
		Match("src/**/*.go", "src/internal/store/ledger/entry.go")
	}
}
