//go:build unix && !darwin && !portable

package gitstore

import "syscall"

// fsync is fsync(2) (fsync_darwin.go has macOS's).
func fsync(fd int) error { return syscall.Fsync(fd) }
