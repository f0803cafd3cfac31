package hooks

import (
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// emptyTree is git's empty tree: what a first commit's index is compared to.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// StagedPaths lists the paths the commit being made changes: the index
// (GIT_INDEX_FILE where git set one, as `git commit -a` does) against HEAD,
// or against the empty tree before the first commit. A rename is its two
// paths. The plumbing diff-index prints paths from the top of the work tree
// whatever diff.relative says.
func StagedPaths(repo *gitstore.Repo) ([]string, error) {
	base := "HEAD"
	if _, err := repo.Git("rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
		base = emptyTree
	}
	out, err := repo.Git("diff-index", "--cached", "--name-only", "--no-renames", "-z", base)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "git diff-index")
	}
	var paths []string
	for p := range strings.SplitSeq(string(out), "\x00") {
		if p != "" {
			paths = append(paths, p)
		}
	}
	return paths, nil
}
