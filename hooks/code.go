package hooks

import (
	"fmt"
	"slices"
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// codeState is what code refs are judged against, read once per push: the
// ledger after it, its policy, and (if path leases are enforced) the live
// path holds.
type codeState struct {
	snap   *ledger.Snapshot
	policy *lease.Policy
	holds  []lease.PathHold
	// ignoreCase: the repository's core.ignorecase; paths and patterns then
	// match case folded (FORMAT.md §9c).
	ignoreCase bool
}

func (c *Checker) codeStateAt(tip gitstore.ObjectID) (*codeState, error) {
	snap, err := c.L.SnapshotAt(tip)
	if err != nil {
		return nil, err
	}
	p, err := lease.ReadPolicy(snap)
	if err != nil {
		return nil, err
	}
	cs := &codeState{snap: snap, policy: p, ignoreCase: c.L.Repo.IgnoreCase()}
	if p.PathLeases != lease.Off {
		if cs.holds, err = lease.PathHolds(snap, c.Now); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// checkCode applies the push policies to a code ref: receipts on protected
// branches, and paths under another actor's live lease. Every commit that
// enters the ref is checked (enteringCommits), whether or not another ref
// already holds it. A commit's changes are ownChanges: for a merge, only
// what the merge itself changes, so a clean merge of checked commits needs
// neither a receipt nor a path check, and an evil merge needs both.
func (c *Checker) checkCode(cs *codeState, u Update) ([]Finding, error) {
	p, state, holds := cs.policy, cs.snap, cs.holds
	needReceipts := p.Receipts != lease.Off && slices.Contains(p.Protected, u.Ref)
	if !needReceipts && p.PathLeases == lease.Off {
		return nil, nil
	}
	commits, err := c.enteringCommits(u, needReceipts, p.Protected)
	if err != nil {
		return nil, err
	}
	db, err := c.L.Repo.Objects()
	if err != nil {
		return nil, err
	}
	var out []Finding
	add := func(mode string, code errs.Code, format string, args ...any) {
		out = append(out, Finding{Ref: u.Ref, Code: code, Message: fmt.Sprintf(format, args...), Warning: mode == lease.Warn})
	}
	for _, id := range commits {
		cm, err := db.ReadCommit(id)
		if err != nil {
			return nil, err
		}
		changed, err := ownChanges(db, cm)
		if err != nil {
			return nil, err
		}
		merge := len(cm.Parents) > 1
		if merge && len(changed) == 0 {
			continue // its content is its parents', each checked on its own
		}
		what := "commit"
		if merge {
			what = "merge"
		}
		if needReceipts {
			ok, err := receipted(state, id, cm.Tree)
			if err != nil {
				return nil, err
			}
			if !ok {
				add(p.Receipts, errs.ReceiptMissing, "%s %s has no receipt in the ledger (protected branch)", what, id)
			}
		}
		for _, path := range changed {
			for _, h := range lease.HoldsOn(holds, path, cs.ignoreCase) {
				if !p.IsAuthor(h.Actor, cm.Author.Email) {
					add(p.PathLeases, errs.PathHeld, "%s %s by %s changes %s, leased to %s (%s, epoch %d) until %s; "+
						"author %s is not %s's (the policy's authors give %s: %v; tally policy set-authors maps an actor to its commit emails)",
						what, id, cm.Author.Email, path, h.Actor, h.Source, h.Epoch, h.ExpiresAt,
						cm.Author.Email, h.Actor, h.Actor, p.Authors[h.Actor])
				}
			}
		}
	}
	return out, nil
}

// ownChanges returns the paths a commit itself changes: against its parent
// (or the empty tree for a root commit), and for a merge the paths whose
// content differs from that path in every parent. A path that matches one
// parent came from that parent.
func ownChanges(db *gitstore.ObjectDB, cm *gitstore.Commit) ([]string, error) {
	if len(cm.Parents) == 0 {
		return gitstore.DiffTrees(db, gitstore.ObjectID{}, cm.Tree)
	}
	var own []string
	for i, parent := range cm.Parents {
		pc, err := db.ReadCommit(parent)
		if err != nil {
			return nil, err
		}
		changed, err := gitstore.DiffTrees(db, pc.Tree, cm.Tree)
		if err != nil {
			return nil, err
		}
		if i == 0 {
			own = changed
		} else {
			own = slices.DeleteFunc(own, func(p string) bool { _, found := slices.BinarySearch(changed, p); return !found })
		}
		if len(own) == 0 {
			break
		}
	}
	return own, nil
}

func receipted(state *ledger.Snapshot, commit, tree gitstore.ObjectID) (bool, error) {
	_, _, err := receipt.Find(state, commit, tree)
	if errs.CodeOf(err) == errs.ReceiptMissing {
		return false, nil
	}
	return err == nil, err
}

// enteringCommits lists the commits that enter u.Ref with this update: those
// NEW reaches and the ref's old value does not, whichever other refs hold
// them (a commit staged on another ref first is checked when it reaches this
// one). When the update creates the ref, a commit already on an existing ref
// that the same policies cover passed this hook there and is not checked
// again: with receipts required, the existing protected refs; otherwise
// every existing ref outside the namespace and the notes. On the client, the
// remote's refs are known by their remote-tracking refs; where the remote's
// old value is not here, those stand in for it.
func (c *Checker) enteringCommits(u Update, receiptsRequired bool, protected []string) ([]gitstore.ObjectID, error) {
	db, err := c.L.Repo.Objects()
	if err != nil {
		return nil, err
	}
	args := []string{"rev-list", u.New.String(), "--not"}
	switch {
	case !u.Old.IsZero() && db.Has(u.Old):
		args = append(args, u.Old.String())
	case !c.Server:
		args = append(args, "--remotes="+c.Remote)
	case receiptsRequired:
		refs, err := c.existingRefs()
		if err != nil {
			return nil, err
		}
		for _, ref := range protected {
			if refs[ref] && ref != u.Ref { // after the fact, the created ref itself exists
				args = append(args, ref)
			}
		}
	default:
		args = append(args, "--exclude="+c.L.Namespace+"/*", "--exclude="+receipt.NotesRef, "--exclude="+u.Ref, "--all")
	}
	out, err := c.git(args...)
	if err != nil {
		return nil, err
	}
	var ids []gitstore.ObjectID
	for _, line := range strings.Fields(out) {
		id, err := gitstore.ParseObjectID(line)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}

// existingRefs lists the refs of the repository (in pre-receive: as they
// were before the push).
func (c *Checker) existingRefs() (map[string]bool, error) {
	out, err := c.git("for-each-ref", "--format=%(refname)")
	if err != nil {
		return nil, err
	}
	refs := map[string]bool{}
	for _, r := range strings.Fields(out) {
		refs[r] = true
	}
	return refs, nil
}
