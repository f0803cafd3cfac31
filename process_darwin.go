package tally

import (
	"errors"
	"strings"

	"golang.org/x/sys/unix"
)

// macOS has one process table per boot, and no PID namespaces: pid_ns is
// soloProcessTable, and the boot id is kern.bootsessionuuid, lowercased.

// processStart returns pid's start time (kern.proc.pid's p_starttime) in
// microseconds since the epoch, or 0 if it cannot be read.
func processStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	kp, err := unix.SysctlKinfoProc("kern.proc.pid", pid)
	if err != nil || kp.Proc.P_pid != int32(pid) {
		return 0
	}
	t := kp.Proc.P_starttime
	return uint64(t.Sec)*1_000_000 + uint64(t.Usec)
}

// processTable returns this boot's id and the one process table's number.
func processTable() (bootID string, pidNS uint64, err error) {
	id, err := unix.Sysctl("kern.bootsessionuuid")
	if err != nil {
		return "", 0, err
	}
	id = strings.ToLower(strings.TrimSpace(id))
	if len(id) != 36 {
		return "", 0, errors.New("kern.bootsessionuuid is not a UUID")
	}
	return id, soloProcessTable, nil
}
