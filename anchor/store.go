package anchor

import (
	"bytes"
	"errors"
	"slices"
	"strconv"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/ledger"
)

// RefFor returns the ref that stores the ledger's checkpoint at size:
// <namespace>/checkpoints/<size in decimal>. It points at a blob holding the
// checkpoint's note, so it is pushed and fetched with the ledger
// (git push origin 'refs/tally/*').
func RefFor(l *ledger.Ledger, size uint64) string {
	return l.Namespace + "/checkpoints/" + strconv.FormatUint(size, 10)
}

const storeLockTimeout = 30 * time.Second

// Load returns the checkpoint note stored for size, or nil if there is none.
func Load(l *ledger.Ledger, size uint64) ([]byte, error) {
	ref := RefFor(l, size)
	id, err := l.Repo.ReadRef(ref)
	if errors.Is(err, gitstore.ErrNoRef) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "read %s", ref)
	}
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	typ, data, err := db.Read(id)
	if err != nil || typ != gitstore.BlobObject {
		return nil, errs.Wrap(errs.Corrupt, err, "%s does not point at a checkpoint blob", ref)
	}
	return data, nil
}

// Save stores a checkpoint note (see Sign) of c under RefFor(c.Size), with
// git's lockfile compare-and-swap under the writer lock
// its local CheckpointsLock. A note already stored there with the same
// body gains the new signatures. One with another body is FORK-DETECTED
// (another root at the same size, say fetched from a remote, or another
// commit line), except that a stored note of the same checkpoint without a
// commit line, or with one where text has none, is kept as it is: stored
// checkpoints are append-only (CheckStored), and the two bodies are the
// same checkpoint. It returns the ref.
func Save(l *ledger.Ledger, c Checkpoint, text []byte) (string, error) {
	ref := RefFor(l, c.Size)
	body, _ := splitNote(text)
	if got, _, err := ParseCommit(body); err != nil || got != c {
		return "", errs.New(errs.Usage, "note to store is not the checkpoint of size %d", c.Size)
	}
	wl, err := gitstore.AcquireWriterLock(l.Files.CheckpointsLock(), storeLockTimeout)
	if err != nil {
		if errors.Is(err, gitstore.ErrRefLocked) {
			return "", errs.New(errs.Conflict, "another tally process held the checkpoints lock for %v", storeLockTimeout)
		}
		return "", err
	}
	defer wl.Release()
	old, err := l.Repo.ReadRef(ref)
	if err != nil && !errors.Is(err, gitstore.ErrNoRef) {
		return "", errs.Wrap(errs.Corrupt, err, "read %s", ref)
	}
	if !old.IsZero() {
		prev, err := Load(l, c.Size)
		if err != nil {
			return "", err
		}
		merged, err := mergeNotes(prev, text)
		if err != nil {
			prevBody, _ := splitNote(prev)
			if sameCheckpoint(prevBody, body) {
				return ref, nil
			}
			return "", errs.New(errs.ForkDetected, "%s holds another checkpoint than the ledger's at %d entries (%q, root %s):\n%s",
				ref, c.Size, c.Origin, c.Root, prevBody).With("checkpoint_size", c.Size)
		}
		text = merged
	}
	pw := gitstore.NewPackWriter()
	id := pw.Add(gitstore.BlobObject, text)
	if id == old {
		return ref, nil
	}
	_, err = l.Repo.UpdateRefWithPack(wl, ref, old, id, pw)
	switch {
	case errors.Is(err, gitstore.ErrRefChanged):
		return "", errs.Wrap(errs.Conflict, err, "update %s", ref)
	case errors.Is(err, gitstore.ErrRefLocked):
		return "", errs.Wrap(errs.RefLocked, err, "update %s", ref)
	case err != nil:
		return "", errs.Wrap(errs.Internal, err, "update %s", ref)
	}
	return ref, nil
}

// sameCheckpoint reports whether two checkpoint bodies that differ are the
// same checkpoint, one of them without the commit line (a note written
// before tally wrote that line).
func sameCheckpoint(a, b []byte) bool {
	ca, ida, erra := ParseCommit(a)
	cb, idb, errb := ParseCommit(b)
	return erra == nil && errb == nil && ca == cb && (ida.IsZero() || idb.IsZero())
}

// CheckStored judges a push of the stored checkpoint ref for size: text is
// the blob the ref is to point at, prev the note it holds now (nil when the
// push creates it), and kv and m the ledger as it will be after the push.
// Stored checkpoints are append-only, so that no clone that saved one is
// later told FORK-DETECTED by a rewritten copy:
//
//   - text must be a well-formed checkpoint note of that size (CHECKPOINT-
//     INVALID), consistent with the ledger (Check: ROLLBACK-DETECTED for a
//     size beyond it, FORK-DETECTED for another root);
//   - a stored note may only gain signatures: same body, every signature
//     line it had still there (POLICY).
//
// It returns the ledger commit the note's commit line names (zero for none),
// which the caller must check is the ledger's commit of entry size-1
// (ledger.CheckCommitLine): kv holds the state, not the commits.
func CheckStored(kv chain.KV, m *chain.Meta, size uint64, prev, text []byte) (gitstore.ObjectID, error) {
	body, sigs := splitNote(text)
	c, commit, err := ParseCommit(body)
	if err != nil {
		return commit, err
	}
	if c.Size != size {
		return commit, invalid("the checkpoint stored for size %d is of size %d", size, c.Size)
	}
	if want := joinNote(body, sigs); !bytes.Equal(want, text) {
		return commit, invalid("checkpoint note is not the body, a blank line and signature lines")
	}
	for _, s := range sigs {
		if !wellFormedSignature(s) {
			return commit, invalid("checkpoint signature line %q is not `— <name> <base64>`", s)
		}
	}
	if _, err := Check(kv, m, c); err != nil {
		return commit, err
	}
	if prev == nil {
		return commit, nil
	}
	prevBody, prevSigs := splitNote(prev)
	if !bytes.Equal(prevBody, body) {
		return commit, errs.New(errs.Policy, "stored checkpoints are append-only: the checkpoint of size %d may only gain signatures, not change its body", size)
	}
	for _, s := range prevSigs {
		if !slices.Contains(sigs, s) {
			return commit, errs.New(errs.Policy, "stored checkpoints are append-only: the push drops the signature %q from the checkpoint of size %d", s, size)
		}
	}
	return commit, nil
}
