package ledger

import (
	"os"

	"github.com/tally-dev/tally/gitstore"
)

// Every append writes one small pack; gitstore.Compact merges them
// log-structured so their number stays bounded. An append that finds enough
// mergeable packs starts a compaction in the background and never waits for
// it: maintenance is best effort and must not slow or fail an append. At most
// one compaction runs per repository: it holds the compaction lock (an flock,
// so a killed compactor never leaves it behind), and an append that finds the
// lock taken leaves the work to its holder.
const compactTrigger = 12 // mergeable packs that make an append start a compaction

// A Maintainer starts a compaction of the ledger's repository in another
// process, so that a short-lived command can exit at once (the command line
// starts a detached `tally gc`). It is handed the compaction lock's open file,
// already locked: the other process must inherit it and hold it until its
// compaction ends, and it must merge packs as Compact does. It returns once
// that process has started, with a function that waits for it to end; an
// error means nothing was started.
type Maintainer func(l *Ledger, lock *os.File) (wait func(), err error)

// maybePack starts a background compaction when packs have piled up: through
// Options.Maintain if the caller gave one, else in a goroutine
// (WaitMaintenance).
func (l *Ledger) maybePack() {
	if !gitstore.NeedsCompaction(l.Repo.ObjectDir, compactTrigger) {
		return
	}
	lock, err := gitstore.LockCompaction(l.Files.CompactLock(), false)
	if err != nil || lock == nil {
		return // busy, or no lock to be had: the next append tries again
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
