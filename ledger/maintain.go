package ledger

import (
	"os"

	"github.com/tally-dev/tally/gitstore"
)

// Every append writes one small pack; gitstore.Compact merges them
// log-structured so their number stays bounded. An append that finds enough
// mergeable packs compacts after it has released the writer lock: the rounds
// that merge at most inlineCompactBytes (four level-0 packs, or a level-1
// round: nearly every round) in its own process, since such a merge copies a
// few stored entries and costs less than starting a process; a larger round
// in the background, which it never waits for. Maintenance is best effort and
// must not fail an append. At most one compaction runs per repository: it
// holds the compaction lock (an flock, so a killed compactor never leaves it
// behind), and an append that finds the lock taken leaves the work to its
// holder.
const (
	compactTrigger     = 12        // mergeable packs that make an append compact
	inlineCompactBytes = 256 << 10 // the most a round merged by the append itself may read
)

// A Maintainer starts a compaction of the ledger's repository in another
// process, so that a short-lived command can exit at once (the command line
// starts a detached `tally gc`). It is handed the compaction lock's open file,
// already locked: the other process must inherit it and hold it until its
// compaction ends, and it must merge packs as Compact does. It returns once
// that process has started, with a function that waits for it to end; an
// error means nothing was started.
type Maintainer func(l *Ledger, lock *os.File) (wait func(), err error)

// maybePack compacts when packs have piled up: the small rounds here, the
// rest in the background through Options.Maintain if the caller gave one,
// else in a goroutine (WaitMaintenance).
//
// It decides from the object database's own list of packs (the one the
// append opened, with the pack it added), not a new listing of the pack
// directory: that read was ≈ 1.3% of a note's CPU, and a pack another
// process wrote meanwhile is counted by the next append.
func (l *Ledger) maybePack() {
	db, err := l.Repo.Objects()
	if err != nil || !db.NeedsCompaction(compactTrigger) {
		return
	}
	lock, err := gitstore.LockCompaction(l.Files.CompactLock(), false)
	if err != nil || lock == nil {
		return // busy, or no lock to be had: the next append tries again
	}
	if _, more, err := gitstore.CompactSmall(db, l.Repo.ObjectDir, inlineCompactBytes); err != nil || !more {
		lock.Close() // done, or failed: the next append tries again
		return
	}
	done := make(chan struct{})
	l.repacking = done
	if l.maintain != nil {
		wait, err := l.maintain(l, lock.File())
		lock.Close()
		if err != nil {
			close(done)
			return
		}
		go func() { wait(); close(done) }()
		return
	}
	go func() {
		defer close(done)
		defer lock.Close()
		l.Compact()
	}()
}

// WaitMaintenance waits for a background compaction this process started, if
// any. Short-lived commands exit without waiting; tests and long-running
// servers call it before removing or closing the repository.
func (l *Ledger) WaitMaintenance() {
	if l.repacking != nil {
		<-l.repacking
	}
}

// CompactNow waits for any running compaction, then merges the repository's
// small packs (tally gc).
func (l *Ledger) CompactNow() (*gitstore.CompactReport, error) {
	lock, err := gitstore.LockCompaction(l.Files.CompactLock(), true)
	if err != nil {
		return nil, err
	}
	defer lock.Close()
	return l.Compact()
}

// Compact merges the repository's small packs now; the caller holds the
// compaction lock.
func (l *Ledger) Compact() (*gitstore.CompactReport, error) {
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	var progress func(done, total int)
	if l.Progress != nil {
		progress = func(done, total int) { l.Progress("gc", done, total) }
	}
	return gitstore.Compact(db, l.Repo.ObjectDir, progress)
}
