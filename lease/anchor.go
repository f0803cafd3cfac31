package lease

import (
	"fmt"
	"sort"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/refname"
)

// maxAnchorRefs bounds the refs of one anchor entry, and so the objects it
// writes.
const maxAnchorRefs = 64

// AnchorBody is the body of an "anchor" entry: the object ids that code refs
// point at, bound to the checkpoint of the ledger before the entry, so that
// one signed checkpoint of a later ledger covers both.
type AnchorBody struct {
	Refs       map[string]string `json:"refs"` // full ref name -> 40 lowercase hex
	Checkpoint AnchorCheckpoint  `json:"checkpoint"`
}

// AnchorCheckpoint is the checkpoint an anchor records: the ledger's origin,
// size and Merkle root (hex) before the anchor entry.
type AnchorCheckpoint struct {
	Origin string     `json:"origin"`
	Size   uint64     `json:"size"`
	Root   chain.Hash `json:"root"`
}

// CheckpointOf is the checkpoint of the ledger that m describes.
func CheckpointOf(m *chain.Meta) AnchorCheckpoint {
	return AnchorCheckpoint{Origin: m.Origin, Size: m.Size, Root: m.Root}
}

// Anchor is the state of the last anchor (state key "anchors/latest").
type Anchor struct {
	Seq        uint64            `json:"seq"`
	Refs       map[string]string `json:"refs"`
	Checkpoint AnchorCheckpoint  `json:"checkpoint"`
}

// AnchoredRef is the state of one anchored ref: the object it pointed at
// when last anchored, by the entry seq.
type AnchoredRef struct {
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	Seq    uint64 `json:"seq"`
}

const anchorLatestKey = "anchors/latest"

// anchorRefKey is "anchors/refs/<xx>/<h>", h the BLAKE3-256 of the ref name
// in hex and xx its first two digits.
func anchorRefKey(ref string) string { return shardKey("anchors/refs", ref) }

// ReadAnchor returns the last anchor, or nil if there is none.
func ReadAnchor(kv chain.KV) (*Anchor, error) {
	var a Anchor
	ok, err := newTxn(kv).load(anchorLatestKey, &a)
	if err != nil || !ok {
		return nil, err
	}
	return &a, nil
}

// ReadAnchoredRef returns the last anchor of a ref, or nil if it has none.
func ReadAnchoredRef(kv chain.KV, ref string) (*AnchoredRef, error) {
	var a AnchoredRef
	ok, err := newTxn(kv).load(anchorRefKey(ref), &a)
	if err != nil || !ok {
		return nil, err
	}
	return &a, nil
}

// anchor checks an anchor entry: 1..64 refs, each a full ref name with a
// 40-digit lowercase hex object id (USAGE otherwise), and a checkpoint equal
// to the chain metadata before the entry (CHECKPOINT-INVALID otherwise; the
// writer builds it from the state it appends on, so only a forged or
// mis-built entry fails this).
func (r *rule) anchor() (string, error) {
	var b AnchorBody
	if err := r.body(&b); err != nil {
		return "", err
	}
	if len(b.Refs) == 0 || len(b.Refs) > maxAnchorRefs {
		return "", errs.New(errs.Usage, "an anchor names 1..%d refs, not %d", maxAnchorRefs, len(b.Refs))
	}
	refs := make([]string, 0, len(b.Refs))
	for ref, id := range b.Refs {
		if !refname.Valid(ref) {
			return "", errs.New(errs.Usage, "anchor ref %q is not a full ref name", ref)
		}
		if !chain.IsLowerHex(id, 40) {
			return "", errs.New(errs.Usage, "anchor ref %s: %q is not a 40-digit lowercase hex object id", ref, id)
		}
		refs = append(refs, ref)
	}
	mb, ok, err := r.t.get(chain.MetaKey)
	if err != nil {
		return "", errs.Wrap(errs.Corrupt, err, "read chain meta")
	}
	m, err := chain.DecodeMeta(mb, ok)
	if err != nil {
		return "", errs.Wrap(errs.Corrupt, err, "chain meta")
	}
	if want := CheckpointOf(m); b.Checkpoint != want {
		return "", errs.New(errs.CheckpointInvalid, "anchor records checkpoint (%q, %d, %s); the ledger before it is (%q, %d, %s)",
			b.Checkpoint.Origin, b.Checkpoint.Size, b.Checkpoint.Root, want.Origin, want.Size, want.Root).
			With("checkpoint_size", b.Checkpoint.Size).With("ledger_size", m.Size)
	}
	if err := r.t.put(anchorLatestKey, Anchor{Seq: r.e.Seq, Refs: b.Refs, Checkpoint: b.Checkpoint}); err != nil {
		return "", err
	}
	sort.Strings(refs)
	for _, ref := range refs {
		if err := r.t.put(anchorRefKey(ref), AnchoredRef{Ref: ref, Commit: b.Refs[ref], Seq: r.e.Seq}); err != nil {
			return "", err
		}
	}
	s := fmt.Sprintf("anchor %s at %.12s", refs[0], b.Refs[refs[0]])
	if len(refs) > 1 {
		s += fmt.Sprintf(" and %d more refs", len(refs)-1)
	}
	return s + fmt.Sprintf(" (checkpoint %d)", m.Size), nil
}
