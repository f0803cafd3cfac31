package hooks

import (
	"os"
	"path/filepath"
	"strings"
	"unicode"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// EditTarget is one path an agent is about to write, as the guard judges it
// (FORMAT.md §9c, "Paths").
type EditTarget struct {
	Given string `json:"given"` // as the payload named it
	// Abs is where a write to the path lands: made absolute and resolved
	// component by component as the kernel does, following every symbolic
	// link on the way (a dangling one to where it points).
	Abs string `json:"abs"`
	// Trees are the work trees Abs lies in, innermost first: a repository
	// nested in another's work tree (a submodule, or a .git an agent made)
	// is judged by both. Empty when the path is in no work tree.
	Trees []TreePath `json:"trees"`
}

// TreePath is a path as one work tree sees it: the work tree and its
// repository's common git directory (links resolved), and the path
// relative to the work tree, '/'-separated: what the lease rules judge.
type TreePath struct {
	WorkTree  string `json:"work_tree"`
	CommonDir string `json:"common_dir"`
	Rel       string `json:"rel"`
}

// maxLinks is how many symbolic links one path may pass through, as Linux
// allows (ELOOP beyond).
const maxLinks = 40

// ResolveEditPaths resolves the paths a payload names (absolute, or
// relative to base, an absolute directory; '\' read as a separator) to the
// work trees each lies in (any worktree of any repository). It refuses,
// as a USAGE error, a path the guard cannot place: one holding a NUL, a
// Windows drive or UNC path where the system has none, one through a loop
// of links; and, as NOT-SUPPORTED, a write into a git directory or of a
// .git entry (hooks, config, the ledger: an agent's edit tools have no
// business there), to an existing directory (what lies under it is not
// judged), or to a file with several names (hard links), any of which may
// be held.
func ResolveEditPaths(given []string, base string) ([]EditTarget, error) {
	out := make([]EditTarget, 0, len(given))
	for _, g := range given {
		if strings.IndexByte(g, 0) >= 0 {
			return nil, errs.New(errs.Usage, "the path %q holds a NUL byte", g)
		}
		p := filepath.FromSlash(strings.ReplaceAll(g, `\`, "/"))
		if windowsRooted(g) && filepath.VolumeName(p) == "" {
			return nil, errs.New(errs.Usage, "the path %q names a Windows drive or share, which this system does not have", g)
		}
		if !filepath.IsAbs(p) {
			p = base + string(filepath.Separator) + p // not Join: it would clean "link/.." away
		}
		abs, err := landing(p)
		if err != nil {
			return nil, errs.New(errs.Usage, "the path %q: %v", g, err)
		}
		if dotGitIn(g) || dotGitIn(abs) {
			return nil, errs.New(errs.NotSupported, "the path %q is a .git entry or inside one: an agent's edit tools may not write git's own files (hooks, config, the ledger)", g)
		}
		if fi, err := os.Stat(abs); err == nil && fi.IsDir() {
			return nil, errs.New(errs.NotSupported, "the path %q is a directory: the edit tools write files, and a tool that removes or replaces a directory changes paths the guard does not see", g)
		} else if err == nil && fi.Mode().IsRegular() && linkCount(fi) > 1 {
			return nil, errs.New(errs.NotSupported, "the file %q has %d names (hard links): a write to it changes them all, and the guard cannot tell which are held", g, linkCount(fi))
		}
		t := EditTarget{Given: g, Abs: abs, Trees: []TreePath{}}
		for d := existingDir(abs); ; {
			wt, cd, ok := gitstore.WorkTreeOf(d)
			if !ok {
				if gitstore.InGitDir(d) {
					return nil, errs.New(errs.NotSupported, "the path %q lies in a git directory (%s): an agent's edit tools may not write git's own files", g, d)
				}
				break
			}
			wt = RealPath(wt)
			rel, err := filepath.Rel(wt, abs)
			rel = filepath.ToSlash(rel)
			if err == nil && rel != "." && rel != ".." && !strings.HasPrefix(rel, "../") {
				t.Trees = append(t.Trees, TreePath{WorkTree: wt, CommonDir: RealPath(cd), Rel: rel})
			}
			if d = filepath.Dir(wt); d == wt {
				break
			}
		}
		out = append(out, t)
	}
	return out, nil
}

// landing returns where a write to p (absolute) lands, resolving it one
// component at a time as the kernel does: a symbolic link is replaced by
// its target before the components after it, so "link/.." is the link's
// target's parent, not the link's; a dangling link is followed to where it
// points (writing through it creates its target). Components that do not
// exist are taken as they are (a harness creates the directories it
// writes into). More than maxLinks links is an error, as ELOOP is.
func landing(p string) (string, error) {
	vol := filepath.VolumeName(p)
	todo := components(p[len(vol):])
	at := vol + string(filepath.Separator)
	links := 0
	for len(todo) > 0 {
		c := todo[0]
		todo = todo[1:]
		switch c {
		case ".":
			continue
		case "..":
			at = filepath.Dir(at)
			continue
		}
		next := filepath.Join(at, c)
		fi, err := os.Lstat(next)
		if err != nil || fi.Mode()&os.ModeSymlink == 0 {
			at = next
			continue
		}
		if links++; links > maxLinks {
			return "", errs.New(errs.Usage, "too many levels of symbolic links at %s", next)
		}
		target, err := os.Readlink(next)
		if err != nil {
			return "", err
		}
		if tv := filepath.VolumeName(target); filepath.IsAbs(target) {
			at = tv + string(filepath.Separator)
			target = target[len(tv):]
		}
		todo = append(components(target), todo...)
	}
	return at, nil
}

// components splits a path at its separators, dropping empty names.
func components(p string) []string {
	return strings.FieldsFunc(p, func(r rune) bool { return r == '/' || r == filepath.Separator })
}

// windowsRooted reports whether a payload's path names a Windows drive
// ("C:\…", "C:/…") or share ("\\host\…").
func windowsRooted(p string) bool {
	return len(p) >= 3 && p[1] == ':' && (p[2] == '\\' || p[2] == '/') && ('a' <= p[0]|0x20 && p[0]|0x20 <= 'z') ||
		strings.HasPrefix(p, `\\`)
}

// dotGitIn reports whether a component of p is a .git as some file system
// would open it: any case (macOS and Windows volumes), with trailing dots
// or spaces (Windows drops them), as the short name git~1 or a stream of it
// (NTFS), or with
// characters HFS+ ignores — the names git itself refuses to check out.
func dotGitIn(p string) bool {
	for _, c := range components(strings.ReplaceAll(p, `\`, "/")) {
		c = strings.Map(func(r rune) rune {
			if hfsIgnored(r) {
				return -1
			}
			return unicode.ToLower(r)
		}, c)
		c, _, _ = strings.Cut(c, ":") // an NTFS stream of it: .git::$INDEX_ALLOCATION
		if strings.TrimRight(c, ". ") == ".git" || c == "git~1" {
			return true
		}
	}
	return false
}

// hfsIgnored reports the code points HFS+ ignores in names (git's
// is_hfs_dotgit list): zero-width joiners and marks, and the BOM.
func hfsIgnored(r rune) bool {
	switch r {
	case 0x200c, 0x200d, 0x200e, 0x200f, 0x202a, 0x202b, 0x202c, 0x202d, 0x202e,
		0x206a, 0x206b, 0x206c, 0x206d, 0x206e, 0x206f, 0xfeff:
		return true
	}
	return false
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
