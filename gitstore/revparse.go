package gitstore

import (
	"errors"
	"fmt"
	"strings"

	"github.com/tally-dev/tally/refname"
)

// ResolveCommit resolves a revision to a commit id. Full ids, HEAD and
// branch, tag and full ref names are resolved directly; anything else
// (abbreviations, HEAD~2, ...) is handed to `git rev-parse`.
func (r *Repo) ResolveCommit(rev string) (ObjectID, error) {
	db, err := r.Objects()
	if err != nil {
		return ObjectID{}, err
	}
	var id ObjectID
	switch {
	case len(rev) == 40:
		id, err = ParseObjectID(rev)
	case rev == "HEAD":
		id, err = r.Head()
	default:
		err = ErrNoRef
		for _, name := range []string{rev, "refs/heads/" + rev, "refs/tags/" + rev, "refs/remotes/" + rev} {
			if strings.HasPrefix(name, "refs/") && refname.Valid(name) {
				if id, err = r.ReadRef(name); !errors.Is(err, ErrNoRef) {
					break
				}
			}
		}
	}
	if err != nil {
		if id, err = r.revParse(rev); err != nil {
			return ObjectID{}, err
		}
	}
	// Peel annotated tags.
	for range 10 {
		typ, data, err := db.Read(id)
		if err != nil {
			return ObjectID{}, fmt.Errorf("%s: %w", rev, err)
		}
		switch typ {
		case CommitObject:
			return id, nil
		case TagObject:
			obj, _, _ := strings.Cut(string(data), "\n")
			if id, err = ParseObjectID(strings.TrimPrefix(obj, "object ")); err != nil {
				return ObjectID{}, fmt.Errorf("%s: malformed tag", rev)
			}
		default:
			return ObjectID{}, fmt.Errorf("%s is a %s, not a commit", rev, typ)
		}
	}
	return ObjectID{}, fmt.Errorf("%s: tag chain too long", rev)
}

func (r *Repo) revParse(rev string) (ObjectID, error) {
	out, err := r.Git("rev-parse", "--verify", "--quiet", "--end-of-options", rev+"^{commit}")
	if err != nil {
		return ObjectID{}, fmt.Errorf("unknown revision %q", rev)
	}
	return ParseObjectID(strings.TrimSpace(string(out)))
}

// KnownOn returns which of commits this clone knows remote to hold: those
// reachable from its remote-tracking refs refs/remotes/<remote>/*, apart
// from refs matching an exclude pattern (one git name-rev, which walks only
// history newer than the oldest of commits).
func (r *Repo) KnownOn(remote string, commits []string, exclude ...string) (map[string]bool, error) {
	known := map[string]bool{}
	if len(commits) == 0 {
		return known, nil
	}
	args := []string{"name-rev", "--name-only", "--refs=refs/remotes/" + remote + "/*"}
	for _, x := range exclude {
		args = append(args, "--exclude="+x)
	}
	out, err := r.Git(append(append(args, "--"), commits...)...)
	if err != nil {
		return nil, err
	}
	names := strings.Split(strings.TrimSuffix(string(out), "\n"), "\n")
	if len(names) != len(commits) {
		return nil, fmt.Errorf("git name-rev: %d names for %d commits", len(names), len(commits))
	}
	for i, n := range names {
		known[commits[i]] = n != "undefined"
	}
	return known, nil
}
