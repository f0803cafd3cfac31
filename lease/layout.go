package lease

import (
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

// ReceiptIndexChunked is the value of the receipt_index switch (of a genesis
// body, a policy entry and the layout blob) that puts a ledger's receipts
// index in bounded blobs (FORMAT.md §6, "The receipts index"). Without it a
// ledger keeps one blob per commit and per tree, the layout of the ledgers
// written before the switch existed, so that they replay byte for byte.
const ReceiptIndexChunked = "chunked"

// ReceiptIndexSingle names, in views, the layout of a ledger without the
// switch. No entry may ask for it: the switch is one way.
const ReceiptIndexSingle = "single"

// layoutKey is the state key of the layout blob: the state layouts the
// ledger recorded (absent: none, every layout as it was before the switch).
const layoutKey = "layout"

// Layout is the layout blob. It is a state blob of its own, not a member of
// the policy blob, because every done reads it: a policy can hold
// thousands of roles and pushers, the layout blob is a few bytes.
type Layout struct {
	// ReceiptIndex is ReceiptIndexChunked once the ledger switched; never
	// anything else (an empty layout blob is not written).
	ReceiptIndex string `json:"receipt_index"`
}

// ReadLayout returns the layout in force: its ReceiptIndex is
// ReceiptIndexChunked or, without a layout blob, "". Anything else is
// CORRUPT (the rules write nothing else).
func ReadLayout(kv chain.KV) (*Layout, error) {
	var l Layout
	ok, err := newTxn(kv).loadStrict(layoutKey, &l)
	if err != nil {
		return nil, err
	}
	if ok && l.ReceiptIndex != ReceiptIndexChunked {
		return nil, errs.New(errs.Corrupt, "state %s: receipt_index %q", layoutKey, l.ReceiptIndex)
	}
	return &l, nil
}

// IndexName is how a view names the receipts index layout of l.
func (l *Layout) IndexName() string {
	if l.ReceiptIndex == "" {
		return ReceiptIndexSingle
	}
	return l.ReceiptIndex
}

// chunked reports whether the ledger switched to the chunked receipts index.
func (t *txn) chunked() (bool, error) {
	l, err := ReadLayout(t)
	if err != nil {
		return false, err
	}
	return l.ReceiptIndex == ReceiptIndexChunked, nil
}

// switchReceiptIndex records the switch to the chunked receipts index, for
// a genesis or policy entry whose body asks for it (v, as given). Only
// ReceiptIndexChunked switches, and only once: any other value (switching
// off) and a ledger that already switched (the entry would change nothing)
// are USAGE.
func (t *txn) switchReceiptIndex(v string) error {
	if v != ReceiptIndexChunked {
		return errs.New(errs.Usage, "receipt_index may only be %q: the chunked receipts index cannot be switched off or to anything else (got %q)",
			ReceiptIndexChunked, v)
	}
	on, err := t.chunked()
	if err != nil {
		return err
	}
	if on {
		return errs.New(errs.Usage, "the receipts index is already %s", ReceiptIndexChunked)
	}
	return t.put(layoutKey, &Layout{ReceiptIndex: v})
}

// genesis applies the genesis entry: its body, {"origin"} and optionally
// {"receipt_index":"chunked"}, decoded strictly as every body is; the
// origin itself is the chain's (chain.Meta.Advance).
func (r *rule) genesis() error {
	var b chain.GenesisBody
	if err := r.body(&b); err != nil {
		return err
	}
	if b.ReceiptIndex == nil {
		return nil
	}
	return r.t.switchReceiptIndex(*b.ReceiptIndex)
}
