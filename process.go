package tally

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"

	"github.com/tally-dev/tally/lease"
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
	fields, err := procStat(pid)
	if err != nil {
		return true // no procfs: trust the signal probe
	}
	return len(fields) == 0 || fields[0] != "Z"
}

// procStat returns the fields of /proc/PID/stat after the parenthesized
// command name (which may contain spaces): fields[0] is the state (field 3
// of proc(5)), fields[19] the start time (field 22).
func procStat(pid int) ([]string, error) {
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return nil, err
	}
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return nil, fmt.Errorf("/proc/%d/stat: no command name", pid)
	}
	return strings.Fields(string(stat[i+1:])), nil
}

// processStart returns pid's start time in clock ticks after boot, or 0 if
// it cannot be read (no such process, or no procfs).
func processStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	fields, err := procStat(pid)
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
// process table the pids it sees (getppid, kill, /proc) belong to. ok is
// false when it cannot tell, or when the mounted /proc belongs to another
// PID namespace than ours (its pid numbers would not be the ones kill and
// getppid use); such a host records no process table, so its leases cannot
// be reclaimed as dead and it takes none over.
func processTable() (bootID string, pidNS uint64, ok bool) {
	b, err := os.ReadFile("/proc/sys/kernel/random/boot_id")
	if err != nil {
		return "", 0, false
	}
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
		return "", 0, false
	}
	fi, err := os.Stat("/proc/self/ns/pid")
	if err != nil {
		return "", 0, false
	}
	st, isStat := fi.Sys().(*syscall.Stat_t)
	if !isStat || st.Ino == 0 {
		return "", 0, false
	}
	return strings.TrimSpace(string(b)), st.Ino, true
}

// holderGone reports whether the holder of l is observably gone to a process
// with identity self: the lease was recorded in self's process table (host,
// boot, PID namespace), and no live process has its pid, or the one that has
// it started at another time than the holder (the pid was reused).
func holderGone(l *lease.Lease, self lease.HolderID) bool {
	h := l.Holder()
	if h.PID == 0 || !self.SameProcessTable(h) {
		return false // no holder process recorded, or not one this process can see
	}
	if !ProcessAlive(h.PID) {
		return true
	}
	if h.PIDStart == 0 {
		return false // any process at that pid may be the holder
	}
	start := processStart(h.PID)
	return start != 0 && start != h.PIDStart
}
