package tally

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"syscall"
)

// ProcessAlive reports whether pid names a running process on this host. A
// process we may not signal (EPERM) is alive; a zombie (exited, not yet
// reaped by its parent) is not.
func ProcessAlive(pid int) bool {
	if pid <= 0 {
		return false
	}
	err := syscall.Kill(pid, 0)
	if err != nil && !errors.Is(err, syscall.EPERM) {
		return false
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true // no procfs: trust the signal probe
	}
	// The state follows the parenthesized command name, which may contain spaces.
	i := bytes.LastIndexByte(stat, ')')
	return i < 0 || i+2 >= len(stat) || stat[i+2] != 'Z'
}
