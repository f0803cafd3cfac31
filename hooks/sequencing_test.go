package hooks

import (
	"os/exec"
	"strings"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// TestSequencingAsGit: for every value of receive.procReceiveRefs below,
// alone and beside a routing one, the server's in-process rule (sequencing)
// answers what the pre-receive shim's `git config --get-regexp` query does:
// routed when git prints a value and none with a "!". The two read one
// pattern in two regexp dialects (RE2 and git's POSIX ERE), so this is
// where a construct they read differently would show.
func TestSequencingAsGit(t *testing.T) {
	values := []string{
		"refs/for/tally", "refs/for/tally/", "refs/for/tally///", "refs/for", "refs/for/", "refs", "refs/",
		"a:refs/for/tally", "ad:refs/for", "da:refs", "d:refs/for/tally", "x:refs/for/tally", ":refs/for/tally",
		"a:refs/for/tal", "refs/for/tallyx", "refs/for/tally/claim", "refs/heads", "refs/for/tally refs/heads",
		"x\nrefs/for/tally", "refs/for/tally\n", "a:b:refs/for/tally", "a:refs/for/tally:", "!refs/for/tally",
		"a!:refs/for/tally", "!a:refs/heads", "ref.s/for/tally", "REFS/FOR/TALLY", "refs//for/tally", "",
	}
	shimAnswer := func(dir string) bool {
		out, err := exec.Command("git", "-C", dir, "config", "--get-regexp",
			"^"+strings.ReplaceAll(procReceiveKey, ".", `\.`)+"$", routedValues).Output()
		if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 {
			return false // no value matches
		} else if err != nil {
			t.Fatalf("git config --get-regexp: %v", err)
		}
		return len(out) > 0 && !strings.Contains(string(out), "!")
	}
	for _, beside := range []string{"", "refs/for/tally"} {
		for _, v := range values {
			dir := testrepo.New(t)
			for _, val := range []string{v, beside} {
				if val != "" || v == "" {
					testrepo.Git(t, dir, "config", "--add", ProcReceiveConfig, val)
				}
			}
			repo, err := gitstore.Open(dir)
			if err != nil {
				t.Fatal(err)
			}
			if got, want := sequencing(repo), shimAnswer(dir); got != want {
				t.Errorf("receive.procReceiveRefs %q (beside %q): sequencing says %v, the shim's query %v", v, beside, got, want)
			}
		}
	}
}
