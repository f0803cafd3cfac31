package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// A command leaves its packs mapped for exit to drop: no munmap of a pack
// or index it mapped (each one a TLB flush across the process's threads;
// Close did two per pack). Counted from strace: the mappings of the file
// descriptors opened on objects/pack/*.pack and *.idx, and the munmaps of
// those addresses.
func TestExitUnmapsNoPack(t *testing.T) {
	testrepo.Strace(t)
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.yaml", "wave: w\ncells:\n  - id: a\n  - id: b\n"))
	r.ok("A", "claim", "w/a")
	r.commit("work", "f.txt")
	for _, args := range [][]string{{"claim", "--next"}, {"done", "w/a", "--epoch", "1"}, {"status"}} {
		log := straceTally(t, r, "openat,mmap,munmap", args...)
		mapped, unmapped := packMunmaps(log)
		if mapped == 0 {
			t.Fatalf("tally %v mapped no pack: the trace does not show what it should\n%s", args, log)
		}
		if unmapped != 0 {
			t.Errorf("tally %v mapped %d pack and index files and unmapped %d before exit", args, mapped, unmapped)
		}
	}
}

var (
	// A call strace resumed pads the space before " = " (joined by
	// packMunmaps): " +" where strace writes one space or many.
	straceOpen   = regexp.MustCompile(`^(\d+) +openat\(AT_FDCWD, "([^"]+)", [^)]*\) += (\d+)$`)
	straceMmap   = regexp.MustCompile(`^(\d+) +mmap\(NULL, \d+, PROT_READ, MAP_PRIVATE, (\d+), 0\) += (0x[0-9a-f]+)$`)
	straceMunmap = regexp.MustCompile(`^(\d+) +munmap\((0x[0-9a-f]+), \d+\)`)
)

// packMunmaps reads an strace -f log (openat, mmap, munmap) and
// returns how many pack and index files were mapped and how many of those
// mappings were unmapped. A call strace split in two (another thread ran
// in between) is joined first.
func packMunmaps(log string) (mapped, unmapped int) {
	lines := straceJoin(log)
	fds := map[string]bool{}   // open descriptors of pack files, by pid and descriptor
	addrs := map[string]bool{} // their mappings, by pid and address
	for _, l := range lines {
		if m := straceOpen.FindStringSubmatch(l); m != nil {
			fds[m[1]+" "+m[3]] = strings.Contains(m[2], "/objects/pack/pack-") && (strings.HasSuffix(m[2], ".pack") || strings.HasSuffix(m[2], ".idx"))
		} else if m := straceMmap.FindStringSubmatch(l); m != nil && fds[m[1]+" "+m[2]] {
			addrs[m[1]+" "+m[3]] = true
			mapped++
		} else if m := straceMunmap.FindStringSubmatch(l); m != nil && addrs[m[1]+" "+m[2]] {
			delete(addrs, m[1]+" "+m[2])
			unmapped++
		}
	}
	return mapped, unmapped
}

// straceTally runs tally with args as actor A in r, with --json, under
// strace -f tracing calls (a list for -e trace=), and returns strace's log.
func straceTally(t *testing.T, r *repo, calls string, args ...string) string {
	t.Helper()
	trace := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(testrepo.Strace(t), append([]string{"-f", "-qq", "-o", trace, "-e", "trace=" + calls,
		testrepo.Tally(t), "-C", r.dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=A")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tally %v: %v %s", args, err, out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// straceJoin returns the lines of an strace -f log, each call whole: a
// call strace split in two ("<unfinished ...>", then "<... resumed>", when
// another thread ran in between) is joined into one line.
func straceJoin(log string) []string {
	pending := map[string]string{} // pid -> the call's first half
	var lines []string
	for _, l := range strings.Split(log, "\n") {
		f := strings.Fields(l)
		if len(f) < 2 {
			continue
		}
		if before, ok := strings.CutSuffix(l, " <unfinished ...>"); ok {
			pending[f[0]] = before
			continue
		}
		if f[1] == "<..." {
			_, rest, _ := strings.Cut(l, " resumed>")
			l = pending[f[0]] + rest
			delete(pending, f[0])
		}
		lines = append(lines, l)
	}
	return lines
}

// TestPackMunmapsReadsStrace: the parser of TestExitUnmapsNoPack's traces.
// A descriptor reused for a loose object, whose openat strace resumed (and
// padded before " = "), no longer names a pack, in that process only; a
// pack's mapping unmapped is counted, an address of another process is not.
func TestPackMunmapsReadsStrace(t *testing.T) {
	log := `20958 openat(AT_FDCWD, ".git/objects/pack/pack-fd.idx", O_RDONLY|O_CLOEXEC) = 3
20958 mmap(NULL, 1436, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7f561e1c8000
20958 openat(AT_FDCWD, ".git/objects/7f/8c3f", O_RDONLY|O_CLOEXEC <unfinished ...>
20955 --- SIGURG {si_signo=SIGURG, si_code=SI_TKILL, si_pid=20951, si_uid=0} ---
20958 <... openat resumed>)             = 3
20958 mmap(NULL, 147, PROT_READ, MAP_PRIVATE, 3, 0) = 0x7f561e1c7000
20958 munmap(0x7f561e1c7000, 147)       = 0
20955 openat(AT_FDCWD, "/r/.git/objects/pack/pack-ab.pack", O_RDONLY|O_CLOEXEC) = 8
20955 mmap(NULL, 1719, PROT_READ, MAP_PRIVATE, 8, 0 <unfinished ...>
20958 munmap(0x7effd87e8000, 1719)      = 0
20955 <... mmap resumed>)               = 0x7effd87e8000
20955 munmap(0x7f561e1c8000, 1436)      = 0
`
	if mapped, unmapped := packMunmaps(log); mapped != 2 || unmapped != 0 {
		t.Errorf("mapped %d, unmapped %d; want 2 and 0", mapped, unmapped)
	}
	if mapped, unmapped := packMunmaps(log + "20955 munmap(0x7effd87e8000, 1719) = 0\n"); mapped != 2 || unmapped != 1 {
		t.Errorf("with the pack unmapped: mapped %d, unmapped %d; want 2 and 1", mapped, unmapped)
	}
}
