package gitstore

import "syscall"

// statMtime and statCtime are a stat's modification and change times,
// which Linux names Mtim and Ctim (stat_bsd.go: macOS and FreeBSD).
func statMtime(st *syscall.Stat_t) syscall.Timespec { return st.Mtim }
func statCtime(st *syscall.Stat_t) syscall.Timespec { return st.Ctim }
