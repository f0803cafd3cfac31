package hooks

import (
	"errors"
	"strconv"
	"strings"

	"github.com/tally-dev/tally/anchor"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// checkNamespace judges a ref under the namespace other than the ledger.
// FORMAT.md §1 defines only <namespace>/checkpoints/<size>; anything else
// there is refused, so nothing can hide under a name that looks like
// tally's. ledgerTip is the ledger as it will be after the push.
func (c *Checker) checkNamespace(ledgerTip gitstore.ObjectID, u Update) ([]Finding, error) {
	refuse := func(err error) ([]Finding, error) { return refusal(u, err), nil }
	rest, _ := strings.CutPrefix(u.Ref, c.L.Namespace+"/checkpoints/")
	size, perr := strconv.ParseUint(rest, 10, 64)
	if rest == u.Ref || perr != nil || strconv.FormatUint(size, 10) != rest {
		return refuse(errs.New(errs.Policy, "%s is not a ref tally defines: under %s there are only %s and %s/checkpoints/<size>",
			u.Ref, c.L.Namespace, c.L.Ref, c.L.Namespace))
	}
	if u.New.IsZero() {
		return refuse(errs.New(errs.Policy, "stored checkpoints are append-only: deleting %s is not allowed", u.Ref))
	}
	if ledgerTip.IsZero() {
		return refuse(errs.New(errs.CheckpointInvalid, "a checkpoint without a ledger"))
	}
	db, err := c.L.Repo.Objects()
	if err != nil {
		return nil, err
	}
	read := func(id gitstore.ObjectID) ([]byte, error) {
		typ, data, err := db.Read(id)
		if err != nil {
			return nil, err
		}
		if typ != gitstore.BlobObject {
			return nil, errs.New(errs.CheckpointInvalid, "%s must point at a blob holding a checkpoint note, not a %s", u.Ref, typ)
		}
		return data, nil
	}
	text, err := read(u.New)
	if err != nil {
		return refuse(err)
	}
	var prev []byte
	if !u.Old.IsZero() && db.Has(u.Old) {
		if prev, err = read(u.Old); err != nil {
			return refuse(err)
		}
	}
	snap, err := c.L.SnapshotAt(ledgerTip)
	if err != nil {
		return nil, err
	}
	commit, err := anchor.CheckStored(snap, snap.Meta, size, prev, text)
	if err == nil && !commit.IsZero() {
		// A note naming another commit would squat the size: the signer's
		// true note could never be stored there (bodies never change).
		err = c.L.CheckCommitLine(ledgerTip, size, commit)
	}
	if err != nil {
		return refuse(err)
	}
	return nil, nil
}

// checkNotes judges a push of the receipt notes: they move only by
// fast-forward, never are deleted, and every line a push adds names a
// receipt the ledger (as it will be after the push) holds for that commit
// (receipt.CheckNotesPush).
func (c *Checker) checkNotes(ledgerTip gitstore.ObjectID, u Update) ([]Finding, error) {
	refuse := func(err error) ([]Finding, error) { return refusal(u, err), nil }
	if u.New.IsZero() {
		return refuse(errs.New(errs.Policy, "deleting %s is not allowed: receipt notes are append-only", u.Ref))
	}
	db, err := c.L.Repo.Objects()
	if err != nil {
		return nil, err
	}
	old := u.Old
	if !old.IsZero() && !db.Has(old) {
		// Only a client can lack the remote's value: the server judges
		// fast-forward; this checks the notes it sends against none.
		old = gitstore.ObjectID{}
	} else if !old.IsZero() {
		ff, err := c.isAncestor(old, u.New)
		if err != nil {
			return nil, err
		}
		if !ff {
			return refuse(errs.New(errs.Policy, "%s moves only by fast-forward: %s does not descend from %s", u.Ref, u.New, old))
		}
	}
	var snap *ledger.Snapshot
	if !ledgerTip.IsZero() {
		if snap, err = c.L.SnapshotAt(ledgerTip); err != nil {
			return nil, err
		}
	}
	if err := receipt.CheckNotesPush(db, snap, old, u.New); err != nil {
		return refuse(err)
	}
	return nil, nil
}

// refusal is the one finding that refuses u for err (its code and message).
func refusal(u Update, err error) []Finding {
	e := errs.From(err)
	return []Finding{{Ref: u.Ref, Code: e.Code, Message: e.Message}}
}

// isAncestor reports whether a is an ancestor of b (git merge-base
// --is-ancestor: exit 1 means no).
func (c *Checker) isAncestor(a, b gitstore.ObjectID) (bool, error) {
	_, err := c.git("merge-base", "--is-ancestor", a.String(), b.String())
	var ge *gitstore.GitError
	if errors.As(err, &ge) && ge.Code == 1 {
		return false, nil
	}
	return err == nil, err
}
