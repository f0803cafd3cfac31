package proctree

import (
	"errors"

	"golang.org/x/sys/windows"
)

// alive opens the process and asks for its exit code: a process we may not
// open is alive; one whose exit code is STILL_ACTIVE is (a process that
// exited with code 259 reads as alive, erring on the process's side).
func alive(pid int) bool {
	h, err := windows.OpenProcess(windows.PROCESS_QUERY_LIMITED_INFORMATION, false, uint32(pid))
	if errors.Is(err, windows.ERROR_ACCESS_DENIED) {
		return true
	}
	if err != nil {
		return false
	}
	defer windows.CloseHandle(h)
	var code uint32
	if err := windows.GetExitCodeProcess(h, &code); err != nil {
		return true
	}
	return code == stillActive
}

// stillActive is the exit code GetExitCodeProcess gives a running process.
const stillActive = 259
