package hooks

import (
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"

	"github.com/go-git/go-git/v5/plumbing/format/pktline"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// The server sequencer (FORMAT.md §9b) is git's proc-receive hook:
// receive-pack hands it the commands for refs under receive.procReceiveRefs
// (tally's: ledger.RequestPrefix) after pre-receive has passed and the pushed
// objects are in the repository, and the hook moves whatever refs it likes
// and reports the result.

// ProcReceiveConfig is the git configuration variable (multi-valued) that
// routes request refs to the proc-receive hook.
const ProcReceiveConfig = "receive.procReceiveRefs"

// Answer is the proc-receive hook's result for one request: accepted, with
// the ledger ref's old and new value, or refused with Reason.
type Answer struct {
	OK       bool
	Reason   string
	Ref      string // the ref the request moved
	Old, New gitstore.ObjectID
}

// ProcReceive speaks git's proc-receive protocol (version 1) on in and out:
// it reads the version lines and answers version 1 with no capabilities,
// reads the commands, calls handle for each in order and reports its answer.
// A command whose handling fails is refused with the error's code.
func ProcReceive(in io.Reader, out io.Writer, handle func(Update) Answer) error {
	sc := pktline.NewScanner(in)
	lines := func() ([]string, error) {
		var got []string
		for sc.Scan() {
			b := sc.Bytes()
			if len(b) == 0 {
				return got, nil
			}
			got = append(got, strings.TrimSuffix(string(b), "\n"))
		}
		if err := sc.Err(); err != nil {
			return nil, err
		}
		return nil, io.ErrUnexpectedEOF
	}
	version, err := lines()
	if err != nil {
		return errs.Wrap(errs.Usage, err, "proc-receive: reading the version")
	}
	if len(version) == 0 || !strings.HasPrefix(version[0], "version=1") {
		return errs.New(errs.Usage, "proc-receive: unsupported protocol %q", version)
	}
	enc := pktline.NewEncoder(out)
	if err := enc.EncodeString("version=1\x00"); err != nil {
		return err
	}
	if err := enc.Flush(); err != nil {
		return err
	}
	commands, err := lines()
	if err != nil {
		return errs.Wrap(errs.Usage, err, "proc-receive: reading the commands")
	}
	var updates []Update
	for _, c := range commands {
		f := strings.Fields(c)
		u, ok := Update{}, len(f) == 3
		if ok {
			u, ok = mkUpdate(f[2], f[0], f[1])
		}
		if !ok {
			return errs.New(errs.Usage, "proc-receive: malformed command %q", c)
		}
		updates = append(updates, u)
	}
	for _, u := range updates {
		a := handle(u)
		if !a.OK {
			enc.EncodeString(ledger.CutRefusalLine("ng " + u.Ref + " " + strings.ReplaceAll(a.Reason, "\n", " ")))
			continue
		}
		enc.Encodef("ok %s", u.Ref)
		enc.Encodef("option refname %s", a.Ref)
		enc.Encodef("option old-oid %s", a.Old)
		if err := enc.Encodef("option new-oid %s", a.New); err != nil {
			return err
		}
	}
	return enc.Flush()
}

// Refusal is the Answer of a request the rules (or anything else) refused:
// ledger.RequestRefusal, which ledger.Request reads back.
func Refusal(err error) Answer {
	return Answer{Reason: ledger.RequestRefusal(err)}
}

// sequencing reports whether repo routes requests (additions of refs under
// ledger.RequestPrefix) to proc-receive: some value of ProcReceiveConfig
// covers ledger.RequestPrefix as git's receive-pack matches it (a ref
// prefix, every trailing "/" dropped), with no modifiers or ones that
// include additions ("a:", "ad:"), and no value is negative (a "!"
// modifier: which refs those leave out is git's to define, so none is
// relied on). The rule is routedValues, the one pattern the pre-receive
// shim (requestsOnly) hands to `git config --get-regexp`; here it is
// matched in process, since pre-receive asks this for every request and a
// `git config` child would cost more than the answer. TestSequencingAsGit
// holds the two matchers to one answer, and
// TestSequencedRequestSkipsPreReceive both to what git's receive-pack does.
func sequencing(repo *gitstore.Repo) bool {
	covered := false
	for _, v := range repo.Config().Values(ProcReceiveConfig) {
		if strings.Contains(v, "!") {
			return false
		}
		covered = covered || routedValue().MatchString(v)
	}
	return covered
}

// routedValue is routedValues compiled, on first use: every other command
// would pay for compiling it at start.
var routedValue = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(routedValues) })

// checkRequest is pre-receive's judgment of a push to a request ref: passed
// on to proc-receive where the repository routes requests there, refused
// otherwise (git would store the request as a plain ref) with
// SEQUENCER-ABSENT, the code by which a client tells that nothing was
// appended and that the server does not sequence (ledger.Request).
func (c *Checker) checkRequest(u Update) []Finding {
	if c.Server && sequencing(c.L.Repo) {
		return nil
	}
	return []Finding{{Ref: u.Ref, Code: errs.SequencerAbsent, Message: fmt.Sprintf(
		"%s/* are requests to the server's sequencer, which this repository does not run (%s; tally hooks install --server sets it up)",
		ledger.RequestPrefix, ProcReceiveConfig)}}
}

// PusherGuard returns the check a sequenced request's entry must pass
// before it is built: the pusher binding of the policy on the snapshot the
// entry is built on (the binding in force just before it), judged exactly as
// pre-receive judges a pushed entry of that actor (checkPusher).
func PusherGuard(env Env) func(s *ledger.Snapshot, actor string, kind chain.Kind) error {
	return func(s *ledger.Snapshot, actor string, kind chain.Kind) error {
		p, err := lease.ReadPolicy(s)
		if err != nil {
			return err
		}
		pusher, known := IdentifyPusher(env, p.PusherVar)
		return checkPusher(p, pusher, known, &ledger.Applied{Entry: &chain.Entry{Seq: s.Meta.Size, Actor: actor, Kind: kind}})
	}
}

// RequestPusher is the pusher binding's judgment of a request before it
// is read (FORMAT.md §9b), and the pusher its entry is judged by: on the
// ledger's tip, while pushers are bound, a request needs a pusher
// (PUSHER-UNKNOWN) bound to some actor (PUSHER-DENIED), so a pusher who
// may append nothing costs the server nothing more. PusherGuard judges the
// intent's actor later, on the tip its entry is built on, in whichever
// server process builds it, from the variables returned here (those that
// name a pusher under that policy, with env's values; EnvOf): a policy
// that names another variable by then finds no pusher (PUSHER-UNKNOWN).
func RequestPusher(l *ledger.Ledger, env Env) (map[string]string, error) {
	s, err := l.Head()
	if err != nil {
		return nil, err
	}
	p, err := lease.ReadPolicy(s)
	if err != nil {
		return nil, err
	}
	vars := map[string]string{}
	for _, v := range pusherVars(p.PusherVar) {
		if val, ok := env(v); ok {
			vars[v] = val
		}
	}
	if !p.PushersBound() {
		return vars, nil
	}
	pusher, known := IdentifyPusher(env, p.PusherVar)
	if !known {
		return nil, errs.New(errs.PusherUnknown, "pushers are bound by the policy, but the server named no pusher (none of %s is set)",
			strings.Join(pusherVars(p.PusherVar), ", "))
	}
	if len(p.Pushers[pusher.Name]) == 0 {
		return nil, errs.New(errs.PusherDenied, "pusher %s (%s) may not push entries of any actor", pusher.Name, pusher.Var).With("pusher", pusher.Name)
	}
	return vars, nil
}

// EnvOf is the Env of the variables vars holds.
func EnvOf(vars map[string]string) Env {
	return func(name string) (string, bool) {
		v, ok := vars[name]
		return v, ok
	}
}

// SequencerHook is the hook that serves requests.
const SequencerHook = "proc-receive"

// Sequencer is what InstallSequencer did: the shim written ("" if none)
// or why the server does not sequence.
type Sequencer struct {
	Shim    string `json:"shim,omitempty"`
	Refs    string `json:"refs,omitempty"`
	Offer   string `json:"offer,omitempty"` // the ref that offers it to clones
	Skipped string `json:"skipped,omitempty"`
}

// InstallSequencer sets a bare repository up to serve requests: a
// proc-receive shim at <hooks>/proc-receive calling tally (git runs that hook
// by its own name only, never through a <hook>.d/ dispatcher, and it cannot
// be chained: one process answers the protocol) and ProcReceiveConfig
// covering ledger.RequestPrefix. It leaves everything alone, saying why, when
// another proc-receive hook is there (Gitea's AGit flow, for example) or the
// repository is GitLab's (Gitaly runs its own proc-receive and ignores
// hooks/).
func InstallSequencer(repo *gitstore.Repo, tallyPath string, ops []string) (*Sequencer, error) {
	loc := locations(repo, SequencerHook)[2]
	if isDir(filepath.Join(repo.CommonDir, "custom_hooks")) {
		return &Sequencer{Skipped: "GitLab (custom_hooks/): Gitaly runs its own proc-receive; clients keep compare-and-swap"}, nil
	}
	if _, err := os.Lstat(loc.Path); err == nil && !isShim(loc.Path) {
		return &Sequencer{Skipped: loc.Path + " is another proc-receive hook; clients keep compare-and-swap"}, nil
	}
	if err := os.MkdirAll(filepath.Dir(loc.Path), 0o755); err != nil {
		return nil, err
	}
	tmp := loc.Path + ".tally-tmp"
	if err := os.WriteFile(tmp, []byte(shim(SequencerHook, tallyPath, false)), 0o755); err != nil {
		return nil, err
	}
	if err := os.Rename(tmp, loc.Path); err != nil {
		os.Remove(tmp)
		return nil, err
	}
	if !sequencing(repo) {
		if _, err := repo.Git("config", "--add", ProcReceiveConfig, ledger.RequestPrefix); err != nil {
			return nil, errs.Wrap(errs.Internal, err, "git config --add %s", ProcReceiveConfig)
		}
	}
	if err := offerSequencer(repo, ops); err != nil {
		return nil, err
	}
	return &Sequencer{Shim: loc.Path, Refs: ledger.RequestPrefix, Offer: ledger.SequencerRef}, nil
}

// offerSequencer writes ledger.SequencerRef: a commit with the empty tree
// and ledger.SequencerOffer(ops) as its message, the same commit in every
// repository whose sequencer serves ops.
func offerSequencer(repo *gitstore.Repo, ops []string) error {
	pw := gitstore.NewPackWriter()
	tree := pw.Add(gitstore.TreeObject, nil)
	who := gitstore.Ident{Name: "tally", Email: "tally", When: 0, TZ: "+0000"}
	id := pw.Add(gitstore.CommitObject, (&gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: ledger.SequencerOffer(ops)}).Encode())
	if _, err := pw.WriteTo(repo.ObjectDir); err != nil {
		return errs.Wrap(errs.Internal, err, "writing %s", ledger.SequencerRef)
	}
	if _, err := repo.Git("update-ref", ledger.SequencerRef, id.String()); err != nil {
		return errs.Wrap(errs.Internal, err, "git update-ref %s", ledger.SequencerRef)
	}
	return nil
}

// uninstallSequencer removes the ProcReceiveConfig value and the offer
// InstallSequencer added (after its shim has gone).
func uninstallSequencer(repo *gitstore.Repo) {
	repo.Git("config", "--unset-all", ProcReceiveConfig, "^"+regexp.QuoteMeta(ledger.RequestPrefix)+"$")
	repo.Git("update-ref", "-d", ledger.SequencerRef)
}
