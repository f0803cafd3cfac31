package hooks

import (
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// emptyTree is git's empty tree: what a first commit's index is compared to.
const emptyTree = "4b825dc642cb6eb9a060e54bf8d69288fbee4904"

// StagedPaths lists the paths the commit being made changes itself, by the
// push hooks' rule for a merge (FORMAT.md §9a): the index (GIT_INDEX_FILE
// where git set one, as `git commit -a` does) against HEAD, or against the
// empty tree before the first commit; while a merge is being concluded
// (MERGE_HEAD), only the paths that differ from every parent, so merging in
// another actor's work on its own paths is not its change. A rename is its
// two paths. The plumbing diff-index prints paths from the top of the work
// tree whatever diff.relative says.
func StagedPaths(repo *gitstore.Repo) ([]string, error) {
	parents := []string{"HEAD"}
	if _, err := repo.Git("rev-parse", "--verify", "--quiet", "HEAD^{commit}"); err != nil {
		parents = []string{emptyTree}
	}
	if b, err := os.ReadFile(filepath.Join(repo.GitDir, "MERGE_HEAD")); err == nil {
		parents = append(parents, strings.Fields(string(b))...)
	}
	var own []string
	for i, parent := range parents {
		out, err := repo.Git("diff-index", "--cached", "--name-only", "--no-renames", "-z", parent)
		if err != nil {
			return nil, errs.Wrap(errs.Internal, err, "git diff-index")
		}
		changed := strings.FieldsFunc(string(out), func(r rune) bool { return r == 0 })
		if i == 0 {
			own = changed
			continue
		}
		differs := make(map[string]bool, len(changed))
		for _, p := range changed {
			differs[p] = true
		}
		own = slices.DeleteFunc(own, func(p string) bool { return !differs[p] })
	}
	return own, nil
}
