package ledger

import (
	"os"
	"os/exec"
	"syscall"

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

// maybePack starts a background compaction when packs have piled up: in a
// detached `tally gc` process if the caller named one (Maintainer), so a
// short-lived command exits at once, else in a goroutine (WaitMaintenance).
// The detached process inherits the held lock and keeps it until it exits.
func (l *Ledger) maybePack() {
	if !gitstore.NeedsCompaction(l.Repo.ObjectDir, compactTrigger) {
		return
	}
	lock, err := gitstore.LockCompaction(gitstore.CompactionLockPath(l.Repo.CommonDir), false)
	if err != nil || lock == nil {
		return // busy, or no lock to be had: the next append tries again
	}
	done := make(chan struct{})
	l.repacking = done
	if l.Maintainer != "" {
		cmd := exec.Command(l.Maintainer, "-C", l.Repo.CommonDir, "--namespace", l.Namespace, "gc", "--holding-lock")
		cmd.ExtraFiles = []*os.File{lock.File()}
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		err := cmd.Start()
		lock.Close()
		if err != nil {
			close(done)
			return
		}
		go func() { cmd.Wait(); close(done) }()
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
	lock, err := gitstore.LockCompaction(gitstore.CompactionLockPath(l.Repo.CommonDir), true)
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
