package gitstore_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
)

// includeConfig writes a global configuration that includes other files
// (include.path with "~/" and relative paths, nested; includeIf "gitdir:",
// "gitdir/i:" and "onbranch:", some of which do not match) and sets some
// variables again after an include, so that each variable's last setting is
// in a different place. It points this process and git at it and returns the
// repository.
func includeConfig(t *testing.T) (dir string, env []string) {
	t.Helper()
	home := t.TempDir()
	dir = testrepo.New(t)
	write := func(name, text string) {
		t.Helper()
		p := filepath.Join(home, name)
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(".gitconfig", `[user]
	email = global@example.com
	name = global
[include]
	path = ~/inc/common.inc
[user]
	name = after-include
[includeIf "gitdir:`+filepath.Dir(dir)+`/"]
	path = work.inc
[includeIf "gitdir:/nowhere/"]
	path = wrong.inc
[includeIf "gitdir/i:`+strings.ToUpper(filepath.Base(dir))+`/.GIT"]
	path = fold.inc
[includeIf "onbranch:ma*"]
	path = branch.inc
[includeIf "onbranch:other"]
	path = wrong.inc
`)
	write("inc/common.inc", "[user]\n\tname = common\n\tsigningkey = common-key\n[include]\n\tpath = nested.inc\n")
	write("inc/nested.inc", "[gpg]\n\tformat = nested\n[tally]\n\tremote = nested\n")
	write("work.inc", "[user]\n\temail = work@example.com\n")
	write("fold.inc", "[gpg]\n\tformat = ssh\n")
	write("branch.inc", "[tally]\n\tremote = branch\n")
	write("wrong.inc", "[user]\n\temail = wrong@example.com\n\tsigningkey = wrong\n[tally]\n\tremote = wrong\n")
	vars := []string{"HOME=" + home, "GIT_CONFIG_GLOBAL=" + filepath.Join(home, ".gitconfig"), "GIT_CONFIG_NOSYSTEM=1"}
	for _, kv := range vars {
		k, v, _ := strings.Cut(kv, "=")
		t.Setenv(k, v)
	}
	t.Setenv("XDG_CONFIG_HOME", "")
	return dir, testrepo.Env(vars...)
}

// Config follows include and includeIf as git does: each variable's value is
// what `git config --get` prints in the same repository and environment.
func TestConfigIncludesAsGit(t *testing.T) {
	dir, env := includeConfig(t)
	repo, err := gitstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	cfg := repo.Config()
	for _, name := range []string{"user.email", "user.name", "user.signingkey", "gpg.format", "tally.remote"} {
		cmd := exec.Command("git", "config", "--get", name)
		cmd.Dir, cmd.Env = dir, env
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git config --get %s: %v", name, err)
		}
		want := strings.TrimSpace(string(out))
		if got, ok := cfg.Value(name); !ok || got != want {
			t.Errorf("%s: tally reads %q (set: %v), git %q", name, got, ok, want)
		}
		t.Logf("%s = %s", name, want)
	}
}

// Config reads git's whole configuration syntax as git does: for each of
// these variables, in a repository whose config uses quotes, escapes,
// comments, continued lines, value-less keys, a variable on its section's
// line, the legacy [section.sub] form, keys in mixed case and subsections
// that differ only in case, tally's value (and whether it is set) is what
// `git config --get` prints.
func TestConfigSyntaxAsGit(t *testing.T) {
	dir := testrepo.New(t)
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", filepath.Join(t.TempDir(), "none"))
	config := "\ufeff# tally test\r\n" + `[core]
	repositoryformatversion = 0
[x] flag
[X]
	quoted = "a ; b # c" ; the comment goes
	inner = one   two	 three   
	spaced = "  kept  "  
	cont = one\
two
	esc = tab\there \"q\" back\\slash
	Mixed-Case = val
	last = first
	last = second
[Sec.Sub] k = legacy
[sec "Sub"] k2 = "q\"x\\y"  
	k = quoted
[sec "sub"] k3 = lower
[sec  "with \"quote\" and \\ back"]
	k4 = odd
[Sec.Dot "Ted"]
	k5 = dotted
[remote "origin"]
	url = /srv/a.git
[remote "Origin"]
	url = /srv/b.git
`
	if err := os.WriteFile(filepath.Join(dir, ".git", "config"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	repo, err := gitstore.Open(dir)
	if err != nil {
		t.Fatal(err)
	}
	defer repo.Close()
	cfg := repo.Config()
	for _, name := range []string{"core.repositoryformatversion", "x.flag", "x.quoted", "X.inner", "x.spaced", "x.cont",
		"x.esc", "x.mixed-case", "x.MIXED-CASE", "x.last", "sec.sub.k", "sec.Sub.k", "sec.Sub.k2", "sec.sub.k3", "sec.SUB.k3",
		`sec.with "quote" and \ back.k4`, "sec.dot.Ted.k5", "sec.Dot.Ted.k5", "remote.origin.url", "remote.Origin.url", "x.missing"} {
		cmd := exec.Command("git", "config", "--get", name)
		cmd.Dir = dir
		out, err := cmd.Output()
		set := err == nil
		if ee, ok := err.(*exec.ExitError); err != nil && (!ok || ee.ExitCode() != 1) {
			t.Fatalf("git config --get %s: %v", name, err)
		}
		want := strings.TrimSuffix(string(out), "\n")
		if got, ok := cfg.Value(name); ok != set || got != want {
			t.Errorf("%s: tally reads %q (set: %v), git %q (set: %v)", name, got, ok, want, set)
		}
	}
	if got := repo.RemoteNames(); !slices.Equal(got, []string{"origin", "Origin"}) {
		t.Errorf("RemoteNames() = %q, want origin and Origin", got)
	}
}
