package ledger

import (
	"encoding/json"
	"errors"
	"os"
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// First contact (FORMAT.md §9a). A clone that trusts checkpoint keys and has
// nothing yet of a remote's ledger does not fetch and replay the whole
// history: it fetches the remote's stored checkpoints and the ledger's tip,
// picks the largest checkpoint a trusted key signed whose body names the
// ledger commit of its last entry, fetches the ledger shallow down to that
// commit, checks that it is the ledger's commit at that seq with the
// checkpoint's origin, size and root, and verifies the entries after it as
// the incremental verify does from a record (VerifyRange). The state tree of
// the checkpoint's commit is trusted because the signer vouched for the
// commit; everything after it is replayed. History before it is neither
// fetched nor verified, and every view says so (ShallowStart) until a full
// verify fetches and replays it.

// A TrustedCheckpoint is a checkpoint whose signature a key this clone
// trusts verified and whose body names the ledger commit of its last entry.
type TrustedCheckpoint struct {
	Origin string
	Size   uint64
	Root   chain.Hash
	Commit gitstore.ObjectID
	Key    string // the name of the trusted key that signed it
}

// CheckpointTrust judges a checkpoint note fetched from a remote: ok when a
// trusted key signed it and its body names a commit. Notes it refuses are
// ignored; they cannot start a shallow verify.
type CheckpointTrust func(note []byte) (cp TrustedCheckpoint, ok bool)

// CheckpointStart is where this clone's verification of the ledger began
// when it did not begin at genesis: the trusted checkpoint of Size entries
// whose last entry's commit is Commit, signed by the key named Key. Entries
// before Size were neither fetched nor replayed here.
type CheckpointStart struct {
	Size   uint64 `json:"checkpoint_size"`
	Key    string `json:"key"`
	Commit string `json:"commit"`
}

// ShallowStart returns where verification began in this clone, nil when it
// began at genesis (or no shallow first contact happened).
func (l *Ledger) ShallowStart() *CheckpointStart {
	b, err := os.ReadFile(l.Files.CheckpointStart())
	if err != nil {
		return nil
	}
	var s CheckpointStart
	if json.Unmarshal(b, &s) != nil {
		return nil
	}
	return &s
}

// clearShallowStart forgets the shallow start once the whole history was
// verified from genesis.
func (l *Ledger) clearShallowStart() {
	os.Remove(l.Files.CheckpointStart())
}

// shallowAttempts bounds the deepening fetches of a first contact whose
// remote tip keeps moving.
const shallowAttempts = 5

// firstContact reports whether FetchRemote should start from a trusted
// checkpoint: keys are trusted, and the clone has nothing of the ledger yet
// (no record of the remote, no tracking ref, no local ledger). A shallow
// fetch into history the clone already has would cut it: git's shallow file
// applies to every ref, and git gc would then drop what lies below it.
func (l *Ledger) firstContact(remote string) bool {
	if l.trust == nil || !l.readRemoteRecord(remote).IsZero() {
		return false
	}
	for _, ref := range []string{l.trackingRef(remote), l.Ref} {
		if _, err := l.Repo.ReadRef(ref); !errors.Is(err, gitstore.ErrNoRef) {
			return false
		}
	}
	return true
}

// fetchFromCheckpoint is FetchRemote's first contact (firstContact): it
// returns the remote tip, verified from the largest trusted checkpoint, or,
// when the remote stores none, from genesis after completing the history.
// A trusted checkpoint larger than the remote's ledger is ROLLBACK-DETECTED;
// one whose commit is not the ledger's commit at its last seq, or whose
// commit's chain meta is not the checkpoint's, is FORK-DETECTED.
func (l *Ledger) fetchFromCheckpoint(remote string) (gitstore.ObjectID, *Report, error) {
	stored := l.Namespace + "/checkpoints/"
	tracking := TrackingRef(remote, stored)
	depth := 1
	// The clone has nothing of the ledger (firstContact): no haves to offer.
	tip, err := l.Repo.FetchRefFresh(remote, depth, l.Ref, l.trackingRef(remote), gitstore.RefPair{Ref: stored, Tracking: tracking})
	if err != nil {
		return tip, nil, remoteError(err)
	}
	if tip.IsZero() {
		return tip, nil, nil
	}
	cp, ok, err := l.trustedCheckpoint(tracking)
	if err != nil {
		return tip, nil, err
	}
	if !ok {
		// Nothing to start from: all of the history, verified from genesis.
		if tip, err = l.fetchRemoteDepth(remote, gitstore.FullDepth); err != nil {
			return tip, nil, err
		}
		rep, err := l.verifyRemoteTip(remote, gitstore.ObjectID{}, tip, false) // no record: a first contact
		return tip, rep, err
	}
	for attempt := 0; ; attempt++ {
		snap, err := l.SnapshotAt(tip)
		if err != nil {
			return tip, nil, err
		}
		if snap.Meta.Size < cp.Size {
			return tip, nil, errs.New(errs.RollbackDetected, "remote %s serves %d entries of %s, but a checkpoint signed by %s saw %d",
				remote, snap.Meta.Size, l.Ref, cp.Key, cp.Size).With("checkpoint_size", cp.Size).With("ledger_size", snap.Meta.Size)
		}
		need := int(snap.Meta.Size - cp.Size + 1) // the commits of entries size-1 back to cp.Size-1
		if need <= depth {
			break
		}
		if attempt == shallowAttempts {
			return tip, nil, errs.New(errs.Conflict, "remote %s: %s kept moving while fetching it down to the checkpoint of %d entries", remote, l.Ref, cp.Size)
		}
		depth = need
		if tip, err = l.Repo.FetchRefDepth(remote, depth, l.Ref, l.trackingRef(remote)); err != nil {
			return tip, nil, remoteError(err)
		}
	}
	at, err := l.CommitAt(tip, cp.Size-1)
	if err != nil {
		return tip, nil, err
	}
	if at != cp.Commit {
		return tip, nil, errs.New(errs.ForkDetected, "remote %s has commit %s at seq %d of %s, the checkpoint signed by %s names %s",
			remote, at, cp.Size-1, l.Ref, cp.Key, cp.Commit).With("checkpoint_size", cp.Size)
	}
	base, err := l.SnapshotAt(at)
	if err != nil {
		return tip, nil, err
	}
	if m := base.Meta; m.Origin != cp.Origin || m.Size != cp.Size || m.Root != cp.Root {
		return tip, nil, errs.New(errs.ForkDetected, "commit %s records %d entries of %q with root %s, the checkpoint signed by %s names it for %d of %q with root %s",
			at, m.Size, m.Origin, m.Root, cp.Key, cp.Size, cp.Origin, cp.Root).With("checkpoint_size", cp.Size)
	}
	rep, err := l.VerifyRange(at, tip)
	if err != nil {
		return tip, nil, err
	}
	start := CheckpointStart{Size: cp.Size, Key: cp.Key, Commit: cp.Commit.String()}
	if err := writeFileAtomic(l.Files.CheckpointStart(), mustJSON(start)); err != nil {
		return tip, nil, err
	}
	return tip, rep, l.writeRemoteRecord(remote, tip)
}

// trustedCheckpoint returns the largest of the checkpoints fetched under
// tracking that the clone's trust accepts.
func (l *Ledger) trustedCheckpoint(tracking string) (best TrustedCheckpoint, found bool, err error) {
	out, err := l.Repo.Git("for-each-ref", "--format=%(objectname)", tracking)
	if err != nil {
		return best, false, errs.Wrap(errs.Internal, err, "git for-each-ref")
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return best, false, err
	}
	for _, hex := range strings.Fields(string(out)) {
		id, err := gitstore.ParseObjectID(hex)
		if err != nil {
			continue
		}
		typ, note, err := db.Read(id)
		if err != nil || typ != gitstore.BlobObject {
			continue // not a checkpoint note: it vouches for nothing
		}
		if cp, ok := l.trust(note); ok && cp.Size > 0 && cp.Size > best.Size {
			best, found = cp, true
		}
	}
	return best, found, nil
}

// historyShallow explains a ledger commit missing from a clone whose history
// is shallow: the walk reached the boundary of a first contact's fetch
// (HISTORY-SHALLOW), which is not damage. Any other error is returned as
// it is.
func (l *Ledger) historyShallow(err error) error {
	if err == nil || !errors.Is(err, gitstore.ErrObjectNotFound) || len(l.Repo.Shallow()) == 0 {
		return err
	}
	return errs.Wrap(errs.HistoryShallow, err, "this clone fetched %s only from a trusted checkpoint on (FORMAT.md §9a), and the history before it is not here: `tally --remote <remote> verify --full` fetches and verifies it", l.Ref)
}
