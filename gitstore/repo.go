// Package gitstore is tally's access to a git repository: object reading and
// pack writing that stay fast in repositories of any size, mutable tree
// overlays, commits, and a reference compare-and-swap that follows git's own
// lockfile protocol. It knows nothing of leases.
package gitstore

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
)

// Repo is a discovered git repository.
//
// GitDir is the per-worktree git directory (HEAD lives there); CommonDir is
// shared by all worktrees of a clone (refs, objects, config). For a main
// worktree or a bare repository they are the same directory.
type Repo struct {
	GitDir    string
	CommonDir string
	WorkTree  string // "" for a bare repository
	ObjectDir string
	// alternates are extra object directories from GIT_ALTERNATE_OBJECT_DIRECTORIES
	// (set by git for pre-receive hooks, together with a quarantine object directory).
	alternates []string

	odbOnce sync.Once
	odb     *ObjectDB
	odbErr  error
}

// ErrNotRepo is returned by Open when no repository is found.
var ErrNotRepo = fmt.Errorf("not a git repository")

// Open finds the repository containing dir, honouring GIT_DIR, GIT_COMMON_DIR,
// GIT_OBJECT_DIRECTORY and GIT_ALTERNATE_OBJECT_DIRECTORIES as git does (hooks
// run with them set). SHA-256 and reftable repositories are refused: tally reads
// objects and refs itself and supports only the SHA-1 files backend.
func Open(dir string) (*Repo, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return nil, err
	}
	r := &Repo{}
	if env := os.Getenv("GIT_DIR"); env != "" {
		r.GitDir = absFrom(abs, env)
		if wt := os.Getenv("GIT_WORK_TREE"); wt != "" {
			r.WorkTree = absFrom(abs, wt)
		} else if !isBare(r.GitDir) && filepath.Base(r.GitDir) == ".git" {
			r.WorkTree = filepath.Dir(r.GitDir)
		}
	} else if err := r.discover(abs); err != nil {
		return nil, err
	}
	r.CommonDir = r.GitDir
	if env := os.Getenv("GIT_COMMON_DIR"); env != "" {
		r.CommonDir = absFrom(abs, env)
	} else if b, err := readFile(filepath.Join(r.GitDir, "commondir")); err == nil {
		r.CommonDir = absFrom(r.GitDir, strings.TrimSpace(string(b)))
	}
	r.ObjectDir = filepath.Join(r.CommonDir, "objects")
	if env := os.Getenv("GIT_OBJECT_DIRECTORY"); env != "" {
		r.ObjectDir = absFrom(abs, env)
	}
	if env := os.Getenv("GIT_ALTERNATE_OBJECT_DIRECTORIES"); env != "" {
		for _, p := range filepath.SplitList(env) {
			if p != "" {
				r.alternates = append(r.alternates, absFrom(abs, p))
			}
		}
	}
	if _, err := os.Stat(filepath.Join(r.CommonDir, "refs")); err != nil {
		return nil, fmt.Errorf("%w: %s has no refs directory", ErrNotRepo, r.CommonDir)
	}
	if err := r.checkExtensions(); err != nil {
		return nil, err
	}
	return r, nil
}

func absFrom(base, p string) string {
	if filepath.IsAbs(p) {
		return filepath.Clean(p)
	}
	return filepath.Join(base, p)
}

func isBare(dir string) bool {
	for _, name := range []string{"HEAD", "objects", "refs"} {
		if _, err := os.Stat(filepath.Join(dir, name)); err != nil {
			return false
		}
	}
	return true
}

// discover walks up from dir like git: a ".git" directory or "gitdir:" file
// marks a work tree; a directory that itself looks like a git dir is bare.
func (r *Repo) discover(dir string) error {
	for d := dir; ; d = filepath.Dir(d) {
		dotgit := filepath.Join(d, ".git")
		if fi, err := os.Stat(dotgit); err == nil {
			if fi.IsDir() {
				r.GitDir, r.WorkTree = dotgit, d
				return nil
			}
			b, err := readFile(dotgit)
			if err != nil {
				return err
			}
			line := strings.TrimSpace(string(b))
			if !strings.HasPrefix(line, "gitdir:") {
				return fmt.Errorf("%w: %s is not a gitdir file", ErrNotRepo, dotgit)
			}
			r.GitDir, r.WorkTree = absFrom(d, strings.TrimSpace(strings.TrimPrefix(line, "gitdir:"))), d
			return nil
		}
		if isBare(d) {
			r.GitDir = d
			return nil
		}
		if filepath.Dir(d) == d {
			return fmt.Errorf("%w: %s", ErrNotRepo, dir)
		}
	}
}

// checkExtensions refuses repositories whose object or ref format tally cannot read.
func (r *Repo) checkExtensions() error {
	b, err := readFile(filepath.Join(r.CommonDir, "config"))
	if err != nil {
		return nil // git itself tolerates a missing config
	}
	section := ""
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		line := strings.ToLower(strings.TrimSpace(sc.Text()))
		if strings.HasPrefix(line, "[") {
			section = strings.Trim(line, "[] ")
			continue
		}
		if section != "extensions" {
			continue
		}
		key, val, _ := strings.Cut(line, "=")
		key, val = strings.TrimSpace(key), strings.TrimSpace(val)
		if (key == "objectformat" && val != "sha1") || (key == "refstorage" && val != "files") {
			return fmt.Errorf("%w: extensions.%s = %s", ErrUnsupported, key, val)
		}
	}
	return nil
}

// ErrUnsupported is returned for repositories tally cannot operate on.
var ErrUnsupported = fmt.Errorf("unsupported repository format")

// Objects returns the repository's object database, opened on first use.
func (r *Repo) Objects() (*ObjectDB, error) {
	r.odbOnce.Do(func() { r.odb, r.odbErr = OpenObjectDB(r.ObjectDir, r.alternates) })
	return r.odb, r.odbErr
}

// Close releases the object database.
func (r *Repo) Close() error {
	if r.odb != nil {
		return r.odb.Close()
	}
	return nil
}

// WorkTreeOf returns the work tree containing dir (an existing directory)
// and the common git directory of its repository, found by walking up as
// git does but without git's environment variables: the guard asks where a
// path lies, not where this process's git is. ok is false when dir is in
// no work tree: outside every repository, or inside a git directory
// (InGitDir tells which).
func WorkTreeOf(dir string) (workTree, commonDir string, ok bool) {
	r := &Repo{}
	if r.discover(dir) != nil || r.WorkTree == "" {
		return "", "", false
	}
	r.CommonDir = r.GitDir
	if b, err := readFile(filepath.Join(r.GitDir, "commondir")); err == nil {
		r.CommonDir = absFrom(r.GitDir, strings.TrimSpace(string(b)))
	}
	return r.WorkTree, r.CommonDir, true
}

// InGitDir reports whether dir (an existing directory) lies inside a git
// directory — a .git, a separate or bare repository's — rather than in a
// work tree, walking up as WorkTreeOf does.
func InGitDir(dir string) bool {
	r := &Repo{}
	return r.discover(dir) == nil && r.WorkTree == ""
}
