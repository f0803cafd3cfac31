package ledger

import (
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"time"

	"github.com/tally-dev/tally/gitstore"
)

// Every append writes one small pack; gitstore.Compact merges them
// log-structured so their number stays bounded. An append that finds enough
// mergeable packs starts a compaction in the background and never waits for
// it: maintenance is best effort and must not slow or fail an append. At most
// one compaction runs per clone (the compact.lock file; one older than
// compactStale is taken to be abandoned).
const (
	compactTrigger = 12 // mergeable packs that make an append start a compaction
	compactStale   = 10 * time.Minute
)

func (l *Ledger) compactLock() string { return filepath.Join(l.LocalDir, "compact.lock") }

// maybePack starts a background compaction when packs have piled up: in a
// detached `tally gc` process if the caller named one (Maintainer), so a
// short-lived command exits at once, else in a goroutine (WaitMaintenance).
func (l *Ledger) maybePack() {
	if !gitstore.NeedsCompaction(l.Repo.ObjectDir, compactTrigger) {
		return
	}
	lock := l.compactLock()
	if fi, err := os.Stat(lock); err == nil {
		if time.Since(fi.ModTime()) < compactStale {
			return // one is running
		}
		os.Remove(lock)
	}
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	f.Close()
	done := make(chan struct{})
	l.repacking = done
	if l.Maintainer != "" {
		cmd := exec.Command(l.Maintainer, "-C", l.Repo.CommonDir, "--namespace", l.Namespace, "gc", "--release-lock", lock)
		cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
		if err := cmd.Start(); err != nil {
			os.Remove(lock)
			close(done)
			return
		}
		go func() { cmd.Wait(); close(done) }()
		return
	}
	go func() {
		defer close(done)
		defer os.Remove(lock)
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

// Compact merges the repository's small packs now (tally gc).
func (l *Ledger) Compact() (*gitstore.CompactReport, error) {
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, err
	}
	return gitstore.Compact(db, l.Repo.ObjectDir)
}
