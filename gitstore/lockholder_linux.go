//go:build linux && !portable

package gitstore

import (
	"bufio"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// lockHolder is the pid and uid of the process holding the flock on the
// lock file f (0 and -1 when not known), as /proc/locks tells: a line
// "<n>: FLOCK ADVISORY WRITE <pid> <major>:<minor>:<inode> 0 EOF" for the
// holder (a waiter's line has "->" after the number), its uid the owner of
// /proc/<pid>.
func lockHolder(f *os.File) (pid, uid int) {
	var st unix.Stat_t
	if unix.Fstat(int(f.Fd()), &st) != nil {
		return 0, -1
	}
	file := fmt.Sprintf("%02x:%02x:%d", unix.Major(st.Dev), unix.Minor(st.Dev), st.Ino)
	locks, err := os.Open("/proc/locks")
	if err != nil {
		return 0, -1
	}
	defer locks.Close()
	s := bufio.NewScanner(locks)
	for s.Scan() {
		f := strings.Fields(s.Text())
		if len(f) < 6 || f[1] != "FLOCK" || f[5] != file {
			continue
		}
		if pid, err = strconv.Atoi(f[4]); err != nil || pid <= 0 {
			return 0, -1
		}
		var proc unix.Stat_t
		if unix.Stat("/proc/"+f[4], &proc) != nil {
			return pid, -1
		}
		return pid, int(proc.Uid)
	}
	return 0, -1
}
