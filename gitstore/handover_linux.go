//go:build linux

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
// poller like the files of fileio.go: the fstat that names a holder's
// socket, then socket, bind, listen, one accept and close cost a lone
// writer six system calls, where a net.Listener would add the poller's
// epoll instance and registrations.

// handoverNameOf is the hand-over socket name of the lock file f.
func handoverNameOf(f *os.File) (string, error) {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return "", err
	}
	return HandoverName(st.Dev, st.Ino), nil
}

// sameUser checks that the peer of the connected socket fd runs as this
// process's effective user.
func sameUser(fd int) error {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return err
	}
	if int(cred.Uid) != os.Geteuid() {
		return errForeignPeer
	}
	return nil
}

// HolderConn is a requester's connection to the writer-lock holder.
type HolderConn struct{ fd int }

// DialHolder connects to the hand-over socket name (HandoverName) and
// checks that its listener runs as this user: ErrNoHolder when nobody
// listens there, or another user does (who could otherwise answer for
// entries that never landed).
func DialHolder(name string) (*HolderConn, error) {
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return nil, err
	}
	for {
		err = unix.Connect(fd, &unix.SockaddrUnix{Name: name})
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if err == nil {
		err = sameUser(fd)
	}
	if err != nil {
		unix.Close(fd)
		if errors.Is(err, unix.ECONNREFUSED) || errors.Is(err, unix.ENOENT) || errors.Is(err, unix.EAGAIN) || errors.Is(err, errForeignPeer) {
			return nil, ErrNoHolder
		}
		return nil, err
	}
	return &HolderConn{fd: fd}, nil
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
type HandoverListener struct{ fd int }

// Listen binds and listens on w's hand-over socket, or returns nil when
// it cannot: the name is bound already (a holder killed a moment ago,
// whose socket the kernel has not freed yet, or another user's process),
// or the system has no abstract sockets. Then requesters wait for the
// lock, as they would for a holder that does not serve.
func (w *WriterLock) Listen() *HandoverListener {
	name, err := handoverNameOf(w.f)
	if err != nil {
		return nil
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
	if err != nil {
		return nil
	}
	if unix.Bind(fd, &unix.SockaddrUnix{Name: name}) != nil || unix.Listen(fd, listenBacklog) != nil {
		unix.Close(fd)
		return nil
	}
	return &HandoverListener{fd: fd}
}

// accept accepts one pending connection (ok false when none is pending).
// A peer of another user is refused (closed) and skipped.
func (l *HandoverListener) accept() (fd int, ok bool) {
	for {
		fd, _, err := unix.Accept4(l.fd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		switch {
		case errors.Is(err, unix.EINTR), errors.Is(err, unix.ECONNABORTED):
			continue
		case err != nil:
			return -1, false
		}
		if sameUser(fd) != nil {
			unix.Close(fd)
			continue
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
// refused; one that sends garbage or nothing costs the batch at most
// intentWait, and nothing else.
func (l *HandoverListener) Take(max int) []*HandoverConn {
	var waiting []*pending
	var out []*HandoverConn
	for len(waiting)+len(out) < max {
		fd, ok := l.accept()
		if !ok {
			break
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
	unix.SetNonblock(p.fd, false)
	tv := unix.NsecToTimeval(answerTimeout.Nanoseconds())
	unix.SetsockoptTimeval(p.fd, unix.SOL_SOCKET, unix.SO_SNDTIMEO, &tv)
	return &HandoverConn{fd: p.fd, Intent: p.buf[frameHeader:]}
}

// Close closes the socket (again: nothing). The kernel resets every
// connection still pending, which tells its requester at once that
// nothing was taken.
func (l *HandoverListener) Close() { closeOnce(&l.fd) }

// Send sends one frame to the requester.
func (c *HandoverConn) Send(payload []byte) error { return writeAll(c.fd, frame(payload)) }

// Close ends the connection (again: nothing).
func (c *HandoverConn) Close() { closeOnce(&c.fd) }
