package hooks

import "github.com/tally-dev/tally/gitstore"

// OwnChanges returns the paths commit cm itself changes, by the rule the
// hooks apply (FORMAT.md §9a): against its parent, and for a merge only the
// paths whose content differs from every parent. tally audit judges a range
// of commits by it, as a push of that range would be judged.
func OwnChanges(db *gitstore.ObjectDB, cm *gitstore.Commit) ([]string, error) {
	return ownChanges(db, cm)
}
