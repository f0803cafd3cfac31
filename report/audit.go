package report

import (
	"cmp"
	"encoding/json"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/hooks"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/receipt"
)

// AuditOptions select what tally audit examines.
type AuditOptions struct {
	// Ref is the full ref name whose policy applies (is it protected?).
	Ref string
	// Old and New bound the commits: those New reaches and Old does not
	// (git's OLD..NEW). Old empty: all commits New reaches.
	Old, New string
	// Since and Until override the period (see Audit).
	Since, Until time.Time
}

// Period is the span of ledger time an audit looks at.
type Period struct {
	Since string `json:"since"`
	Until string `json:"until"`
}

// AuditCommit is a commit of the range that lacks a receipt.
type AuditCommit struct {
	Commit  string `json:"commit"`
	Merge   bool   `json:"merge,omitempty"`
	Subject string `json:"subject"`
}

// FailedRun is a receipt whose evidence records a command that failed.
type FailedRun struct {
	Commit   string `json:"commit"`
	Seq      uint64 `json:"seq"`
	Cell     string `json:"cell"`
	Epoch    int64  `json:"epoch"`
	Argv     string `json:"argv"`
	ExitCode int    `json:"exit_code"`
}

// AuditTakeover is a takeover or preemption in the period.
type AuditTakeover struct {
	Seq        uint64 `json:"seq"`
	TS         string `json:"ts"`
	Lane       string `json:"lane"`
	Kind       string `json:"kind"`
	Actor      string `json:"actor"`
	Prior      string `json:"prior"`
	PriorEpoch int64  `json:"prior_epoch"`
}

// ExpiredLease is a lease that lapsed while held, in the period.
type ExpiredLease struct {
	Lane      string `json:"lane"`
	Epoch     int64  `json:"epoch"`
	Actor     string `json:"actor"`
	ExpiredAt string `json:"expired_at"`
}

// UnsignedEntry is an entry whose commit is not signed.
type UnsignedEntry struct {
	Seq   uint64     `json:"seq"`
	TS    string     `json:"ts"`
	Actor string     `json:"actor"`
	Kind  chain.Kind `json:"kind"`
}

// AuditResult is what tally audit reports. Missing lists what policy
// required and the range lacks: its presence is the AUDIT-FAILED exit.
type AuditResult struct {
	Ref            string          `json:"ref"`
	Range          string          `json:"range"`
	Period         Period          `json:"period"`
	Commits        int             `json:"commits"`
	VerifiedSeq    int64           `json:"verified_through_seq"`
	Root           string          `json:"root"`
	Unreceipted    []AuditCommit   `json:"unreceipted"`
	FailedEvidence []FailedRun     `json:"failed_evidence"`
	Takeovers      []AuditTakeover `json:"takeovers"`
	Unsigned       []UnsignedEntry `json:"unsigned"`
	Expired        []ExpiredLease  `json:"expired"`
	Missing        []string        `json:"missing"`
}

// Audit examines the commits of a range against the verified ledger:
//
//   - commits without a receipt (receipt.Find: by commit, else by tree),
//     skipping merges that change nothing of their own (hooks.OwnChanges, the
//     push rule);
//   - receipts of those commits whose evidence has a non-zero exit code;
//   - in the period, takeovers and preemptions, leases that lapsed while
//     held, and (when the policy requires signatures) unsigned entries.
//
// The period is [committer time of Old, latest committer time in the range]
// (without Old: from the earliest committer time in the range), each bound
// replaced by Since or Until when given. It is compared with entry
// timestamps, so it is as accurate as the clocks that wrote both.
//
// Missing gets a line when the policy enforces receipts on Ref and a commit
// lacks one, or requires signatures and an entry in the period is unsigned.
// A ledger that does not verify is an error (its integrity code).
func Audit(c *tally.Client, opt AuditOptions) (*AuditResult, error) {
	git := func(args ...string) (string, error) {
		out, err := c.L.Repo.Git(args...)
		if err != nil {
			msg := err.Error()
			if ge, ok := err.(*gitstore.GitError); ok && strings.TrimSpace(ge.Stderr) != "" {
				msg = strings.TrimSpace(ge.Stderr)
			}
			return "", errs.New(errs.Usage, "git %s: %s", strings.Join(args, " "), msg)
		}
		return string(out), nil
	}
	rng := opt.New
	if opt.Old != "" {
		rng = opt.Old + ".." + opt.New
	}
	out, err := git("rev-list", "--timestamp", rng, "--")
	if err != nil {
		return nil, err
	}
	type rc struct {
		id gitstore.ObjectID
		t  time.Time
	}
	var commits []rc
	var first, last time.Time
	for _, line := range strings.Split(strings.TrimSpace(out), "\n") {
		ts, hex, ok := strings.Cut(line, " ")
		if !ok {
			continue
		}
		sec, err := strconv.ParseInt(ts, 10, 64)
		id, perr := gitstore.ParseObjectID(hex)
		if err != nil || perr != nil {
			return nil, errs.New(errs.Internal, "git rev-list printed %q", line)
		}
		t := time.Unix(sec, 0).UTC()
		commits = append(commits, rc{id, t})
		if first.IsZero() || t.Before(first) {
			first = t
		}
		if t.After(last) {
			last = t
		}
	}
	if opt.Old != "" {
		s, err := git("show", "-s", "--format=%ct", opt.Old, "--")
		if err != nil {
			return nil, err
		}
		sec, err := strconv.ParseInt(strings.TrimSpace(s), 10, 64)
		if err != nil {
			return nil, errs.New(errs.Internal, "git show %s printed %q", opt.Old, s)
		}
		first = time.Unix(sec, 0).UTC()
	}
	period := Options{Since: first, Until: last}
	if !opt.Since.IsZero() {
		period.Since = opt.Since
	}
	if !opt.Until.IsZero() {
		period.Until = opt.Until
	}
	if period.Until.IsZero() {
		period.Until = period.Since
	}
	// No commits and no OLD: the period is empty (Build would take zero
	// bounds for the whole ledger).
	empty := period.Since.IsZero()
	m, err := Build(c, period)
	if err != nil {
		return nil, err
	}
	if f := m.Verify.Failure; f != nil {
		e := errs.New(f.Code, "%s", f.Message)
		if f.Seq >= 0 {
			e = e.With("seq", f.Seq)
		}
		return nil, e
	}
	head, err := c.L.Head()
	if err != nil {
		return nil, err
	}
	policy, err := lease.ReadPolicy(head)
	if err != nil {
		return nil, err
	}
	res := &AuditResult{Ref: opt.Ref, Range: rng, Commits: len(commits), VerifiedSeq: m.Verify.HeadSeq, Root: m.Verify.Root,
		Period:      Period{chain.FormatTime(period.Since), chain.FormatTime(period.Until)},
		Unreceipted: []AuditCommit{}, FailedEvidence: []FailedRun{}, Takeovers: []AuditTakeover{},
		Unsigned: []UnsignedEntry{}, Expired: []ExpiredLease{}, Missing: []string{}}
	db, err := c.L.Repo.Objects()
	if err != nil {
		return nil, err
	}
	for _, cmt := range commits {
		cm, err := db.ReadCommit(cmt.id)
		if err != nil {
			return nil, errs.Wrap(errs.CommitMissing, err, "commit %s", cmt.id)
		}
		own, err := hooks.OwnChanges(db, cm)
		if err != nil {
			return nil, err
		}
		merge := len(cm.Parents) > 1
		if merge && len(own) == 0 {
			continue // its content is its parents', each judged on its own
		}
		_, refs, err := receipt.Find(head, cmt.id, cm.Tree)
		if errs.CodeOf(err) == errs.ReceiptMissing {
			res.Unreceipted = append(res.Unreceipted, AuditCommit{Commit: cmt.id.String(), Merge: merge,
				Subject: strings.SplitN(cm.Message, "\n", 2)[0]})
			continue
		}
		if err != nil {
			return nil, err
		}
		for _, ref := range refs {
			e, _, _, err := head.Entry(ref.Seq)
			if err != nil {
				return nil, err
			}
			var d lease.DoneBody
			if err := json.Unmarshal(e.Body, &d); err != nil {
				return nil, errs.Wrap(errs.Corrupt, err, "receipt entry %d", ref.Seq)
			}
			for _, ev := range d.Evidence {
				if ev.ExitCode != 0 {
					res.FailedEvidence = append(res.FailedEvidence, FailedRun{Commit: cmt.id.String(), Seq: ref.Seq,
						Cell: ref.Wave + "/" + ref.Cell, Epoch: ref.Epoch, Argv: strings.Join(ev.Argv, " "), ExitCode: ev.ExitCode})
				}
			}
		}
	}
	for _, b := range m.Bars {
		if empty {
			break
		}
		lane := laneName(m.Lanes[b.Lane])
		if b.Takeover != "" && !b.granted.Before(period.Since) {
			res.Takeovers = append(res.Takeovers, AuditTakeover{Seq: b.GrantSeq, TS: chain.FormatTime(b.Start), Lane: lane,
				Kind: b.Takeover, Actor: b.Actor, Prior: b.Prior, PriorEpoch: b.PriorEpoch})
		}
		if b.Outcome == Expired && !b.ended.After(period.Until) {
			res.Expired = append(res.Expired, ExpiredLease{Lane: lane, Epoch: b.Epoch, Actor: b.Actor, ExpiredAt: chain.FormatTime(b.End)})
		}
	}
	if policy.RequireSignatures && !empty {
		for _, e := range m.Verify.Unsigned {
			if !e.TS.Before(period.Since) && !e.TS.After(period.Until) {
				res.Unsigned = append(res.Unsigned, UnsignedEntry{Seq: e.Seq, TS: chain.FormatTime(e.TS), Actor: e.Actor, Kind: e.Kind})
			}
		}
		slices.SortFunc(res.Unsigned, func(a, b UnsignedEntry) int { return cmp.Compare(a.Seq, b.Seq) })
		if len(res.Unsigned) > 0 {
			res.Missing = append(res.Missing, strconv.Itoa(len(res.Unsigned))+" unsigned entries where the policy requires signatures")
		}
	}
	if policy.Receipts == lease.Enforce && slices.Contains(policy.Protected, opt.Ref) && len(res.Unreceipted) > 0 {
		res.Missing = append(res.Missing, strconv.Itoa(len(res.Unreceipted))+" commits without a receipt on protected "+opt.Ref)
	}
	return res, nil
}
