package hooks

import (
	"os"
	"path/filepath"
	"strings"

	"github.com/tally-dev/tally/gitstore"
)

// EditTarget is one path an agent is about to write, as the guard judges it
// (FORMAT.md §9c, "Paths").
type EditTarget struct {
	Given string `json:"given"` // as the payload named it
	// Abs is the path made absolute and clean, with the symbolic links of
	// its deepest existing ancestor resolved.
	Abs string `json:"abs"`
	// WorkTree and CommonDir are the work tree the path lies in and its
	// repository's common git directory (links resolved), Rel the path
	// relative to WorkTree, '/'-separated: what the lease rules judge. All
	// empty when the path is not tally's to judge (Skipped says why).
	WorkTree  string `json:"work_tree,omitempty"`
	CommonDir string `json:"common_dir,omitempty"`
	Rel       string `json:"rel,omitempty"`
	Skipped   string `json:"skipped,omitempty"`
}

// ResolveEditPaths resolves the paths a payload names (absolute, or
// relative to base; '\' read as a separator) to the work tree each lies in
// (any worktree of any repository). A path in no work tree, or inside a
// .git directory, is Skipped.
func ResolveEditPaths(given []string, base string) []EditTarget {
	out := make([]EditTarget, 0, len(given))
	for _, g := range given {
		p := filepath.FromSlash(strings.ReplaceAll(g, `\`, "/"))
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		t := EditTarget{Given: g, Abs: resolveExisting(filepath.Clean(p))}
		wt, cd, ok := gitstore.WorkTreeOf(existingDir(t.Abs))
		if !ok {
			t.Skipped = "outside every git work tree"
			out = append(out, t)
			continue
		}
		wt = RealPath(wt)
		rel, err := filepath.Rel(wt, t.Abs)
		rel = filepath.ToSlash(rel)
		switch {
		case err != nil || rel == ".." || strings.HasPrefix(rel, "../"):
			t.Skipped = "outside its work tree"
		case rel == "." || rel == ".git" || strings.HasPrefix(rel, ".git/"):
			t.Skipped = "the work tree's own git directory"
		default:
			t.WorkTree, t.CommonDir, t.Rel = wt, RealPath(cd), rel
		}
		out = append(out, t)
	}
	return out
}

// resolveExisting resolves the symbolic links of p's deepest existing
// ancestor (p itself when it exists) and appends the rest, so a link into
// or out of a work tree is judged by where the write lands. A dangling link
// on the way is followed to where it points (writing through it creates its
// target), up to 40 links as the kernel allows.
func resolveExisting(p string) string {
	for range 40 {
		next, again := resolveStep(p)
		if !again {
			return next
		}
		p = next
	}
	return p
}

// resolveStep resolves p's deepest resolvable ancestor; again reports a
// dangling link followed, whose target must be resolved in turn.
func resolveStep(p string) (resolved string, again bool) {
	rest := ""
	for d := p; ; d = filepath.Dir(d) {
		if r, err := filepath.EvalSymlinks(d); err == nil {
			return filepath.Join(r, rest), false
		}
		if fi, err := os.Lstat(d); err == nil && fi.Mode()&os.ModeSymlink != 0 {
			if target, err := os.Readlink(d); err == nil {
				if !filepath.IsAbs(target) {
					target = filepath.Join(filepath.Dir(d), target)
				}
				return filepath.Join(target, rest), true
			}
		}
		if filepath.Dir(d) == d {
			return p, false
		}
		rest = filepath.Join(filepath.Base(d), rest)
	}
}

// existingDir is p if it is a directory, else its deepest existing
// directory ancestor.
func existingDir(p string) string {
	for d := p; ; d = filepath.Dir(d) {
		if fi, err := os.Stat(d); err == nil && fi.IsDir() || filepath.Dir(d) == d {
			return d
		}
	}
}

// RealPath is p with its symbolic links resolved, or p cleaned when that
// fails: how the guard compares repositories' directories.
func RealPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
