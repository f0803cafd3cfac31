//go:build linux && !portable

package gitstore

import (
	"os"
	"strconv"
	"syscall"
)

// pidNamespace names the PID namespace this process's pids belong to: the
// inode of /proc/self/ns/pid. ok is false when it cannot be told, or when
// the mounted /proc is another namespace's (its /proc/self is not this
// process).
func pidNamespace() (string, bool) {
	if self, err := os.Readlink("/proc/self"); err != nil || self != strconv.Itoa(os.Getpid()) {
		return "", false
	}
	fi, err := os.Stat("/proc/self/ns/pid")
	if err != nil {
		return "", false
	}
	st, ok := fi.Sys().(*syscall.Stat_t)
	if !ok || st.Ino == 0 {
		return "", false
	}
	return strconv.FormatUint(st.Ino, 10), true
}
