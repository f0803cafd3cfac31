// Package hooks enforces the ledger where it matters: at push. The client
// pre-push hook and the server pre-receive hook run the same checks — the
// ledger verifier and the lease rules through ledger.VerifyRangeEach, plus the
// push policies — so a forged or illegal ledger update is refused, not just
// reported. The server hook checks only what a push adds.
package hooks

import (
	"bufio"
	"fmt"
	"io"
	"os/exec"
	"slices"
	"strings"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/pathspec"
	"github.com/tally-dev/tally/receipt"
)

// Update is one ref update of a push.
type Update struct {
	Ref      string
	Old, New gitstore.ObjectID
}

// Finding is a refusal (or, under a warn policy, a warning) about one ref.
type Finding struct {
	Ref     string `json:"ref"`
	Code    string `json:"code"`
	Message string `json:"message"`
	Warning bool   `json:"warning"`
}

func (f Finding) String() string {
	kind := "refused"
	if f.Warning {
		kind = "warning"
	}
	return fmt.Sprintf("tally: %s %s: %s: %s", kind, f.Ref, f.Code, f.Message)
}

// ParsePreReceive reads pre-receive input: "<old> <new> <ref>" per line.
func ParsePreReceive(r io.Reader) ([]Update, error) {
	return parseLines(r, func(f []string) (Update, bool) {
		if len(f) != 3 {
			return Update{}, false
		}
		return mkUpdate(f[2], f[0], f[1])
	})
}

// ParsePrePush reads pre-push input: "<local ref> <local sha> <remote ref> <remote sha>".
func ParsePrePush(r io.Reader) ([]Update, error) {
	return parseLines(r, func(f []string) (Update, bool) {
		if len(f) != 4 {
			return Update{}, false
		}
		return mkUpdate(f[2], f[3], f[1])
	})
}

func mkUpdate(ref, old, new string) (Update, bool) {
	o, err1 := gitstore.ParseObjectID(old)
	n, err2 := gitstore.ParseObjectID(new)
	return Update{Ref: ref, Old: o, New: n}, err1 == nil && err2 == nil
}

func parseLines(r io.Reader, parse func([]string) (Update, bool)) ([]Update, error) {
	var out []Update
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) == 0 {
			continue
		}
		u, ok := parse(f)
		if !ok {
			return nil, errs.New("USAGE", "malformed hook input line %q", sc.Text())
		}
		out = append(out, u)
	}
	if err := sc.Err(); err != nil {
		return nil, errs.Wrap("USAGE", err, "reading the hook input")
	}
	return out, nil
}

// Checker checks the updates of one push against a ledger.
type Checker struct {
	L *ledger.Ledger
	// Now is the clock entry timestamps are bounded by (the server's).
	Now time.Time
	// Server selects the server's view: new ledger entries must not be ahead
	// of Now by more than the policy's skew tolerance, and refs not yet moved
	// mark what is new. Otherwise (pre-push) Remote names the remote pushed to.
	Server bool
	Remote string
	// Pusher looks up the server environment's variables that name who
	// pushed (os.LookupEnv in the server hook; nil: none). Used only on the
	// server; it decides anything only while the policy binds pushers
	// (pusherCheck).
	Pusher Env
}

// Check returns the findings for a push. The ledger update, if any, is
// checked first; code refs are then judged against the ledger as it will be
// after the push.
func (c *Checker) Check(updates []Update) ([]Finding, error) {
	var out []Finding
	ledgerTip, err := c.L.Tip()
	if err != nil {
		return nil, err
	}
	for _, u := range updates {
		if u.Ref != c.L.Ref {
			continue
		}
		f, err := c.checkLedger(u)
		if err != nil {
			return nil, err
		}
		if f != nil {
			out = append(out, *f)
		} else if !u.New.IsZero() {
			ledgerTip = u.New
		}
	}
	var state *codeState
	for _, u := range updates {
		if u.Ref == c.L.Ref || strings.HasPrefix(u.Ref, c.L.Namespace+"/") || u.New.IsZero() || ledgerTip.IsZero() {
			continue
		}
		if state == nil {
			if state, err = c.codeStateAt(ledgerTip); err != nil {
				return nil, err
			}
		}
		fs, err := c.checkCode(state, u)
		if err != nil {
			return nil, err
		}
		out = append(out, fs...)
	}
	return out, nil
}

// checkLedger verifies the entries a ledger update adds (only those): the
// chain, the rules, signatures, and on the server the clock skew.
func (c *Checker) checkLedger(u Update) (*Finding, error) {
	refuse := func(code, format string, args ...any) *Finding {
		return &Finding{Ref: u.Ref, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	if u.New.IsZero() {
		return refuse("POLICY", "deleting the ledger is not allowed"), nil
	}
	old := u.Old
	base, err := c.L.SnapshotAt(old)
	if err != nil && !c.Server {
		// The remote has entries this clone never fetched: the push cannot be a
		// fast-forward (the server will say so); still check what we send.
		old = gitstore.ObjectID{}
		base, err = c.L.SnapshotAt(old)
	}
	if err != nil {
		return refuse("CORRUPT", "cannot read the current ledger %s: %v", u.Old, err), nil
	}
	p, err := lease.ReadPolicy(base)
	if err != nil {
		return nil, err
	}
	var each func(*ledger.Applied) error // nil on the client: verify may then check segments in parallel
	if c.Server {
		limit := c.Now.Add(time.Duration(p.SkewSeconds) * time.Second)
		skew := func(a *ledger.Applied) error {
			if ts, err := chain.ParseTime(a.Entry.TS); err == nil && ts.After(limit) {
				return errs.New("POLICY", "entry %d is dated %s, more than %ds ahead of the server clock (%s)",
					a.Entry.Seq, a.Entry.TS, p.SkewSeconds, chain.FormatTime(c.Now)).With("seq", a.Entry.Seq)
			}
			return nil
		}
		pusher := c.pusherCheck(p)
		each = func(a *ledger.Applied) error {
			if err := skew(a); err != nil {
				return err
			}
			return pusher(a)
		}
	}
	_, err = c.L.VerifyRangeEach(old, u.New, each)
	if err != nil {
		e := errs.From(err)
		msg := e.Message
		if e.Code == "FORK-DETECTED" || e.Code == "ROLLBACK-DETECTED" {
			msg = "not a fast-forward of the current ledger: " + msg
		}
		return refuse(e.Code, "%s", msg), nil
	}
	return nil, nil
}

// codeState is what code refs are judged against, read once per push: the
// ledger after it, its policy, and (if path leases are enforced) the live
// path holds.
type codeState struct {
	snap   *ledger.Snapshot
	policy *lease.Policy
	holds  []lease.PathHold
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
	cs := &codeState{snap: snap, policy: p}
	if p.PathLeases != lease.Off {
		if cs.holds, err = lease.PathHolds(snap, c.Now); err != nil {
			return nil, err
		}
	}
	return cs, nil
}

// checkCode applies the push policies to a code ref: receipts on protected
// branches, and paths under another actor's live lease. Merge commits are
// exempt from both: their content is their parents'.
func (c *Checker) checkCode(cs *codeState, u Update) ([]Finding, error) {
	p, state, holds := cs.policy, cs.snap, cs.holds
	needReceipts := p.Receipts != lease.Off && slices.Contains(p.Protected, u.Ref)
	if !needReceipts && p.PathLeases == lease.Off {
		return nil, nil
	}
	commits, err := c.newCommits(u)
	if err != nil {
		return nil, err
	}
	db, err := c.L.Repo.Objects()
	if err != nil {
		return nil, err
	}
	var out []Finding
	add := func(mode, code, format string, args ...any) {
		out = append(out, Finding{Ref: u.Ref, Code: code, Message: fmt.Sprintf(format, args...), Warning: mode == lease.Warn})
	}
	for _, id := range commits {
		cm, err := db.ReadCommit(id)
		if err != nil {
			return nil, err
		}
		if len(cm.Parents) > 1 {
			continue
		}
		if needReceipts {
			ok, err := receipted(state, id, cm.Tree)
			if err != nil {
				return nil, err
			}
			if !ok {
				add(p.Receipts, "RECEIPT-MISSING", "commit %s has no receipt in the ledger (protected branch)", id)
			}
		}
		if len(holds) == 0 {
			continue
		}
		var parentTree gitstore.ObjectID
		if len(cm.Parents) == 1 {
			pc, err := db.ReadCommit(cm.Parents[0])
			if err != nil {
				return nil, err
			}
			parentTree = pc.Tree
		}
		changed, err := gitstore.DiffTrees(db, parentTree, cm.Tree)
		if err != nil {
			return nil, err
		}
		for _, path := range changed {
			for _, h := range holds {
				if h.Actor != cm.Author.Email && pathspec.Match(h.Pattern, path) {
					add(p.PathLeases, "PATH-HELD", "commit %s by %s changes %s, leased to %s (%s, epoch %d) until %s",
						id, cm.Author.Email, path, h.Actor, h.Source, h.Epoch, h.ExpiresAt)
				}
			}
		}
	}
	return out, nil
}

func receipted(state *ledger.Snapshot, commit, tree gitstore.ObjectID) (bool, error) {
	_, _, err := receipt.Find(state, commit, tree)
	if errs.Code(err) == "RECEIPT-MISSING" {
		return false, nil
	}
	return err == nil, err
}

// newCommits lists the commits an update adds. On the server, those no
// existing ref reaches (in pre-receive the refs have not moved yet, so --all
// is the old state); on the client, those the remote's refs do not reach.
func (c *Checker) newCommits(u Update) ([]gitstore.ObjectID, error) {
	args := []string{"rev-list", u.New.String(), "--not"}
	if c.Server {
		args = append(args, "--all")
	} else {
		args = append(args, "--remotes="+c.Remote)
	}
	if db, err := c.L.Repo.Objects(); err == nil && !u.Old.IsZero() && db.Has(u.Old) {
		args = append(args, u.Old.String())
	}
	cmd := exec.Command("git", args...)
	cmd.Dir = c.L.Repo.GitDir
	out, err := cmd.Output()
	if err != nil {
		return nil, errs.Wrap("INTERNAL", err, "git rev-list")
	}
	var ids []gitstore.ObjectID
	for _, line := range strings.Fields(string(out)) {
		id, err := gitstore.ParseObjectID(line)
		if err != nil {
			return nil, err
		}
		ids = append(ids, id)
	}
	return ids, nil
}
