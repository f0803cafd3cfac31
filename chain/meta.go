package chain

import (
	"encoding/json"
	"fmt"

	"github.com/tally-dev/tally/errs"
)

// MetaKey is the state key of the chain metadata blob.
const MetaKey = "meta"

// Meta describes the chain after its last entry. It is stored (canonically
// encoded) in every ledger commit, so any commit answers "how long is the log,
// what is its head and Merkle root" without walking history.
//
// Invariants: Size entries have been appended; Head is the hash of entry
// Size-1 (zero when Size is 0); Range is the compact Merkle range of [0, Size)
// and Root is its root; TS is the timestamp of entry Size-1.
type Meta struct {
	V      int    `json:"v"`
	Origin string `json:"origin"`
	Size   uint64 `json:"size"`
	Head   Hash   `json:"head"`
	TS     string `json:"ts"`
	Root   Hash   `json:"root"`
	Range  []Hash `json:"range"`
}

// LinkError describes why an entry cannot follow a chain. Code is one of
// SEQ-GAP, LINK-BROKEN, TIME-REVERSED or RULE-VIOLATION (genesis misuse).
type LinkError struct {
	Code errs.Code
	Msg  string
}

func (e *LinkError) Error() string { return string(e.Code) + ": " + e.Msg }

// Check reports whether e may be appended to the chain described by m.
func (m *Meta) Check(e *Entry) error {
	if e.Seq != m.Size {
		return &LinkError{errs.SeqGap, fmt.Sprintf("entry has seq %d, expected %d", e.Seq, m.Size)}
	}
	if e.Prev != m.Head {
		return &LinkError{errs.LinkBroken, fmt.Sprintf("entry %d prev %s does not match head %s", e.Seq, e.Prev, m.Head)}
	}
	if (e.Kind == KindGenesis) != (e.Seq == 0) {
		return &LinkError{errs.RuleViolation, fmt.Sprintf("entry %d: genesis must be exactly entry 0", e.Seq)}
	}
	if m.Size > 0 && e.TS < m.TS { // same-width timestamps compare as strings
		return &LinkError{errs.TimeReversed, fmt.Sprintf("entry %d ts %s is before %s", e.Seq, e.TS, m.TS)}
	}
	return nil
}

// GenesisBody is the body of entry 0. ReceiptIndex, when given, switches
// the new ledger's receipts index layout (lease.ReceiptIndexChunked, the
// only value the rules accept; a pointer, so that a member given empty is
// refused rather than read as absent); absent, the ledger keeps the layout
// ledgers had before the member existed.
type GenesisBody struct {
	Origin       string  `json:"origin"`
	ReceiptIndex *string `json:"receipt_index,omitempty"`
}

// Advance returns the metadata after appending e (whose hash is h). It assumes
// Check(e) passed.
func (m *Meta) Advance(e *Entry, h Hash) (*Meta, error) {
	next := &Meta{V: FormatVersion, Origin: m.Origin, Size: m.Size + 1, Head: h, TS: e.TS}
	if e.Kind == KindGenesis {
		var g GenesisBody
		if err := json.Unmarshal(e.Body, &g); err != nil || g.Origin == "" {
			return nil, &LinkError{errs.RuleViolation, "genesis body must name an origin"}
		}
		next.Origin = g.Origin
	}
	// A copy with room for the one hash Append may add: m's range stays
	// as it was, and the copy is not copied again to grow.
	r := Range{Size: m.Size, Hashes: make([]Hash, len(m.Range), len(m.Range)+1)}
	copy(r.Hashes, m.Range)
	r.Append(LeafHash(h))
	next.Range, next.Root = r.Hashes, r.Root()
	return next, nil
}

// DecodeMeta parses a stored meta blob; a missing blob means the empty chain.
func DecodeMeta(b []byte, ok bool) (*Meta, error) {
	if !ok {
		return &Meta{V: FormatVersion, Root: EmptyRoot(), Range: []Hash{}}, nil
	}
	var m Meta
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	if m.Range == nil {
		m.Range = []Hash{}
	}
	r := Range{Size: m.Size, Hashes: m.Range}
	if err := r.Validate(); err != nil {
		return nil, fmt.Errorf("meta: %w", err)
	}
	return &m, nil
}
