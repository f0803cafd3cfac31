//go:build linux

package gitstore

import (
	"bufio"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"golang.org/x/sys/unix"
)

// asNobody starts the system's python3 (/usr/bin/python3: one installed
// under root's home would not run) with script as user and group 65534
// (nobody, another user than any that owns the test's files),
// with args, and returns its stdout; it skips the test when this process
// cannot switch users (not root) or lacks setpriv or that python3.
func asNobody(t *testing.T, script string, args ...string) (*exec.Cmd, *bufio.Reader) {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run a process as another user")
	}
	const python = "/usr/bin/python3"
	if _, err := exec.LookPath("setpriv"); err != nil {
		t.Skip("setpriv is not installed: cannot run a process as another user")
	}
	if _, err := os.Stat(python); err != nil {
		t.Skipf("%s is not installed: no client of another user", python)
	}
	cmd := exec.Command("setpriv", append([]string{"--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script}, args...)...)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stderr = os.Stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
	return cmd, bufio.NewReader(out)
}

// readLine is the next line of out, from a process of asNobody.
func readLine(t *testing.T, out *bufio.Reader) string {
	t.Helper()
	line, err := out.ReadString('\n')
	if err != nil {
		t.Fatalf("the other user's process: %q %v", line, err)
	}
	return strings.TrimSuffix(line, "\n")
}

// reachableDir is a fresh directory every user can reach (its parents
// searchable), with mode perm, as a repository's .git/tally is.
func reachableDir(t *testing.T, perm os.FileMode) string {
	t.Helper()
	dir := t.TempDir()
	for _, d := range []string{filepath.Dir(dir), dir} {
		if err := os.Chmod(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Chmod(dir, perm); err != nil {
		t.Fatal(err)
	}
	return dir
}

// heldLock takes a writer lock in dir (a fresh directory if "") and
// listens on its hand-over socket, whose path it returns.
func heldLock(t *testing.T, dir string) (*WriterLock, *HandoverListener, string) {
	t.Helper()
	if dir == "" {
		dir = t.TempDir()
	}
	paths := LocalPathsOf(dir)
	w, err := AcquireWriterLock(paths.WriterLock(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	ln := w.Listen(paths.WriterSocket())
	if ln == nil {
		t.Fatal("cannot listen on the hand-over socket")
	}
	t.Cleanup(ln.Close)
	return w, ln, paths.WriterSocket()
}

// dialSent connects to the holder at path and sends it intent.
func dialSent(t *testing.T, path, intent string) *HolderConn {
	t.Helper()
	c, err := DialHolder(path)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Send([]byte(intent)); err != nil {
		t.Fatal(err)
	}
	return c
}

// hasPeerCredentials reports whether this build reads a socket peer's uid
// (not a portable one: handover_peer_other.go).
func hasPeerCredentials() bool {
	_, err := peerUID(-1)
	return !errors.Is(err, errNoPeerCredentials)
}

// openToAll lets every user connect through the socket file at path, as a
// system that ignored a socket file's mode would: only the holder's check
// of the peer's uid refuses them then.
func openToAll(t *testing.T, path string) {
	t.Helper()
	if !hasPeerCredentials() {
		t.Skip("this build reads no peer credentials: the socket file's mode alone refuses another user")
	}
	if err := os.Chmod(path, 0o666); err != nil {
		t.Fatal(err)
	}
}

// requesterScript connects to the socket at argv[1] and sends an intent,
// then says whether it was answered: "refused" when it cannot connect.
const requesterScript = `
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
try:
    s.connect(sys.argv[1])
except OSError:
    print("refused", flush=True)
    sys.exit(0)
s.sendall(struct.pack(">I", 2) + b"{}")
print("sent", flush=True)
try:
    got = s.recv(64)
except ConnectionResetError:
    got = b""
print("eof" if got == b"" else "answered", flush=True)
`

// The holder never takes a requester of another user: the socket file
// (mode 0600) refuses its connection; and where the system still let it
// connect, the holder, reading its uid, closes it unanswered. The batch
// beside it is not disturbed.
func TestHandoverRefusesAnotherUsersRequester(t *testing.T) {
	for _, open := range []bool{false, true} {
		t.Run(map[bool]string{false: "socket as made", true: "socket open to all"}[open], func(t *testing.T) {
			_, ln, path := heldLock(t, reachableDir(t, 0o755))
			if open {
				openToAll(t, path)
			}
			_, out := asNobody(t, requesterScript, path)
			sent := readLine(t, out)
			if want := map[bool]string{false: "refused", true: "sent"}[open]; sent != want {
				t.Fatalf("the other user's requester: %q, want %q", sent, want)
			}
			ours := dialSent(t, path, "mine")
			conns := ln.Take(8)
			if len(conns) != 1 || string(conns[0].Intent) != "mine" {
				t.Fatalf("took %d intents, want only this user's", len(conns))
			}
			if err := conns[0].Send([]byte("answer")); err != nil {
				t.Fatal(err)
			}
			if b, err := ours.Receive(64); err != nil || string(b) != "answer" {
				t.Fatalf("this user's answer: %q %v", b, err)
			}
			if sent == "sent" {
				if line := readLine(t, out); line != "eof" {
					t.Fatalf("the other user's requester: %q, want its connection closed unanswered", line)
				}
			}
		})
	}
}

// A requester does not hand its intent to a listener of another user,
// who could answer for entries that never landed: a socket file bound by
// another user (here in a directory everyone may write, which a
// repository's is not) is no holder, and the requester waits for the lock.
func TestHandoverRefusesAnotherUsersHolder(t *testing.T) {
	path := LocalPathsOf(reachableDir(t, 0o777)).WriterSocket()
	_, out := asNobody(t, `
import os, socket, struct, sys
os.makedirs(os.path.dirname(sys.argv[1]), exist_ok=True)
s = socket.socket(socket.AF_UNIX)
s.bind(sys.argv[1])
os.chmod(sys.argv[1], 0o777)
s.listen(8)
print("listening", flush=True)
while True:
    c, _ = s.accept()
    try:
        c.sendall(struct.pack(">I", 11) + b'{"from":1}\n')
    except OSError:
        pass
`, path)
	if line := readLine(t, out); line != "listening" {
		t.Fatalf("the other user's holder: %q", line)
	}
	if c, err := DialHolder(path); !errors.Is(err, ErrNoHolder) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("dial another user's holder: %v, want ErrNoHolder", err)
	}
}

// within runs f and fails the test unless it returns within limit (a
// bound far above what it needs: it checks that f does not hang, not how
// fast it is).
func within(t *testing.T, limit time.Duration, what string, f func()) {
	t.Helper()
	done := make(chan struct{})
	go func() { defer close(done); f() }()
	select {
	case <-done:
	case <-time.After(limit):
		t.Fatalf("%s: still running after %v", what, limit)
	}
}

// A requester never waits for a listener that does not accept: with the
// listener's backlog full (a holder of this user that hangs, or a flood
// of connections), DialHolder finds no holder at once, and its writer
// waits for the lock, which has its own bound.
func TestHandoverDialDoesNotWaitForBacklog(t *testing.T) {
	path := filepath.Join(t.TempDir(), "writer.sock")
	ln, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(ln)
	if err := unix.Bind(ln, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := unix.Listen(ln, 1); err != nil {
		t.Fatal(err)
	}
	// Fill the backlog: connect without waiting until the listener refuses.
	filled := false
	for range 64 {
		fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC|unix.SOCK_NONBLOCK, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer unix.Close(fd)
		if err := unix.Connect(fd, &unix.SockaddrUnix{Name: path}); err != nil {
			if !errors.Is(err, unix.EAGAIN) {
				t.Fatalf("filling the backlog: %v", err)
			}
			filled = true
			break
		}
	}
	if !filled {
		t.Fatal("the listener's backlog never filled")
	}
	within(t, 10*time.Second, "dial a listener whose backlog is full", func() {
		if c, err := DialHolder(path); !errors.Is(err, ErrNoHolder) {
			if err == nil {
				c.Close()
			}
			t.Errorf("dial a listener whose backlog is full: %v, want ErrNoHolder", err)
		}
	})
}

// Connections of another user, made and closed as fast as it can, cost
// the holder a bounded accept loop: Take ends and takes this user's
// intent beside them.
func TestHandoverTakeBoundedUnderFlood(t *testing.T) {
	_, ln, path := heldLock(t, reachableDir(t, 0o755))
	openToAll(t, path)
	_, out := asNobody(t, `
import socket, sys
print("flooding", flush=True)
while True:
    s = socket.socket(socket.AF_UNIX)
    try:
        s.connect(sys.argv[1])
    except OSError:
        pass
    s.close()
`, path)
	if line := readLine(t, out); line != "flooding" {
		t.Fatalf("the flood: %q", line)
	}
	// The flood may hold the backlog full at the moment this user dials:
	// that dial is then "no holder" (the writer waits for the lock, as
	// TestHandoverDialFullBacklog shows), and Take must still end.
	mine := 0
	if c, err := DialHolder(path); err == nil {
		t.Cleanup(c.Close)
		if err := c.Send([]byte("mine")); err != nil {
			t.Fatal(err)
		}
		mine = 1
	} else if !errors.Is(err, ErrNoHolder) {
		t.Fatal(err)
	}
	var conns []*HandoverConn
	within(t, 10*time.Second, "Take under a flood of another user's connections", func() {
		conns = ln.Take(8)
	})
	if len(conns) > mine || (len(conns) == 1 && string(conns[0].Intent) != "mine") {
		t.Fatalf("took %d intents under the flood (%d sent)", len(conns), mine)
	}
}

// Garbage on the socket costs a batch nothing but the wait for an intent
// that never comes whole: a frame longer than MaxIntent, a connection that
// sends nothing and one that sends half a frame are closed untaken, and
// the intents beside them are taken (one whose requester hung up after
// sending it too: its holder learns that when it says "taken").
func TestHandoverTakesOnlyWholeIntents(t *testing.T) {
	_, ln, path := heldLock(t, "")
	dial := func() *HolderConn {
		c, err := DialHolder(path)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	dialSent(t, path, "first")
	huge := dial()
	writeAll(huge.fd, []byte{0x7f, 0xff, 0xff, 0xff})
	dial() // sends nothing
	half := dial()
	writeAll(half.fd, frame([]byte("cut short"))[:7])
	dialSent(t, path, "gone").Close()
	dialSent(t, path, "last")
	start := time.Now()
	var got []string
	for _, c := range ln.Take(16) {
		got = append(got, string(c.Intent))
		c.Close()
	}
	if strings.Join(got, ",") != "first,gone,last" {
		t.Fatalf("took %q", got)
	}
	if d := time.Since(start); d > 10*intentWait {
		t.Fatalf("Take took %v for intents that never come whole", d)
	}
	for _, c := range []*HolderConn{huge, half} {
		if _, err := c.Receive(64); err == nil {
			t.Fatal("a garbage connection got an answer")
		}
	}
}

// A holder that stops serving closes its socket and removes its file: a
// requester whose connection was still pending hears at once that its
// intent was not taken (the end of the connection before any frame), and
// waits for the lock instead of for an answer; a later one finds nobody.
func TestHandoverCloseEndsPending(t *testing.T) {
	_, ln, path := heldLock(t, "")
	c := dialSent(t, path, "intent")
	ln.Close()
	if _, err := c.Receive(64); !errors.Is(err, io.EOF) {
		t.Fatalf("a pending requester after the holder closed: %v, want io.EOF", err)
	}
	if _, err := os.Lstat(path); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("the socket file after the holder closed: %v", err)
	}
	if _, err := DialHolder(path); !errors.Is(err, ErrNoHolder) {
		t.Fatalf("dial after the holder closed: %v, want ErrNoHolder", err)
	}
}

// The socket file of a holder that was killed stays behind: a requester
// finds nobody there, and the next holder binds in its place.
func TestHandoverReplacesKilledHoldersSocket(t *testing.T) {
	dir := t.TempDir()
	path := LocalPathsOf(dir).WriterSocket()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	fd, err := unix.Socket(unix.AF_UNIX, unix.SOCK_STREAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := unix.Bind(fd, &unix.SockaddrUnix{Name: path}); err != nil {
		t.Fatal(err)
	}
	unix.Chmod(path, 0o600)
	unix.Listen(fd, 1)
	unix.Close(fd) // the holder dies: its file stays
	if _, err := DialHolder(path); !errors.Is(err, ErrNoHolder) {
		t.Fatalf("dial a dead holder's socket: %v, want ErrNoHolder", err)
	}
	_, ln, _ := heldLock(t, dir)
	dialSent(t, path, "after")
	if conns := ln.Take(8); len(conns) != 1 || string(conns[0].Intent) != "after" {
		t.Fatalf("the next holder took %d intents", len(conns))
	}
}

// A socket path too long for a socket address (104 bytes on macOS and the
// BSDs) means no hand-over: the holder does not listen, and a requester
// finds nobody and waits for the lock.
func TestHandoverPathTooLong(t *testing.T) {
	dir := filepath.Join(t.TempDir(), strings.Repeat("d", 120))
	paths := LocalPathsOf(dir)
	w, err := AcquireWriterLock(paths.WriterLock(), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	if ln := w.Listen(paths.WriterSocket()); ln != nil {
		ln.Close()
		t.Fatalf("listening on %d bytes of path", len(paths.WriterSocket()))
	}
	if _, err := DialHolder(paths.WriterSocket()); !errors.Is(err, ErrNoHolder) {
		t.Fatalf("dial a path too long: %v, want ErrNoHolder", err)
	}
}
