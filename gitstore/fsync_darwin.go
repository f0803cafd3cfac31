//go:build !portable

package gitstore

import (
	"errors"

	"golang.org/x/sys/unix"
)

// fsync on macOS is fcntl F_FULLFSYNC: fsync(2) there leaves the data in
// the drive's cache, which a power loss takes (os.File.Sync does the same).
// A filesystem that does not know F_FULLFSYNC gets fsync(2).
func fsync(fd int) error {
	_, err := unix.FcntlInt(uintptr(fd), unix.F_FULLFSYNC, 0)
	if errors.Is(err, unix.ENOTSUP) || errors.Is(err, unix.ENOTTY) || errors.Is(err, unix.EINVAL) {
		return unix.Fsync(fd)
	}
	return err
}
