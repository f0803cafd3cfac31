package main

import (
	"os"
	"os/exec"
	"syscall"

	"github.com/tally-dev/tally/ledger"
)

// detachedGC is the command line's ledger.Maintainer: a `tally gc
// --holding-lock` in its own session, so that it outlives the command that
// started it, inheriting the held compaction lock as its file descriptor 3.
func detachedGC(l *ledger.Ledger, lock *os.File) (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-C", l.Repo.CommonDir, "--namespace", l.Namespace, "gc", "--holding-lock")
	cmd.ExtraFiles = []*os.File{lock}
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() { cmd.Wait() }, nil
}
