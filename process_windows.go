package tally

import (
	"errors"
	"fmt"
	"unsafe"

	"golang.org/x/sys/windows"
)

// Windows has one process table per boot: pid_ns is soloProcessTable, and
// the boot id is derived from the boot time the kernel keeps.

// processStart returns pid's creation time (GetProcessTimes) in 100 ns
// units since 1601, or 0 if it cannot be read.
func processStart(pid int) uint64 {
	if pid <= 0 {
		return 0
	}
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if err != nil {
		return 0
	}
	defer windows.CloseHandle(h)
	var created, exited, kernel, user windows.Filetime
	if err := windows.GetProcessTimes(h, &created, &exited, &kernel, &user); err != nil {
		return 0
	}
	return uint64(created.HighDateTime)<<32 | uint64(created.LowDateTime)
}

// timeOfDay is SYSTEM_TIMEOFDAY_INFORMATION, what NtQuerySystemInformation
// answers for SystemTimeOfDayInformation.
type timeOfDay struct {
	BootTime, CurrentTime, TimeZoneBias int64
	TimeZoneID, Reserved                uint32
	BootTimeBias, SleepTimeBias         uint64
}

// processTable returns this boot's id and the one process table's number.
// The boot time is the kernel's own (exact, not the clock less the uptime);
// setting the system clock moves it, after which a dead holder from before
// cannot be reclaimed: it errs on the holder's side.
func processTable() (bootID string, pidNS uint64, err error) {
	var t timeOfDay
	if err := windows.NtQuerySystemInformation(windows.SystemTimeOfDayInformation, unsafe.Pointer(&t), uint32(unsafe.Sizeof(t)), nil); err != nil {
		return "", 0, err
	}
	if t.BootTime == 0 {
		return "", 0, errors.New("the kernel names no boot time")
	}
	return derivedBootID(fmt.Sprintf("windows boot time %d", t.BootTime)), soloProcessTable, nil
}
