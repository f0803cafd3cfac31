package chain

import (
	"encoding/json"
	"errors"
	"strconv"
)

// Verify decodes every entry of a ledger, so decoding is on its hot path.
// Canonical bytes have one layout — members in sorted order, no whitespace —
// so after IsCanonical the envelope is read by a scanner that expects exactly
// that sequence, instead of by reflection.

var errEnvelope = errors.New("entry: not an entry object with exactly v, seq, kind, prev, ts, actor, nonce, body")

// envelope scans canonical entry bytes.
type envelope struct {
	b   []byte
	pos int
	err error
}

func (s *envelope) lit(l string) {
	if s.err != nil {
		return
	}
	if len(s.b)-s.pos < len(l) || string(s.b[s.pos:s.pos+len(l)]) != l {
		s.err = errEnvelope
		return
	}
	s.pos += len(l)
}

// str reads a JSON string token and returns its value.
func (s *envelope) str() string {
	if s.err != nil || s.pos >= len(s.b) || s.b[s.pos] != '"' {
		s.err = errEnvelope
		return ""
	}
	start, escaped := s.pos, false
	for s.pos++; s.pos < len(s.b); s.pos++ {
		switch s.b[s.pos] {
		case '\\':
			escaped = true
			s.pos++
		case '"':
			s.pos++
			tok := s.b[start:s.pos]
			if !escaped {
				return string(tok[1 : len(tok)-1])
			}
			var v string
			if err := json.Unmarshal(tok, &v); err != nil {
				s.err = errEnvelope
			}
			return v
		}
	}
	s.err = errEnvelope
	return ""
}

// num reads a non-negative integer.
func (s *envelope) num() uint64 {
	if s.err != nil {
		return 0
	}
	start := s.pos
	for s.pos < len(s.b) && s.b[s.pos] >= '0' && s.b[s.pos] <= '9' {
		s.pos++
	}
	n, err := strconv.ParseUint(string(s.b[start:s.pos]), 10, 64)
	if err != nil {
		s.err = errEnvelope
	}
	return n
}

// object returns the raw bytes of a JSON object value.
func (s *envelope) object() []byte {
	if s.err != nil || s.pos >= len(s.b) || s.b[s.pos] != '{' {
		s.err = errEnvelope
		return nil
	}
	start, depth, inStr := s.pos, 0, false
	for ; s.pos < len(s.b); s.pos++ {
		c := s.b[s.pos]
		switch {
		case inStr && c == '\\':
			s.pos++
		case c == '"':
			inStr = !inStr
		case inStr:
		case c == '{' || c == '[':
			depth++
		case c == '}' || c == ']':
			depth--
			if depth == 0 {
				s.pos++
				return s.b[start:s.pos]
			}
		}
	}
	s.err = errEnvelope
	return nil
}

// decodeEnvelope reads canonical entry bytes into e (fields unvalidated).
func decodeEnvelope(b []byte) (*Entry, error) {
	s := &envelope{b: b}
	e := &Entry{}
	s.lit(`{"actor":`)
	e.Actor = s.str()
	s.lit(`,"body":`)
	e.Body = s.object()
	s.lit(`,"kind":`)
	e.Kind = Kind(s.str())
	s.lit(`,"nonce":`)
	e.Nonce = s.str()
	s.lit(`,"prev":`)
	prev := s.str()
	s.lit(`,"seq":`)
	e.Seq = s.num()
	s.lit(`,"ts":`)
	e.TS = s.str()
	s.lit(`,"v":`)
	e.V = int(s.num())
	s.lit(`}`)
	if s.err == nil && s.pos != len(b) {
		s.err = errEnvelope
	}
	if s.err != nil {
		return nil, s.err
	}
	var err error
	if e.Prev, err = ParseHash(prev); err != nil {
		return nil, errEnvelope
	}
	return e, nil
}

// appendJSONString appends s as a canonical JSON string.
func appendJSONString(b []byte, s string) []byte {
	b = append(b, '"')
	for _, r := range s {
		b = jcsAppendRune(b, r)
	}
	return append(b, '"')
}

// Encode returns the canonical bytes of m. (Written by hand: the verifier
// encodes the metadata once per entry.)
func (m *Meta) Encode() ([]byte, error) {
	// 240 bytes of names, punctuation, head, root, size and version, then
	// the strings and the range: one allocation for the usual meta.
	b := make([]byte, 0, 240+len(m.Origin)+len(m.TS)+67*len(m.Range))
	b = append(b, `{"head":"`...)
	b = m.Head.AppendHex(b)
	b = append(b, `","origin":`...)
	b = appendJSONString(b, m.Origin)
	b = append(b, `,"range":[`...)
	for i, h := range m.Range {
		if i > 0 {
			b = append(b, ',')
		}
		b = append(b, '"')
		b = h.AppendHex(b)
		b = append(b, '"')
	}
	b = append(b, `],"root":"`...)
	b = m.Root.AppendHex(b)
	b = append(b, `","size":`...)
	b = strconv.AppendUint(b, m.Size, 10)
	b = append(b, `,"ts":`...)
	b = appendJSONString(b, m.TS)
	b = append(b, `,"v":`...)
	b = strconv.AppendInt(b, int64(m.V), 10)
	return append(b, '}'), nil
}
