package refname

import (
	"os/exec"
	"strings"
	"testing"
)

// Valid accepts a full ref name exactly when git check-ref-format does
// (tally also requires the refs/ prefix, which every name here has).
func TestValidAgreesWithGit(t *testing.T) {
	names := []string{
		"refs/heads/main", "refs/tally/ledger", "refs/tally/checkpoints/x-1", "refs/heads/ü", "refs/heads/a.b",
		"refs/heads/a\tb", "refs/heads/a\x01", "refs/heads/a\x7f", "refs/heads/.x", "refs/heads/x.lock",
		"refs/heads/a..b", "refs/heads/a b", "refs/heads/a@{1}", "refs//x", "refs/heads/x/", "refs/heads/a~1",
		"refs/heads/a^", "refs/heads/a:b", "refs/heads/a?", "refs/heads/a*", "refs/heads/a[", `refs/heads/a\b`,
		"refs/heads/x/.", "refs/heads/x/..", "refs/heads/@", "refs/heads/a.lock/b",
	}
	for _, name := range names {
		git := exec.Command("git", "check-ref-format", name).Run() == nil
		if got := Valid(name); got != git {
			t.Errorf("Valid(%q) = %v, git check-ref-format says %v", strings.ToValidUTF8(name, "?"), got, git)
		}
	}
}
