//go:build linux

package main

// A local user who cannot write the repository must not be able to stop
// its writers (FORMAT.md §8, §9 "Group commit"): not by taking the
// hand-over socket's name first, not by flooding it with connections, not
// by flocking writer.lock through a read-only descriptor.

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// attacks are the scripts another user runs against a repository whose
// writer lock is argv[1] and hand-over socket argv[2]; each prints one
// line once it is in place. The socket is attacked both where older
// versions named it (in Linux's abstract namespace, after the lock's
// device and inode: argv[3], "@" standing for its leading NUL) and where
// it is now.
var attacks = []struct{ name, script string }{
	{"squat the socket", `
import os, socket, sys
held = []
for name in ("\0" + sys.argv[3][1:], sys.argv[2]):
    try:
        s = socket.socket(socket.AF_UNIX)
        s.bind(name)
        s.listen(0)
        held.append(s)
        for _ in range(4):  # fill the backlog: a blocking connect waits
            c = socket.socket(socket.AF_UNIX)
            c.setblocking(False)
            c.connect(name)
            held.append(c)
    except OSError:
        pass
print("squatting %d" % len(held), flush=True)
sys.stdin.read()
`},
	{"flood the socket", `
import collections, socket, sys
print("flooding", flush=True)
open_ = collections.deque()
while True:
    for name in ("\0" + sys.argv[3][1:], sys.argv[2]):
        s = socket.socket(socket.AF_UNIX)
        s.setblocking(False)
        try:
            s.connect(name)
        except OSError:
            s.close()
            continue
        open_.append(s)
        if len(open_) > 512:
            open_.popleft().close()
`},
	{"flock the lock read-only", `
import fcntl, sys
try:
    f = open(sys.argv[1], "rb")
    fcntl.flock(f, fcntl.LOCK_EX)
    print("holding", flush=True)
except OSError as e:
    print("refused: %s" % e, flush=True)
sys.stdin.read()
`},
}

// TestLocalUserCannotStallWriters: for each attack, another user (nobody)
// attacks a repository it can read but not write, and 6 concurrent `tally
// claim --next` must each be granted a cell within writerBound, far below
// the 30 s a writer waits for the lock (and far above what they need).
func TestLocalUserCannotStallWriters(t *testing.T) {
	const writers, writerBound = 6, 20 * time.Second
	if os.Geteuid() != 0 {
		t.Skip("not root: cannot run a process as another user")
	}
	const python = "/usr/bin/python3"
	if _, err := exec.LookPath("setpriv"); err != nil {
		testrepo.Missing(t, "setpriv is not installed: cannot run a process as another user")
	}
	if _, err := os.Stat(python); err != nil {
		testrepo.Missing(t, python+" is not installed: no process of another user")
	}
	bin := testrepo.Tally(t)
	for _, a := range attacks {
		t.Run(a.name, func(t *testing.T) {
			r := newRepo(t)
			for _, d := range []string{filepath.Dir(r.dir), r.dir} { // readable by all, as a shared checkout is
				if err := os.Chmod(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			r.ok("setup", "init")
			var plan strings.Builder
			plan.WriteString("wave: w\ncells:\n")
			for i := range writers {
				fmt.Fprintf(&plan, "  - id: c%d\n", i)
			}
			r.ok("setup", "plan", r.file("w.yaml", plan.String()))
			gd := filepath.Join(r.dir, ".git")
			lock := filepath.Join(gd, "tally", "writer.lock")
			fi, err := os.Stat(lock)
			if err != nil {
				t.Fatal(err)
			}
			st := fi.Sys().(*syscall.Stat_t)
			abstract := fmt.Sprintf("@tally/writer.lock/v1/%x/%x", st.Dev, st.Ino) // "@": a NUL
			attacker := exec.Command("setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
				python, "-c", a.script, lock, testrepo.HandoverSocket(gd), abstract)
			stdin, _ := attacker.StdinPipe()
			out, _ := attacker.StdoutPipe()
			attacker.Stderr = os.Stderr
			if err := attacker.Start(); err != nil {
				t.Fatal(err)
			}
			defer func() { stdin.Close(); attacker.Process.Kill(); attacker.Wait() }()
			line, err := bufio.NewReader(out).ReadString('\n')
			if err != nil {
				t.Fatalf("the attacker: %q %v", line, err)
			}
			t.Logf("the attacker: %s", strings.TrimSpace(line))
			var wg sync.WaitGroup
			results := make([]string, writers)
			for i := range writers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					results[i] = claimWithin(bin, r.dir, fmt.Sprintf("w%d", i), writerBound)
				}()
			}
			wg.Wait()
			for i, res := range results {
				if res != "" {
					t.Errorf("writer %d: %s", i, res)
				}
			}
		})
	}
}

// claimWithin runs `tally claim --next` as actor, killed after bound, and
// says what went wrong ("" when it was granted a cell).
func claimWithin(bin, dir, actor string, bound time.Duration) string {
	ctx, cancel := context.WithTimeout(context.Background(), bound)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "-C", dir, "--json", "claim", "--next", "--wave", "w")
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	start := time.Now()
	b, err := cmd.Output()
	switch {
	case ctx.Err() != nil:
		return fmt.Sprintf("still running after %v", bound)
	case err != nil:
		return fmt.Sprintf("%v after %v: %s", err, time.Since(start).Round(time.Millisecond), b)
	case !strings.Contains(string(b), `"lease"`):
		return fmt.Sprintf("no lease: %s", b)
	}
	return ""
}
