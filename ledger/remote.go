package ledger

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/refname"
)

// In remote mode the remote's ledger ref is the single point of truth. An
// append fetches the remote tip, verifies what is new there, builds the entry
// on that tip with the same rules, and pushes it with a compare-and-swap; a
// lost race refetches and rebuilds. The local ledger ref then fast-forwards
// to the pushed commit when it can.

// remoteAttempts bounds the retries of a remote append.
const remoteAttempts = 32

// A remote record is this clone's knowledge of a remote's ledger: the last
// tip it verified (or pushed itself, built on a verified tip), in the same
// self-checking form as the local verify record.
func (l *Ledger) remoteRecordPath(remote string) string {
	return l.Files.RemoteRecord(remote)
}

func (l *Ledger) readRemoteRecord(remote string) gitstore.ObjectID {
	tip, _ := l.trustedRecordAt(l.remoteRecordPath(remote))
	return tip
}

// writeRemoteRecord records tip as the remote's verified tip, unless the
// record already names a tip that holds it: processes in the worktrees of
// one clone share the record, and one whose answer or fetch came first may
// write after another recorded a newer tip. The record never moves back.
func (l *Ledger) writeRemoteRecord(remote string, tip gitstore.ObjectID) error {
	if cur := l.readRemoteRecord(remote); !cur.IsZero() && cur != tip && !tip.IsZero() {
		if newer, err := l.holdsCommit(cur, tip); err == nil && newer {
			return nil
		}
	}
	return l.writeRecord(l.remoteRecordPath(remote), tip)
}

// trackingRef is where fetches of a remote's ledger land: a remote-tracking
// ref outside the namespace, so pushing refs/tally/* never sends it back.
func (l *Ledger) trackingRef(remote string) string { return TrackingRef(remote, l.Ref) }

// TrackingRef is where tally's fetches of ref from remote land:
// refs/remotes/<remote>/<ref without refs/>. A remote given as a URL is named
// by a hash of it (a URL is no ref name).
func TrackingRef(remote, ref string) string {
	name := remote
	if !refname.Valid("refs/remotes/" + name + "/x") {
		sum := sha256.Sum256([]byte(remote))
		name = "tally-url-" + hex.EncodeToString(sum[:8])
	}
	return "refs/remotes/" + name + "/" + strings.TrimPrefix(ref, "refs/")
}

// NotesRef holds tally's git notes: for each receipted commit, one line per
// receipt pointing at the ledger entry (see package receipt).
const NotesRef = "refs/notes/tally"

// NotesLock is the writer lock of NotesRef in this clone: the ledger's
// own, since a local done moves NotesRef in the receipt's append
// (Draft.Beside), and one lock for both refs needs no lock order.
func (l *Ledger) NotesLock() string { return l.Files.WriterLock() }

// KnownRemote is remote's ledger as this clone last verified it (its
// record of the remote, FORMAT.md §8), read without asking the remote; ok
// is false when this clone has verified none.
func (l *Ledger) KnownRemote(remote string) (*Snapshot, bool, error) {
	tip := l.readRemoteRecord(remote)
	if tip.IsZero() {
		return nil, false, nil
	}
	s, err := l.SnapshotAt(tip)
	return s, err == nil, err
}

// fetchRemote fetches the remote's ledger into its tracking ref and, in the
// same fetch, the remote's receipt notes into theirs (TrackingRef). When the
// remote's notes moved, the local notes take them in (gitstore.MergeNotes):
// fetches bring notes. The notes are a convenience beside the ledger, so a
// merge that fails does not fail the fetch; done and sync merge again
// (receipt.PushNotes) before they push notes.
func (l *Ledger) fetchRemote(remote string) (gitstore.ObjectID, error) {
	return l.fetchRemoteDepth(remote, 0)
}

// fetchRemoteDepth is fetchRemote with git's --depth (gitstore.FetchRefDepth).
func (l *Ledger) fetchRemoteDepth(remote string, depth int) (gitstore.ObjectID, error) {
	notes := TrackingRef(remote, NotesRef)
	before, _ := l.Repo.ReadRef(notes)
	// The sequencer's offer comes along (an optional ref: none, no error).
	tip, err := l.Repo.FetchRefDepth(remote, depth, l.Ref, l.trackingRef(remote), gitstore.RefPair{Ref: NotesRef, Tracking: notes},
		gitstore.RefPair{Ref: SequencerRef, Tracking: TrackingRef(remote, SequencerRef)})
	if err != nil {
		return tip, remoteError(err)
	}
	if after, _ := l.Repo.ReadRef(notes); after != before && !after.IsZero() {
		l.Repo.MergeNotes(l.NotesLock(), NotesRef, after, gitstore.Ident{Name: "tally", Email: "tally", When: time.Now().Unix(), TZ: "+0000"})
	}
	return tip, nil
}

// FetchRemote fetches the remote's ledger (and notes, fetchRemote) and
// verifies the entries that are new since this clone last verified it. It
// returns the verified remote tip (zero if the remote has no ledger). A
// remote whose ledger no longer extends what was verified before fails with
// FORK-DETECTED or ROLLBACK-DETECTED. The first fetch of a clone that
// trusts checkpoint keys starts from a trusted checkpoint
// (fetchFromCheckpoint).
//
// The fetched tip is judged against the record as it was when the fetch
// began: the server held that tip then, so a fetched tip short of it is a
// rollback. Processes in the worktrees of one clone share the record, and
// another may record a newer tip while this fetch runs, which this
// fetch's answer, taken before, need not hold.
func (l *Ledger) FetchRemote(remote string) (gitstore.ObjectID, error) {
	if l.firstContact(remote) {
		tip, _, err := l.fetchFromCheckpoint(remote)
		return tip, err
	}
	known := l.readRemoteRecord(remote)
	tip, err := l.fetchRemote(remote)
	if err != nil {
		return tip, err
	}
	_, err = l.verifyRemoteTip(remote, known, tip, false)
	return tip, err
}

// verifyRemoteTip verifies a fetched remote tip from what this clone last
// verified of it (from genesis with full) and records it. It returns the
// report, nil when there was nothing new to check.
func (l *Ledger) verifyRemoteTip(remote string, known, tip gitstore.ObjectID, full bool) (*Report, error) {
	return l.verifyRemoteTipEach(remote, known, tip, full, nil)
}

// verifyRemoteTipEach is verifyRemoteTip that also hands each verified
// entry, in order, to each (VerifyRangeEach).
func (l *Ledger) verifyRemoteTipEach(remote string, known, tip gitstore.ObjectID, full bool, each func(*Applied) error) (*Report, error) {
	rep, err := l.checkRemoteTip(remote, known, tip, full, each)
	if err != nil || rep == nil {
		return rep, err
	}
	return rep, l.writeRemoteRecord(remote, tip)
}

// checkRemoteTip is verifyRemoteTipEach without recording tip: the report,
// nil when there was nothing new to check. known is the record as it was
// before tip was fetched (readRemoteRecord then).
func (l *Ledger) checkRemoteTip(remote string, known, tip gitstore.ObjectID, full bool, each func(*Applied) error) (*Report, error) {
	if tip.IsZero() && !known.IsZero() {
		return nil, errs.New(errs.RollbackDetected, "remote %s no longer has %s; this clone verified it at %s", remote, l.Ref, known).
			With("verified", known.String())
	}
	if full {
		known = gitstore.ObjectID{}
	}
	if tip.IsZero() || tip == known {
		return nil, nil
	}
	if err := l.extends(tip, known); err != nil {
		return nil, err
	}
	rep, err := l.VerifyRangeEach(known, tip, each)
	if err != nil {
		return nil, l.historyShallow(err)
	}
	if full {
		l.clearShallowStart()
	}
	return rep, nil
}

// extends refuses a fetched tip that, by its own Merkle tiles, does not hold
// the entry of known (a verified commit) at its seq: ROLLBACK-DETECTED when
// it is shorter, FORK-DETECTED otherwise, with the detail verified_size. It
// reads O(log n) tiles instead of walking back from tip to the root, which
// a shallow clone does not have. Tiles that claim known's entry are not
// believed: VerifyRange then finds known by the walk back; tiles or metas
// that cannot be read are left to VerifyRange too, which names the damage.
func (l *Ledger) extends(tip, known gitstore.ObjectID) error {
	if known.IsZero() {
		return nil
	}
	k, err := l.SnapshotAt(known)
	if err != nil {
		return nil
	}
	t, err := l.SnapshotAt(tip)
	if err != nil {
		return nil
	}
	if in, err := l.holds(tip, k.Meta.Size-1, k.Meta.Head); err != nil || in {
		return nil
	}
	if t.Meta.Size < k.Meta.Size {
		return errs.New(errs.RollbackDetected, "%s was moved back from %s (verified, %d entries) to %s (%d entries)",
			l.Ref, known, k.Meta.Size, tip, t.Meta.Size).With("verified_size", k.Meta.Size)
	}
	return errs.New(errs.ForkDetected, "%s at %s does not extend the verified %s (%d entries)", l.Ref, tip, known, k.Meta.Size).
		With("verified_size", k.Meta.Size)
}

// VerifyRemote fetches the remote's ledger and verifies it: what is new since
// this clone last verified it, or everything with full.
//
// A clone whose history is shallow (a first contact from a checkpoint)
// fetches all of it first when full: a full verify replays every entry from
// genesis, and never reports one it did not do.
func (l *Ledger) VerifyRemote(remote string, full bool) (*Report, error) {
	var (
		tip gitstore.ObjectID
		rep *Report
		err error
	)
	known := l.readRemoteRecord(remote) // before the fetch (FetchRemote)
	switch {
	case !full && l.firstContact(remote):
		tip, rep, err = l.fetchFromCheckpoint(remote)
	case full && len(l.Repo.Shallow()) > 0:
		tip, err = l.fetchRemoteDepth(remote, gitstore.FullDepth)
	default:
		tip, err = l.fetchRemote(remote)
	}
	if err != nil {
		return nil, err
	}
	if tip.IsZero() && known.IsZero() {
		return nil, errs.New(errs.NotInitialized, "remote %s has no ledger at %s", remote, l.Ref)
	}
	if rep == nil {
		rep, err = l.verifyRemoteTip(remote, known, tip, full)
	}
	if rep == nil && err == nil { // nothing new since the record: the range is empty
		rep, err = l.VerifyRange(tip, tip)
	}
	if rep != nil {
		rep.From = l.ShallowStart()
	}
	return rep, err
}

// remoteError maps transport errors to tally's codes.
func remoteError(err error) error {
	switch {
	case errors.Is(err, gitstore.ErrRemoteUnreachable):
		return errs.Wrap(errs.RemoteUnreachable, err, "remote")
	case errors.Is(err, gitstore.ErrRemoteDenied):
		// Credentials or permissions: retrying unchanged cannot help.
		return errs.Wrap(errs.RemoteDenied, err, "remote")
	case errors.Is(err, gitstore.ErrPushRejected) && strings.Contains(err.Error(), ": HOOK-TIMEOUT: "):
		// The server's hook ran out of time (hooks.CheckWithin): the same
		// push may pass when the server is less busy.
		return errs.New(errs.HookTimeout, "%v", err)
	case errors.Is(err, gitstore.ErrPushRejected):
		return errs.New(errs.RemoteRejected, "%v", err)
	case errors.Is(err, gitstore.ErrNoRemote):
		return errs.New(errs.Usage, "%v", err)
	}
	return errs.From(err)
}

// AppendRemote appends entries through the remote. The first attempt builds
// on the remote tip this clone last knew and lets the push's compare-and-swap
// tell whether it is still current. A push git reports applied (the server's
// report-status said ok) is won; one not sent because the ref had moved is
// lost (fetch and rebuild); any other outcome is decided by listing the
// remote ref: our commit there means we won; the old tip means the push did not happen
// (retry; if the server said why, that is REMOTE-REJECTED, or REMOTE-DENIED
// when it refused the user); anything else is fetched and verified, and then
// our entries are either in it (another writer appended on top of ours: we
// won) or not (we lost the race: rebuild on the new tip), with jittered
// backoff.
func (l *Ledger) AppendRemote(remote, actor string, builds []BuildFunc) ([]*Appended, error) {
	var slot time.Duration
	lost := 0
	base := l.readRemoteRecord(remote)
	fetch := base.IsZero()
	var pending []*Appended // pushed, outcome unknown until the next fetch
	for attempt := 0; attempt < remoteAttempts; attempt++ {
		if fetch {
			var err error
			if base, err = l.FetchRemote(remote); err != nil {
				return nil, err
			}
			if pending != nil {
				in, err := l.contains(base, pending[len(pending)-1])
				if err != nil {
					return nil, err
				}
				if in {
					l.fastForwardLocal(base, base)
					l.maybePack()
					return pending, nil
				}
				pending = nil
			}
		}
		out, pw, err := l.prepareOn(base, actor, builds)
		if err != nil {
			if !fetch && errs.From(err).Class() != errs.Integrity {
				// Refused on a possibly stale tip: decide on the current one.
				fetch = true
				continue
			}
			return nil, err
		}
		tip := out[len(out)-1].Commit
		// No ref reaches the pack until the push is decided and the local
		// ledger fast-forwards: it is kept from git gc until then.
		pack, release, err := pw.WriteKept(l.Repo.ObjectDir)
		if err != nil {
			return nil, err
		}
		t0 := time.Now()
		pushErr := l.Repo.PushRef(remote, l.Ref, base, tip)
		var cur gitstore.ObjectID
		var hint time.Duration // the server's, when its hook refused a lost race
		told := false
		if errors.Is(pushErr, gitstore.ErrPushRejected) {
			cur, hint, told = parseLostRace(pushErr.Error(), l.Ref)
		}
		moved := errors.Is(pushErr, gitstore.ErrRefChanged)
		switch {
		case pushErr == nil:
			cur = tip // receive-pack reported the update applied
		case told: // the server's hook said where the ledger is
		case moved: // nothing was sent: no need to ask what happened
		default:
			if cur, err = l.Repo.ListRemoteRef(remote, l.Ref); err != nil {
				release()
				return nil, remoteError(err)
			}
		}
		// A slot is about as long as an attempt takes, the time another writer
		// needs to land; after k lost races, wait a random number of slots
		// below 2^k (binary exponential backoff), so contenders spread out
		// instead of racing again together.
		slot = time.Since(t0)
		switch {
		case moved:
			// Another writer moved the ref since base: fetch, verify, rebuild.
			release()
			gitstore.RemovePack(l.Repo.ObjectDir, pack)
			fetch = true
		case cur == tip:
			if db, err := l.Repo.Objects(); err == nil {
				db.AddPack(pack)
			}
			l.writeRemoteRecord(remote, tip)
			l.fastForwardLocal(base, tip)
			release()
			l.maybePack()
			return out, nil
		case cur == base: // not applied; a retry writes a pack of its own
			release()
			gitstore.RemovePack(l.Repo.ObjectDir, pack)
			if errors.Is(pushErr, gitstore.ErrPushRejected) || errors.Is(pushErr, gitstore.ErrRemoteDenied) {
				return nil, remoteError(pushErr)
			}
			if attempt >= 3 {
				return nil, remoteError(fmt.Errorf("%w: %v", gitstore.ErrRemoteUnreachable, pushErr))
			}
		case told:
			// The hook refused it before anything else: nothing landed, and the
			// server said how long landings take. Wait a random part of a few
			// of those intervals (more after each loss) so losers spread out;
			// a hint of 0 says the base was stale rather than raced.
			release()
			gitstore.RemovePack(l.Repo.ObjectDir, pack)
			fetch = true
			lost++
			if hint > 0 {
				time.Sleep(time.Duration(rand.N(int64(hint) << min(lost, 3))))
			}
			continue
		default:
			// Someone else moved the ref: our commit may be under theirs.
			release()
			if db, err := l.Repo.Objects(); err == nil {
				db.AddPack(pack)
			}
			pending = out
			fetch = true
		}
		lost++
		time.Sleep(time.Duration(rand.N(1<<min(lost, 5))) * min(slot, 500*time.Millisecond))
	}
	return nil, errs.New(errs.Conflict, "remote %s: %s kept changing; gave up after %d attempts", remote, l.Ref, remoteAttempts)
}

// LostRaceMessage is the stable text of the server hook's refusal of a push
// that lost a compare-and-swap race (FORMAT.md §9a): the pushed old value,
// the ledger's value when the hook looked, and the server's retry hint.
func LostRaceMessage(old, cur gitstore.ObjectID, hint time.Duration) string {
	return fmt.Sprintf("the ledger moved from %s to %s; retry-after-ms=%d", old, cur, hint.Milliseconds())
}

// lostRaceLine is compiled when a push fails, not in the package's
// initializer, which every tally process runs (1.9% of a tally note).
var lostRaceLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`tally: refused (\S+): CONFLICT: the ledger moved from ([0-9a-f]{40}) to ([0-9a-f]{40}); retry-after-ms=([0-9]+)`)
})

// parseLostRace finds a lost-race refusal of ref in what the server said and
// returns the ledger's value then and the server's retry hint.
func parseLostRace(said, ref string) (cur gitstore.ObjectID, hint time.Duration, ok bool) {
	for _, m := range lostRaceLine().FindAllStringSubmatch(said, -1) {
		id, err := gitstore.ParseObjectID(m[3])
		ms, err2 := strconv.ParseUint(m[4], 10, 32)
		if m[1] == ref && err == nil && err2 == nil {
			return id, time.Duration(ms) * time.Millisecond, true
		}
	}
	return gitstore.ObjectID{}, 0, false
}

// contains reports whether the ledger at tip holds the entry ap, by comparing
// the entry hash recorded at its seq in tip's tiles (equal entries at a seq
// imply equal prefixes).
func (l *Ledger) contains(tip gitstore.ObjectID, ap *Appended) (bool, error) {
	return l.holds(tip, ap.Entry.Seq, ap.Hash)
}

// holds reports whether the ledger at tip has the entry hash h at seq: a
// read of O(log n) tiles, not a walk of the history.
func (l *Ledger) holds(tip gitstore.ObjectID, seq uint64, h chain.Hash) (bool, error) {
	snap, err := l.SnapshotAt(tip)
	if err != nil {
		return false, err
	}
	if seq >= snap.Meta.Size {
		return false, nil
	}
	got, _, err := chain.EntryRecord(snap, snap.Meta.Size, seq)
	if err != nil {
		return false, errs.Wrap(errs.Corrupt, err, "tiles of %s", tip)
	}
	return got == h, nil
}

// fastForwardLocal moves the local ledger ref to tip when the local ledger
// has no entries of its own: its last entry is in base at the same seq (the
// chain makes the prefixes equal). A local ledger with entries the remote
// lacks is left alone for tally sync.
func (l *Ledger) fastForwardLocal(base, tip gitstore.ObjectID) {
	wl, err := l.lockWriter()
	if err != nil {
		return
	}
	defer wl.Release()
	local, err := l.Tip()
	if err != nil || local == tip {
		return
	}
	if !local.IsZero() && local != base {
		ls, err := l.SnapshotAt(local)
		if err != nil || ls.Meta.Size == 0 {
			return
		}
		if in, err := l.holds(base, ls.Meta.Size-1, ls.Meta.Head); err != nil || !in {
			return // entries of its own: tally sync's business
		}
	}
	if l.Repo.UpdateRef(wl, l.Ref, local, tip) == nil {
		l.writeRecord(l.writerRecordPath(), tip) // verified when fetched: the next append checks nothing
	}
}
