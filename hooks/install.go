package hooks

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/ledger"
)

// shimMarker identifies hook files tally wrote (any version: v1 shims, which
// fell back to `tally` on PATH, are still tally's to replace or remove).
const shimMarker = "# tally-hook-shim"

// shimVersion follows shimMarker in the shims written now.
const shimVersion = " v2"

// origSuffix is where a hook that was already there is kept; the shim runs it
// first, with the same arguments and input.
const origSuffix = ".tally-orig"

// dispatchName is the shim's file name inside a <hook>.d/ directory.
const dispatchName = "tally"

// binLine starts the shim line that names the tally binary.
const binLine = "tally_bin="

// PreCommitHook is the backstop of the edit guard (FORMAT.md §9c): it
// refuses a commit whose staged paths another actor holds, whatever wrote
// them (a shell command no agent hook saw).
const PreCommitHook = "pre-commit"

// Client and server hook names. AllHooks are every hook install may write,
// which uninstall and status look at.
var (
	ClientHooks = []string{"pre-push"}
	ServerHooks = []string{"pre-receive"}
	AllHooks    = []string{"pre-push", PreCommitHook, "commit-msg", "pre-receive", SequencerHook}
)

// Placements of a shim.
const (
	// PlaceHook: the shim is <hooks>/<name>; a hook that was there is kept as
	// <name>.tally-orig and run first.
	PlaceHook = "hook"
	// PlaceDispatcher: <hooks>/<name>.d/ exists, so <hooks>/<name> is a
	// dispatcher that runs every executable in it (Soft Serve, Gitea and
	// Forgejo write such a pair); the shim is <name>.d/tally and the
	// dispatcher is left as it is.
	PlaceDispatcher = "dispatcher"
	// PlaceCustomHooks: the repository has GitLab's custom_hooks/ directory;
	// Gitaly, which ignores the repository's hooks/ directory, runs
	// custom_hooks/<name>.d/*, so the shim is custom_hooks/<name>.d/tally.
	PlaceCustomHooks = "custom_hooks"
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

// A location is one place a hook's shim can be.
type location struct {
	Placement  string
	Path       string // the shim
	Dispatcher string // what runs it, for PlaceDispatcher
}

// locations lists, in order of preference, where the shim for hook name can
// go in repo; install takes the first whose directory exists (PlaceHook's
// always qualifies), uninstall and status look at all of them.
func locations(repo *gitstore.Repo, name string) []location {
	dir := Dir(repo)
	return []location{
		{Placement: PlaceDispatcher, Path: filepath.Join(dir, name+".d", dispatchName), Dispatcher: filepath.Join(dir, name)},
		{Placement: PlaceCustomHooks, Path: filepath.Join(repo.CommonDir, "custom_hooks", name+".d", dispatchName)},
		{Placement: PlaceHook, Path: filepath.Join(dir, name)},
	}
}

// target is where Install puts the shim for name: into a <name>.d/ layout
// where one exists, into GitLab's custom_hooks/ where that exists (only for
// server hooks: GitLab runs no client hooks), else over the hook itself.
func target(repo *gitstore.Repo, name string) location {
	locs := locations(repo, name)
	if isDir(filepath.Dir(locs[0].Path)) {
		return locs[0]
	}
	if isServerHook(name) && isDir(filepath.Dir(filepath.Dir(locs[1].Path))) {
		return locs[1]
	}
	return locs[2]
}

func isServerHook(name string) bool {
	for _, n := range ServerHooks {
		if n == name {
			return true
		}
	}
	return false
}

func isDir(path string) bool {
	st, err := os.Stat(path)
	return err == nil && st.IsDir()
}

// shim is the hook script: a thin wrapper that calls the tally binary named
// by absolute path (a server's hooks run with a PATH nobody controls; on
// Windows with forward slashes, C:/..., which Git for Windows' sh reads
// as it is and a backslash path it does not always), and
// refuses with a message naming that path when it is gone, so the hook
// fails closed and says why. With chain it first runs the hook that was
// there before (<name>.tally-orig), with the same arguments and input.
func shim(name, tallyPath string, chain bool) string {
	var b strings.Builder
	fmt.Fprintf(&b, "#!/bin/sh\n%s%s: runs tally's %s checks", shimMarker, shimVersion, name)
	if chain {
		fmt.Fprintf(&b, " after the hook that was here before (%s%s)", name, origSuffix)
	}
	fmt.Fprintf(&b, `.
# Remove with: tally hooks uninstall
%s%s
if [ ! -x "$tally_bin" ]; then
	echo "tally: the %s hook cannot run: the tally binary $tally_bin is missing or not executable; refusing. Reinstall the hook with: tally hooks install --tally PATH" >&2
	exit 1
fi
`, binLine, shellQuote(filepath.ToSlash(tallyPath)), name)
	if name == "pre-receive" {
		b.WriteString(requestsOnly(chain))
		return b.String()
	}
	if chain {
		fmt.Fprintf(&b, `orig="$(dirname "$0")/%[1]s%[2]s"
if [ -x "$orig" ]; then
	input=$(mktemp) || exit 1
	trap 'rm -f "$input"' EXIT
	cat >"$input"
	"$orig" "$@" <"$input" || exit $?
	"$tally_bin" hook %[1]s "$@" <"$input"
	exit $?
fi
`, name, origSuffix)
	}
	fmt.Fprintf(&b, "exec \"$tally_bin\" hook %s \"$@\"\n", name)
	return b.String()
}

// requestsOnly is the end of the pre-receive shim. It reads the push's
// commands (at most requestsOnlyMax; a longer push is no request) and exits
// 0 without running tally when every one adds a ref under
// ledger.RequestPrefix and receive.procReceiveRefs hands all of them to the
// sequencer: there the proc-receive hook judges each request by everything
// pre-receive would (the pusher binding on the very tip the entry is built
// on), and nothing else is updated. Otherwise tally's check runs on the same
// commands. The config is read only for such pushes, by one git process
// that matches each value whole, as git's receive-pack reads it
// (routedValues): it prints the values that hand requests over and any
// value with a "!" (a negative one, whose matching is git's to define), so
// no output, or output with a "!" in it, makes the full check run. git
// matches a value as one string, newlines and all (no line of a value can
// pass for a value), and the shell only looks for a "!" in what it printed:
// a process fewer than splitting the values in the shell, which needed tr to
// make git's NUL separators readable. The hook chained before (with chain)
// runs in every case.
func requestsOnly(chain bool) string {
	zero := gitstore.ObjectID{}.String()
	var b strings.Builder
	fmt.Fprintf(&b, `input= only=1 n=0
while [ $n -lt %[1]d ] && IFS= read -r line; do
	input="$input$line
"
	n=$((n+1))
	case "$line" in
	*" %[2]s "*) only= ;;
	"%[2]s "*" %[3]s/"?*) ;;
	*) only= ;;
	esac
done
[ $n -lt %[1]d ] || only=
skip=
if [ -n "$only" ] && [ -n "$input" ]; then
	routed=$(git config --get-regexp '%[4]s' '%[5]s') || routed=
	case "$routed" in
	""|*!*) ;;
	*) skip=1 ;;
	esac
fi
feed() {
	printf '%%s' "$input"
	[ $n -lt %[1]d ] || cat
}
`, requestsOnlyMax, zero, ledger.RequestPrefix, "^"+strings.ReplaceAll(procReceiveKey, ".", `\.`)+"$", routedValues)
	if chain {
		// ${0%/*}: git names a hook by a path with a directory, and a
		// dirname process would cost every push a millisecond.
		fmt.Fprintf(&b, `orig="${0%%/*}/pre-receive%[1]s"
if [ -x "$orig" ]; then
	tmp=$(mktemp) || exit 1
	trap 'rm -f "$tmp"' EXIT
	feed >"$tmp"
	"$orig" "$@" <"$tmp" || exit $?
	[ -z "$skip" ] || exit 0
	"$tally_bin" hook pre-receive "$@" <"$tmp"
	exit $?
fi
`, origSuffix)
	}
	b.WriteString(`[ -z "$skip" ] || exit 0
feed | "$tally_bin" hook pre-receive "$@"
`)
	return b.String()
}

// procReceiveKey is ProcReceiveConfig as `git config --get-regexp` names it.
var procReceiveKey = strings.ToLower(ProcReceiveConfig)

// routedValues is the rule by which receive.procReceiveRefs hands requests
// to the sequencer, written once as an extended regular expression matched
// against each whole value (git config's value pattern: no REG_NEWLINE, so
// ^ and $ are the value's ends): a value routes ledger.RequestPrefix
// additions when it has modifiers before the first ":" that include "a",
// or none, and then a ref prefix of ledger.RequestPrefix at a "/", with any
// trailing slashes. The last branch matches any value with a "!" in it,
// which both readers take as "not routed". The pre-receive shim gives it to
// git; sequencing matches it with Go's regexp, so it uses only what POSIX
// ERE and RE2 read alike (anchors, groups, ?, *, a negated class). It must
// not start with "!", which would make git negate it.
var routedValues = func() string {
	prefix := ""
	parts := strings.Split(ledger.RequestPrefix, "/")
	for i := len(parts) - 1; i > 0; i-- {
		prefix = "(/" + regexp.QuoteMeta(parts[i]) + prefix + ")?"
	}
	prefix = regexp.QuoteMeta(parts[0]) + prefix + "/*$"
	return "^[^:]*a[^:]*:" + prefix + "|^" + prefix + "|!"
}()

// requestsOnlyMax bounds the commands the pre-receive shim reads before
// deciding; a push of more is checked by tally whatever it holds.
const requestsOnlyMax = 64

func shellQuote(s string) string { return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'" }

// shimBinary returns the binary a shim's text names ("" if none): the value
// of its tally_bin line, quoted as shellQuote quotes, in the system's own
// separators.
func shimBinary(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, binLine); ok && len(v) >= 2 && v[0] == '\'' && v[len(v)-1] == '\'' {
			return filepath.FromSlash(strings.ReplaceAll(v[1:len(v)-1], `'\''`, "'"))
		}
	}
	return ""
}

func isShim(path string) bool {
	b, err := os.ReadFile(path)
	return err == nil && strings.Contains(string(b), shimMarker)
}

// Install writes shims that call the tally binary at tallyPath (an
// absolute path) for the named hooks, each where target puts it. Over the
// hook itself, an existing hook that is not a tally shim is moved aside to
// <name>.tally-orig and chained, never clobbered; into a <name>.d/ layout
// nothing else is touched, and a shim an earlier install wrote over the
// dispatcher is removed and the dispatcher put back. It returns the paths
// written.
func Install(repo *gitstore.Repo, tallyPath string, names []string) ([]string, error) {
	var written []string
	for _, name := range names {
		loc := target(repo, name)
		if err := os.MkdirAll(filepath.Dir(loc.Path), 0o755); err != nil {
			return written, err
		}
		chain := loc.Placement == PlaceHook
		if chain {
			if _, err := os.Lstat(loc.Path); err == nil && !isShim(loc.Path) {
				orig := loc.Path + origSuffix
				if _, err := os.Lstat(orig); err == nil {
					return written, errs.New(errs.Usage, "%s exists and is not tally's, and %s is taken: resolve by hand", loc.Path, orig)
				}
				if err := os.Rename(loc.Path, orig); err != nil {
					return written, err
				}
			}
		} else if _, err := removeShim(filepath.Join(Dir(repo), name)); err != nil {
			return written, err
		}
		tmp := loc.Path + ".tally-tmp"
		if err := os.WriteFile(tmp, []byte(shim(name, tallyPath, chain)), 0o755); err != nil {
			return written, err
		}
		if err := os.Rename(tmp, loc.Path); err != nil {
			os.Remove(tmp)
			return written, err
		}
		written = append(written, loc.Path)
	}
	return written, nil
}

// removeShim removes the tally shim at path, if path is one, and puts back
// the hook it chained. It reports whether it removed one.
func removeShim(path string) (bool, error) {
	if !isShim(path) {
		return false, nil
	}
	if err := os.Remove(path); err != nil {
		return false, err
	}
	if err := os.Rename(path+origSuffix, path); err != nil && !errors.Is(err, os.ErrNotExist) {
		return true, err
	}
	return true, nil
}

// Uninstall removes every shim Install can have written (every hook of
// AllHooks, at every location), puts back the hooks they chained, and
// removes a custom_hooks/<name>.d/ directory left empty (install creates
// it; a <hooks>/<name>.d/ belongs to the dispatcher and stays). It returns
// the paths it removed.
func Uninstall(repo *gitstore.Repo) ([]string, error) {
	var removed []string
	for _, name := range AllHooks {
		for _, loc := range locations(repo, name) {
			ok, err := removeShim(loc.Path)
			if ok {
				removed = append(removed, loc.Path)
			}
			if err != nil {
				return removed, err
			}
			if ok && loc.Placement == PlaceCustomHooks {
				os.Remove(filepath.Dir(loc.Path)) // only if empty
			}
			if ok && name == SequencerHook {
				uninstallSequencer(repo)
			}
			if ok && name == "pre-receive" {
				unsetServerConfig(repo)
			}
		}
	}
	return removed, nil
}

// HookStatus is what one installed shim does, as `tally hooks status`
// reports it. Active means git (or the dispatcher) will run the shim and the
// shim can run tally: the shim is executable, the binary it names is an
// executable file by absolute path, and for PlaceDispatcher the dispatcher
// is an executable that is not itself a tally shim. For PlaceCustomHooks
// Gitaly is the dispatcher, which tally cannot see. Problems say what is
// wrong, including what does not stop tally's check but stops the server's
// own hooks (a dispatcher chained as <name>.tally-orig).
type HookStatus struct {
	Hook         string   `json:"hook"`
	Installed    bool     `json:"installed"`
	Shim         string   `json:"shim,omitempty"`
	Placement    string   `json:"placement,omitempty"`
	Binary       string   `json:"binary,omitempty"`
	BinaryExists bool     `json:"binary_exists"`
	Chained      string   `json:"chained,omitempty"`
	Dispatcher   string   `json:"dispatcher,omitempty"`
	Active       bool     `json:"active"`
	Problems     []string `json:"problems,omitempty"`
	OtherHook    string   `json:"other_hook,omitempty"` // a hook there that is not tally's
}

// Status reports, for every hook of AllHooks, each shim found at any of its
// locations, or one entry with Installed false (and the hook that is there
// instead, if any) when there is none.
func Status(repo *gitstore.Repo) []HookStatus {
	var out []HookStatus
	for _, name := range AllHooks {
		found := false
		for _, loc := range locations(repo, name) {
			b, err := os.ReadFile(loc.Path)
			if err != nil || !strings.Contains(string(b), shimMarker) {
				continue
			}
			found = true
			out = append(out, shimStatus(name, loc, string(b)))
		}
		if !found {
			s := HookStatus{Hook: name}
			if path := filepath.Join(Dir(repo), name); executable(path) {
				s.OtherHook = path
			}
			out = append(out, s)
		}
	}
	return out
}

func shimStatus(name string, loc location, text string) HookStatus {
	s := HookStatus{Hook: name, Installed: true, Shim: loc.Path, Placement: loc.Placement, Binary: shimBinary(text)}
	s.BinaryExists = s.Binary != "" && executable(s.Binary)
	if !executable(loc.Path) {
		s.Problems = append(s.Problems, "the shim is not executable: git skips it")
	}
	switch {
	case s.Binary == "":
		s.Problems = append(s.Problems, "the shim names no tally binary: reinstall it")
	case !filepath.IsAbs(s.Binary):
		s.Problems = append(s.Problems, "the shim names the tally binary by a relative path: reinstall it")
	case !s.BinaryExists:
		s.Problems = append(s.Problems, "the tally binary "+s.Binary+" is missing or not executable: every run of the hook fails (reinstall with --tally PATH)")
	}
	switch loc.Placement {
	case PlaceHook:
		if executable(loc.Path + origSuffix) {
			s.Chained = loc.Path + origSuffix
		}
	case PlaceDispatcher:
		s.Dispatcher = loc.Dispatcher
	}
	s.Active = len(s.Problems) == 0
	switch {
	case loc.Placement == PlaceDispatcher && isShim(loc.Dispatcher):
		s.Active = false
		s.Problems = append(s.Problems, "the dispatcher "+loc.Dispatcher+" is a tally shim, which runs nothing in "+filepath.Dir(loc.Path)+": run tally hooks install again")
	case loc.Placement == PlaceDispatcher && !executable(loc.Dispatcher):
		s.Active = false
		s.Problems = append(s.Problems, "nothing runs "+filepath.Dir(loc.Path)+": "+loc.Dispatcher+" is missing or not executable")
	case loc.Placement == PlaceHook && isDir(loc.Path+".d"):
		// tally's check runs, but a dispatcher chained as .tally-orig runs
		// <name>.tally-orig.d/*, so the server's own hooks do not.
		s.Problems = append(s.Problems, loc.Path+".d/ exists but the shim is over the dispatcher: the server's own hooks there may not run; run tally hooks install again")
	}
	return s
}

// Binary returns path as the absolute path a shim names, refusing (USAGE) a
// path that is not an executable file: a shim calling nothing would refuse
// every push. A symbolic link is kept as given, so a shim naming a stable
// link (/usr/local/bin/tally) follows upgrades that replace its target.
func Binary(path string) (string, error) {
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", err
	}
	if !executable(abs) {
		return "", errs.New(errs.Usage, "--tally %s: not an executable file", abs)
	}
	return abs, nil
}
