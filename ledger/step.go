package ledger

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
)

// EntryKey is the path of the entry's canonical bytes in a ledger commit's tree.
const EntryKey = "entry"

// Applied is the outcome of Step.
type Applied struct {
	Entry  *chain.Entry
	Hash   chain.Hash
	Meta   *chain.Meta // after the entry
	Result *lease.Result
}

// Step checks entry bytes raw against the state in t and, if they are legal,
// applies them to t: the rules' changes, the Merkle tiles, the chain metadata
// and the entry itself. It is the one function the writer, the verifier and the
// hooks use, so they cannot disagree about what is legal.
//
// Errors carry the failing check's code: NONCANONICAL or CORRUPT for bytes that
// are not an entry, SEQ-GAP, LINK-BROKEN or TIME-REVERSED for a broken chain,
// or the rule's own code (LEASE-HELD, EPOCH-MISMATCH, ...) for an illegal entry.
// On error t may have been partially modified only if the error is CORRUPT.
func Step(t *gitstore.Tree, raw []byte) (*Applied, error) { return step(t, raw, nil) }

// step is Step with the chain metadata before the entry already known (the
// writer and the verifier carry it from entry to entry instead of decoding it
// each time).
func step(t *gitstore.Tree, raw []byte, meta *chain.Meta) (*Applied, error) {
	e, err := decodeEntry(raw)
	if err != nil {
		return nil, err
	}
	return apply(t, raw, e, chain.EntryHash(raw), meta)
}

// decodeEntry decodes entry bytes: NONCANONICAL for valid JSON in another
// spelling, CORRUPT for anything else that is not an entry.
func decodeEntry(raw []byte) (*chain.Entry, error) {
	e, err := chain.Decode(raw)
	if err != nil {
		if errors.Is(err, chain.ErrNonCanonical) {
			return nil, errs.New(errs.Noncanonical, "%v", err)
		}
		return nil, errs.Wrap(errs.Corrupt, err, "malformed entry")
	}
	return e, nil
}

// apply is step for an entry already decoded (e) and hashed (h) from raw.
func apply(t *gitstore.Tree, raw []byte, e *chain.Entry, h chain.Hash, meta *chain.Meta) (*Applied, error) {
	if meta == nil {
		mb, ok, err := t.Get(chain.MetaKey)
		if err != nil {
			return nil, errs.Wrap(errs.Corrupt, err, "read chain meta")
		}
		if meta, err = chain.DecodeMeta(mb, ok); err != nil {
			return nil, errs.Wrap(errs.Corrupt, err, "chain meta")
		}
	}
	if err := meta.Check(e); err != nil {
		return nil, linkError(err)
	}
	res, err := lease.Apply(t, e)
	if err != nil {
		return nil, err
	}
	next, err := meta.Advance(e, h)
	if err != nil {
		return nil, linkError(err)
	}
	metaBytes, err := next.Encode()
	if err != nil {
		return nil, err
	}
	// The entry is set first of the changes (after every check that may
	// refuse it, so that a refusal leaves t as it was) because its blob id
	// is the tiles' locator: Set hashes it once for both.
	loc, err := t.SetID(EntryKey, raw)
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "apply entry")
	}
	err = chain.AppendTilesTo(t, meta.Size, h, loc, func(k string, v []byte) error {
		if err := t.Set(k, v); err != nil {
			return errs.Wrap(errs.Corrupt, err, "apply %s", k)
		}
		return nil
	})
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "Merkle tiles")
	}
	for _, k := range res.Keys() {
		if v := res.Changes[k]; v == nil {
			err = t.Delete(k)
		} else {
			err = t.Set(k, v)
		}
		if err != nil {
			return nil, errs.Wrap(errs.Corrupt, err, "apply %s", k)
		}
	}
	if err := t.Set(chain.MetaKey, metaBytes); err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "apply meta")
	}
	return &Applied{Entry: e, Hash: h, Meta: next, Result: res}, nil
}

// commitMessage is the message of the commit recording an entry (FORMAT.md
// §4): the summary, a blank line, and the Tally-Seq and Tally-Entry
// trailers. Built in one buffer: the verifier builds it for every entry it
// checks, and fmt cost a hash string and buffers of its own.
func commitMessage(summary string, seq uint64, h chain.Hash) string {
	var num [20]byte
	var hexh [2 * len(chain.Hash{})]byte
	var b strings.Builder
	b.Grow(len(summary) + len("\n\nTally-Seq: \nTally-Entry: \n") + len(num) + len(hexh))
	b.WriteString(summary)
	b.WriteString("\n\nTally-Seq: ")
	b.Write(strconv.AppendUint(num[:0], seq, 10))
	b.WriteString("\nTally-Entry: ")
	b.Write(h.AppendHex(hexh[:0]))
	b.WriteByte('\n')
	return b.String()
}

func linkError(err error) error {
	var le *chain.LinkError
	if errors.As(err, &le) {
		return errs.New(le.Code, "%s", le.Msg)
	}
	return errs.Wrap(errs.Corrupt, err, "chain")
}
