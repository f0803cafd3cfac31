package pathspec

import (
	"regexp"
	"strings"
	"sync"
	"testing"
	"unicode/utf8"
)

func TestNormalize(t *testing.T) {
	accepted := []struct{ in, want string }{
		{"src/a", "src/a"},
		{"./src/a", "src/a"},
		{".//src/a", "src/a"},
		{"src//a", "src/a"},
		{"src/a/", "src/a"},
		{"src///a//", "src/a"},
		{".", "**"},
		{"./", "**"},
		{"./**", "**"},
		{"**", "**"},
		{"**/**", "**"},
		{"a/**/**/b", "a/**/b"},
		{"a/**/b/**/**", "a/**/b/**"},
		{"src/*.go", "src/*.go"},
		{"?", "?"},
		{"*/?/*", "*/?/*"},
		{"a b/c", "a b/c"},
		{"a/ b /c", "a/ b /c"},
		{"héllo/*", "héllo/*"},
		{".hidden/x", ".hidden/x"},
		{"..a/a..b/...", "..a/a..b/..."},
		{strings.Repeat("a", MaxLen), strings.Repeat("a", MaxLen)},
	}
	for _, c := range accepted {
		got, err := Normalize(c.in)
		if err != nil || got != c.want {
			t.Errorf("Normalize(%q) = %q, %v; want %q, nil", c.in, got, err, c.want)
		}
	}
	refused := []string{
		"",
		"/", "/a", "//a",
		"..", "../a", "a/../b", "a/..", "a/.", "a/./b", "././a",
		"a**", "**a", "***", "a/**b/c", "a/b**", "a/***/b",
		`a\b`, "a[b]", "a]", "[",
		"a\x00b", "a\nb", "\t", "a\tb", "a\x7f", "a\u0085b",
		" a", "a ", " ", "\u00a0a", "a\u3000", "a /", "./ a", "a/ /",
		"\xff", "a/\xc3",
		strings.Repeat("a", MaxLen+1),
	}
	for _, in := range refused {
		if got, err := Normalize(in); err == nil {
			t.Errorf("Normalize(%q) = %q, nil; want an error", in, got)
		}
	}
}

func TestMatch(t *testing.T) {
	cases := []struct {
		pattern, path string
		want          bool
	}{
		// a plain path matches itself and everything below it
		{"src/a", "src/a", true},
		{"src/a", "src/a/x/y.go", true},
		{"src/a", "src/ab", false},
		{"src/a", "src", false},
		{"src/a", "xsrc/a", false},
		// '*' stays inside one segment, may be empty, and names directories too
		{"src/*.go", "src/x.go", true},
		{"src/*.go", "src/.go", true},
		{"src/*.go", "src/x.go/z", true},
		{"src/*.go", "src/sub/x.go", false},
		{"src/*.go", "src/x.gox", false},
		{"a*c", "a/c", false},
		{"a/*/c", "a/b/c", true},
		{"a/*/c", "a/c", false},
		{"*", "a", true},
		{"*", "a/b/c", true},
		{"*.*", "...", true},
		// '?' is exactly one character, a code point, never '/'
		{"?", "a", true},
		{"?", "é", true},
		{"?", "ab", false},
		{"a?c", "abc", true},
		{"a?c", "ac", false},
		{"a?c", "a/c", false},
		// "**" at the end, the start, the middle, and alone
		{"src/**", "src", true},
		{"src/**", "src/a/b", true},
		{"src/**", "srcx", false},
		{"**/b", "b", true},
		{"**/b", "a/b", true},
		{"**/b", "a/c/b/d", true},
		{"**/b", "a/bb", false},
		{"**/*.go", "x.go", true},
		{"**/*.go", "a/b/x.go", true},
		{"**/*.go", "a/x.c", false},
		{"a/**/b", "a/b", true},
		{"a/**/b", "a/x/y/b", true},
		{"a/**/b", "a/x/b/c", true},
		{"a/**/b", "a/xb", false},
		{"a/**/b", "b", false},
		{"a/**/b/**/c", "a/b/c", true},
		{"a/**/b/**/c", "a/c/b", false},
		{"**", "a", true},
		{"**", "a/b/c", true},
		// only clean paths match
		{"**", "", false},
		{"**", "/a", false},
		{"**", "a/", false},
		{"**", "a//b", false},
		{"**", "./a", false},
		{"**", "a/./b", false},
		{"**", "a/../b", false},
		{"a/**", "a/..", false},
		{"**", "..", false},
		// invalid UTF-8 in a path: one character per byte, equal to no literal
		{"?", "\xff", true},
		{"a", "a/\xff", true},
		{"\uFFFD", "\xff", false},
		{"??", "\xff\xfe", true},
		{"?", "\xff\xfe", false},
		{"\uFFFD", "\uFFFD", true},
	}
	for _, c := range cases {
		if got := Match(c.pattern, c.path); got != c.want {
			t.Errorf("Match(%q, %q) = %v, want %v", c.pattern, c.path, got, c.want)
		}
		if got := refMatch(c.pattern, c.path); got != c.want {
			t.Errorf("reference matcher disagrees with the table on (%q, %q): %v", c.pattern, c.path, got)
		}
	}
}

func TestMatchAny(t *testing.T) {
	ps := []string{"docs/**", "src/*.go"}
	for path, want := range map[string]bool{
		"docs/a.md": true, "src/x.go": true, "src/a/x.go": false, "README": false,
	} {
		if got := MatchAny(ps, path); got != want {
			t.Errorf("MatchAny(%q, %q) = %v, want %v", ps, path, got, want)
		}
	}
	if MatchAny(nil, "a") {
		t.Error("MatchAny(nil, _) = true")
	}
}

func TestOverlapTable(t *testing.T) {
	cases := []struct {
		a, b string
		want bool
		// witness, when set, is the unique shortest common path.
		witness string
	}{
		{"src/**/*.go", "src/pkg/a.go", true, "src/pkg/a.go"},
		{"src/*.go", "src/sub/x.go", false, ""},
		{"src/a", "src/a/b", true, "src/a/b"},
		{"src", "src/a", true, "src/a"},
		{"src/a", "src/b", false, ""},
		{"a", "b", false, ""},
		{"*.go", "*.c", false, ""},
		{"*.go", "x.*", true, "x.go"},
		{"a*", "*b", true, "ab"},
		{"a*b", "b*a", false, ""},
		{"?", "??", false, ""},
		{"?", "*", true, ""},
		{"?", "a/b", true, "a/b"},
		{"é*", "?", true, "é"},
		// segments "." and ".." are not paths, so these share nothing
		{".*", "?", false, ""},
		{"..*", "??", false, ""},
		{".?", "?.", false, ""},
		{".*/a", "**", true, ""},
		{".*", "??", true, ""},
		{"*.", ".*", true, ""},
		{"*", "*", true, ""},
		{"**", "**", true, ""},
		{"**", "a", true, "a"},
		{"a/**/b", "a/c", true, ""},
		{"a/**/b", "c/**", false, ""},
		{"**/a", "**/b", true, ""},
		{"a/*/c", "a/b", true, "a/b/c"},
		{"a/*/c", "a/b/d", false, ""},
		{"*/*", "a", true, ""},
		{"**/*.go", "vendor/**", true, ""},
		{"a/**/b/**/c", "**/c/**/b", true, ""},
		{"a/**/b/**/c", "b/**", false, ""},
	}
	for _, c := range cases {
		w, ok := Overlap(c.a, c.b)
		if ok != c.want {
			t.Errorf("Overlap(%q, %q) = %q, %v; want %v", c.a, c.b, w, ok, c.want)
			continue
		}
		if !ok {
			continue
		}
		if !refMatch(c.a, w) || !refMatch(c.b, w) {
			t.Errorf("Overlap(%q, %q) witness %q does not match both", c.a, c.b, w)
		}
		if c.witness != "" && w != c.witness {
			t.Errorf("Overlap(%q, %q) witness %q, want %q", c.a, c.b, w, c.witness)
		}
	}
}

// Overlap must finish quickly on the largest patterns Normalize accepts, even
// the quadratic worst case of one long segment full of stars on each side.
func TestOverlapLarge(t *testing.T) {
	half := MaxLen / 2
	cases := []struct {
		a, b string
		want bool
	}{
		// one segment each, ending in different letters
		{strings.Repeat("*a", half), strings.Repeat("*b", half), false},
		// a^512 matches both
		{strings.Repeat("*a", half), strings.Repeat("a*", half), true},
		// a/a/…/a/z/y
		{strings.Repeat("a/**/", MaxLen/5) + "z", strings.Repeat("**/a/", MaxLen/5) + "y", true},
		// x^1024
		{strings.Repeat("?", MaxLen), strings.Repeat("*?", half), true},
	}
	for _, c := range cases {
		for _, p := range []string{c.a, c.b} {
			if n, err := Normalize(p); err != nil || n != p {
				t.Fatalf("test pattern not normalized: %v", err)
			}
		}
		w, ok := Overlap(c.a, c.b)
		if ok != c.want {
			t.Errorf("Overlap(%.20q…, %.20q…) = %v, want %v", c.a, c.b, ok, c.want)
		}
		if ok && (!refMatch(c.a, w) || !refMatch(c.b, w)) {
			t.Errorf("invalid witness for large patterns %.20q…, %.20q…", c.a, c.b)
		}
	}
}

// refMatch is the reference matcher for normalized patterns: a translation of
// the pattern language into a regular expression over path+"/", written
// independently of Match.
func refMatch(pattern, path string) bool {
	if path == "" {
		return false
	}
	for _, s := range strings.Split(path, "/") {
		if s == "" || s == "." || s == ".." {
			return false
		}
	}
	// Go's regexp would let a literal U+FFFD match an invalid byte; \x01 is a
	// single character that no normalized pattern contains as a literal.
	var sb strings.Builder
	for i := 0; i < len(path); {
		r, n := utf8.DecodeRuneInString(path[i:])
		if r == utf8.RuneError && n == 1 {
			r = '\x01'
		}
		sb.WriteRune(r)
		i += n
	}
	return refRegexp(pattern).MatchString(sb.String() + "/")
}

var refCache sync.Map // pattern → *regexp.Regexp

func refRegexp(pattern string) *regexp.Regexp {
	if re, ok := refCache.Load(pattern); ok {
		return re.(*regexp.Regexp)
	}
	const segments = `(?:[^/]+/)*`
	var sb strings.Builder
	sb.WriteString(`^`)
	for _, seg := range strings.Split(pattern, "/") {
		if seg == "**" {
			sb.WriteString(segments)
			continue
		}
		for _, r := range seg {
			switch r {
			case '*':
				sb.WriteString(`[^/]*`)
			case '?':
				sb.WriteString(`[^/]`)
			default:
				sb.WriteString(regexp.QuoteMeta(string(r)))
			}
		}
		sb.WriteString(`/`)
	}
	sb.WriteString(segments + `$`) // directory semantics: anything below
	re := regexp.MustCompile(sb.String())
	refCache.Store(pattern, re)
	return re
}

// TestKey: the literal directory prefix, and the property it is for: an
// overlap's witness, followed by '/', begins with both keys.
func TestKey(t *testing.T) {
	for _, c := range []struct{ p, want string }{
		{"src/a", "src/a/"},
		{"src/a/*.go", "src/a/"},
		{"src/**", "src/"},
		{"**", ""},
		{"*/x", ""},
		{"a?/b", ""},
		{"a/b?c/d", "a/"},
	} {
		if got := Key(c.p); got != c.want {
			t.Errorf("Key(%q) = %q, want %q", c.p, got, c.want)
		}
	}
	for _, pair := range [][2]string{{"src/a", "src/**"}, {"**/x", "a/b/x/y"}, {"a/*/c", "a/b"}} {
		w, ok := Overlap(pair[0], pair[1])
		if !ok || !strings.HasPrefix(w+"/", Key(pair[0])) || !strings.HasPrefix(w+"/", Key(pair[1])) {
			t.Errorf("Overlap(%q, %q) = %q, %v", pair[0], pair[1], w, ok)
		}
	}
	if _, ok := Overlap("src/a/*.go", "src/b"); ok {
		t.Errorf("patterns under unrelated keys overlap")
	}
}
