//go:build linux && !portable

package tally

import (
	"errors"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/tally-dev/tally/proctree"
)

// processStart returns pid's start time in clock ticks after boot, or 0 if
// it cannot be read (no such process, or no procfs).
func processStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	fields, err := proctree.Stat(pid)
	if err != nil || len(fields) < 20 {
		return 0
	}
	start, err := strconv.ParseUint(fields[19], 10, 64)
	if err != nil {
		return 0
	}
	return start
}

// processTable returns this process's boot id and PID-namespace inode: the
// process table the pids it sees (getppid, kill, /proc) belong to. It fails
// when it cannot tell, or when the mounted /proc belongs to another PID
// namespace than ours (its pid numbers would not be the ones kill and
// getppid use); such a host records no process table, so its leases cannot
// be reclaimed as dead and it takes none over.
func processTable() (bootID string, pidNS uint64, err error) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", 0, err
	}
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
		return "", 0, errors.New("the mounted /proc is another PID namespace's")
	}
	fi, err := os.Stat("/proc/self/ns/pid")
	if err != nil {
		return "", 0, err
	}
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat || st.Ino == 0 {
		return "", 0, errors.New("/proc/self/ns/pid has no inode")
	}
	return strings.TrimSpace(string(b)), st.Ino, nil
}
