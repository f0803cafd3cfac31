package receipt

import (
	"encoding/json"
	"fmt"
	"slices"
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// How a commit was matched to receipts: by the receipts index of the commit
// itself, or, when it has none, by the index of its tree (the receipted work
// was rebased or squashed into a commit with the same tree).
const (
	MatchCommit = "commit"
	MatchTree   = "tree"
)

// Receipt is a receipt as its done entry records it.
type Receipt struct {
	Seq   uint64     `json:"seq"`
	Hash  chain.Hash `json:"hash"`
	TS    string     `json:"ts"`
	Actor string     `json:"actor"`
	lease.DoneBody
}

// noteLine is the receipt's line in a note (NoteLine) for the ledger origin.
func (r *Receipt) noteLine(origin string) string {
	return NoteLine(origin, r.Seq, r.Hash.String(), r.Wave+"/"+r.Cell, r.Epoch)
}

// ShowResult lists the receipts of a commit.
type ShowResult struct {
	Commit   string    `json:"commit"`
	Tree     string    `json:"tree"`
	Match    string    `json:"match"`
	Receipts []Receipt `json:"receipts"`
}

// Show finds the receipts of the commit rev names through the receipts index
// of ledger state s (the head if nil), else those of other commits with the
// same tree, and reads their done entries. It reads what the ledger says;
// Verify checks it. No receipt for the commit or its tree is RECEIPT-MISSING.
func Show(l *ledger.Ledger, s *ledger.Snapshot, rev string) (*ShowResult, error) {
	commit, tree, err := resolve(l, rev)
	if err != nil {
		return nil, err
	}
	if s == nil {
		if s, err = l.Head(); err != nil {
			return nil, err
		}
	}
	match, refs, err := Find(s, commit, tree)
	if err != nil {
		return nil, err
	}
	res := &ShowResult{Commit: commit.String(), Tree: tree.String(), Match: match, Receipts: []Receipt{}}
	for _, ref := range refs {
		r, err := readReceipt(s, ref.Seq)
		if err != nil {
			return nil, err
		}
		res.Receipts = append(res.Receipts, *r)
	}
	return res, nil
}

// resolve returns the commit rev names and its tree.
func resolve(l *ledger.Ledger, rev string) (commit, tree gitstore.ObjectID, err error) {
	if commit, err = l.Repo.ResolveCommit(rev); err != nil {
		return commit, tree, errs.Wrap(errs.CommitMissing, err, "resolve %s", rev)
	}
	tree, err = treeOf(l, commit.String())
	return commit, tree, err
}

// changedPaths lists the paths that differ from the commit base ("": none,
// everything is new) to tree, in git's order; never nil.
func changedPaths(l *ledger.Ledger, base string, tree gitstore.ObjectID) ([]string, error) {
	var baseTree gitstore.ObjectID
	if base != "" {
		var err error
		if baseTree, err = treeOf(l, base); err != nil {
			return nil, err
		}
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	changed, err := gitstore.DiffTrees(db, baseTree, tree)
	if err != nil {
		return nil, errs.Wrap(errs.CommitMissing, err, "diff %s..%s", base, tree)
	}
	if changed == nil {
		changed = []string{}
	}
	return changed, nil
}

// treeOf reads a commit's tree; a commit absent from the repository is COMMIT-MISSING.
func treeOf(l *ledger.Ledger, commit string) (gitstore.ObjectID, error) {
	id, err := gitstore.ParseObjectID(commit)
	if err != nil {
		return id, errs.New(errs.CommitMissing, "%q is not an object id", commit)
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return id, err
	}
	c, err := db.ReadCommit(id)
	if err != nil {
		return id, errs.Wrap(errs.CommitMissing, err, "commit %s", commit).With("commit", commit)
	}
	return c.Tree, nil
}

// Find returns the receipts the state indexes under the commit, else under
// its tree (the match says which): the key's index blobs (its head, count
// and chunks: 3 + n/16 reads for n receipts), never a scan of the chain.
// None is RECEIPT-MISSING.
func Find(s *ledger.Snapshot, commit, tree gitstore.ObjectID) (string, []lease.ReceiptRef, error) {
	ix, err := lease.ReadReceipts(s, lease.ReceiptKey(commit.String()))
	if err != nil || len(ix.Receipts) > 0 {
		return MatchCommit, ix.Receipts, err
	}
	if ix, err = lease.ReadReceipts(s, lease.TreeKey(tree.String())); err != nil || len(ix.Receipts) > 0 {
		return MatchTree, ix.Receipts, err
	}
	return "", nil, errs.New(errs.ReceiptMissing, "no receipt for commit %s, and none for its tree %s", commit, tree).
		With("commit", commit.String()).With("tree", tree.String())
}

// readReceipt reads entry seq through the Merkle tiles (checking its bytes
// against the recorded entry hash) and decodes it as a done entry.
func readReceipt(s *ledger.Snapshot, seq uint64) (*Receipt, error) {
	e, h, _, err := s.Entry(seq)
	if err != nil {
		if e := errs.From(err); e.Class() != errs.Integrity {
			return nil, errs.Wrap(errs.ReceiptInvalid, err, "receipt entry %d", seq).With("seq", seq).With("check", "entry")
		}
		return nil, err
	}
	if e.Kind != chain.KindDone {
		return nil, invalid(seq, "kind", "entry %d is a %s entry, not done", seq, e.Kind)
	}
	r := &Receipt{Seq: e.Seq, Hash: h, TS: e.TS, Actor: e.Actor}
	if err := json.Unmarshal(e.Body, &r.DoneBody); err != nil {
		return nil, invalid(seq, "kind", "entry %d: done body: %v", seq, err)
	}
	return r, nil
}

func invalid(seq uint64, check, format string, args ...any) *errs.Error {
	return errs.New(errs.ReceiptInvalid, format, args...).With("seq", seq).With("check", check)
}

// LedgerPoint is the verified ledger head that receipts are checked against.
type LedgerPoint struct {
	Origin string     `json:"origin"`
	Ref    string     `json:"ref"`
	Size   uint64     `json:"size"`
	Root   chain.Hash `json:"root"`
	Head   chain.Hash `json:"head"`
}

// Checks are the checks a receipt passed. Every one but Note is required:
// a receipt failing one makes Verify fail instead.
type Checks struct {
	EntryHash bool `json:"entry_hash"` // the entry's bytes hash to the entry hash in the Merkle tiles
	Inclusion bool `json:"inclusion"`  // an RFC 9162 inclusion proof leads to the verified root
	Kind      bool `json:"kind"`       // the entry is a done entry
	Commit    bool `json:"commit"`     // its commit is the receipt's and has its tree, which is the queried commit's tree
	Index     bool `json:"index"`      // the receipts index agrees with the entry
	// EpochLive holds because the entry is in a verified chain: verify replayed
	// the lease rules, which accept a done only at the live lease's epoch.
	EpochLive bool `json:"epoch_live"`
	CellState bool `json:"cell_state"` // the cell records this receipt (or has moved to a later epoch)
	Changed   bool `json:"changed"`    // the changed paths, recomputed from base..commit, equal the recorded ones
	Scope     bool `json:"scope"`      // every changed path is within the cell's paths
	Note      bool `json:"note"`       // the commit's git note points at this entry (missing: a warning)
}

// Checked is a receipt with the proof and checks that held for it.
type Checked struct {
	Receipt
	Proof  []chain.Hash `json:"proof"` // the inclusion proof of Seq in the ledger of Ledger.Size entries
	Checks Checks       `json:"checks"`
}

// VerifyResult is a successful receipt verification.
type VerifyResult struct {
	Commit   string      `json:"commit"`
	Tree     string      `json:"tree"`
	Match    string      `json:"match"`
	Ledger   LedgerPoint `json:"ledger"`
	Receipts []Checked   `json:"receipts"`
	Warnings []string    `json:"warnings"`
}

// Verify verifies the ledger (incrementally, see ledger.Ledger.Verify; its
// failures keep their own codes) and then, with Check, the receipts of the
// commit rev names.
func Verify(l *ledger.Ledger, rev string) (*VerifyResult, error) {
	rep, err := l.Verify(false)
	if err != nil {
		return nil, err
	}
	return Check(l, rep, rev)
}

// Check checks the receipts of the commit rev names against the ledger head
// that rep reports verified. It finds them as Show does, then for each:
// the entry is read and hash-checked through the Merkle tiles and proved
// included under the verified root; it is a done entry whose commit and tree
// are the receipt's, and whose tree is the queried commit's; the index agrees
// with it; the cell records it; the paths changed from its base to its
// commit, recomputed from the repository, are the recorded ones and within
// the cell's paths. Finally each commit's git note must not point at an
// entry of this ledger other than a receipt of its tree; a missing note line
// is a warning. Its cost depends on the receipts found, the size of their
// diffs and the notes tree, and only logarithmically on the ledger's length.
//
// Failures are RECEIPT-MISSING (no receipt for the commit or its tree),
// COMMIT-MISSING (an object the check needs is not in the repository), or
// RECEIPT-INVALID (or an integrity code of the entry read) with details
// naming the seq and the check.
func Check(l *ledger.Ledger, rep *ledger.Report, rev string) (*VerifyResult, error) {
	commit, tree, err := resolve(l, rev)
	if err != nil {
		return nil, err
	}
	s, err := l.SnapshotAt(rep.Commit)
	if err != nil {
		return nil, err
	}
	if s.Meta.Size != rep.Entries || s.Meta.Root != rep.Root {
		return nil, errs.New(errs.ReceiptInvalid, "ledger commit %s does not hold the verified head (size %d, root %s)",
			rep.Commit, rep.Entries, rep.Root)
	}
	match, refs, err := Find(s, commit, tree)
	if err != nil {
		return nil, err
	}
	res := &VerifyResult{Commit: commit.String(), Tree: tree.String(), Match: match, Receipts: []Checked{}, Warnings: []string{},
		Ledger: LedgerPoint{Origin: s.Meta.Origin, Ref: l.Ref, Size: s.Meta.Size, Root: s.Meta.Root, Head: s.Meta.Head}}
	nodes := chain.TileNodeReader(s, s.Meta.Size)
	for _, ref := range refs {
		c, err := checkOne(l, s, nodes, ref, res)
		if err != nil {
			return nil, err
		}
		res.Receipts = append(res.Receipts, *c)
	}
	return res, checkNotes(l, s, res)
}

// checkOne runs the checks of one receipt.
func checkOne(l *ledger.Ledger, s *ledger.Snapshot, nodes chain.NodeReader, ref lease.ReceiptRef, res *VerifyResult) (*Checked, error) {
	seq, size := ref.Seq, s.Meta.Size
	r, err := readReceipt(s, seq)
	if err != nil {
		return nil, err
	}
	c := &Checked{Receipt: *r, Checks: Checks{EntryHash: true, Kind: true}}
	if c.Proof, err = chain.InclusionProof(nodes, seq, size); err != nil {
		return nil, errs.Wrap(errs.ReceiptInvalid, err, "entry %d", seq).With("seq", seq).With("check", "inclusion")
	}
	if err := chain.VerifyInclusion(chain.LeafHash(r.Hash), seq, size, c.Proof, s.Meta.Root); err != nil {
		return nil, errs.Wrap(errs.ReceiptInvalid, err, "entry %d is not in the verified ledger", seq).With("seq", seq).With("check", "inclusion")
	}
	c.Checks.Inclusion = true

	b := &r.DoneBody
	commitTree, err := treeOf(l, b.Commit)
	if err != nil {
		return nil, err
	}
	switch {
	case res.Match == MatchCommit && b.Commit != res.Commit:
		return nil, invalid(seq, "commit", "entry %d receipts commit %s, not %s", seq, b.Commit, res.Commit)
	case b.Tree != commitTree.String():
		return nil, invalid(seq, "commit", "entry %d records tree %s, but commit %s has tree %s", seq, b.Tree, b.Commit, commitTree)
	case b.Tree != res.Tree:
		return nil, invalid(seq, "commit", "entry %d records tree %s, not %s's tree %s", seq, b.Tree, res.Commit, res.Tree)
	}
	c.Checks.Commit = true
	if ref != (lease.ReceiptRef{Seq: r.Seq, Wave: b.Wave, Cell: b.Cell, Epoch: b.Epoch, Commit: b.Commit, Tree: b.Tree}) {
		return nil, invalid(seq, "index", "the receipts index (%+v) disagrees with entry %d", ref, seq)
	}
	c.Checks.Index, c.Checks.EpochLive = true, true

	cell, err := lease.ReadCell(s, b.Wave, b.Cell)
	if err != nil {
		return nil, errs.Wrap(errs.ReceiptInvalid, err, "entry %d", seq).With("seq", seq).With("check", "cell_state")
	}
	if rc := cell.Receipt; (rc == nil || rc.Seq != seq || rc.Commit != b.Commit) && cell.Epoch <= b.Epoch {
		return nil, invalid(seq, "cell_state", "cell %s/%s at epoch %d does not record receipt %d", b.Wave, b.Cell, cell.Epoch, seq)
	}
	c.Checks.CellState = true

	changed, err := changedPaths(l, b.Base, commitTree)
	if err != nil {
		return nil, err
	}
	if !slices.Equal(changed, b.Changed) {
		return nil, invalid(seq, "changed", "entry %d records changed paths %v, but %s..%s changes %v", seq, b.Changed, b.Base, b.Commit, changed)
	}
	c.Checks.Changed = true
	if out := lease.OutOfScope(cell.Paths, b.Changed); len(out) > 0 {
		return nil, invalid(seq, "scope", "entry %d changes %v outside %s/%s's paths %v", seq, out, b.Wave, b.Cell, cell.Paths).With("paths", out)
	}
	c.Checks.Scope = true
	return c, nil
}

// checkNotes checks the tally notes of the receipted commits and of the
// queried commit. A line of this ledger's origin must be valid for the
// commit by validNoteLine, the rule the notes push check applies too: the note
// line of a receipt of the commit or of its tree (rebasing may copy notes to
// the new commit); any other is RECEIPT-INVALID. Every receipted commit here
// has the queried commit's tree, so one set serves them all. A receipted
// commit whose note lacks its line gets a warning: the ledger is the record,
// the note a pointer to it.
func checkNotes(l *ledger.Ledger, s *ledger.Snapshot, res *VerifyResult) error {
	origin := s.Meta.Origin
	queried, _ := gitstore.ParseObjectID(res.Commit)
	tree, _ := gitstore.ParseObjectID(res.Tree)
	lines := map[string]int{} // note line -> index in res.Receipts
	commits := []string{res.Commit}
	for i, c := range res.Receipts {
		lines[c.noteLine(origin)] = i
		if !slices.Contains(commits, c.DoneBody.Commit) {
			commits = append(commits, c.DoneBody.Commit)
		}
	}
	for _, commit := range commits {
		id, _ := gitstore.ParseObjectID(commit)
		note, err := ReadNote(l.Repo, id)
		if err != nil {
			return errs.Wrap(errs.Corrupt, err, "read %s note of %s", NotesRef, commit)
		}
		found := map[int]bool{}
		for _, line := range strings.Split(note, "\n") {
			line = strings.TrimSpace(line)
			if !strings.HasPrefix(line, "tally-receipt ") {
				continue
			}
			if !strings.HasPrefix(line, "tally-receipt origin="+origin+" ") {
				res.Warnings = append(res.Warnings, fmt.Sprintf("the %s note of %s names another ledger: %q", NotesRef, commit, line))
				continue
			}
			if ok, err := validNoteLine(s, queried, tree, line); err != nil {
				return err
			} else if !ok {
				return errs.New(errs.ReceiptInvalid, "the %s note of %s names an entry that is not a receipt of its tree: %q", NotesRef, commit, line).
					With("check", "note").With("commit", commit).With("note", line)
			}
			if i, ok := lines[line]; ok {
				found[i] = true
			}
		}
		for i := range res.Receipts {
			c := &res.Receipts[i]
			switch {
			case c.DoneBody.Commit != commit:
			case found[i]:
				c.Checks.Note = true
			default:
				res.Warnings = append(res.Warnings, fmt.Sprintf("no %s note on %s for receipt #%d (the ledger is the record)", NotesRef, commit, c.Seq))
			}
		}
	}
	return nil
}
