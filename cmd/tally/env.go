package main

import (
	"os"
	"os/exec"

	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/proctree"
)

// detachedGC is the command line's ledger.Maintainer: a `tally gc
// --holding-lock` detached (its own session; on Windows its own process
// group without a console), so that it outlives the command that
// started it, inheriting the held compaction lock as its file descriptor 3.
func detachedGC(l *ledger.Ledger, lock *os.File) (func(), error) {
	self, err := os.Executable()
	if err != nil {
		return nil, err
	}
	cmd := exec.Command(self, "-C", l.Repo.CommonDir, "--namespace", l.Namespace, "gc", "--holding-lock")
	cmd.ExtraFiles = []*os.File{lock}
	proctree.Detach(cmd)
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	return func() { cmd.Wait() }, nil
}
