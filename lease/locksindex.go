package lease

import (
	"bytes"
	"encoding/json"
	"strconv"
	"unicode/utf8"
)

// decodeLocksIndex decodes the locks/index blob as json.Unmarshal would.
// Every path decision reads it whole (up to MaxLiveLocks entries), and
// encoding/json spent most of an edit guard's check on it, so the form the
// rules write (canonical JSON: members in key order, no white space, no
// escapes) is read directly; anything else, however valid, goes to
// json.Unmarshal.
func decodeLocksIndex(b []byte, li *locksIndex) error {
	if locks, ok := canonicalLocks(b); ok {
		li.Locks = locks
		return nil
	}
	*li = locksIndex{}
	return json.Unmarshal(b, li)
}

// canonicalLocks reads b when it is exactly
// {"locks":[{"actor":S,"epoch":N,"expires_at":S,"pattern":S},...]}
// with strings of valid UTF-8 holding no escape or control character and N
// a JSON integer; ok is false for anything else.
func canonicalLocks(b []byte) (locks []indexedLock, ok bool) {
	rest, ok := bytes.CutPrefix(b, []byte(`{"locks":[`))
	if !ok || bytes.IndexByte(b, '\\') >= 0 {
		return nil, false
	}
	locks = make([]indexedLock, 0, bytes.Count(rest, []byte(`{"actor":`)))
	for more := len(rest) > 0 && rest[0] == '{'; more; {
		var l indexedLock
		var epoch string
		for _, f := range []struct {
			prefix string
			dst    *string
			quoted bool
		}{{`{"actor":`, &l.Actor, true}, {`,"epoch":`, &epoch, false}, {`,"expires_at":`, &l.ExpiresAt, true}, {`,"pattern":`, &l.Pattern, true}} {
			if rest, ok = bytes.CutPrefix(rest, []byte(f.prefix)); !ok {
				return nil, false
			}
			if *f.dst, rest, ok = canonicalValue(rest, f.quoted); !ok {
				return nil, false
			}
		}
		if !jsonInteger(epoch) {
			return nil, false
		}
		var err error
		if l.Epoch, err = strconv.ParseInt(epoch, 10, 64); err != nil {
			return nil, false
		}
		if rest, ok = bytes.CutPrefix(rest, []byte("}")); !ok {
			return nil, false
		}
		locks = append(locks, l)
		if rest, more = bytes.CutPrefix(rest, []byte(",")); more && (len(rest) == 0 || rest[0] != '{') {
			return nil, false
		}
	}
	return locks, string(rest) == "]}"
}

// canonicalValue cuts one value off b: a string without escapes (quoted),
// or the bytes up to the next ',' or '}'.
func canonicalValue(b []byte, quoted bool) (string, []byte, bool) {
	if !quoted {
		i := bytes.IndexAny(b, ",}")
		if i <= 0 {
			return "", nil, false
		}
		return string(b[:i]), b[i:], true
	}
	if len(b) == 0 || b[0] != '"' {
		return "", nil, false
	}
	i := bytes.IndexByte(b[1:], '"')
	if i < 0 {
		return "", nil, false
	}
	s := b[1 : 1+i]
	for _, c := range s {
		if c < 0x20 {
			return "", nil, false
		}
	}
	if !utf8.Valid(s) {
		return "", nil, false
	}
	return string(s), b[i+2:], true
}

// jsonInteger reports whether s is a JSON number without fraction or
// exponent: -?(0|[1-9][0-9]*).
func jsonInteger(s string) bool {
	s, _ = cutByte(s, '-')
	if s == "" || s[0] == '0' && len(s) > 1 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}

func cutByte(s string, c byte) (string, bool) {
	if s != "" && s[0] == c {
		return s[1:], true
	}
	return s, false
}
