//go:build darwin || freebsd

package gitstore

import "golang.org/x/sys/unix"

// peerUID is the uid of the peer of the connected socket fd
// (LOCAL_PEERCRED).
func peerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptXucred(fd, unix.SOL_LOCAL, unix.LOCAL_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
