// Package pathspec is the path pattern language of tally leases and receipts:
// normalization, matching, and an exact overlap test with a witness.
//
// # Paths
//
// A path is repository-relative and '/'-separated, as git prints it: non-empty,
// no leading or trailing '/', no empty segment, and no "." or ".." segment.
// Strings that are not paths in this sense match no pattern, so a receipt cannot
// escape a lease with "src/../secret". A character is a Unicode code point; each
// byte of invalid UTF-8 in a path counts as one character that equals no literal.
//
// # Patterns
//
// A pattern is a '/'-separated list of segments. A segment is either
//   - "**", which matches zero or more whole path segments; or
//   - a glob, which matches exactly one path segment: "*" matches any run
//     (possibly empty) of characters, "?" matches exactly one character, and
//     every other character matches itself.
//
// Matching has git's directory semantics: a pattern matches a path P if it
// matches P itself or any directory above P, that is, any proper prefix of P's
// segments joined with '/'. Equivalently, pattern p matches whatever p + "/**"
// matches literally. So "src/a" matches "src/a" and "src/a/x/y.go"; "src/*.go"
// matches "src/x.go" and "src/x.go/z" but not "src/sub/x.go"; "src/**" matches
// "src" and everything below it; "**" matches every path.
//
// # Normal form
//
// Normalize turns a user-written spec into normal form, or refuses it. It strips
// one leading "./", collapses repeated '/', drops a trailing '/', rewrites "."
// (the repository root) to "**", and collapses consecutive "**" segments. It
// refuses: the empty string; a normal form that would begin or end with white
// space (so " a", "a " and "a /" are refused, "a b" is not); strings longer than
// MaxLen bytes; invalid UTF-8; control characters (including NUL); '\', '[' and
// ']'; absolute paths (leading '/'); "." and ".." segments other than the
// leading "./" or the whole "."; and any "**" that is not a whole segment (such
// as "a**" or "***"). The language is kept this small so that Overlap is exact.
//
// Match and Overlap expect normalized patterns. On other strings their results
// are unspecified, but they do not panic.
package pathspec

import (
	"fmt"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"golang.org/x/text/unicode/norm"
)

// MaxLen is the longest spec, in bytes, that Normalize accepts. Overlap costs
// time and memory proportional to the product of the two pattern lengths
// (see Cost); this bound keeps one test of two patterns of the worst kind
// (one long segment full of stars each) at about 5 ms. Real repository paths
// are far shorter: git's own tests treat 255 bytes per segment as long.
const MaxLen = 1024

// Normalize returns the normal form of spec, or an error saying why spec is not
// a pattern. The normal form is a fixed point: Normalize(n) == n, nil for every
// n it returns.
func Normalize(spec string) (string, error) {
	if spec == "" {
		return "", fmt.Errorf("pathspec: empty pattern")
	}
	if len(spec) > MaxLen {
		return "", fmt.Errorf("pathspec: pattern longer than %d bytes", MaxLen)
	}
	if !utf8.ValidString(spec) {
		return "", fmt.Errorf("pathspec %q: not valid UTF-8", spec)
	}
	for _, r := range spec {
		switch {
		case unicode.IsControl(r):
			return "", fmt.Errorf("pathspec %q: control character %U", spec, r)
		case r == '\\' || r == '[' || r == ']':
			return "", fmt.Errorf("pathspec %q: %q is not supported", spec, r)
		}
	}
	if spec[0] == '/' {
		return "", fmt.Errorf("pathspec %q: absolute paths are not allowed; use a path relative to the repository root", spec)
	}
	var segs []string
	for s := range strings.SplitSeq(spec, "/") {
		if s != "" {
			segs = append(segs, s)
		}
	}
	if segs[0] == "." {
		segs = segs[1:]
	}
	if len(segs) == 0 {
		return "**", nil // spec was "." or "./": the whole repository
	}
	out := segs[:0]
	for _, s := range segs {
		switch {
		case s == "." || s == "..":
			return "", fmt.Errorf("pathspec %q: %q segments are not allowed", spec, s)
		case s != "**" && strings.Contains(s, "**"):
			return "", fmt.Errorf("pathspec %q: \"**\" must be a whole segment, found %q", spec, s)
		case s == "**" && len(out) > 0 && out[len(out)-1] == "**":
			// "**/**" matches exactly what "**" matches.
		default:
			out = append(out, s)
		}
	}
	n := strings.Join(out, "/")
	// Checked on the result, not on spec, so that "a /" is refused too and the
	// normal form stays a fixed point.
	first, _ := utf8.DecodeRuneInString(n)
	last, _ := utf8.DecodeLastRuneInString(n)
	if unicode.IsSpace(first) || unicode.IsSpace(last) {
		return "", fmt.Errorf("pathspec %q: leading or trailing white space", spec)
	}
	return n, nil
}

// MatchAny reports whether some pattern in patterns matches path.
func MatchAny(patterns []string, path string) bool {
	for _, p := range patterns {
		if Match(p, path) {
			return true
		}
	}
	return false
}

// Match reports whether the normalized pattern matches path, with the directory
// semantics described in the package documentation. Paths that are not clean
// (see "Paths") never match.
func Match(pattern, path string) bool {
	segs, ok := splitPath(path)
	if !ok {
		return false
	}
	return matchSegs(compile(pattern), segs)
}

// Key returns the literal directory prefix of a normalized pattern: its
// leading segments that hold no '*' or '?', each followed by '/' ("" if the
// first segment is a glob). For every path P the pattern matches, P + "/"
// begins with the key, so two patterns can overlap only if one's key is a
// prefix of the other's: "src/a/*.go" (key "src/a/") and "src/b" (key
// "src/b/") cannot, whatever follows. Callers index patterns by it.
func Key(pattern string) string {
	end := 0 // the key is pattern[:end] plus, if the whole pattern is literal, a '/'
	for i := 0; i <= len(pattern); i++ {
		if i < len(pattern) && (pattern[i] == '*' || pattern[i] == '?') {
			return pattern[:end]
		}
		if i == len(pattern) || pattern[i] == '/' {
			end = i + 1
		}
	}
	return pattern + "/"
}

// Cost is an upper bound on the work of Overlap(a, b), in steps of its
// tables: (len(a)+2)·(len(b)+2) + PairCost. The segment table has one cell
// per pair of segments and each glob pair's table one cell per pair of
// characters; with the "**" compile appends, both sum to at most the
// product. PairCost stands for the set-up of one test (compiling both
// patterns, allocating the tables), which dominates for short patterns.
// Callers budget a scan of many pairs with it; it depends on the lengths
// alone, so a budget is the same for every implementation.
func Cost(a, b string) int64 { return int64(len(a)+2)*int64(len(b)+2) + PairCost }

// PairCost is the part of Cost that does not depend on the lengths.
const PairCost = 64

// Overlap reports whether some path matches both normalized patterns a and b.
// If so, witness is such a path, built from literals of a and b and the filler
// character 'x'; it is deterministic and short, though not always shortest.
// Overlap is exact: ok is false only if no path at all matches both.
// Overlap(a, b) and Overlap(b, a) agree on ok. Time and memory are
// O(len(a)·len(b)) (see Cost), and O(len(a)+len(b)) when the keys differ.
func Overlap(a, b string) (witness string, ok bool) {
	if ka, kb := Key(a), Key(b); !strings.HasPrefix(ka, kb) && !strings.HasPrefix(kb, ka) {
		return "", false
	}
	return Compile(a).Overlap(Compile(b))
}

// Compiled is a normalized pattern prepared for Overlap, for callers that
// test one pattern against many: compiling is most of the work of testing
// two short patterns.
type Compiled struct {
	key  string
	segs []segment
	sat  []bool // satisfiable(segs)
}

// Compile prepares a normalized pattern for Compiled.Overlap.
func Compile(pattern string) *Compiled {
	segs := compile(pattern)
	return &Compiled{key: Key(pattern), segs: segs, sat: satisfiable(segs)}
}

// Overlap is Overlap of the two patterns c and d were compiled from.
func (c *Compiled) Overlap(d *Compiled) (witness string, ok bool) {
	if !strings.HasPrefix(c.key, d.key) && !strings.HasPrefix(d.key, c.key) {
		return "", false
	}
	pa, pb := c.segs, d.segs
	if allGlobstar(pa) && allGlobstar(pb) {
		// Both match every path, but the search below would accept the empty
		// path, which is not a path.
		return string(filler), true
	}
	var buf []uint8 // scratch for intersect and commonSegment
	exA, exB := c.sat, d.sat

	// The product of the two segment-level automata. Cell (i, j) means pa[:i]
	// and pb[:j] have matched a common sequence of segments. Every transition
	// moves to a later cell in row-major order (the "**"×"**" self-loop adds no
	// reachability), so one forward sweep decides reachability.
	const (
		reached = 1 << iota
		diagOK  // pa[i] and pb[j] are globs with a common segment
	)
	w := len(pb) + 1
	cell := make([]uint8, (len(pa)+1)*w)
	cell[0] = reached
	for i := 0; i <= len(pa); i++ {
		for j := 0; j <= len(pb); j++ {
			if cell[i*w+j]&reached == 0 {
				continue
			}
			if i < len(pa) && pa[i].globstar {
				cell[(i+1)*w+j] |= reached // "**" matches no segment
			}
			if j < len(pb) && pb[j].globstar {
				cell[i*w+j+1] |= reached
			}
			if i == len(pa) || j == len(pb) {
				continue
			}
			switch {
			case pa[i].globstar && !pb[j].globstar && exB[j]:
				cell[i*w+j+1] |= reached // "**" absorbs the segment pb[j] matches
			case pb[j].globstar && !pa[i].globstar && exA[i]:
				cell[(i+1)*w+j] |= reached
			case !pa[i].globstar && !pb[j].globstar:
				if meetGlobs(pa[i].glob, pb[j].glob, &buf) {
					cell[i*w+j] |= diagOK
					cell[(i+1)*w+j+1] |= reached
				}
			}
		}
	}
	if cell[len(pa)*w+len(pb)]&reached == 0 {
		return "", false
	}

	// Walk back from the accepting cell along reached predecessors, preferring
	// moves that consume a segment of both patterns at once, to keep the
	// witness short.
	var segs []string
	for i, j := len(pa), len(pb); i > 0 || j > 0; {
		switch {
		case i > 0 && j > 0 && cell[(i-1)*w+j-1]&diagOK != 0:
			segs = append(segs, commonSegment(pa[i-1].glob, pb[j-1].glob, &buf))
			i, j = i-1, j-1
		case i > 0 && j < len(pb) && pb[j].globstar && exA[i-1] && cell[(i-1)*w+j]&reached != 0:
			segs = append(segs, commonSegment(pa[i-1].glob, starGlob, &buf))
			i--
		case j > 0 && i < len(pa) && pa[i].globstar && exB[j-1] && cell[i*w+j-1]&reached != 0:
			segs = append(segs, commonSegment(pb[j-1].glob, starGlob, &buf))
			j--
		case i > 0 && pa[i-1].globstar && cell[(i-1)*w+j]&reached != 0:
			i--
		default: // the only remaining way in: pb[j-1] is "**" and matched nothing
			j--
		}
	}
	for l, r := 0, len(segs)-1; l < r; l, r = l+1, r-1 {
		segs[l], segs[r] = segs[r], segs[l]
	}
	return strings.Join(segs, "/"), true
}

// Glob elements that are not literal characters. Literals are non-negative.
const (
	star    rune = -1 // '*'
	anyChar rune = -2 // '?'
	badByte rune = -3 // an invalid UTF-8 byte of a path; equal to no literal
	pastEnd rune = -4 // the position after a glob's last element; matches nothing
)

// filler is the witness character for a position where both patterns accept
// any character. It only has to differ from '/' and '.', which are the
// characters that make a segment invalid.
const filler = 'x'

// segment is one compiled pattern segment: "**", or a glob of literals, star
// and anyChar.
type segment struct {
	globstar bool
	glob     []rune
}

// compile splits pattern into segments and appends "**" unless the pattern
// already ends with one: this is the directory semantics, p matching as p/**.
func compile(pattern string) []segment {
	segs := make([]segment, 0, strings.Count(pattern, "/")+2)
	runes := make([]rune, 0, len(pattern)) // backs every glob
	for s := range strings.SplitSeq(pattern, "/") {
		if s == "**" {
			segs = append(segs, segment{globstar: true})
			continue
		}
		start := len(runes)
		for _, r := range s {
			switch r {
			case '*':
				r = star
			case '?':
				r = anyChar
			}
			runes = append(runes, r)
		}
		segs = append(segs, segment{glob: runes[start:len(runes):len(runes)]})
	}
	if !segs[len(segs)-1].globstar {
		segs = append(segs, segment{globstar: true})
	}
	return segs
}

func allGlobstar(segs []segment) bool {
	for _, s := range segs {
		if !s.globstar {
			return false
		}
	}
	return true
}

// satisfiable reports, for each segment, whether it is a glob that matches
// some valid path segment (the witness walk then takes one with
// commonSegment). Only a glob of literals can fail: the empty glob, "." and
// ".." (which only unnormalized patterns have). A '*' or '?' can take the
// filler, which makes any segment valid.
func satisfiable(segs []segment) []bool {
	ok := make([]bool, len(segs))
	for i, s := range segs {
		if s.globstar {
			continue
		}
		dots := len(s.glob) <= 2
		for _, r := range s.glob {
			dots = dots && r == '.'
		}
		ok[i] = !dots
	}
	return ok
}

// starGlob is the glob "*", which matches every valid segment.
var starGlob = []rune{star}

// splitPath splits a clean path into segments decoded to runes, or reports
// false if path is not clean.
func splitPath(path string) ([][]rune, bool) {
	if path == "" {
		return nil, false
	}
	var segs [][]rune
	for s := range strings.SplitSeq(path, "/") {
		if s == "" || s == "." || s == ".." {
			return nil, false
		}
		rs := make([]rune, 0, len(s))
		for len(s) > 0 {
			r, n := utf8.DecodeRuneInString(s)
			if r == utf8.RuneError && n == 1 {
				r = badByte
			}
			rs = append(rs, r)
			s = s[n:]
		}
		segs = append(segs, rs)
	}
	return segs, true
}

// matchSegs matches path segments against pattern segments. It backtracks only
// to the most recent "**", which is complete because every other segment
// consumes exactly one path segment (the classic wildcard argument), so it runs
// in O(len(pat)·len(path)) segment matches.
func matchSegs(pat []segment, path [][]rune) bool {
	p, s, starP, starS := 0, 0, -1, 0
	for s < len(path) {
		switch {
		case p < len(pat) && pat[p].globstar:
			starP, starS = p, s
			p++
		case p < len(pat) && matchGlob(pat[p].glob, path[s]):
			p, s = p+1, s+1
		case starP >= 0:
			starS++
			p, s = starP+1, starS
		default:
			return false
		}
	}
	for p < len(pat) && pat[p].globstar {
		p++
	}
	return p == len(pat)
}

// matchGlob matches one segment against one glob, by the same single-backtrack
// argument as matchSegs one level down.
func matchGlob(glob, seg []rune) bool {
	g, s, starG, starS := 0, 0, -1, 0
	for s < len(seg) {
		switch {
		case g < len(glob) && glob[g] == star:
			starG, starS = g, s
			g++
		case g < len(glob) && (glob[g] == anyChar || glob[g] == seg[s]):
			g, s = g+1, s+1
		case starG >= 0:
			starS++
			g, s = starG+1, starS
		default:
			return false
		}
	}
	for g < len(glob) && glob[g] == star {
		g++
	}
	return g == len(glob)
}

// Segment validity states: a segment must not be empty, "." or "..". The state
// after reading a prefix is how many dots it is (0, 1 or 2) or valid (3); valid
// absorbs every later character.
const (
	segEmpty = iota
	segDot
	segDotDot
	segValid
)

func stepState(s int, c rune) int {
	if c == '.' && s < segValid {
		return s + 1
	}
	return segValid
}

// commonSegment returns a valid path segment matched by both globs, or "" if
// there is none. buf is scratch space reused across calls.
func commonSegment(a, b []rune, buf *[]uint8) string {
	if !intersect(a, b, buf) {
		return ""
	}
	return walkBack(a, b, *buf)
}

// intersect reports whether some valid path segment matches both globs. It
// sweeps the product automaton over cells (i, j), meaning a[:i] and b[:j]
// matched a common prefix; each cell holds the set of segment states that
// prefix can be in, as a bit mask. All transitions go to later cells in
// row-major order except the star×star self-loop, which only ever adds
// segValid, so it is applied in place before the cell is propagated. The
// table is left in *buf for walkBack.
func intersect(a, b []rune, buf *[]uint8) bool {
	w := len(b) + 1
	n := (len(a) + 1) * w
	if cap(*buf) < n {
		*buf = make([]uint8, n)
	}
	cell := (*buf)[:n]
	clear(cell)
	cell[0] = 1 << segEmpty
	for i := 0; i <= len(a); i++ {
		row := cell[i*w : i*w+w]
		ai, down := pastEnd, []uint8(nil)
		if i < len(a) {
			ai, down = a[i], cell[(i+1)*w:(i+2)*w]
		}
		for j, m := range row {
			if m == 0 {
				continue
			}
			bj := pastEnd
			if j < len(b) {
				bj = b[j]
			}
			switch {
			case ai == star && bj == star:
				m |= 1 << segValid // the self-loop: one filler character
				row[j] = m
				down[j] |= m
				row[j+1] |= m
			case ai == star:
				down[j] |= m
				if bj != pastEnd {
					row[j+1] |= stepMask(m, charFor(bj))
				}
			case bj == star:
				row[j+1] |= m
				if ai != pastEnd {
					down[j] |= stepMask(m, charFor(ai))
				}
			case ai != pastEnd && bj != pastEnd:
				if c, ok := meet(ai, bj); ok {
					down[j+1] |= stepMask(m, c)
				}
			}
		}
	}
	return cell[n-1]&(1<<segValid) != 0
}

// meetGlobs is intersect, without the table when neither glob has a star:
// then both match only segments of their own length, position by position,
// and the one common segment left to choose is valid unless it is "", "." or
// ".." (a '?' against a '?' takes the filler, which is valid).
func meetGlobs(a, b []rune, buf *[]uint8) bool {
	if slices.Contains(a, star) || slices.Contains(b, star) {
		return intersect(a, b, buf)
	}
	if len(a) != len(b) || len(a) == 0 {
		return false
	}
	dots := len(a) <= 2
	for i := range a {
		c, ok := meet(a[i], b[i])
		if !ok {
			return false
		}
		dots = dots && c == '.'
	}
	return !dots
}

// walkBack reads a common segment out of the table intersect left in cell,
// which must have accepted. It walks back from (len(a), len(b), segValid) to
// (0, 0, segEmpty) along transitions between states present in the table.
// Every step either moves to an earlier cell or, via the self-loop, from
// segValid to a smaller state at the same cell, after which the self-loop no
// longer applies; so the walk terminates.
func walkBack(a, b []rune, cell []uint8) string {
	w := len(b) + 1
	has := func(i, j, s int) bool { return cell[i*w+j]&(1<<s) != 0 }
	// from finds a state in cell (i, j) that c takes to s.
	from := func(i, j int, c rune, s int) (int, bool) {
		for t := segEmpty; t <= segValid; t++ {
			if has(i, j, t) && stepState(t, c) == s {
				return t, true
			}
		}
		return 0, false
	}
	var out []rune
	i, j, s := len(a), len(b), segValid
	for i > 0 || j > 0 || s != segEmpty {
		if i > 0 && j > 0 && a[i-1] != star && b[j-1] != star {
			if c, ok := meet(a[i-1], b[j-1]); ok {
				if t, ok := from(i-1, j-1, c, s); ok {
					out, i, j, s = append(out, c), i-1, j-1, t
					continue
				}
			}
		}
		if j > 0 && i < len(a) && a[i] == star && b[j-1] != star {
			c := charFor(b[j-1])
			if t, ok := from(i, j-1, c, s); ok {
				out, j, s = append(out, c), j-1, t
				continue
			}
		}
		if i > 0 && j < len(b) && b[j] == star && a[i-1] != star {
			c := charFor(a[i-1])
			if t, ok := from(i-1, j, c, s); ok {
				out, i, s = append(out, c), i-1, t
				continue
			}
		}
		if i > 0 && a[i-1] == star && has(i-1, j, s) {
			i--
			continue
		}
		if j > 0 && b[j-1] == star && has(i, j-1, s) {
			j--
			continue
		}
		// Only the star×star self-loop remains: s is segValid, the one state
		// the loop sets, entered by a filler character from a smaller state of
		// the same cell. That smaller state is there: the loop runs only on a
		// reached cell, and a segValid that arrived any other way would have
		// been walked back above.
		t := segEmpty
		for !has(i, j, t) {
			t++
		}
		out, s = append(out, filler), t
	}
	for l, r := 0, len(out)-1; l < r; l, r = l+1, r-1 {
		out[l], out[r] = out[r], out[l]
	}
	return string(out)
}

// meet returns a character matched by both non-star elements x and y.
func meet(x, y rune) (rune, bool) {
	switch {
	case x == anyChar && y == anyChar:
		return filler, true
	case x == anyChar:
		return y, true
	case y == anyChar || x == y:
		return x, true
	}
	return 0, false
}

// charFor returns a character matched by the non-star element x.
func charFor(x rune) rune {
	if x == anyChar {
		return filler
	}
	return x
}

// stepMask is the image of the state set m under stepState: a '.' moves each
// dot count up by one (segValid stays), anything else makes the segment valid.
func stepMask(m uint8, c rune) uint8 {
	switch {
	case c == '.':
		return (m<<1 | m&(1<<segValid)) & 0xf
	case m != 0:
		return 1 << segValid
	}
	return 0
}

// Compose returns s in Unicode normalization form C: how paths and
// patterns are compared (FORMAT.md §9c, "Paths"). macOS file systems open
// one file for a name's composed and decomposed forms, and git there
// records the composed one (core.precomposeUnicode), so a hold on
// "café/**" must cover "cafe\u0301/x" wherever the repository is checked
// out.
func Compose(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= utf8.RuneSelf {
			return norm.NFC.String(s)
		}
	}
	return s
}

// Fold returns s case folded, for matching where the file system ignores
// case (git's core.ignorecase): a pattern and a path match case-insensitively
// when their folds match. '*', '?' and '/' fold to themselves, so the fold of
// a normalized pattern is one.
func Fold(s string) string { return strings.ToLower(s) }
