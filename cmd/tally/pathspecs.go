package main

import (
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// lockSpecs resolves the pathspecs of lock and unlock as git resolves
// pathspecs: relative to the directory tally runs in (-C), so from src/
// "api/**" is "src/api/**"; one that starts with ":/" is relative to the
// repository root (":/" alone is the root). Leading "./" and "../" segments
// are resolved against that directory; one that climbs above the root is
// USAGE. The ledger stores only root-relative patterns.
func (a *app) lockSpecs(specs []string) ([]string, error) {
	out, err := gitstore.RunGit(a.dir, "rev-parse", "--show-prefix")
	if err != nil {
		return nil, errs.Wrap(errs.NotARepo, err, "git rev-parse --show-prefix in %s", a.dir)
	}
	prefix := strings.TrimSuffix(strings.TrimSpace(string(out)), "/")
	resolved := make([]string, len(specs))
	for i, s := range specs {
		r, err := resolveSpec(prefix, s)
		if err != nil {
			return nil, err
		}
		resolved[i] = r
	}
	return resolved, nil
}

// resolveSpec is lockSpecs for one spec, with prefix the current directory
// relative to the root ("" at the root, no trailing '/').
func resolveSpec(prefix, spec string) (string, error) {
	if spec == "" {
		return "", nil // refused as USAGE with the other malformed patterns
	}
	if rest, ok := strings.CutPrefix(spec, ":/"); ok {
		if rest == "" {
			return ".", nil
		}
		return rest, nil
	}
	dir := []string{}
	if prefix != "" {
		dir = strings.Split(prefix, "/")
	}
	rest := spec
	for {
		switch {
		case rest == "." || rest == "./":
			rest = ""
		case strings.HasPrefix(rest, "./"):
			rest = rest[2:]
			continue
		case rest == ".." || rest == "../" || strings.HasPrefix(rest, "../"):
			if len(dir) == 0 {
				return "", errs.New(errs.Usage, "pathspec %q is outside the repository (from %q)", spec, prefix+"/")
			}
			dir = dir[:len(dir)-1]
			rest = strings.TrimPrefix(strings.TrimPrefix(rest, ".."), "/")
			continue
		}
		break
	}
	if rest != "" {
		dir = append(dir, rest)
	}
	if len(dir) == 0 {
		return ".", nil // the root: every path
	}
	return strings.Join(dir, "/"), nil
}
