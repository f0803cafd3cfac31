//go:build !linux || portable

package main

import (
	"runtime"
	"testing"
)

// procTable skips the test: only on Linux (without -tags portable) does
// the test read the process table independently of tally.
func procTable(t testing.TB) (bootID string, pidNS uint64) {
	t.Helper()
	t.Skipf("the test reads the boot id and PID namespace on its own only on Linux, not %s in this build", runtime.GOOS)
	return "", 0
}
