package hooks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

// shimMarker identifies hook files tally wrote.
const shimMarker = "# tally-hook-shim v1"

// origSuffix is where a hook that was already there is kept; the shim runs it
// first, with the same arguments and input.
const origSuffix = ".tally-orig"

// Client and server hook names.
var (
	ClientHooks = []string{"pre-push"}
	ServerHooks = []string{"pre-receive"}
)

// Dir returns the hooks directory git uses for repo (core.hooksPath if set).
func Dir(repo *gitstore.Repo) string {
	if p, ok := repo.ConfigValue("core.hooksPath"); ok && p != "" {
		if rest, ok := strings.CutPrefix(p, "~/"); ok {
			if home, err := os.UserHomeDir(); err == nil {
				p = filepath.Join(home, rest)
			}
		}
		if !filepath.IsAbs(p) {
			base := repo.WorkTree
			if base == "" {
				base = repo.GitDir
			}
			p = filepath.Join(base, p)
		}
		return p
	}
	return filepath.Join(repo.CommonDir, "hooks")
}

// shim is the hook script: a thin wrapper that chains the previous hook and
// calls the tally binary, so every hook runs the same checks as the CLI.
func shim(name, tallyPath string) string {
	return fmt.Sprintf(`#!/bin/sh
%s: runs the %[2]s hook that was here before (%[2]s%[3]s), then tally.
# Remove with: tally hooks uninstall
tally_bin=%[4]s
[ -x "$tally_bin" ] || tally_bin=tally
orig="$(dirname "$0")/%[2]s%[3]s"
if [ -x "$orig" ]; then
	input=$(mktemp) || exit 1
	trap 'rm -f "$input"' EXIT
	cat >"$input"
	"$orig" "$@" <"$input" || exit $?
	"$tally_bin" hook %[2]s "$@" <"$input"
	exit $?
fi
exec "$tally_bin" hook %[2]s "$@"
`, shimMarker, name, origSuffix, shellQuote(tallyPath))
}

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

func isShim(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), shimMarker)
}

// Install writes shims for the named hooks. An existing hook that is not a
// tally shim is moved aside to <name>.tally-orig and chained, never
// clobbered. It returns the paths written.
func Install(repo *gitstore.Repo, tallyPath string, names []string) ([]string, error) {
	dir := Dir(repo)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, err
	}
	var written []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		orig := path + origSuffix
		if _, err := os.Lstat(path); err == nil && !isShim(path) {
			if _, err := os.Lstat(orig); err == nil {
				return written, errs.New("USAGE", "%s exists and is not tally's, and %s is taken: resolve by hand", path, orig)
			}
			if err := os.Rename(path, orig); err != nil {
				return written, err
			}
		}
		tmp := path + ".tally-tmp"
		if err := os.WriteFile(tmp, []byte(shim(name, tallyPath)), 0o755); err != nil {
			return written, err
		}
		if err := os.Rename(tmp, path); err != nil {
			os.Remove(tmp)
			return written, err
		}
		written = append(written, path)
	}
	return written, nil
}

// Uninstall removes tally's shims for the named hooks and puts back the hooks
// they chained. It returns the paths it changed.
func Uninstall(repo *gitstore.Repo, names []string) ([]string, error) {
	dir := Dir(repo)
	var changed []string
	for _, name := range names {
		path := filepath.Join(dir, name)
		if !isShim(path) {
			continue
		}
		if err := os.Remove(path); err != nil {
			return changed, err
		}
		changed = append(changed, path)
		if err := os.Rename(path+origSuffix, path); err != nil && !errors.Is(err, os.ErrNotExist) {
			return changed, err
		}
	}
	return changed, nil
}
