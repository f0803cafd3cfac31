//go:build linux && !portable

package tally

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
)

// processAlive: the signal probe, and /proc/PID/stat's state to tell a
// zombie.
func processAlive(pid int) bool {
	if !signalProbe(pid) {
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
