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
	strace := testrepo.Strace(t)
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("plan.yaml", "wave: w\ncells:\n  - id: a\n  - id: b\n"))
	r.ok("A", "claim", "w/a")
	r.commit("work", "f.txt")
	trace := filepath.Join(t.TempDir(), "trace")
	for _, args := range [][]string{{"claim", "--next"}, {"done", "w/a", "--epoch", "1"}, {"status"}} {
		cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", trace, "-e", "trace=openat,mmap,munmap",
			testrepo.Tally(t), "-C", r.dir, "--json"}, args...)...)
		cmd.Env = testrepo.Env("TALLY_ACTOR=A")
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("tally %v: %v %s", args, err, out)
		}
		b, err := os.ReadFile(trace)
		if err != nil {
			t.Fatal(err)
		}
		mapped, unmapped := packMunmaps(string(b))
		if mapped == 0 {
			t.Fatalf("tally %v mapped no pack: the trace does not show what it should\n%s", args, b)
		}
		if unmapped != 0 {
			t.Errorf("tally %v mapped %d pack and index files and unmapped %d before exit", args, mapped, unmapped)
		}
	}
}

var (
	straceOpen   = regexp.MustCompile(`^(\d+) +openat\(AT_FDCWD, "([^"]+)", [^)]*\) = (\d+)$`)
	straceMmap   = regexp.MustCompile(`^(\d+) +mmap\(NULL, \d+, PROT_READ, MAP_PRIVATE, (\d+), 0\) = (0x[0-9a-f]+)$`)
	straceMunmap = regexp.MustCompile(`^(\d+) +munmap\((0x[0-9a-f]+), \d+\)`)
)

// packMunmaps reads an strace -f log (openat, mmap, munmap) and
// returns how many pack and index files were mapped and how many of those
// mappings were unmapped. A call strace split in two (another thread ran
// in between) is joined first.
func packMunmaps(log string) (mapped, unmapped int) {
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
	fds := map[string]bool{}   // open descriptors of pack files
	addrs := map[string]bool{} // their mappings
	for _, l := range lines {
		if m := straceOpen.FindStringSubmatch(l); m != nil {
			fds[m[3]] = strings.Contains(m[2], "/objects/pack/pack-") && (strings.HasSuffix(m[2], ".pack") || strings.HasSuffix(m[2], ".idx"))
		} else if m := straceMmap.FindStringSubmatch(l); m != nil && fds[m[2]] {
			addrs[m[3]] = true
			mapped++
		} else if m := straceMunmap.FindStringSubmatch(l); m != nil && addrs[m[2]] {
			delete(addrs, m[2])
			unmapped++
		}
	}
	return mapped, unmapped
}
