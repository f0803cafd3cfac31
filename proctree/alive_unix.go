//go:build unix

package proctree

import (
	"errors"
	"syscall"
)

// signalProbe reports whether a process has pid: kill(pid, 0) succeeds, or
// fails only because we may not signal it (EPERM). A zombie passes.
func signalProbe(pid int) bool {
	err := syscall.Kill(pid, 0)
	return err == nil || errors.Is(err, syscall.EPERM)
}
