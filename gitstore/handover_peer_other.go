//go:build unix && !darwin && !freebsd && (!linux || portable)

package gitstore

// peerUID cannot tell a socket peer's uid here (errNoPeerCredentials): the
// socket file's owner and mode stand for it (checkPeer). A Linux build with
// the portable tag uses this too, so that Linux tests run the hand-over as
// a system without peer credentials does.
func peerUID(int) (int, error) { return -1, errNoPeerCredentials }
