//go:build linux && !portable

package gitstore

import "golang.org/x/sys/unix"

// newSocket is a non-blocking Unix stream socket, closed on exec, made in
// one system call.
func newSocket() (int, error) {
	return unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
}

// acceptConn accepts a connection on the listening socket fd, non-blocking
// and closed on exec, in one system call.
func acceptConn(fd int) (int, error) {
	nfd, _, err := unix.Accept4(fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
	return nfd, err
}
