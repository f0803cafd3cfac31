//go:build unix

package testrepo

import (
	"syscall"
	"time"
)

// processCPU is the CPU time this process has spent, user and system.
func processCPU() time.Duration {
	var r syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &r)
	return time.Duration(r.Utime.Nano() + r.Stime.Nano())
}
