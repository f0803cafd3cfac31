package tally

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tally-dev/tally/anchor"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// CheckpointOptions configure Checkpoint.
type CheckpointOptions struct {
	// Sign are checkpoint signing keys (see anchor.LoadSigner); none makes an
	// unsigned checkpoint, the bare body.
	Sign []string
	// Name is the key name: OpenSSH keys sign under it (default: the
	// origin), note keys must have it (default: any).
	Name string
	// Save also stores the note under <namespace>/checkpoints/<size>.
	Save bool
}

// CheckpointResult is a checkpoint of the ledger.
type CheckpointResult struct {
	anchor.Checkpoint
	Commit       string   `json:"commit"`        // the ledger commit it describes
	Note         string   `json:"note"`          // the full note text (the body alone when unsigned)
	VerifierKeys []string `json:"verifier_keys"` // note verifier keys of the signers
	Ref          string   `json:"ref,omitempty"` // where it was stored, with Save
}

// Checkpoint verifies the ledger incrementally (so only a verified ledger is
// ever checkpointed) and returns the checkpoint of its tip, its root
// recomputed from the Merkle tiles, as a note signed by o.Sign.
func (c *Client) Checkpoint(o CheckpointOptions) (*CheckpointResult, error) {
	rep, err := c.Verify(false)
	if err != nil {
		return nil, err
	}
	s, err := c.L.SnapshotAt(rep.Commit)
	if err != nil {
		return nil, err
	}
	cp, err := anchor.FromTiles(s, s.Meta)
	if err != nil {
		return nil, err
	}
	signers, err := loadSigners(o, cp.Origin)
	if err != nil {
		return nil, err
	}
	return c.signCheckpoint(cp, rep.Commit, signers, o.Save)
}

// loadSigners loads the signing keys of o for checkpoints of origin.
func loadSigners(o CheckpointOptions, origin string) ([]*anchor.Signer, error) {
	var signers []*anchor.Signer
	for _, k := range o.Sign {
		s, err := anchor.LoadSigner(k, o.Name, origin)
		if err != nil {
			return nil, err
		}
		signers = append(signers, s)
	}
	return signers, nil
}

// signCheckpoint signs cp, the checkpoint of the ledger at commit, and with
// save stores it.
func (c *Client) signCheckpoint(cp anchor.Checkpoint, commit gitstore.ObjectID, signers []*anchor.Signer, save bool) (*CheckpointResult, error) {
	res := &CheckpointResult{Checkpoint: cp, Commit: commit.String(), VerifierKeys: []string{}}
	for _, s := range signers {
		res.VerifierKeys = append(res.VerifierKeys, s.Key)
	}
	text, err := anchor.Sign(cp, commit, signers...)
	if err != nil {
		return nil, err
	}
	res.Note = string(text)
	if save {
		if res.Ref, err = anchor.Save(c.L, cp, text); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// CheckpointCheck is the outcome of checking one checkpoint against the
// ledger: it is consistent, and signed by the keys asked for.
type CheckpointCheck struct {
	*anchor.Consistency
	SignedBy []string `json:"signed_by"`
}

// CheckCheckpoints checks checkpoint notes against the ledger at commit (a
// verified tip, see Verify): each must be signed by every one of keys (none:
// signatures are not checked) and consistent with the ledger (see
// anchor.Check: CHECKPOINT-INVALID, ROLLBACK-DETECTED or FORK-DETECTED), and
// a commit line must name the ledger's commit of the checkpoint's last entry
// (FORK-DETECTED otherwise). The first failure is returned, with the detail
// "checkpoint" naming its index.
func (c *Client) CheckCheckpoints(commit gitstore.ObjectID, notes [][]byte, keys []string) ([]CheckpointCheck, error) {
	s, err := c.L.SnapshotAt(commit)
	if err != nil {
		return nil, err
	}
	out := []CheckpointCheck{}
	for i, text := range notes {
		o, err := anchor.Open(text, keys)
		var cons *anchor.Consistency
		if err == nil {
			cons, err = anchor.Check(s, s.Meta, o.Checkpoint)
		}
		if err == nil && !o.Commit.IsZero() {
			err = c.L.CheckCommitLine(commit, o.Size, o.Commit)
		}
		if err != nil {
			return nil, errs.From(err).With("checkpoint", i)
		}
		out = append(out, CheckpointCheck{cons, o.SignedBy})
	}
	return out, nil
}

// ProveInclusion proves that entry seq is among the first size entries (0:
// all) of the ledger's tip, from its Merkle tiles.
func (c *Client) ProveInclusion(seq, size uint64) (*anchor.Proof, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	return anchor.ProveInclusion(s, s.Meta, seq, size)
}

// ProveConsistency proves that the ledger's first oldSize entries are a
// prefix of its first newSize entries (0: all), from the tip's tiles.
func (c *Client) ProveConsistency(oldSize, newSize uint64) (*anchor.Proof, error) {
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	return anchor.ProveConsistency(s, s.Meta, oldSize, newSize)
}

// ProofResult is a verified proof.
type ProofResult struct {
	*anchor.Proof
	Checkpoint *anchor.Opened `json:"checkpoint,omitempty"`
}

// VerifyProof checks a proof's text without any repository. With a
// checkpoint note it also checks that the proof is about the checkpoint's log
// (and, with keys, that the checkpoint is signed by each of them), so that a
// root the proof leads to is one a signer vouched for.
func VerifyProof(proof, checkpoint []byte, keys []string) (*ProofResult, error) {
	p, err := anchor.VerifyProof(proof)
	if err != nil {
		return nil, err
	}
	res := &ProofResult{Proof: p}
	if checkpoint == nil {
		if len(keys) > 0 {
			return nil, errs.New(errs.Usage, "checkpoint keys need a checkpoint")
		}
		return res, nil
	}
	if res.Checkpoint, err = anchor.Open(checkpoint, keys); err != nil {
		return nil, err
	}
	return res, p.Matches(res.Checkpoint.Checkpoint)
}

// AnchorOptions configure Anchor.
type AnchorOptions struct {
	// Refs are the refs to anchor: full names, or branch or tag names
	// (refs/heads/ then refs/tags/ is tried). Empty: the branch HEAD is on.
	Refs []string
	// Checkpoint signs and names the checkpoint stored after the anchor
	// (which is always saved).
	Checkpoint CheckpointOptions
}

// AnchorResult is the outcome of Anchor.
type AnchorResult struct {
	Appended
	Refs map[string]string `json:"refs"`
	// Checkpoint is the stored checkpoint of the ledger ending with the anchor.
	Checkpoint *CheckpointResult `json:"checkpoint"`
}

// Anchor verifies the ledger, appends an anchor entry recording what the
// refs point at and the checkpoint of the ledger before it, then stores the
// (signed) checkpoint of the ledger ending with the anchor under
// <namespace>/checkpoints/<size>.
func (c *Client) Anchor(o AnchorOptions) (*AnchorResult, error) {
	refs, err := c.resolveRefs(o.Refs)
	if err != nil {
		return nil, err
	}
	rep, err := c.Verify(false)
	if err != nil {
		return nil, err
	}
	s, err := c.L.SnapshotAt(rep.Commit)
	if err != nil {
		return nil, err
	}
	signers, err := loadSigners(o.Checkpoint, s.Meta.Origin)
	if err != nil {
		return nil, err
	}
	ap, err := c.append(func(s *ledger.Snapshot, _ time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: chain.KindAnchor, Body: lease.AnchorBody{Refs: refs, Checkpoint: lease.CheckpointOf(s.Meta)}}, nil
	})
	if err != nil {
		return nil, err
	}
	cp, err := c.signCheckpoint(anchor.FromMeta(ap.Meta), ap.Commit, signers, true)
	if err != nil {
		return nil, err
	}
	return &AnchorResult{appendedOf(ap), refs, cp}, nil
}

// resolveRefs reads the refs to anchor (see AnchorOptions.Refs).
func (c *Client) resolveRefs(names []string) (map[string]string, error) {
	repo := c.L.Repo
	if len(names) == 0 {
		b, err := os.ReadFile(filepath.Join(repo.GitDir, "HEAD"))
		if err != nil {
			return nil, errs.Wrap(errs.NotARepo, err, "read HEAD")
		}
		ref, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: ")
		if !ok {
			return nil, errs.New(errs.Usage, "HEAD is detached; name the refs to anchor")
		}
		names = []string{ref}
	}
	out := map[string]string{}
	for _, name := range names {
		full := []string{name}
		if !strings.HasPrefix(name, "refs/") {
			full = []string{"refs/heads/" + name, "refs/tags/" + name}
		}
		found := false
		for _, ref := range full {
			id, err := repo.ReadRef(ref)
			if errors.Is(err, gitstore.ErrNoRef) {
				continue
			}
			if err != nil {
				return nil, errs.Wrap(errs.Corrupt, err, "read %s", ref)
			}
			out[ref], found = id.String(), true
			break
		}
		if !found {
			return nil, errs.New(errs.Usage, "no ref %s", name)
		}
	}
	return out, nil
}
