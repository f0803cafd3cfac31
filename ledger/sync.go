package ledger

import (
	"encoding/json"
	"io"
	"math/rand/v2"
	"sort"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
)

// SyncReport says what Sync did.
type SyncReport struct {
	Remote string `json:"remote"`
	// Action is "up-to-date", "fast-forward" (local took the remote's
	// entries), "pushed" (the remote took the local ones) or "rebuilt" (local
	// entries were rebuilt on the remote tip and pushed).
	Action  string         `json:"action"`
	Tip     string         `json:"tip"`
	Rebuilt []RebuiltEntry `json:"rebuilt"`
	Dropped []DroppedEntry `json:"dropped"`
	Entries uint64         `json:"entries"`
}

// RebuiltEntry is a local entry that now sits at another seq.
type RebuiltEntry struct {
	OldSeq uint64     `json:"old_seq"`
	NewSeq uint64     `json:"new_seq"`
	Kind   chain.Kind `json:"kind"`
	Actor  string     `json:"actor"`
}

// DroppedEntry is a local entry the rules no longer allow on the remote's
// ledger. It is reported, never dropped silently; it stays readable in the
// old local history (reflog-free, so copy it from the report if it matters).
type DroppedEntry struct {
	OldSeq  uint64          `json:"old_seq"`
	Kind    chain.Kind      `json:"kind"`
	Actor   string          `json:"actor"`
	Body    json.RawMessage `json:"body"`
	Code    errs.Code       `json:"code"`
	Message string          `json:"message"`
}

// Sync reconciles the local ledger with the remote's: it fetches and
// verifies the remote, fast-forwards the local ledger, pushes local-only
// entries, and when both have moved, rebuilds the local-only entries on the
// remote tip in order — each only where the rules still allow it — and pushes
// the result with a compare-and-swap. It never pushes a dead-holder takeover:
// local entries carrying dead-holder evidence are always rebuilt, that claim
// without its evidence (withoutDeadEvidence).
func (l *Ledger) Sync(remote string) (*SyncReport, error) {
	if _, err := l.Verify(false); err != nil && !errs.Is(err, errs.NotInitialized) {
		return nil, err
	}
	pause := 2 * time.Millisecond
	for attempt := 0; attempt < remoteAttempts; attempt++ {
		rep, err := l.syncOnce(remote)
		if err == nil || !errs.Is(err, errs.Conflict) {
			return rep, err
		}
		time.Sleep(pause/2 + rand.N(pause))
		pause = min(2*pause, 200*time.Millisecond)
	}
	return nil, errs.New(errs.Conflict, "remote %s: %s kept changing; gave up after %d attempts", remote, l.Ref, remoteAttempts)
}

// syncOnce makes one attempt; a lost race is a CONFLICT error (retried).
func (l *Ledger) syncOnce(remote string) (*SyncReport, error) {
	rep := &SyncReport{Remote: remote, Rebuilt: []RebuiltEntry{}, Dropped: []DroppedEntry{}}
	rtip, err := l.FetchRemote(remote)
	if err != nil {
		return nil, err
	}
	ltip, err := l.Tip()
	if err != nil {
		return nil, err
	}
	if ltip.IsZero() && rtip.IsZero() {
		return nil, errs.New(errs.NotInitialized, "neither the local ledger nor remote %s has one", remote)
	}
	lsnap, err := l.SnapshotAt(ltip)
	if err != nil {
		return nil, err
	}
	rsnap, err := l.SnapshotAt(rtip)
	if err != nil {
		return nil, err
	}
	common, err := commonPrefix(lsnap, rsnap)
	if err != nil {
		return nil, err
	}
	newTip := rtip
	switch {
	case ltip == rtip:
		rep.Action = "up-to-date"
	case common == lsnap.Meta.Size:
		rep.Action = "fast-forward"
	case common == rsnap.Meta.Size && (common == 0 || !hasDeadEvidence(lsnap, common)):
		// A ledger new to the remote goes as it is; its hook judges it whole.
		rep.Action, newTip = "pushed", ltip
		if err := l.pushTo(remote, rtip, ltip); err != nil {
			return nil, err
		}
	case common == 0:
		return nil, errs.New(errs.ForkDetected, "the local ledger and remote %s's start from different genesis entries: they are different ledgers", remote)
	default: // both moved, or the local entries carry dead-holder evidence
		rep.Action = "rebuilt"
		var release func()
		if newTip, release, err = l.rebuild(lsnap, rsnap, common, rep); err != nil {
			return nil, err
		}
		// No ref reaches the rebuilt entries until moveLocal: their pack is
		// kept from git gc until then.
		defer release()
		if newTip != rtip {
			if err := l.pushTo(remote, rtip, newTip); err != nil {
				return nil, err
			}
		}
	}
	if err := l.moveLocal(ltip, newTip); err != nil {
		return nil, err
	}
	l.writeRemoteRecord(remote, newTip)
	rep.Tip = newTip.String()
	snap, err := l.SnapshotAt(newTip)
	if err != nil {
		return nil, err
	}
	rep.Entries = snap.Meta.Size
	l.maybePack() // fetched and rebuilt entries leave packs like appends do
	return rep, nil
}

// commonPrefix returns how many leading entries two ledgers share. Because
// each entry names its predecessor's hash, equal entries at seq s imply equal
// entries before s, so a binary search over the Merkle tiles' entry hashes
// finds it in O(log n) reads.
func commonPrefix(a, b *Snapshot) (uint64, error) {
	n := min(a.Meta.Size, b.Meta.Size)
	var failed error
	k := sort.Search(int(n), func(i int) bool {
		ha, _, err1 := chain.EntryRecord(a, a.Meta.Size, uint64(i))
		hb, _, err2 := chain.EntryRecord(b, b.Meta.Size, uint64(i))
		if err1 != nil || err2 != nil {
			failed = errs.New(errs.Corrupt, "Merkle tiles at entry %d: %v %v", i, err1, err2)
			return true
		}
		return ha != hb
	})
	return uint64(k), failed
}

// rebuild replays the local entries from seq common onward on the remote
// state, in order, recording which ones the rules no longer allow, and writes
// the objects of the result. It returns the new tip and the release of its
// pack's .keep (PackWriter.WriteKept), to call once a ref reaches the tip.
func (l *Ledger) rebuild(local, remote *Snapshot, common uint64, rep *SyncReport) (gitstore.ObjectID, func(), error) {
	pw := gitstore.NewPackWriter()
	parent := remote.Commit
	snap := remote
	n := int(local.Meta.Size - common)
	m := l.meter("rebuild", n)
	for seq := common; seq < local.Meta.Size; seq++ {
		e, _, _, err := local.Entry(seq)
		if err != nil {
			return parent, nil, err
		}
		var body any = e.Body
		stripped, err := withoutDeadEvidence(e)
		if err != nil {
			return parent, nil, err
		}
		if stripped != nil {
			body = stripped
		}
		build := func(*Snapshot, time.Time) (*Draft, error) {
			return &Draft{Kind: e.Kind, Body: body, Actor: e.Actor}, nil
		}
		ap, err := l.build(snap, e.Actor, time.Time{}, build, pw)
		if err != nil {
			x := errs.From(err)
			if x.Code == errs.Corrupt || x.Code == errs.Internal {
				return parent, nil, err
			}
			code, msg := x.Code, x.Message
			if stripped != nil {
				code, msg = errs.DeadHolderRemote, "a dead-holder takeover is not sent to a remote, and without its evidence the claim is refused: "+string(x.Code)+": "+x.Message
			}
			rep.Dropped = append(rep.Dropped, DroppedEntry{OldSeq: seq, Kind: e.Kind, Actor: e.Actor, Body: e.Body, Code: code, Message: msg})
			m.add(counted(int(seq-common), n))
			continue
		}
		rep.Rebuilt = append(rep.Rebuilt, RebuiltEntry{OldSeq: seq, NewSeq: ap.Entry.Seq, Kind: e.Kind, Actor: e.Actor})
		parent = ap.Commit
		m.add(counted(int(seq-common), n))
	}
	if pw.Len() == 0 {
		return parent, func() {}, nil
	}
	_, release, err := pw.WriteKept(l.Repo.ObjectDir)
	return parent, release, err
}

// withoutDeadEvidence returns, for a reclaim-dead claim that carries
// dead-holder evidence, its body without the evidence; nil for any other
// entry. A remote refuses dead-holder takeovers (FORMAT.md §9a: nobody there
// can check the evidence), so sync sends such a claim only as what entry
// time alone allows: a claim of a free cell or of an expired lease.
func withoutDeadEvidence(e *chain.Entry) (*lease.ClaimBody, error) {
	if e.Kind != chain.KindClaim {
		return nil, nil
	}
	var b lease.ClaimBody
	if err := json.Unmarshal(e.Body, &b); err != nil {
		return nil, errs.New(errs.Corrupt, "claim body of entry %d: %v", e.Seq, err)
	}
	if b.Mode != lease.ModeReclaimDead || b.Dead == nil {
		return nil, nil
	}
	b.Dead = nil
	return &b, nil
}

// hasDeadEvidence reports whether an entry of snap from seq from on carries
// dead-holder evidence (withoutDeadEvidence), so that sync must rebuild the
// local entries rather than push them as they are. Unreadable entries count
// as carrying it: the rebuild then reports why.
func hasDeadEvidence(snap *Snapshot, from uint64) bool {
	for seq := from; seq < snap.Meta.Size; seq++ {
		e, _, _, err := snap.Entry(seq)
		if err != nil {
			return true
		}
		if b, err := withoutDeadEvidence(e); b != nil || err != nil {
			return true
		}
	}
	return false
}

// pushTo moves the remote ledger from old to tip, deciding a failed push by
// listing the remote ref. A lost race is CONFLICT.
func (l *Ledger) pushTo(remote string, old, tip gitstore.ObjectID) error {
	// git reports its progress (to nowhere when nobody watches) so that a
	// push of thousands of entries is never taken for a stalled one.
	shown := l.PushProgress
	if shown == nil {
		shown = io.Discard
	}
	pushErr := l.Repo.PushRefShowing(remote, l.Ref, old, tip, shown)
	if pushErr == nil {
		return nil
	}
	cur, err := l.Repo.ListRemoteRef(remote, l.Ref)
	if err != nil {
		return remoteError(err)
	}
	switch cur {
	case tip:
		return nil
	case old:
		return remoteError(pushErr)
	}
	return errs.New(errs.Conflict, "remote %s moved during sync", remote)
}

// moveLocal sets the local ledger to tip if it still is old, and records tip
// as verified: it is the verified remote tip or local entries rebuilt on it
// by Step. A local append in the meantime is a CONFLICT (sync again).
func (l *Ledger) moveLocal(old, tip gitstore.ObjectID) error {
	if old == tip {
		return nil
	}
	wl, err := l.lockWriter()
	if err != nil {
		return err
	}
	defer wl.Release()
	if err := l.Repo.UpdateRef(wl, l.Ref, old, tip); err != nil {
		return errs.Wrap(errs.Conflict, err, "local ledger moved during sync")
	}
	// tip is verified, and the local entries it replaces were dropped on
	// purpose: both records move to it (or the writer would take the move
	// for a rollback).
	if err := l.writeRecord(l.writerRecordPath(), tip); err != nil {
		return err
	}
	return l.writeRecord(l.recordPath(), tip)
}
