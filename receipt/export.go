package receipt

import (
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

// In-toto Statement v1 (https://github.com/in-toto/attestation/blob/main/spec/v1/statement.md).
const (
	StatementType = "https://in-toto.io/Statement/v1"
	PredicateType = "https://tally.dev/receipt/v1"
)

// Statement is an in-toto Statement v1 attesting one receipt.
type Statement struct {
	Type          string    `json:"_type"`
	Subject       []Subject `json:"subject"`
	PredicateType string    `json:"predicateType"`
	Predicate     Predicate `json:"predicate"`
}

// Subject is an in-toto resource descriptor naming a git object by digest.
type Subject struct {
	Name   string            `json:"name"`
	Digest map[string]string `json:"digest"`
}

// Predicate is the receipt: who finished which cell under which lease epoch,
// from which base, changing which paths, with which evidence, and where the
// done entry is in the ledger.
type Predicate struct {
	Cell     string           `json:"cell"` // wave/cell
	Actor    string           `json:"actor"`
	Epoch    int64            `json:"epoch"`
	TS       string           `json:"ts"`
	Base     string           `json:"base"`
	Changed  []string         `json:"changed"`
	Evidence []lease.Evidence `json:"evidence"`
	Ledger   LedgerRef        `json:"ledger"`
}

// LedgerRef locates the done entry in the verified ledger: entry Seq with
// hash EntryHash is leaf Seq of the Merkle log of Size entries and root Root,
// as InclusionProof (RFC 9162, BLAKE3, see docs/FORMAT.md §3) proves.
type LedgerRef struct {
	Origin         string       `json:"origin"`
	Ref            string       `json:"ref"`
	Seq            uint64       `json:"seq"`
	EntryHash      chain.Hash   `json:"entry_hash"`
	Size           uint64       `json:"size"`
	Root           chain.Hash   `json:"root"`
	InclusionProof []chain.Hash `json:"inclusion_proof"`
}

// Attest returns the in-toto statement of one verified receipt: the one of
// cell ("wave/cell") if given, else the only one. Its subjects are the
// receipted commit and its tree; when the queried commit matched by tree,
// that commit is the receipted one, not the queried one, whose tree the tree
// subject still names.
func Attest(res *VerifyResult, cell string) (*Statement, error) {
	var pick *Checked
	cells := []string{}
	for i := range res.Receipts {
		r := &res.Receipts[i]
		cells = append(cells, r.Wave+"/"+r.Cell)
		if cell == "" && len(res.Receipts) == 1 || cell == r.Wave+"/"+r.Cell {
			pick = r
		}
	}
	if pick == nil {
		if cell != "" {
			return nil, errs.New(errs.ReceiptMissing, "%s has no receipt for cell %s (receipts: %v)", res.Commit, cell, cells).With("cells", cells)
		}
		return nil, errs.New(errs.Usage, "%s has %d receipts; choose one with --cell: %v", res.Commit, len(cells), cells).With("cells", cells)
	}
	b := &pick.DoneBody
	return &Statement{
		Type: StatementType,
		Subject: []Subject{
			{Name: "git+commit:" + b.Commit, Digest: map[string]string{"gitCommit": b.Commit}},
			{Name: "git+tree:" + b.Tree, Digest: map[string]string{"gitTree": b.Tree}},
		},
		PredicateType: PredicateType,
		Predicate: Predicate{Cell: b.Wave + "/" + b.Cell, Actor: pick.Actor, Epoch: b.Epoch, TS: pick.TS, Base: b.Base,
			Changed: b.Changed, Evidence: b.Evidence,
			Ledger: LedgerRef{Origin: res.Ledger.Origin, Ref: res.Ledger.Ref, Seq: pick.Seq, EntryHash: pick.Hash,
				Size: res.Ledger.Size, Root: res.Ledger.Root, InclusionProof: pick.Proof}},
	}, nil
}
