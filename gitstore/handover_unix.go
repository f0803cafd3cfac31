//go:build unix

package gitstore

import (
	"encoding/binary"
	"errors"
	"io"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The hand-over's sockets are raw descriptors, outside the runtime's
// poller like the files of fileio.go: socket, bind, chmod, listen, one
// accept, unlink and close cost a lone writer seven system calls, where a
// net.Listener would add the poller's epoll instance and registrations.
// newSocket and acceptConn (handover_sock_*.go) make them; peerUID
// (handover_peer_*.go) reads a peer's credentials where the system can.

// checkPeer checks that the peer of the connected socket fd runs as this
// process's effective user, where the system tells (peerUID); elsewhere
// the socket file's mode, which only its owner can connect through, and
// the requester's look at its owner (DialHolder) say so.
func checkPeer(fd int) error {
	uid, err := peerUID(fd)
	switch {
	case errors.Is(err, errNoPeerCredentials):
		return nil
	case err != nil:
		return err
	case uid != os.Geteuid():
		return errForeignPeer
	}
	return nil
}

// HolderConn is a requester's connection to the writer-lock holder.
type HolderConn struct{ fd int }

// DialHolder connects to the hand-over socket at path (LocalPaths.WriterSocket)
// and checks that its listener runs as this user: the socket file is this
// user's (bind made it as its binder's user), and so is the peer where the
// system tells. It never waits for the holder to accept: a connection the
// holder's backlog has no room for at once is ErrNoHolder, as are another
// user's socket and nobody listening. The writer then waits for the lock.
func DialHolder(path string) (*HolderConn, error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil || st.Mode&unix.S_IFMT != unix.S_IFSOCK || int(st.Uid) != os.Geteuid() {
		return nil, ErrNoHolder
	}
	fd, err := newSocket()
	if err != nil {
		return nil, err
	}
	err = connectNow(fd, path)
	if err == nil {
		err = checkPeer(fd)
	}
	if err == nil {
		err = blocking(fd, answerTimeout)
	}
	if err != nil {
		unix.Close(fd)
		return nil, ErrNoHolder
	}
	return &HolderConn{fd: fd}, nil
}

// connectNow connects the non-blocking socket fd to the socket file at
// path: at once, or within dialWait where the system completes connections
// later (EINPROGRESS). A full backlog refuses at once (EAGAIN on Linux,
// ECONNREFUSED on the BSDs).
func connectNow(fd int, path string) error {
	err := unix.Connect(fd, &unix.SockaddrUnix{Name: path})
	if errors.Is(err, unix.EINTR) { // the connection goes on: wait for it as for EINPROGRESS
		err = unix.EINPROGRESS
	}
	if !errors.Is(err, unix.EINPROGRESS) {
		return err
	}
	pfd := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLOUT}}
	deadline := time.Now().Add(dialWait)
	for {
		left := time.Until(deadline)
		if left <= 0 {
			return unix.ETIMEDOUT
		}
		n, err := unix.Poll(pfd, int(left.Milliseconds())+1)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		if n > 0 {
			break
		}
	}
	soErr, err := unix.GetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_ERROR)
	if err == nil && soErr != 0 {
		err = unix.Errno(soErr)
	}
	return err
}

// blocking makes the socket fd blocking, with writes that give up after
// sendTimeout (a peer that does not read).
func blocking(fd int, sendTimeout time.Duration) error {
	if err := unix.SetNonblock(fd, false); err != nil {
		return err
	}
	tv := unix.NsecToTimeval(sendTimeout.Nanoseconds())
	return unix.SetsockoptTimeval(fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
}

// Send sends one frame.
func (c *HolderConn) Send(payload []byte) error { return writeAll(c.fd, frame(payload)) }

// Receive waits for the next frame, of at most max bytes. io.EOF means
// the holder closed the connection, or died, before sending it; a frame
// cut short or too long is io.ErrUnexpectedEOF. It waits as long as the
// holder lives: once a holder has the intent, only it can say whether it
// landed.
func (c *HolderConn) Receive(max int) ([]byte, error) {
	var h [frameHeader]byte
	if err := readFull(c.fd, h[:]); err != nil {
		return nil, err
	}
	n := binary.BigEndian.Uint32(h[:])
	if uint64(n) > uint64(max) {
		return nil, io.ErrUnexpectedEOF
	}
	b := make([]byte, n)
	if err := readFull(c.fd, b); err != nil {
		if errors.Is(err, io.EOF) {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	return b, nil
}

// Close ends the connection (again: nothing).
func (c *HolderConn) Close() { closeOnce(&c.fd) }

// closeOnce closes the descriptor *fd unless it is closed already (-1),
// and marks it closed: a descriptor number closed twice may be another
// file's by then.
func closeOnce(fd *int) {
	if *fd >= 0 {
		unix.Close(*fd)
		*fd = -1
	}
}

// readFull reads len(b) bytes from the blocking descriptor fd: io.EOF if
// it ends first (a reset, as a killed peer's, counts as an end).
func readFull(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Read(fd, b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.ECONNRESET):
			return io.EOF
		case err != nil:
			return err
		case n == 0:
			return io.EOF
		}
		b = b[n:]
	}
	return nil
}

// writeAll writes b to the blocking descriptor fd.
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := unix.Write(fd, b)
		if errors.Is(err, unix.EINTR) {
			continue
		}
		if err != nil {
			return err
		}
		b = b[n:]
	}
	return nil
}

// HandoverListener is the holder's socket (Listen).
type HandoverListener struct {
	fd   int
	path string
}

// Listen binds and listens on the hand-over socket at path
// (LocalPaths.WriterSocket), which only this user can connect through
// (mode 0600), or returns nil when it cannot: the directory is not
// writable, or path is too long for a socket address (104 bytes on macOS
// and the BSDs, 108 on Linux). Then requesters wait for the lock, as they
// would for a holder that does not serve. Only w's holder may bind there:
// a socket file left by a holder that was killed is removed first.
func (w *WriterLock) Listen(path string) *HandoverListener {
	fd, err := newSocket()
	if err != nil {
		return nil
	}
	addr := &unix.SockaddrUnix{Name: path}
	err = unix.Bind(fd, addr)
	if errors.Is(err, unix.EADDRINUSE) {
		if err = os.Remove(path); err == nil {
			err = unix.Bind(fd, addr)
		}
	}
	if err != nil {
		unix.Close(fd)
		return nil
	}
	// Bound but not listening, the socket refuses every connection, so
	// nobody reaches it through the mode bind gave it before this one.
	if unix.Chmod(path, 0o600) != nil || unix.Listen(fd, listenBacklog) != nil {
		os.Remove(path)
		unix.Close(fd)
		return nil
	}
	return &HandoverListener{fd: fd, path: path}
}

// accept accepts one pending connection (ok false when none is pending).
// A peer of another user is refused (closed) and counted in foreign.
func (l *HandoverListener) accept(foreign *int) (fd int, ok bool) {
	for {
		fd, err := acceptConn(l.fd)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
			continue
		case err != nil:
			return -1, false
		}
		if checkPeer(fd) != nil {
			unix.Close(fd)
			*foreign++
			return -1, true
		}
		return fd, true
	}
}

// pending is an accepted connection whose intent is being read.
type pending struct {
	fd  int
	buf []byte // what has arrived
}

// need is how many bytes p's frame still lacks (-1: the frame is not an
// intent, too long).
func (p *pending) need() int {
	if len(p.buf) < frameHeader {
		return frameHeader - len(p.buf)
	}
	n := binary.BigEndian.Uint32(p.buf)
	if n > MaxIntent {
		return -1
	}
	return frameHeader + int(n) - len(p.buf)
}

// fill reads what has arrived on p without blocking: done when its frame
// is whole, failed when the frame is too long or the peer ended or erred.
func (p *pending) fill() (done, failed bool) {
	for {
		need := p.need()
		if need < 0 {
			return false, true
		}
		if need == 0 {
			return true, false
		}
		b := make([]byte, need)
		n, err := unix.Read(p.fd, b)
		switch {
		case errors.Is(err, unix.EINTR):
			continue
		case errors.Is(err, unix.EAGAIN):
			return false, false
		case err != nil || n == 0:
			return false, true
		}
		p.buf = append(p.buf, b[:n]...)
	}
}

// Take accepts the connections pending now, at most max, and returns those
// whose intent (one frame of at most MaxIntent bytes) arrived whole within
// intentWait; the others are closed, not taken. A peer of another user is
// refused and not counted in max, but accepting ends after listenBacklog
// of them, or after intentWait, so that connections coming as fast as they
// are closed cannot keep the holder accepting; one that sends garbage or
// nothing costs the batch at most intentWait, and nothing else.
func (l *HandoverListener) Take(max int) []*HandoverConn {
	var waiting []*pending
	var out []*HandoverConn
	foreign := 0
	acceptUntil := time.Now().Add(intentWait)
	for len(waiting)+len(out) < max && foreign < listenBacklog && time.Now().Before(acceptUntil) {
		fd, ok := l.accept(&foreign)
		if !ok {
			break
		}
		if fd < 0 {
			continue
		}
		p := &pending{fd: fd}
		switch done, failed := p.fill(); {
		case done:
			out = append(out, p.conn())
		case failed:
			unix.Close(fd)
		default:
			waiting = append(waiting, p)
		}
	}
	deadline := time.Now().Add(intentWait)
	for len(waiting) > 0 {
		left := time.Until(deadline)
		if left <= 0 {
			break
		}
		fds := make([]unix.PollFd, len(waiting))
		for i, p := range waiting {
			fds[i] = unix.PollFd{Fd: int32(p.fd), Events: unix.POLLIN}
		}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			break
		}
		still := waiting[:0]
		for i, p := range waiting {
			if fds[i].Revents == 0 {
				still = append(still, p)
				continue
			}
			switch done, failed := p.fill(); {
			case done:
				out = append(out, p.conn())
			case failed:
				unix.Close(p.fd)
			default:
				still = append(still, p)
			}
		}
		waiting = still
	}
	for _, p := range waiting {
		unix.Close(p.fd)
	}
	return out
}

// conn is p, whose intent is whole, made blocking for the answers, with a
// bound on how long a write may block (a requester that does not read).
func (p *pending) conn() *HandoverConn {
	blocking(p.fd, answerTimeout)
	return &HandoverConn{fd: p.fd, Intent: p.buf[frameHeader:]}
}

// Close removes the socket file and closes the socket (again: nothing),
// still under the writer lock, so it never removes another holder's. The
// kernel resets every connection still pending, which tells its requester
// at once that nothing was taken.
func (l *HandoverListener) Close() {
	if l.fd >= 0 {
		os.Remove(l.path)
		closeOnce(&l.fd)
	}
}

// HandoverConn is one requester's connection, on the holder's side, with
// the intent it sent. A holder sends it at most two frames (Send) and
// closes it (Close); closing it before "taken" tells the requester that
// its intent was not taken.
type HandoverConn struct {
	fd     int
	Intent []byte
}

// Send sends one frame to the requester.
func (c *HandoverConn) Send(payload []byte) error { return writeAll(c.fd, frame(payload)) }

// Close ends the connection (again: nothing).
func (c *HandoverConn) Close() { closeOnce(&c.fd) }
