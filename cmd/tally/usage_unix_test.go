//go:build unix

package main

import (
	"os"
	"syscall"
)

// faultsAndSwitches is what wait4 counted for an exited process: minor page
// faults, and context switches, voluntary or not.
func faultsAndSwitches(ps *os.ProcessState) (faults, switches int64) {
	if ru, ok := ps.SysUsage().(*syscall.Rusage); ok {
		return int64(ru.Minflt), int64(ru.Nvcsw + ru.Nivcsw)
	}
	return 0, 0
}
