//go:build linux && !portable

package gitstore

import "golang.org/x/sys/unix"

// peerUID is the uid of the peer of the connected socket fd (SO_PEERCRED).
func peerUID(fd int) (int, error) {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return -1, err
	}
	return int(cred.Uid), nil
}
