package ledger

import (
	"strings"

	"github.com/tally-dev/tally/errs"
)

// A fresh `git clone` fetches branches and tags, not refs/tally/*, so a clone
// of a repository with a ledger starts without one. Running `tally init` there
// would create a second ledger with its own genesis, which no sync can ever
// join to the first (FORK-DETECTED). So a clone without a ledger asks its
// remotes before it calls itself uninitialized or starts a ledger. Asking
// costs one ref listing per remote, paid only on those two paths.
//
// tally does not fetch the remote's ledger on its own there: which remote is
// the shared one is the user's choice when several have ledgers, and a view
// such as status should not write refs behind the user's back. The hint names
// both ways: work through the remote (tally remote set), or copy its ledger
// (git fetch) and work locally, then tally sync.

// RemoteLedgers lists the configured remotes of the clone that hold a ledger
// at l.Ref, and those that could not be asked (with why).
func (l *Ledger) RemoteLedgers() (have []string, unreachable map[string]error) {
	unreachable = map[string]error{}
	for _, name := range l.Repo.RemoteNames() {
		tip, err := l.Repo.ListRemoteRef(name, l.Ref)
		switch {
		case err != nil:
			unreachable[name] = err
		case !tip.IsZero():
			have = append(have, name)
		}
	}
	return have, unreachable
}

// cloneHint returns err (a NOT-INITIALIZED of the local ledger) saying which
// remotes hold a ledger and how to use it, with detail remotes; err itself
// when none does. Remotes that cannot be reached are left out: this is a
// hint, and the error stands either way.
func (l *Ledger) cloneHint(err error) error {
	if !errs.Is(err, errs.NotInitialized) {
		return err
	}
	have, _ := l.RemoteLedgers()
	if len(have) == 0 {
		return err
	}
	r := have[0]
	return errs.New(errs.NotInitialized, "no ledger in this clone at %s, but remote %s has one (%s): work through it with `tally remote set %s`, or copy it with `git fetch %s '%s/*:%s/*'` and work locally (tally sync %s); do not run tally init, which would start a second ledger",
		l.Ref, r, strings.Join(have, ", "), r, r, l.Namespace, l.Namespace, r).With("remotes", have)
}

// RefuseInitBesideRemote refuses to start a ledger in a clone while one of
// its remotes holds a ledger (LEDGER-ON-REMOTE, detail remotes), or when a
// remote cannot be asked (REMOTE-UNREACHABLE, detail remote): a second
// genesis can never be synced with the remote's. Starting one anyway is the
// caller's explicit choice (tally init --new-ledger), not a default.
func (l *Ledger) RefuseInitBesideRemote() error {
	have, unreachable := l.RemoteLedgers()
	if len(have) > 0 {
		r := have[0]
		return errs.New(errs.LedgerOnRemote, "remote %s already has a ledger at %s (%s): use it with `tally remote set %s` (or `git fetch %s '%s/*:%s/*'`); a new one could never be synced with it. To start a separate ledger anyway, pass --new-ledger",
			r, l.Ref, strings.Join(have, ", "), r, r, l.Namespace, l.Namespace).With("remotes", have)
	}
	for _, name := range l.Repo.RemoteNames() { // the first, in configuration order
		if err, ok := unreachable[name]; ok {
			return errs.New(errs.RemoteUnreachable, "cannot tell whether remote %s already has a ledger: %v (pass --new-ledger to start one without asking)", name, err).With("remote", name)
		}
	}
	return nil
}
