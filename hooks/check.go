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
	"strings"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

// Update is one ref update of a push.
type Update struct {
	Ref      string
	Old, New gitstore.ObjectID
}

// Finding is a refusal (or, under a warn policy, a warning) about one ref.
type Finding struct {
	Ref     string    `json:"ref"`
	Code    errs.Code `json:"code"`
	Message string    `json:"message"`
	Warning bool      `json:"warning"`
}

func (f Finding) String() string {
	kind := "refused"
	if f.Warning {
		kind = "warning"
	}
	return ledger.FindingLine(kind, f.Ref, f.Code, f.Message)
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
			return nil, errs.New(errs.Usage, "malformed hook input line %q", sc.Text())
		}
		out = append(out, u)
	}
	if err := sc.Err(); err != nil {
		return nil, errs.Wrap(errs.Usage, err, "reading the hook input")
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
	// AfterTheFact judges an update that already happened (tally check on a
	// hosted remote): the refs already point at the new values, and who
	// pushed is unknown, so the pusher binding is not judged.
	AfterTheFact bool
}

// Check returns the findings for a push. The ledger update, if any, is
// checked first; every other ref is then judged against the ledger as it
// will be after the push: the namespace's other refs and the receipt notes
// by checkNamespace and checkNotes, code refs by checkCode.
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
		var fs []Finding
		switch {
		case u.Ref == c.L.Ref:
			continue
		case strings.HasPrefix(u.Ref, ledger.RequestPrefix+"/"):
			fs = c.checkRequest(u)
		case strings.HasPrefix(u.Ref, c.L.Namespace+"/"):
			fs, err = c.checkNamespace(ledgerTip, u)
		case u.Ref == receipt.NotesRef:
			fs, err = c.checkNotes(ledgerTip, u)
		case u.New.IsZero() || ledgerTip.IsZero():
			continue
		default:
			if state == nil {
				if state, err = c.codeStateAt(ledgerTip); err != nil {
					return nil, err
				}
			}
			fs, err = c.checkCode(state, u)
		}
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
	refuse := func(code errs.Code, format string, args ...any) *Finding {
		return &Finding{Ref: u.Ref, Code: code, Message: fmt.Sprintf(format, args...)}
	}
	if u.New.IsZero() {
		return refuse(errs.Policy, "deleting the ledger is not allowed"), nil
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
		return refuse(errs.Corrupt, "cannot read the current ledger %s: %v", u.Old, err), nil
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
				return errs.New(errs.Policy, "entry %d is dated %s, more than %ds ahead of the server clock (%s)",
					a.Entry.Seq, a.Entry.TS, p.SkewSeconds, chain.FormatTime(c.Now)).With("seq", a.Entry.Seq)
			}
			return refuseDeadHolder(a)
		}
		each = skew
		if !c.AfterTheFact {
			pusher := c.pusherCheck(p)
			each = func(a *ledger.Applied) error {
				if err := skew(a); err != nil {
					return err
				}
				return pusher(a)
			}
		}
	}
	_, err = c.L.VerifyRangeEach(old, u.New, each)
	if err != nil {
		e := errs.From(err)
		msg := e.Message
		if e.Code == errs.ForkDetected || e.Code == errs.RollbackDetected {
			msg = "not a fast-forward of the current ledger: " + msg
		}
		return refuse(e.Code, "%s", msg), nil
	}
	return nil, nil
}

// git runs git in the repository and returns its stdout.
func (c *Checker) git(args ...string) (string, error) {
	out, err := c.L.Repo.Git(args...)
	if err != nil {
		return "", errs.Wrap(errs.Internal, err, "git %s", args[0])
	}
	return string(out), nil
}
