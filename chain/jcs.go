package chain

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"sync"
	"unicode/utf8"
)

// ErrInvalidJSON is wrapped by every error of Canonicalize: the input is not
// one well-formed JSON value, or it uses something tally's format excludes.
var ErrInvalidJSON = errors.New("invalid or unsupported JSON")

// jcsMaxDepth bounds nesting so that hostile input cannot exhaust the stack.
const jcsMaxDepth = 64

// jcsMaxInt is 2^53-1, the largest magnitude every JSON implementation that
// decodes numbers as IEEE 754 doubles (as JCS does) represents exactly.
const jcsMaxInt = 1<<53 - 1

// Canonicalize parses in as exactly one JSON value (RFC 8259) and returns its
// RFC 8785 (JCS) canonical form: no insignificant whitespace, object members
// sorted by the UTF-16 code units of their names, strings escaped as ECMAScript
// JSON.stringify does (only '"', '\\' and U+0000..U+001F are escaped, using the
// short forms \b \f \n \r \t where they exist and \u00xx with lowercase hex
// otherwise; everything else, including '/', U+007F, U+2028 and U+2029, is
// literal UTF-8).
//
// It rejects trailing data, duplicate member names (compared after
// unescaping), invalid UTF-8, unpaired surrogate escapes and nesting deeper
// than 64 arrays and objects.
//
// Numbers are restricted to integers: a number must match -?(0|[1-9][0-9]*),
// have magnitude at most 2^53-1 and not be -0. JCS serializes a number as
// ECMAScript's Number.prototype.toString does, which for exactly these
// values is the input's own digits, so for every accepted input the result is
// byte-identical to full JCS; fractions and exponents, which JCS would
// rewrite through binary floating point, are rejected instead.
//
// The result is never longer than in.
func Canonicalize(in []byte) ([]byte, error) {
	e := jcsPool.Get().(*jcsEncoder)
	defer jcsPool.Put(e)
	return e.canonicalize(in, make([]byte, 0, len(in)))
}

// IsCanonical reports whether b is accepted by Canonicalize and already in
// canonical form.
func IsCanonical(b []byte) bool {
	e := jcsPool.Get().(*jcsEncoder)
	defer jcsPool.Put(e)
	out, err := e.canonicalize(b, e.buf[:0])
	if err != nil {
		return false
	}
	e.buf = out
	return bytes.Equal(out, b)
}

// MarshalCanonical returns the canonical form of the encoding/json encoding
// of v. Values that encode to non-integer numbers (such as 0.5) are rejected.
func MarshalCanonical(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	return Canonicalize(b)
}

var jcsPool = sync.Pool{New: func() any { return new(jcsEncoder) }}

// A jcsEncoder translates one JSON text to canonical form in a single pass,
// writing members in input order and reordering an object's members in
// place only when their names were not already sorted. Its buffers are
// reused across calls.
type jcsEncoder struct {
	in   []byte
	pos  int
	out  []byte
	keys []byte      // unescaped names of the members in mems
	mems []jcsMember // members of all open objects, innermost last
	tmp  []byte      // scratch for reordering
	buf  []byte      // output scratch for IsCanonical
}

// A jcsMember locates one object member: its unescaped name is
// keys[key0:key1] and its canonical `"name":value` text is out[val0:val1].
type jcsMember struct{ key0, key1, val0, val1 int }

func (e *jcsEncoder) canonicalize(in, out []byte) ([]byte, error) {
	e.in, e.pos, e.out = in, 0, out
	e.keys, e.mems = e.keys[:0], e.mems[:0]
	err := e.value(0)
	if err == nil {
		e.skipSpace()
		if e.pos < len(e.in) {
			err = e.errorf("trailing data after JSON value")
		}
	}
	out, e.in, e.out = e.out, nil, nil
	if err != nil {
		return nil, err
	}
	return out, nil
}

func (e *jcsEncoder) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: offset %d: %s", ErrInvalidJSON, e.pos, fmt.Sprintf(format, args...))
}

func (e *jcsEncoder) skipSpace() {
	for e.pos < len(e.in) {
		switch e.in[e.pos] {
		case ' ', '\t', '\n', '\r':
			e.pos++
		default:
			return
		}
	}
}

// peek skips whitespace and returns the next byte, or 0 at end of input
// (a NUL byte is never valid there either).
func (e *jcsEncoder) peek() byte {
	e.skipSpace()
	if e.pos < len(e.in) {
		return e.in[e.pos]
	}
	return 0
}

func (e *jcsEncoder) value(depth int) error {
	switch c := e.peek(); {
	case c == '{':
		return e.object(depth + 1)
	case c == '[':
		return e.array(depth + 1)
	case c == '"':
		return e.string(false)
	case c == '-' || '0' <= c && c <= '9':
		return e.number()
	case c == 't':
		return e.literal("true")
	case c == 'f':
		return e.literal("false")
	case c == 'n':
		return e.literal("null")
	case c == 0 && e.pos == len(e.in):
		return e.errorf("unexpected end of input")
	default:
		return e.errorf("unexpected character %q", c)
	}
}

func (e *jcsEncoder) literal(lit string) error {
	if !bytes.HasPrefix(e.in[e.pos:], []byte(lit)) {
		return e.errorf("invalid literal")
	}
	e.pos += len(lit)
	e.out = append(e.out, lit...)
	return nil
}

func (e *jcsEncoder) number() error {
	start := e.pos
	neg := e.in[e.pos] == '-'
	if neg {
		e.pos++
	}
	digits := e.pos
	for e.pos < len(e.in) && '0' <= e.in[e.pos] && e.in[e.pos] <= '9' {
		e.pos++
	}
	n := e.pos - digits
	switch {
	case n == 0:
		return e.errorf("invalid number")
	case n > 1 && e.in[digits] == '0':
		return e.errorf("number with leading zero")
	case e.pos < len(e.in) && (e.in[e.pos] == '.' || e.in[e.pos] == 'e' || e.in[e.pos] == 'E'):
		return e.errorf("only integers are supported")
	case n > 16:
		return e.errorf("integer out of range ±(2^53-1)")
	}
	var v uint64
	for _, c := range e.in[digits:e.pos] {
		v = v*10 + uint64(c-'0')
	}
	switch {
	case v > jcsMaxInt:
		return e.errorf("integer out of range ±(2^53-1)")
	case neg && v == 0:
		return e.errorf("negative zero")
	}
	e.out = append(e.out, e.in[start:e.pos]...)
	return nil
}

func (e *jcsEncoder) array(depth int) error {
	if depth > jcsMaxDepth {
		return e.errorf("nesting deeper than %d", jcsMaxDepth)
	}
	e.pos++
	e.out = append(e.out, '[')
	if e.peek() == ']' {
		e.pos++
		e.out = append(e.out, ']')
		return nil
	}
	for {
		if err := e.value(depth); err != nil {
			return err
		}
		switch e.peek() {
		case ',':
			e.pos++
			e.out = append(e.out, ',')
		case ']':
			e.pos++
			e.out = append(e.out, ']')
			return nil
		default:
			return e.errorf("expected ',' or ']' in array")
		}
	}
}

func (e *jcsEncoder) object(depth int) error {
	if depth > jcsMaxDepth {
		return e.errorf("nesting deeper than %d", jcsMaxDepth)
	}
	e.pos++
	start := len(e.out)
	e.out = append(e.out, '{')
	if e.peek() == '}' {
		e.pos++
		e.out = append(e.out, '}')
		return nil
	}
	// Nested objects push and pop their own members above base, so when this
	// object ends, mems[base:] and keys[kbase:] are exactly its own.
	base, kbase := len(e.mems), len(e.keys)
	sorted := true
	for {
		if e.peek() != '"' {
			return e.errorf("expected string for object member name")
		}
		m := jcsMember{key0: len(e.keys), val0: len(e.out)}
		if err := e.string(true); err != nil {
			return err
		}
		m.key1 = len(e.keys)
		if e.peek() != ':' {
			return e.errorf("expected ':' after object member name")
		}
		e.pos++
		e.out = append(e.out, ':')
		if err := e.value(depth); err != nil {
			return err
		}
		m.val1 = len(e.out)
		if len(e.mems) > base {
			switch jcsCompare(e.key(e.mems[len(e.mems)-1]), e.key(m)) {
			case 0:
				return e.errorf("duplicate object member name %q", e.key(m))
			case 1:
				sorted = false
			}
		}
		e.mems = append(e.mems, m)
		c := e.peek()
		if c == '}' {
			break
		}
		if c != ',' {
			return e.errorf("expected ',' or '}' in object")
		}
		e.pos++
		e.out = append(e.out, ',')
	}
	e.pos++
	e.out = append(e.out, '}')
	if !sorted {
		if err := e.reorder(start, e.mems[base:]); err != nil {
			return err
		}
	}
	e.mems, e.keys = e.mems[:base], e.keys[:kbase]
	return nil
}

func (e *jcsEncoder) key(m jcsMember) []byte { return e.keys[m.key0:m.key1] }

// reorder rewrites the object starting at out[start] with its members ms
// sorted by name. The rewritten object has the same length.
func (e *jcsEncoder) reorder(start int, ms []jcsMember) error {
	slices.SortFunc(ms, func(a, b jcsMember) int { return jcsCompare(e.key(a), e.key(b)) })
	for i := 1; i < len(ms); i++ {
		if jcsCompare(e.key(ms[i-1]), e.key(ms[i])) == 0 {
			return e.errorf("duplicate object member name %q", e.key(ms[i]))
		}
	}
	e.tmp = append(e.tmp[:0], e.out[start:]...)
	e.out = append(e.out[:start], '{')
	for i, m := range ms {
		if i > 0 {
			e.out = append(e.out, ',')
		}
		e.out = append(e.out, e.tmp[m.val0-start:m.val1-start]...)
	}
	e.out = append(e.out, '}')
	return nil
}

// jcsCompare orders a and b, both valid UTF-8, by their UTF-16 code units.
// UTF-8 byte order is code point order, which agrees with UTF-16 order except
// between a supplementary character (encoded with a leading surrogate in
// 0xD800..0xDBFF) and a BMP character in U+E000..U+FFFF.
func jcsCompare(a, b []byte) int {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	if i == len(a) || i == len(b) {
		return cmp.Compare(len(a), len(b))
	}
	// Equal prefixes hold equal lead bytes, so both sides back up alike.
	for !utf8.RuneStart(a[i]) {
		i--
	}
	ra, _ := utf8.DecodeRune(a[i:])
	rb, _ := utf8.DecodeRune(b[i:])
	// A supplementary character's first UTF-16 unit is a surrogate and no BMP
	// character is one, so against a BMP character any surrogate stands in.
	switch {
	case ra > 0xFFFF && rb <= 0xFFFF:
		ra = 0xD800
	case rb > 0xFFFF && ra <= 0xFFFF:
		rb = 0xD800
	}
	return cmp.Compare(ra, rb)
}

// string translates the string at in[pos] to canonical form, also appending
// its unescaped value to keys if isKey.
func (e *jcsEncoder) string(isKey bool) error {
	e.pos++
	e.out = append(e.out, '"')
	for {
		start, ascii := e.pos, true
		for e.pos < len(e.in) {
			c := e.in[e.pos]
			if c == '"' || c == '\\' || c < 0x20 {
				break
			}
			ascii = ascii && c < utf8.RuneSelf
			e.pos++
		}
		// Runs end only at ASCII bytes, so validating each run separately
		// validates the whole string.
		run := e.in[start:e.pos]
		if !ascii && !utf8.Valid(run) {
			return e.errorf("invalid UTF-8 in string")
		}
		e.out = append(e.out, run...)
		if isKey {
			e.keys = append(e.keys, run...)
		}
		if e.pos == len(e.in) {
			return e.errorf("unterminated string")
		}
		switch e.in[e.pos] {
		case '"':
			e.pos++
			e.out = append(e.out, '"')
			return nil
		case '\\':
			r, err := e.escape()
			if err != nil {
				return err
			}
			e.out = jcsAppendRune(e.out, r)
			if isKey {
				e.keys = utf8.AppendRune(e.keys, r)
			}
		default:
			return e.errorf("unescaped control character in string")
		}
	}
}

// escape decodes the escape sequence at in[pos], joining surrogate pairs.
func (e *jcsEncoder) escape() (rune, error) {
	if e.pos+1 == len(e.in) {
		return 0, e.errorf("unterminated string")
	}
	c := e.in[e.pos+1]
	e.pos += 2
	switch c {
	case '"', '\\', '/':
		return rune(c), nil
	case 'b':
		return '\b', nil
	case 'f':
		return '\f', nil
	case 'n':
		return '\n', nil
	case 'r':
		return '\r', nil
	case 't':
		return '\t', nil
	case 'u':
		r, ok := e.hex4()
		switch {
		case !ok:
			return 0, e.errorf("invalid \\u escape")
		case 0xDC00 <= r && r < 0xE000:
			return 0, e.errorf("unpaired surrogate in \\u escape")
		case r < 0xD800 || r >= 0xE000:
			return r, nil
		}
		if !bytes.HasPrefix(e.in[e.pos:], []byte(`\u`)) {
			return 0, e.errorf("unpaired surrogate in \\u escape")
		}
		e.pos += 2
		lo, ok := e.hex4()
		if !ok || lo < 0xDC00 || lo >= 0xE000 {
			return 0, e.errorf("unpaired surrogate in \\u escape")
		}
		return 0x10000 + (r-0xD800)<<10 + (lo - 0xDC00), nil
	}
	e.pos -= 2
	return 0, e.errorf("invalid escape character %q", c)
}

func (e *jcsEncoder) hex4() (rune, bool) {
	if len(e.in)-e.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range e.in[e.pos : e.pos+4] {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c -= 'a' - 10
		case 'A' <= c && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	e.pos += 4
	return r, true
}

// jcsAppendRune appends r as it appears inside a canonical JSON string.
func jcsAppendRune(b []byte, r rune) []byte {
	switch r {
	case '"', '\\':
		return append(b, '\\', byte(r))
	case '\b':
		return append(b, '\\', 'b')
	case '\f':
		return append(b, '\\', 'f')
	case '\n':
		return append(b, '\\', 'n')
	case '\r':
		return append(b, '\\', 'r')
	case '\t':
		return append(b, '\\', 't')
	}
	if r < 0x20 {
		const hex = "0123456789abcdef"
		return append(b, '\\', 'u', '0', '0', hex[r>>4], hex[r&15])
	}
	return utf8.AppendRune(b, r)
}
