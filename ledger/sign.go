package ledger

import (
	"errors"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/lease"
)

// sigRule is what the state before an entry says about its commit signature:
// whether one is required and which keys of the entry's actor may make it.
type sigRule struct {
	actor    string
	required bool
	keys     []string
}

// sigRuleAt reads the signature rule for actor from the state before an entry.
func sigRuleAt(st chain.KV, actor string) (*sigRule, error) {
	p, err := lease.ReadPolicy(st)
	if err != nil {
		return nil, err
	}
	k, err := lease.ReadKeys(st, actor)
	if err != nil {
		return nil, err
	}
	return &sigRule{actor: actor, required: p.RequireSignatures, keys: k.Active()}, nil
}

// checkSigner tells, before anything is built, whether commits signed by
// signer (nil: unsigned) would pass check: the writer refuses up front what
// verify would refuse later. Nothing is corrupt then, so the codes are
// refusals (exit 2), not the integrity codes verify gives the same commit:
// KEY-REQUIRED for no key where one is required, KEY-UNKNOWN for a key that
// is not the actor's.
func (r *sigRule) checkSigner(signer *identity.Signer) error {
	if signer == nil {
		if r.required {
			return errs.New(errs.KeyRequired, "signatures are required: sign with --sign-key (or TALLY_SIGNING_KEY)")
		}
		return nil
	}
	if len(r.keys) == 0 {
		if r.required {
			return errs.New(errs.KeyUnknown, "%s has no registered key to check the signature against (tally keys add)", r.actor)
		}
		return nil
	}
	for _, k := range r.keys {
		if k == signer.PublicKey {
			return nil
		}
	}
	return errs.New(errs.KeyUnknown, "the signing key is not a registered key of %s (tally keys show %s)", r.actor, r.actor)
}

// check applies the rule to a ledger commit. A signature is checked whenever
// the actor has registered keys; it is required when the policy says so. An
// actor without keys can sign nothing verifiably, which only matters when
// signatures are required. Checked or not, a signature must be in its one
// canonical form (identity.CheckCommitSignature), so that with the commit
// itself exact (verify step 7) the commit id is fixed by the entry and what
// the key holder signed.
func (r *sigRule) check(c *gitstore.Commit) error {
	if c.Signature == "" {
		if r.required {
			return errs.New(errs.Unsigned, "signatures are required and the commit of %s's entry is not signed", r.actor)
		}
		return nil
	}
	var err error
	if len(r.keys) == 0 {
		if r.required {
			return errs.New(errs.BadSignature, "%s has no registered key to check the signature against", r.actor)
		}
		err = identity.CheckCommitSignature(c.Signature)
	} else {
		_, err = identity.VerifyCommit(c.Payload(), c.Signature, r.keys)
	}
	if errors.Is(err, identity.ErrBadSignature) {
		return errs.New(errs.BadSignature, "entry of %s: %v", r.actor, err)
	}
	return err
}
