package main

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// Every time tally writes into a commit lies in the range git's fsck
// accepts (FORMAT.md §2): a ledger written at the first and the last
// instant an entry can carry, with a receipt note, is accepted by a bare
// repository with receive.fsckObjects, and passes git fsck --strict.
// TALLY_NOW a millisecond before the range, whose commit time would be
// negative (badDateOverflow), is refused before anything is written.
func TestPushFirstAndLastTimeToFsckServer(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.now = "1969-12-31T23:59:59.999Z"
	if e := r.refuse(2, "USAGE", "A", "init"); e["limit"] != "1970-01-01T00:00:00.000Z" {
		t.Fatalf("TALLY_NOW before 1970: limit %v, want the first instant", e["limit"])
	}
	r.now = "1970-01-01T00:00:00.000Z"
	r.ok("A", "init")
	r.ok("A", "plan", r.file("w.json", `{"wave":"w","cells":[{"id":"a"}]}`))
	r.ok("A", "claim", "w/a")
	r.commit("work", "a.txt")
	r.ok("A", "done", "w/a", "--epoch", "1")
	r.now = "9999-12-31T23:59:59.999Z"
	r.ok("A", "note", "the last instant")
	if got := r.git("log", "--format=%at %ct", "refs/tally/ledger"); !strings.HasPrefix(got, "253402300799 253402300799\n") ||
		!strings.HasSuffix(got, "\n0 0") {
		t.Fatalf("ledger commit times, newest first:\n%s", got)
	}

	bare := filepath.Join(t.TempDir(), "strict.git")
	testrepo.Git(t, filepath.Dir(bare), "init", "-q", "--bare", bare)
	testrepo.Git(t, bare, "config", "receive.fsckObjects", "true")
	testrepo.Git(t, bare, "config", "transfer.fsckObjects", "true")
	push := exec.Command("git", "push", "--porcelain", bare, "refs/tally/*:refs/tally/*", "refs/notes/tally:refs/notes/tally")
	push.Dir, push.Env = r.dir, testrepo.Env()
	if out, err := push.CombinedOutput(); err != nil {
		t.Fatalf("a server with receive.fsckObjects refused the ledger: %v\n%s", err, out)
	}
	if got, want := testrepo.Git(t, bare, "rev-parse", "refs/tally/ledger"), r.tip(); got != want {
		t.Fatalf("server ledger %s, want %s", got, want)
	}
	fsck := exec.Command("git", "fsck", "--strict", "--no-progress", "--no-dangling")
	fsck.Dir, fsck.Env = bare, testrepo.Env()
	out, err := fsck.CombinedOutput()
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if err != nil || line != "" && !strings.HasPrefix(line, "notice: ") { // notice: HEAD is unborn
			t.Fatalf("git fsck --strict on the server: %v\n%s", err, out)
		}
	}
}
