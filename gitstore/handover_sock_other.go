//go:build unix && (!linux || portable)

package gitstore

import (
	"syscall"

	"golang.org/x/sys/unix"
)

// newSocket is a non-blocking Unix stream socket, closed on exec. macOS has
// no flags for socket(2) to say so: they are set after, under the fork
// lock, so that no child started meanwhile inherits the socket.
func newSocket() (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, err
	}
	return fd, setSocketFlags(fd)
}

// acceptConn accepts a connection on the listening socket fd, non-blocking
// and closed on exec (macOS has no accept4).
func acceptConn(fd int) (int, error) {
	syscall.ForkLock.RLock()
	defer syscall.ForkLock.RUnlock()
	nfd, _, err := unix.Accept(fd)
	if err != nil {
		return -1, err
	}
	return nfd, setSocketFlags(nfd)
}

// setSocketFlags makes the new socket fd non-blocking and closed on exec;
// on failure it closes it.
func setSocketFlags(fd int) error {
	unix.CloseOnExec(fd)
	if err := unix.SetNonblock(fd, true); err != nil {
		unix.Close(fd)
		return err
	}
	return nil
}
