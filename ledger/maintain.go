package ledger

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Every append writes one small pack. Past packThreshold packs, the writer
// starts `git repack --geometric=2` in the background: it rolls the small packs
// into a geometric progression (so their number stays logarithmic) without
// touching the repository's large packs, and git's own locking makes it safe
// beside concurrent appends and readers.
const (
	packThreshold = 50
	repackStale   = 10 * time.Minute
)

// maybePack starts a background repack when small packs have piled up. It never
// blocks or fails an append: maintenance is best effort by design.
func (l *Ledger) maybePack() {
	names, err := os.ReadDir(filepath.Join(l.Repo.ObjectDir, "pack"))
	if err != nil {
		return
	}
	idx := 0
	for _, n := range names {
		if strings.HasSuffix(n.Name(), ".idx") {
			idx++
		}
	}
	if idx < packThreshold {
		return
	}
	lock := filepath.Join(l.LocalDir, "repack.lock")
	if fi, err := os.Stat(lock); err == nil && time.Since(fi.ModTime()) < repackStale {
		return // one is running (or finished moments ago)
	}
	os.Remove(lock)
	f, err := os.OpenFile(lock, os.O_CREATE|os.O_EXCL|os.O_WRONLY, 0o644)
	if err != nil {
		return
	}
	f.Close()
	l.startRepack(lock)
}

// startRepack runs the repack detached from this process, so a short-lived
// command does not wait for it; the lock file is removed when it finishes.
func (l *Ledger) startRepack(lock string) {
	script := `git repack -d -q -l --geometric=2 --no-write-bitmap-index; rm -f "$1"`
	cmd := exec.Command("sh", "-c", script, "tally-repack", lock)
	cmd.Env = append(os.Environ(), "GIT_DIR="+l.Repo.CommonDir)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		os.Remove(lock)
		return
	}
	done := make(chan struct{})
	l.repacking = done
	go func() { cmd.Wait(); close(done) }()
}

// WaitMaintenance waits for a background repack this process started, if any.
// Short-lived commands exit without waiting; tests and long-running servers
// call it before removing or closing the repository.
func (l *Ledger) WaitMaintenance() {
	if l.repacking != nil {
		<-l.repacking
	}
}

// Repack runs the same repack in the foreground (tally gc).
func (l *Ledger) Repack() error {
	cmd := exec.Command("git", "repack", "-d", "-q", "-l", "--geometric=2", "--no-write-bitmap-index")
	cmd.Env = append(os.Environ(), "GIT_DIR="+l.Repo.CommonDir)
	if out, err := cmd.CombinedOutput(); err != nil {
		return fmt.Errorf("git repack: %w: %s", err, strings.TrimSpace(string(out)))
	}
	return nil
}
