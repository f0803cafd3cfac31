package tally

import (
	"errors"
	"fmt"

	"golang.org/x/sys/unix"
)

// FreeBSD has one process table per boot, and no PID namespaces: pid_ns is
// soloProcessTable, and the boot id is derived from kern.boottime. A jail
// sees only its own processes, so a holder outside it would look gone
// from inside: a jailed process records no process table.

// processStart returns 0: the start time is not read on FreeBSD, so any
// process at a lease's pid counts as its holder.
func processStart(int) uint64 { return 0 }

// processTable returns this boot's id and the one process table's number.
func processTable() (bootID string, pidNS uint64, err error) {
	if jailed, err := unix.SysctlUint32("security.jail.jailed"); err != nil || jailed != 0 {
		return "", 0, errors.New("in a jail, processes outside it cannot be seen")
	}
	tv, err := unix.SysctlTimeval("kern.boottime")
	if err != nil {
		return "", 0, err
	}
	return derivedBootID(fmt.Sprintf("freebsd kern.boottime %d.%06d", tv.Sec, tv.Usec)), soloProcessTable, nil
}
