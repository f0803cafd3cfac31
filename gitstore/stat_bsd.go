//go:build darwin || freebsd

package gitstore

import "syscall"

// statMtime and statCtime are a stat's modification and change times,
// which macOS and FreeBSD name Mtimespec and Ctimespec (stat_linux.go).
func statMtime(st *syscall.Stat_t) syscall.Timespec { return st.Mtimespec }
func statCtime(st *syscall.Stat_t) syscall.Timespec { return st.Ctimespec }
