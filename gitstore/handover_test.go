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
)

// asNobody starts the system's python3 (/usr/bin/python3: one installed
// under root's home would not run) with script as user and group 65534
// (nobody), with the socket name as its argument, and returns its stdout;
// it skips the test when this process cannot switch users (not root) or
// lacks setpriv or that python3.
func asNobody(t *testing.T, script, name string) (*exec.Cmd, *bufio.Reader) {
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
	cmd := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", python, "-c", script, name)
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

// heldLock takes a writer lock in a fresh directory and listens on its
// hand-over socket.
func heldLock(t *testing.T) (*WriterLock, *HandoverListener, string) {
	t.Helper()
	w, err := AcquireWriterLock(filepath.Join(t.TempDir(), "writer.lock"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(w.Release)
	name, err := handoverNameOf(w.f)
	if err != nil {
		t.Fatal(err)
	}
	ln := w.Listen()
	if ln == nil {
		t.Fatal("cannot listen on the hand-over socket")
	}
	t.Cleanup(ln.Close)
	return w, ln, name
}

// dialSent connects to the holder at name and sends it intent.
func dialSent(t *testing.T, name, intent string) *HolderConn {
	t.Helper()
	c, err := DialHolder(name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.Close)
	if err := c.Send([]byte(intent)); err != nil {
		t.Fatal(err)
	}
	return c
}

// The holder refuses a requester of another user (SO_PEERCRED): its
// intent is not taken, its connection is closed unanswered, and the
// batch beside it is not disturbed.
func TestHandoverRefusesAnotherUsersRequester(t *testing.T) {
	_, ln, name := heldLock(t)
	_, out := asNobody(t, `
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.connect("\0" + sys.argv[1][1:])
s.sendall(struct.pack(">I", 2) + b"{}")
print("sent", flush=True)
try:
    got = s.recv(64)
except ConnectionResetError:
    got = b""
print("eof" if got == b"" else "answered", flush=True)
`, name)
	if line, _ := out.ReadString('\n'); line != "sent\n" {
		t.Fatalf("the other user's requester: %q", line)
	}
	ours := dialSent(t, name, "mine")
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
	if line, _ := out.ReadString('\n'); line != "eof\n" {
		t.Fatalf("the other user's requester: %q, want its connection closed unanswered", line)
	}
}

// A requester does not hand its intent to a listener of another user,
// who could answer for entries that never landed: the name is taken, but
// nobody of this user holds it, so the requester waits for the lock.
func TestHandoverRefusesAnotherUsersHolder(t *testing.T) {
	name := HandoverName(1, uint64(time.Now().UnixNano()))
	_, out := asNobody(t, `
import socket, struct, sys
s = socket.socket(socket.AF_UNIX)
s.bind("\0" + sys.argv[1][1:])
s.listen(8)
print("listening", flush=True)
c, _ = s.accept()
try:
    c.sendall(struct.pack(">I", 11) + b'{"from":1}\n')
    c.recv(64)
except ConnectionResetError:
    pass
`, name)
	if line, _ := out.ReadString('\n'); line != "listening\n" {
		t.Fatalf("the other user's holder: %q", line)
	}
	if c, err := DialHolder(name); !errors.Is(err, ErrNoHolder) {
		if err == nil {
			c.Close()
		}
		t.Fatalf("dial another user's holder: %v, want ErrNoHolder", err)
	}
}

// Garbage on the socket costs a batch nothing but the wait for an intent
// that never comes whole: a frame longer than MaxIntent, a connection that
// sends nothing and one that sends half a frame are closed untaken, and
// the intents beside them are taken (one whose requester hung up after
// sending it too: its holder learns that when it says "taken").
func TestHandoverTakesOnlyWholeIntents(t *testing.T) {
	_, ln, name := heldLock(t)
	dial := func() *HolderConn {
		c, err := DialHolder(name)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.Close)
		return c
	}
	dialSent(t, name, "first")
	huge := dial()
	writeAll(huge.fd, []byte{0x7f, 0xff, 0xff, 0xff})
	dial() // sends nothing
	half := dial()
	writeAll(half.fd, frame([]byte("cut short"))[:7])
	dialSent(t, name, "gone").Close()
	dialSent(t, name, "last")
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

// A holder that stops serving closes its socket: a requester whose
// connection was still pending hears at once that its intent was not
// taken (the end of the connection before any frame), and waits for the
// lock instead of for an answer.
func TestHandoverCloseEndsPending(t *testing.T) {
	_, ln, name := heldLock(t)
	c := dialSent(t, name, "intent")
	ln.Close()
	if _, err := c.Receive(64); !errors.Is(err, io.EOF) {
		t.Fatalf("a pending requester after the holder closed: %v, want io.EOF", err)
	}
	if _, err := DialHolder(name); !errors.Is(err, ErrNoHolder) {
		t.Fatalf("dial after the holder closed: %v, want ErrNoHolder", err)
	}
}
