package ledger_test

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// An append killed (strace injects SIGKILL) at its second rename — the
// .idx's, once the pack, written into a spare (gitstore.Spares) and linked
// as its .keep, has been renamed to its final name and both files are
// synced — leaves a pack-<hex>.pack without .idx, its .keep and the .idx's
// temporary, and the ref where it was: git fsck --strict and verify --full accept the
// repository, the next append succeeds, and once the leftovers are old the
// next compaction (tally gc) removes all three.
func TestKilledBetweenPackAndIdx(t *testing.T) {
	t.Parallel()
	dir, packDir, before, left := killedAppend(t, "rename,renameat,renameat2", 2)
	var packs []string
	for _, name := range left {
		if base, ok := strings.CutSuffix(name, ".pack"); ok {
			packs = append(packs, name)
			if slices.Contains(left, base+".idx") {
				t.Errorf("the killed append published %s.idx", base)
			}
			if !slices.Contains(left, base+".keep") {
				t.Errorf("the killed append's %s has no .keep", name)
			}
		}
	}
	if len(packs) != 1 || len(left) != 3 {
		t.Fatalf("the killed append left %v in objects/pack; want its .pack under its final name, its .keep and the .idx's temporary", left)
	}
	checkKilledCleaned(t, dir, packDir, before, left)
}

// An append killed (strace injects SIGKILL) as it links its first spare as
// the ledger ref's lock, once it holds the writer lock, leaves the spares it
// made before the lock (gitstore.Spares: the pack's, the index's, the
// lock's) in objects/pack and nothing else: no pack, no .keep, the ref where
// it was. git fsck and verify --full accept the repository, the next append
// succeeds, and once the spares are old the next compaction removes them
// (the kernel dropped the killed writer's flocks on them).
func TestKilledHoldingSpares(t *testing.T) {
	t.Parallel()
	dir, packDir, before, left := killedAppend(t, "link,linkat", 1)
	if len(left) != 3 {
		t.Fatalf("the killed append left %v in objects/pack; want its three spares", left)
	}
	for _, name := range left {
		if !strings.HasPrefix(name, "tally-tmp-") {
			t.Errorf("the killed append left %s, not a temporary", name)
		}
	}
	checkKilledCleaned(t, dir, packDir, before, left)
}

// killedAppend runs `tally note killed` in a new ledger under strace,
// which kills it (SIGKILL) at the when-th of the system calls syscalls, and
// returns the repository, its pack directory, the tip before, and the
// names the killed append left in the pack directory.
func killedAppend(t *testing.T, syscalls string, when int) (dir, packDir, before string, left []string) {
	t.Helper()
	strace := testrepo.Strace(t)
	dir = initRepo(t)
	packDir = filepath.Join(gitDir(t, dir), "objects", "pack")
	before = tip(t, dir)
	listed := func() []string {
		ents, err := os.ReadDir(packDir)
		if err != nil {
			t.Fatal(err)
		}
		var names []string
		for _, e := range ents {
			names = append(names, e.Name())
		}
		return names
	}
	old := listed()
	cmd := exec.Command(strace, "-f", "-qq", "-o", "/dev/null", "-e", "trace="+syscalls,
		"-e", fmt.Sprintf("inject=%s:error=EIO:signal=KILL:when=%d", syscalls, when), testrepo.Tally(t), "-C", dir, "note", "killed")
	cmd.Env = testrepo.Env("TALLY_ACTOR=victim")
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if !errors.As(err, &ee) {
		t.Fatalf("the append was not killed: %v %s", err, out)
	}
	for _, name := range listed() {
		if !slices.Contains(old, name) {
			left = append(left, name)
		}
	}
	return dir, packDir, before, left
}

// checkKilledCleaned checks the repository a killed append left (see
// killedAppend): the ref at before, git fsck --strict and verify --full
// accept it, the next append succeeds, and once its leftovers left are
// old the next compaction (tally gc) removes every one of them.
func checkKilledCleaned(t *testing.T, dir, packDir, before string, left []string) {
	t.Helper()
	if got := tip(t, dir); got != before {
		t.Fatalf("the killed append moved the ref: %s, was %s", got, before)
	}
	fsck(t, dir)
	verifyOK(t, dir, true)

	r := testrepo.Run(t, dir, "next", nil, "--json", "note", "after")
	if r.Code != 0 || tip(t, dir) == before {
		t.Fatalf("the append after the kill: exit %d %s %s", r.Code, r.Stdout, r.Stderr)
	}

	aged := time.Now().Add(-time.Hour)
	for _, name := range left {
		if err := os.Chtimes(filepath.Join(packDir, name), aged, aged); err != nil {
			t.Fatal(err)
		}
	}
	r = testrepo.Run(t, dir, "gc", nil, "--json", "gc")
	if r.Code != 0 {
		t.Fatalf("tally gc: exit %d %s %s", r.Code, r.Stdout, r.Stderr)
	}
	if n, _ := r.JSON["stale"].(float64); int(n) != len(left) {
		t.Errorf("tally gc removed %v stale files, want %d", r.JSON["stale"], len(left))
	}
	for _, name := range left {
		if _, err := os.Lstat(filepath.Join(packDir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s left by the killed append remains after tally gc (%v)", name, err)
		}
	}
	fsck(t, dir)
	verifyOK(t, dir, true)
}

// The writer's record is rewritten in place on an append, not replaced by a
// new file: the same file names the new tip, padded to its fixed size, and
// a record of another length (an edited one) is cut to it.
func TestRecordRewrittenInPlace(t *testing.T) {
	t.Parallel()
	dir := initRepo(t)
	record := filepath.Join(gitDir(t, dir), "tally", "appended")
	testrepo.Run(t, dir, "a", nil, "note", "one")
	fi, err := os.Stat(record)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(record)
	if err := os.WriteFile(record, append(b, strings.Repeat(" ", 300)...), 0o644); err != nil {
		t.Fatal(err)
	}
	testrepo.Run(t, dir, "a", nil, "note", "two")
	fi2, err := os.Stat(record)
	if err != nil {
		t.Fatal(err)
	}
	if !os.SameFile(fi, fi2) {
		t.Error("the append replaced its record by a new file")
	}
	b2, _ := os.ReadFile(record)
	if tipNow := tip(t, dir); !strings.Contains(string(b2), `"commit":"`+tipNow+`"`) {
		t.Errorf("record %q does not name the tip %s", b2, tipNow)
	}
	if len(b2) != len(b) || !strings.HasSuffix(string(b2), " \n") {
		t.Errorf("record is %d bytes %q, want the %d of a padded record", len(b2), b2, len(b))
	}
}

// An append reads the pack directory once, when it opens the object database:
// whether a compaction is due after it is decided on that listing and the
// pack it added (ObjectDB.NeedsCompaction), not on a second read. Counted on
// a note that compacts nothing, and on one that finds 12 mergeable packs and
// compacts them, so the count is not bought by missing compactions.
func TestAppendListsPackDirOnce(t *testing.T) {
	t.Parallel()
	dir := initRepo(t)
	packDir := filepath.Join(gitDir(t, dir), "objects", "pack")
	packs := func() int {
		m, _ := filepath.Glob(filepath.Join(packDir, "*.pack"))
		return len(m)
	}
	// Directory reads of objects/pack by one traced note (opens with
	// O_DIRECTORY; the pack directory's fsync opens it without).
	listings := func(msg string) int {
		n := 0
		for _, line := range tracedNote(t, dir, msg, "-e", "trace=openat,open") {
			if strings.Contains(line, `"`+packDir+`"`) && strings.Contains(line, "O_DIRECTORY") {
				n++
			}
		}
		return n
	}
	if n := listings("first"); n != 1 {
		t.Errorf("a note that compacts nothing read the pack directory %d times, want 1", n)
	}
	for packs() < 11 {
		testrepo.Run(t, dir, "filler", nil, "note", "filler")
	}
	if packs() != 11 {
		t.Fatalf("%d packs before the compacting note, want 11", packs())
	}
	// The 12th pack makes the note compact: the merge lists the directory
	// itself (stale temporaries, then the candidates of each round).
	if n := listings("twelfth"); n < 2 {
		t.Errorf("the note that found 12 packs read the pack directory %d times: it cannot have compacted", n)
	}
	if n := packs(); n >= 12 {
		t.Errorf("%d packs after the 12th: the note did not compact", n)
	}
}

// tracedNote runs `tally note msg` in dir under strace with the options
// given and returns the lines strace wrote.
func tracedNote(t *testing.T, dir, msg string, options ...string) []string {
	t.Helper()
	log := filepath.Join(t.TempDir(), "trace")
	args := append([]string{"-f", "-qq", "-o", log}, options...)
	cmd := exec.Command(testrepo.Strace(t), append(args, testrepo.Tally(t), "-C", dir, "note", msg)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=traced")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tally note %s: %v %s", msg, err, out)
	}
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	return strings.Split(string(b), "\n")
}
