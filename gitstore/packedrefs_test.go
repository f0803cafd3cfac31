package gitstore

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"testing"
)

// packed-refs lookups must agree with git for every ref, including tags with
// peeled lines, in a file git itself wrote.
func TestPackedRefsAgreeWithGit(t *testing.T) {
	dir := t.TempDir()
	git := func(args ...string) string {
		cmd := exec.Command("git", args...)
		cmd.Dir = dir
		cmd.Env = append(os.Environ(), "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
			"GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@t", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@t")
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, out)
		}
		return strings.TrimSpace(string(out))
	}
	git("init", "-q", "-b", "main")
	git("commit", "-q", "--allow-empty", "-m", "c")
	rng := rand.New(rand.NewPCG(7, 7))
	var script strings.Builder
	head := git("rev-parse", "HEAD")
	names := map[string]bool{}
	for i := 0; i < 3000; i++ {
		name := fmt.Sprintf("refs/heads/b/%x", rng.Uint32())
		if i%7 == 0 {
			name = fmt.Sprintf("refs/tags/t%d", rng.IntN(1e6))
		}
		names[name] = true
		fmt.Fprintf(&script, "create %s %s\n", name, head)
	}
	cmd := exec.Command("git", "update-ref", "--stdin")
	cmd.Dir, cmd.Stdin = dir, strings.NewReader(script.String())
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("update-ref: %v %s", err, out)
	}
	for i := 0; i < 20; i++ {
		git("tag", "-a", "-m", "annotated", fmt.Sprintf("ann%03d", i))
		names[fmt.Sprintf("refs/tags/ann%03d", i)] = true
	}
	git("pack-refs", "--all", "--prune")
	r, err := Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for _, line := range strings.Split(git("for-each-ref", "--format=%(objectname) %(refname)"), "\n") {
		id, name, _ := strings.Cut(line, " ")
		want[name] = id
	}
	all := []string{}
	for n := range names {
		all = append(all, n)
	}
	sort.Strings(all)
	for _, n := range all {
		got, err := r.ReadRef(n)
		if err != nil {
			b, _ := os.ReadFile(filepath.Join(dir, "packed-refs"))
			t.Fatalf("ReadRef(%s): %v\npacked-refs:\n%s", n, err, b)
		}
		if got.String() != want[n] {
			t.Fatalf("ReadRef(%s) = %s, git says %s", n, got, want[n])
		}
	}
	for _, missing := range []string{"refs/heads/a", "refs/heads/zzz", "refs/tags/ann0005", "refs/heads/b/", "refs/tally/ledger"} {
		if _, err := r.ReadRef(missing); err != ErrNoRef {
			t.Errorf("ReadRef(%s) = %v, want ErrNoRef", missing, err)
		}
	}
	// An unsorted file (no "sorted" trait) is scanned.
	raw, _ := os.ReadFile(filepath.Join(dir, "packed-refs"))
	lines := strings.Split(strings.TrimSpace(string(raw)), "\n")
	unsorted := "# pack-refs with: peeled\n" + strings.Join(reverseRefLines(lines[1:]), "\n") + "\n"
	os.WriteFile(filepath.Join(dir, "packed-refs"), []byte(unsorted), 0o644)
	for _, n := range all[:200] {
		if got, err := r.ReadRef(n); err != nil || got.String() != want[n] {
			t.Fatalf("unsorted ReadRef(%s) = %v, %v", n, got, err)
		}
	}
}

// reverseRefLines reverses ref lines, keeping each peeled line after its tag.
func reverseRefLines(lines []string) []string {
	var groups [][]string
	for _, l := range lines {
		if strings.HasPrefix(l, "^") {
			groups[len(groups)-1] = append(groups[len(groups)-1], l)
		} else {
			groups = append(groups, []string{l})
		}
	}
	var out []string
	for i := len(groups) - 1; i >= 0; i-- {
		out = append(out, groups[i]...)
	}
	return out
}

// A property test over synthetic sorted files with peeled lines in random
// places: every ref is found, absent names are not.
func TestPackedRefLineProperty(t *testing.T) {
	rng := rand.New(rand.NewPCG(9, 9))
	hexID := func() string { return fmt.Sprintf("%040x", rng.Uint64()) }
	for round := 0; round < 300; round++ {
		n := 1 + rng.IntN(60)
		set := map[string]bool{}
		for len(set) < n {
			set[fmt.Sprintf("refs/%c/%x", "abt"[rng.IntN(3)], rng.IntN(5000))] = true
		}
		var names []string
		for k := range set {
			names = append(names, k)
		}
		sort.Strings(names)
		var b strings.Builder
		b.WriteString("# pack-refs with: peeled fully-peeled sorted \n")
		want := map[string]string{}
		for _, name := range names {
			id := hexID()
			want[name] = id
			fmt.Fprintf(&b, "%s %s\n", id, name)
			if rng.IntN(3) == 0 {
				fmt.Fprintf(&b, "^%s\n", hexID())
			}
		}
		data := []byte(b.String())
		for name, id := range want {
			line, ok := packedRefLine(data, name)
			if !ok || string(line[:40]) != id {
				t.Fatalf("round %d: %s not found (got %q, %v) in\n%s", round, name, line, ok, data)
			}
			if _, ok := packedRefLine(data, name+"x"); ok {
				t.Fatalf("round %d: found absent %sx", round, name)
			}
		}
	}
}
