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
	// Rel is Abs relative to its work tree, '/'-separated: what the lease
	// rules judge. Empty when the path is not tally's to judge (Skipped).
	Rel     string `json:"rel,omitempty"`
	Skipped string `json:"skipped,omitempty"` // why it is not judged
}

// ResolveEditPaths resolves the paths a payload names (absolute, or
// relative to base; '\' read as a separator) for the repository whose
// common git directory is commonDir. A path in a work tree of that
// repository (any of its worktrees) gets Rel; a path in no work tree, in
// another repository, or inside a .git directory is Skipped.
func ResolveEditPaths(given []string, base, commonDir string) []EditTarget {
	common := realPath(commonDir)
	out := make([]EditTarget, 0, len(given))
	for _, g := range given {
		p := filepath.FromSlash(strings.ReplaceAll(g, `\`, "/"))
		if !filepath.IsAbs(p) {
			p = filepath.Join(base, p)
		}
		t := EditTarget{Given: g, Abs: resolveExisting(filepath.Clean(p))}
		dir := existingDir(t.Abs)
		wt, cd, ok := gitstore.WorkTreeOf(dir)
		switch {
		case !ok:
			t.Skipped = "outside every git work tree"
		case realPath(cd) != common:
			t.Skipped = "in another repository (" + wt + ")"
		default:
			rel, err := filepath.Rel(realPath(wt), t.Abs)
			rel = filepath.ToSlash(rel)
			switch {
			case err != nil || rel == ".." || strings.HasPrefix(rel, "../"):
				t.Skipped = "outside its work tree"
			case rel == "." || rel == ".git" || strings.HasPrefix(rel, ".git/"):
				t.Skipped = "the work tree's own git directory"
			default:
				t.Rel = rel
			}
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

// realPath is p with its symbolic links resolved, or p when that fails.
func realPath(p string) string {
	if r, err := filepath.EvalSymlinks(p); err == nil {
		return r
	}
	return filepath.Clean(p)
}
