package gitstore_test

import (
	"errors"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// requestSite is a git daemon serving a plain bare repository (git's hooks
// only, written by the test) and a clone-side repository whose request
// pushes go to it, with no user or system configuration in this process.
type requestSite struct {
	t          *testing.T
	root, bare string
	repo       *gitstore.Repo
	url        string
}

func newRequestSite(t *testing.T, opts gitserver.DaemonOptions) *requestSite {
	t.Setenv("HOME", t.TempDir())
	t.Setenv("GIT_CONFIG_NOSYSTEM", "1")
	t.Setenv("GIT_CONFIG_GLOBAL", "/dev/null")
	root := t.TempDir()
	bare := filepath.Join(root, "srv.git")
	testrepo.Git(t, root, "init", "-q", "--bare", bare)
	client := filepath.Join(t.TempDir(), "client")
	testrepo.Git(t, root, "init", "-q", client)
	repo, err := gitstore.Open(client)
	if err != nil {
		t.Fatal(err)
	}
	return &requestSite{t: t, root: root, bare: bare, repo: repo, url: gitserver.DaemonWith(t, root, opts) + "/srv.git"}
}

// hook writes the server's hook name as a shell script.
func (s *requestSite) hook(name, script string) {
	if err := os.WriteFile(filepath.Join(s.bare, "hooks", name), []byte("#!/bin/sh\n"+script), 0o755); err != nil {
		s.t.Fatal(err)
	}
}

// request is a new request commit (the empty tree, message msg) in a pack
// writer.
func request(msg string) (*gitstore.PackWriter, gitstore.ObjectID) {
	pw := gitstore.NewPackWriter()
	tree := pw.Add(gitstore.TreeObject, nil)
	who := gitstore.Ident{Name: "tally", Email: "tally", When: time.Now().Unix(), TZ: "+0000"}
	return pw, pw.Add(gitstore.CommitObject, (&gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: msg}).Encode())
}

// both pushes a new request to ref+"/git" at url with `git push` and
// another to ref+"/tally" natively, and returns the two results and
// errors, each request's commit and ref suffix taken out of them so that
// they compare.
func (s *requestSite) both(url, ref string) (git, native *gitstore.RequestResult, gitErr, nativeErr error) {
	s.t.Helper()
	pw, id := request("by git")
	pack, err := pw.WriteTo(s.repo.ObjectDir)
	if err != nil {
		s.t.Fatal(err)
	}
	git, gitErr = gitstore.PushRequestGit(s.repo, url, ref+"/git", id, time.Minute)
	gitstore.RemovePack(s.repo.ObjectDir, pack)
	git = anonymous(git, id, ref+"/git", ref)
	pw, id = request("by tally")
	host, addr, path, ok := gitstore.NativePushTarget(s.repo, url)
	if !ok {
		s.t.Fatalf("%s: not pushed natively", url)
	}
	native, nativeErr = gitstore.PushRequestNative(host, addr, path, ref+"/tally", id, pw.Bytes(), time.Now().Add(time.Minute))
	return git, anonymous(native, id, ref+"/tally", ref), gitErr, nativeErr
}

func anonymous(res *gitstore.RequestResult, id gitstore.ObjectID, pushed, ref string) *gitstore.RequestResult {
	if res == nil {
		return nil
	}
	if res.New == id.String() {
		res.New = "COMMIT"
	}
	if res.Ref == pushed {
		res.Ref = ref
	}
	return res
}

// class is the transport error class err wraps ("" for none).
func class(err error) string {
	for _, e := range []error{gitstore.ErrRemoteUnreachable, gitstore.ErrRemoteDenied, gitstore.ErrPushRejected, gitstore.ErrNoRemote} {
		if errors.Is(err, e) {
			return e.Error()
		}
	}
	if err != nil {
		return "other: " + err.Error()
	}
	return ""
}

// TestPushRequestNativeAsGit: a request pushed by tally itself over git://
// gets, from a real git daemon, the same answer `git push --porcelain` gets
// and tally reads from it: a ref stored (a server without a sequencer), a
// pre-receive refusal with what the hook printed (blank lines, a carriage
// return, markup), and the same error class for a repository the daemon
// does not export, a daemon that does not serve pushes, an access hook's
// refusal, a refused connection, and a receive-pack killed after the pack
// arrived (the connection cut before any report).
func TestPushRequestNativeAsGit(t *testing.T) {
	s := newRequestSite(t, gitserver.DaemonOptions{})
	check := func(what, url, ref string) (*gitstore.RequestResult, error) {
		t.Helper()
		git, native, gitErr, nativeErr := s.both(url, ref)
		if class(gitErr) != class(nativeErr) {
			t.Fatalf("%s: git push: %v; native: %v", what, gitErr, nativeErr)
		}
		if !reflect.DeepEqual(git, native) {
			t.Fatalf("%s: git push answered\n%#v\nnative\n%#v", what, git, native)
		}
		return native, nativeErr
	}

	res, err := check("stored", s.url, "refs/for/tally/a")
	if err != nil || !res.OK || res.Ref != "refs/for/tally/a" || res.Old != "" {
		t.Fatalf("plain server: %#v %v", res, err)
	}
	if n := len(strings.Fields(testrepo.Git(t, s.bare, "for-each-ref", "--format=%(objectname)", "refs/for/tally/a/"))); n != 2 {
		t.Fatalf("%d refs stored", n)
	}

	s.hook("pre-receive", `cat >/dev/null
echo "tally: refused: POLICY: no"
echo
printf 'half\rline\n'
echo "<b>bold</b> &amp; more   "
exit 1
`)
	res, err = check("declined", s.url, "refs/for/tally/b")
	if err != nil || res.OK || res.Reason != "pre-receive hook declined" || !strings.Contains(res.Said, "POLICY: no") || len(res.Lines) < 4 {
		t.Fatalf("declined: %#v %v", res, err)
	}

	_, err = check("not exported", strings.TrimSuffix(s.url, "srv.git")+"none.git", "refs/for/tally/c")
	if !errors.Is(err, gitstore.ErrRemoteDenied) {
		t.Fatalf("unexported repository: %v", err)
	}

	s.hook("pre-receive", "cat >/dev/null\nkill -9 $PPID\nsleep 5\n")
	_, err = check("cut", s.url, "refs/for/tally/d")
	if !errors.Is(err, gitstore.ErrRemoteUnreachable) {
		t.Fatalf("receive-pack killed: %v", err)
	}

	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := "git://" + l.Addr().String() + "/srv.git"
	l.Close()
	if _, err = check("refused", closed, "refs/for/tally/e"); !errors.Is(err, gitstore.ErrRemoteUnreachable) || !strings.Contains(err.Error(), "connection refused") {
		t.Fatalf("connection refused: %v", err)
	}

	ro := newRequestSite(t, gitserver.DaemonOptions{ReadOnly: true})
	if _, err = ro.check2(t, "read-only"); !errors.Is(err, gitstore.ErrRemoteDenied) {
		t.Fatalf("read-only daemon: %v", err)
	}
	deny := filepath.Join(t.TempDir(), "deny")
	if err := os.WriteFile(deny, []byte("#!/bin/sh\necho 'pushes are closed today'\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	ah := newRequestSite(t, gitserver.DaemonOptions{AccessHook: deny})
	if _, err = ah.check2(t, "access hook"); !errors.Is(err, gitstore.ErrRemoteDenied) || !strings.Contains(err.Error(), "pushes are closed today") {
		t.Fatalf("access hook: %v", err)
	}
}

// check2 is check of TestPushRequestNativeAsGit for another site.
func (s *requestSite) check2(t *testing.T, what string) (*gitstore.RequestResult, error) {
	t.Helper()
	git, native, gitErr, nativeErr := s.both(s.url, "refs/for/tally/x")
	if class(gitErr) != class(nativeErr) || !reflect.DeepEqual(git, native) {
		t.Fatalf("%s: git push: %#v %v; native: %#v %v", what, git, gitErr, native, nativeErr)
	}
	return native, nativeErr
}

// TestPushRequestNativeServerChecks: tally pushing itself moves no check
// off the server. Pushed natively, a request commit whose tree the pack
// leaves out is refused by receive-pack's connectivity check, a pack whose
// checksum is wrong by its unpacker; neither leaves a ref. A whole request
// then lands.
func TestPushRequestNativeServerChecks(t *testing.T) {
	s := newRequestSite(t, gitserver.DaemonOptions{})
	host, addr, path, ok := gitstore.NativePushTarget(s.repo, s.url)
	if !ok {
		t.Fatalf("%s: not pushed natively", s.url)
	}
	who := gitstore.Ident{Name: "tally", Email: "tally", When: 1, TZ: "+0000"}
	pw := gitstore.NewPackWriter()
	tree := gitstore.HashObject(gitstore.TreeObject, []byte("100644 f\x00"+strings.Repeat("\x01", 20)))
	id := pw.Add(gitstore.CommitObject, (&gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: "no tree"}).Encode())
	res, err := gitstore.PushRequestNative(host, addr, path, "refs/for/tally/a", id, pw.Bytes(), time.Now().Add(time.Minute))
	if err != nil || res.OK || !strings.Contains(res.Reason, "missing necessary objects") {
		t.Fatalf("a request without its tree: %#v %v", res, err)
	}

	pw, id = request("bad checksum")
	pack := pw.Bytes()
	pack[len(pack)-1] ^= 1
	res, err = gitstore.PushRequestNative(host, addr, path, "refs/for/tally/b", id, pack, time.Now().Add(time.Minute))
	if err == nil && (res.OK || !strings.Contains(res.Reason, "unpacker error")) {
		t.Fatalf("a pack with a wrong checksum: %#v %v", res, err)
	}
	if refs := testrepo.Git(t, s.bare, "for-each-ref"); refs != "" {
		t.Fatalf("refused pushes left refs:\n%s", refs)
	}
	pw, id = request("whole")
	if res, err = gitstore.PushRequestNative(host, addr, path, "refs/for/tally/c", id, pw.Bytes(), time.Now().Add(time.Minute)); err != nil || !res.OK {
		t.Fatalf("a whole request: %#v %v", res, err)
	}
	if got := testrepo.Git(t, s.bare, "rev-parse", "refs/for/tally/c"); got != id.String() {
		t.Fatalf("stored %s, pushed %s", got, id)
	}
}

// TestNativePushTargetLeavesToGit: tally pushes a request itself only to a
// git:// URL that git would reach directly: any configuration only git
// applies (a URL rewrite, a proxy, protocol rules, several push URLs,
// another protocol version, configuration in the environment) leaves the
// push to git, and so do other URL forms and schemes.
func TestNativePushTargetLeavesToGit(t *testing.T) {
	s := newRequestSite(t, gitserver.DaemonOptions{})
	dir := s.repo.WorkTree
	testrepo.Git(t, dir, "remote", "add", "origin", "git://example.com/r.git")
	host, addr, path, ok := gitstore.NativePushTarget(s.repo, "origin")
	if !ok || host != "example.com" || addr != "example.com:9418" || path != "/r.git" {
		t.Fatalf("origin: %q %q %q %v", host, addr, path, ok)
	}
	if host, addr, _, ok := gitstore.NativePushTarget(s.repo, "git://127.0.0.1:1234/r.git"); !ok || host != "127.0.0.1:1234" || addr != "127.0.0.1:1234" {
		t.Fatalf("a URL with a port: %q %q %v", host, addr, ok)
	}
	for _, url := range []string{"http://example.com/r.git", "ssh://example.com/r.git", "example.com:r.git", "/srv/r.git",
		"git://[::1]/r.git", "git://example.com/~user/r.git", "git://example.com/r%20x.git", "git://u@example.com/r.git", "git://example.com"} {
		if _, _, _, ok := gitstore.NativePushTarget(s.repo, url); ok {
			t.Errorf("%s: pushed natively", url)
		}
	}
	for _, c := range [][]string{
		{"url.git://example.com/.insteadOf", "git://elsewhere/"},
		{"url.git://example.com/.pushInsteadOf", "git://elsewhere/"},
		{"core.gitProxy", "proxy-command"},
		{"protocol.allow", "never"},
		{"protocol.git.allow", "never"},
		{"protocol.version", "1"},
		{"push.pushOption", "x"},
		{"push.negotiate", "true"},
		{"remote.origin.receivepack", "git receive-pack"},
		{"remote.origin.pushurl", "http://example.com/r.git"},
		{"remote.origin.vcs", "hg"},
	} {
		testrepo.Git(t, dir, "config", c[0], c[1])
		if _, _, _, ok := gitstore.NativePushTarget(s.repo, "origin"); ok {
			t.Errorf("%s=%s: pushed natively", c[0], c[1])
		}
		testrepo.Git(t, dir, "config", "--unset", c[0])
	}
	testrepo.Git(t, dir, "config", "--add", "remote.origin.url", "git://example.com/other.git")
	if _, _, _, ok := gitstore.NativePushTarget(s.repo, "origin"); ok {
		t.Errorf("two URLs (git pushes to both): pushed natively")
	}
	testrepo.Git(t, dir, "config", "--unset-all", "remote.origin.url")
	testrepo.Git(t, dir, "config", "remote.origin.url", "git://example.com/r.git")
	for _, env := range []string{"GIT_PROXY_COMMAND", "GIT_ALLOW_PROTOCOL", "GIT_OVERRIDE_VIRTUAL_HOST", "GIT_CONFIG_PARAMETERS", "GIT_CONFIG_COUNT", "GIT_CONFIG_SYSTEM"} {
		t.Setenv(env, "x")
		if _, _, _, ok := gitstore.NativePushTarget(s.repo, "origin"); ok {
			t.Errorf("%s set: pushed natively", env)
		}
		os.Unsetenv(env)
	}
	if _, _, _, ok := gitstore.NativePushTarget(s.repo, "origin"); !ok {
		t.Fatalf("origin after the settings went: not pushed natively")
	}
}
