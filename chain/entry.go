// Package chain defines the ledger entry, its canonical encoding and hash, and the
// Merkle log over entry hashes. It is pure: no I/O, no clock.
//
// Invariants of a valid chain (checked by Meta.Check):
//   - entry n has seq n; entry 0 is the only genesis entry;
//   - entry n's prev is the hash of entry n-1 (all zeros for genesis);
//   - timestamps never decrease along the chain;
//   - the stored bytes of every entry are its canonical (RFC 8785) encoding.
package chain

import (
	"encoding/json"
	"fmt"
	"time"

	"github.com/zeebo/blake3"
)

// FormatVersion is the entry format version written in every entry's "v".
const FormatVersion = 1

// entryDomain separates entry hashes from every other BLAKE3 use in tally.
const entryDomain = "tally/entry/v1\x00"

// TimeLayout is the only accepted timestamp form: RFC 3339, UTC, milliseconds.
// A fixed width makes timestamps compare correctly as strings and keeps one
// canonical spelling per instant.
const TimeLayout = "2006-01-02T15:04:05.000Z"

// Entry is one ledger entry. Body is kind-specific canonical JSON.
type Entry struct {
	V     int             `json:"v"`
	Seq   uint64          `json:"seq"`
	Kind  Kind            `json:"kind"`
	Prev  Hash            `json:"prev"`
	TS    string          `json:"ts"`
	Actor string          `json:"actor"`
	Nonce string          `json:"nonce"`
	Body  json.RawMessage `json:"body"`
}

// MarshalJSON encodes a hash as lowercase hex.
func (h Hash) MarshalJSON() ([]byte, error) { return json.Marshal(h.String()) }

// UnmarshalJSON decodes a lowercase hex hash.
func (h *Hash) UnmarshalJSON(b []byte) error {
	var s string
	if err := json.Unmarshal(b, &s); err != nil {
		return err
	}
	p, err := ParseHash(s)
	if err != nil {
		return err
	}
	*h = p
	return nil
}

// EntryHash is BLAKE3-256 over the domain string and the entry's canonical bytes.
func EntryHash(canonical []byte) Hash {
	h := blake3.New()
	h.Write([]byte(entryDomain))
	h.Write(canonical)
	var out Hash
	h.Sum(out[:0])
	return out
}

// Encode returns the canonical bytes of e.
func (e *Entry) Encode() ([]byte, error) { return MarshalCanonical(e) }

// validKind reports whether s matches ^[a-z][a-z0-9-]{0,31}$. (Hand-written
// rather than a regexp: compiling regexps at start-up costs every short-lived
// tally process a measurable share of its run time.)
func validKind(s string) bool {
	if len(s) == 0 || len(s) > 32 || s[0] < 'a' || s[0] > 'z' {
		return false
	}
	for i := 1; i < len(s); i++ {
		if c := s[i]; !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '-') {
			return false
		}
	}
	return true
}

// IsLowerHex reports whether s is exactly n lowercase hex digits.
func IsLowerHex(s string, n int) bool {
	if len(s) != n {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !(c >= '0' && c <= '9' || c >= 'a' && c <= 'f') {
			return false
		}
	}
	return true
}

// ValidActor reports whether s may name an actor. Actors appear in git
// identities, so '<', '>' and control characters are excluded.
func ValidActor(s string) error {
	if s == "" || len(s) > 128 {
		return fmt.Errorf("actor must be 1..128 bytes")
	}
	if s[0] == ' ' || s[len(s)-1] == ' ' {
		return fmt.Errorf("actor %q has surrounding spaces", s)
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || r == '<' || r == '>' || r == 0xfffd {
			return fmt.Errorf("actor %q contains a forbidden character", s)
		}
	}
	return nil
}

// ParseTime parses a timestamp in TimeLayout, rejecting every other spelling.
func ParseTime(s string) (time.Time, error) {
	// A fixed-layout parse: time.Parse plus the round-trip check cost more
	// than the rest of replaying a typical entry.
	bad := func() (time.Time, error) {
		return time.Time{}, fmt.Errorf("timestamp %q is not RFC 3339 UTC with milliseconds", s)
	}
	if len(s) != len(TimeLayout) {
		return bad()
	}
	var n [7]int
	for i, f := range [7][2]int{{0, 4}, {5, 7}, {8, 10}, {11, 13}, {14, 16}, {17, 19}, {20, 23}} {
		for j := f[0]; j < f[1]; j++ {
			if s[j] < '0' || s[j] > '9' {
				return bad()
			}
			n[i] = n[i]*10 + int(s[j]-'0')
		}
	}
	if s[4] != '-' || s[7] != '-' || s[10] != 'T' || s[13] != ':' || s[16] != ':' || s[19] != '.' || s[23] != 'Z' {
		return bad()
	}
	if n[0] < firstYear {
		return time.Time{}, fmt.Errorf("timestamp %q is before %s: a git commit cannot carry it", s, FirstTime)
	}
	t := time.Date(n[0], time.Month(n[1]), n[2], n[3], n[4], n[5], n[6]*int(time.Millisecond), time.UTC)
	// time.Date normalizes out-of-range fields (Feb 30 → Mar 2): refuse those.
	if t.Year() != n[0] || int(t.Month()) != n[1] || t.Day() != n[2] || t.Hour() != n[3] || t.Minute() != n[4] || t.Second() != n[5] {
		return bad()
	}
	return t, nil
}

// FormatTime formats t in TimeLayout (truncating to milliseconds). Only for
// a t that TimeInRange accepts is the result a timestamp ParseTime reads.
func FormatTime(t time.Time) string { return t.UTC().Truncate(time.Millisecond).Format(TimeLayout) }

// FirstTime is the first instant an entry may carry: a ledger commit's
// author and committer times are the entry's Unix seconds, and git fsck
// refuses a negative one (badDateOverflow), as do servers with
// receive.fsckObjects.
const FirstTime = "1970-01-01T00:00:00.000Z"

// firstYear is FirstTime's year: every instant of it and after is at or
// after the Unix epoch.
const firstYear = 1970

// LastTime is the last instant TimeLayout can write: it has four digits for
// the year. Its Unix seconds, 253402300799, are a commit time git accepts.
const LastTime = "9999-12-31T23:59:59.999Z"

// TimeInRange reports whether FormatTime(t) is a timestamp ParseTime
// accepts: whether t, in UTC at millisecond precision, lies in years
// 1970..9999. A later instant is written with another number of year
// digits, which no reader accepts, and an earlier one makes a commit git
// refuses, so nothing out of range may be stored.
func TimeInRange(t time.Time) bool {
	y := t.UTC().Truncate(time.Millisecond).Year()
	return y >= firstYear && y <= 9999
}

// RangeLimit is the end of the range of TimeInRange that t lies beyond:
// FirstTime for an instant before it, else LastTime (the "limit" detail of
// a refusal).
func RangeLimit(t time.Time) string {
	if t.UTC().Year() < firstYear {
		return FirstTime
	}
	return LastTime
}

// Decode parses stored entry bytes. It fails if the bytes are not canonical, a
// field is missing or unknown, or a field is malformed; it does not check links.
func Decode(b []byte) (*Entry, error) {
	if !IsCanonical(b) {
		return nil, ErrNonCanonical
	}
	e, err := decodeEnvelope(b)
	if err != nil {
		return nil, err
	}
	if e.V != FormatVersion {
		return nil, fmt.Errorf("entry: unsupported format version %d", e.V)
	}
	if !validKind(string(e.Kind)) {
		return nil, fmt.Errorf("entry: bad kind %q", e.Kind)
	}
	if _, err := ParseTime(e.TS); err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	if err := ValidActor(e.Actor); err != nil {
		return nil, fmt.Errorf("entry: %w", err)
	}
	if !IsLowerHex(e.Nonce, 32) {
		return nil, fmt.Errorf("entry: nonce must be 32 lowercase hex digits")
	}
	if len(e.Body) == 0 || e.Body[0] != '{' {
		return nil, fmt.Errorf("entry: body must be an object")
	}
	return e, nil
}

// ErrNonCanonical reports entry bytes that are not in canonical form.
var ErrNonCanonical = fmt.Errorf("entry bytes are not canonical JSON (RFC 8785)")
