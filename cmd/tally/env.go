package main

import (
	"os"
	"os/exec"
	"syscall"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/ledger"
)

// flagOrEnv is a global flag's value, else its environment variable's.
func flagOrEnv(flag, variable string) string {
	if flag != "" {
		return flag
	}
	return os.Getenv(variable)
}

// envClock is the clock of this invocation: $TALLY_NOW (RFC 3339) if set, so
// tests and hooks can fix the time, else the wall clock.
func envClock() (func() time.Time, error) {
	s := os.Getenv("TALLY_NOW")
	if s == "" {
		return time.Now, nil
	}
	t, err := time.Parse(time.RFC3339Nano, s)
	if err != nil {
		return nil, errs.New(errs.Usage, "TALLY_NOW must be RFC 3339: %v", err)
	}
	if !chain.TimeInRange(t) {
		// An offset can carry a year-9999 (or year-0) time out of the format.
		return nil, errs.New(errs.Usage, "TALLY_NOW %s is %s in UTC, outside the years 0000..9999 an entry's time can carry",
			s, t.UTC().Format(time.RFC3339Nano)).With("limit", chain.LastTime)
	}
	return func() time.Time { return t }, nil
}

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
