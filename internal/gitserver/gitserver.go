// Package gitserver starts real git servers on the loopback interface for
// tests: git daemon (git://) and git http-backend behind net/http/cgi (smart
// HTTP). Both run receive-pack in their own processes with a controlled
// environment, so the server's hooks see the server's clock and
// configuration, not the client's (which is what a file:// remote would give
// them: there the hook inherits the pushing client's environment).
package gitserver

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/proctree"
)

// Kind names a server type; Kinds lists both, for tests that run over each.
type Kind string

const (
	GitDaemon Kind = "daemon"
	SmartHTTP Kind = "http"
)

// Kinds are the server types every remote test runs over.
var Kinds = []Kind{GitDaemon, SmartHTTP}

// Start starts a server of kind serving the bare repositories under root and
// returns its base URL (repositories are baseURL + "/" + directory name).
// env is added to the server's environment (testrepo.Env()), for example
// "TALLY_NOW=..." to set the clock of the server's hooks.
func Start(t testing.TB, kind Kind, root string, env ...string) string {
	t.Helper()
	switch kind {
	case GitDaemon:
		return Daemon(t, root, env...)
	case SmartHTTP:
		return HTTP(t, root, env...)
	}
	t.Fatalf("gitserver: unknown kind %q", kind)
	return ""
}

// Daemon starts `git daemon` on a free loopback port, serving (with
// receive-pack enabled) every repository under root, and returns
// git://127.0.0.1:PORT. It returns once the daemon accepts connections; the
// daemon and every process it started are killed at cleanup.
func Daemon(t testing.TB, root string, env ...string) string {
	t.Helper()
	return DaemonWith(t, root, DaemonOptions{}, env...)
}

// DaemonOptions change how DaemonWith serves, for tests of servers that
// refuse: a read-only daemon, or one whose access hook denies.
type DaemonOptions struct {
	// ReadOnly leaves receive-pack disabled (git daemon's default), so the
	// daemon refuses every push with "service not enabled".
	ReadOnly bool
	// AccessHook is git daemon's --access-hook: a program run before each
	// service with the service name and path as arguments; when it exits
	// non-zero the daemon refuses with the first line it printed.
	AccessHook string
	// MaxConnections is git daemon's --max-connections (0: its default,
	// 32): past it the daemon drops a new connection unanswered, logging
	// "Too many children, dropping connection".
	MaxConnections int
	// Log, when set, also receives the daemon's log (its stderr).
	Log io.Writer
}

// DaemonWith is Daemon with options.
func DaemonWith(t testing.TB, root string, opts DaemonOptions, env ...string) string {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		url, err := startDaemon(t, root, port, opts, env)
		if err == nil {
			return url
		}
		lastErr = err
	}
	t.Fatalf("gitserver: git daemon did not start: %v", lastErr)
	return ""
}

// freePort returns a loopback port that was free a moment ago (the daemon may
// still lose it to another process; Daemon then retries with another).
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}

// lockedBuffer collects a process's stderr for failure messages.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.b.Len() > 1<<20 { // keep memory bounded in long runs
		l.b.Reset()
	}
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func startDaemon(t testing.TB, root string, port int, opts DaemonOptions, env []string) (string, error) {
	// git-daemon itself rather than the git wrapper (which would run it as a
	// child), so that Pdeathsig reaches the listening process: the daemon dies
	// with the test process even when the test binary panics or is killed and
	// the cleanup below never runs.
	args := []string{"--reuseaddr", "--listen=127.0.0.1", "--port=" + strconv.Itoa(port),
		"--base-path=" + root, "--export-all", "--informative-errors", "--verbose"}
	if !opts.ReadOnly {
		args = append(args, "--enable=receive-pack")
	}
	if opts.AccessHook != "" {
		args = append(args, "--access-hook="+opts.AccessHook)
	}
	if opts.MaxConnections > 0 {
		args = append(args, "--max-connections="+strconv.Itoa(opts.MaxConnections))
	}
	cmd := exec.Command(filepath.Join(gitExecPath(t), "git-daemon"), append(args, root)...)
	cmd.Dir = root
	cmd.Env = testrepo.Env(env...)
	proctree.NewGroup(cmd)
	dieWithParent(cmd)
	stderr := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if opts.Log != nil {
		both := io.MultiWriter(stderr, opts.Log) // one writer: exec copies one pipe into it
		cmd.Stdout, cmd.Stderr = both, both
	}
	if err := cmd.Start(); err != nil {
		return "", err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		proctree.KillGroup(cmd) // the daemon and its children
		<-exited
	}
	addr := "127.0.0.1:" + strconv.Itoa(port)
	deadline := time.Now().Add(15 * time.Second)
	for {
		select {
		case <-exited:
			// Typically the port was taken between freePort and the bind.
			return "", fmt.Errorf("git daemon on port %d exited: %s", port, strings.TrimSpace(stderr.String()))
		default:
		}
		// "Ready to rumble" (--verbose) comes once the daemon listens, so a
		// connection accepted after it is the daemon's, not another process's
		// that took the port first.
		if strings.Contains(stderr.String(), "Ready to rumble") {
			if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
				c.Close()
				break
			}
		}
		if time.Now().After(deadline) {
			stop()
			return "", fmt.Errorf("git daemon on port %d: not accepting connections after 15s: %s", port, stderr.String())
		}
		time.Sleep(5 * time.Millisecond) // startup polling only
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if s := strings.TrimSpace(stderr.String()); s != "" {
				t.Logf("git daemon stderr (end):\n%s", tail(s, 4096))
			}
		}
	})
	return "git://" + addr, nil
}

// HTTP serves smart HTTP for the repositories under root with git
// http-backend run through net/http/cgi on a loopback httptest.Server, and
// returns http://127.0.0.1:PORT. Pushing needs http.receivepack=true in the
// repository (NewBare sets it).
func HTTP(t testing.TB, root string, env ...string) string {
	t.Helper()
	h, stderr := backend(t, root, env)
	return serve(t, h, stderr)
}

// AnonPrefix is the path prefix under which HTTPAuth serves without
// authentication.
const AnonPrefix = "/anon"

// HTTPAuth is HTTP behind an authenticating web server, the way one is put
// in front of git http-backend: a request with HTTP basic credentials of
// users (name → password) runs the backend with REMOTE_USER set to the name
// (and AUTH_TYPE=Basic), as the CGI specification says a server does after
// authenticating; wrong credentials get 401, and so does a request without
// any (the challenge after which git sends its credentials). Under
// AnonPrefix (baseURL + AnonPrefix + "/repo.git") requests without
// credentials run the backend without REMOTE_USER, as on a server that also
// lets anonymous users push.
func HTTPAuth(t testing.TB, root string, users map[string]string, env ...string) string {
	t.Helper()
	return HTTPAuthPushers(t, root, users, nil, env...)
}

// ForbiddenPage is the HTML page HTTPAuthPushers answers a forbidden push
// with, as a web server's error page looks.
const ForbiddenPage = "<html><head><title>403 Forbidden</title></head>\n<body><h1>Forbidden</h1>\n<p>push access is for maintainers only</p>\n<hr><address>test server</address></body></html>\n"

// HTTPAuthPushers is HTTPAuth where, when pushers is not nil, only the
// users it names may push: a receive-pack request (its advertisement or
// the push itself) by any other authenticated user gets 403 with
// ForbiddenPage, the way a web server's access rule for git-receive-pack
// refuses, while fetching stays open to every user.
func HTTPAuthPushers(t testing.TB, root string, users map[string]string, pushers map[string]bool, env ...string) string {
	t.Helper()
	h, stderr := backend(t, root, env)
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		user, pass, hasAuth := r.BasicAuth()
		if rest, anon := strings.CutPrefix(r.URL.Path, AnonPrefix+"/"); anon && !hasAuth {
			r.URL.Path = "/" + rest
			h.ServeHTTP(w, r)
			return
		}
		if want, ok := users[user]; !hasAuth || !ok || pass != want {
			w.Header().Set("WWW-Authenticate", `Basic realm="gitserver"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		if pushers != nil && !pushers[user] && (strings.HasSuffix(r.URL.Path, "/git-receive-pack") || r.URL.Query().Get("service") == "git-receive-pack") {
			w.Header().Set("Content-Type", "text/html")
			w.WriteHeader(http.StatusForbidden)
			io.WriteString(w, ForbiddenPage)
			return
		}
		// cgi.Handler never sets REMOTE_USER itself: a copy per request
		// carries this request's user (later Env entries win).
		hu := *h
		hu.Env = append(slices.Clip(h.Env), "REMOTE_USER="+user, "AUTH_TYPE=Basic")
		hu.ServeHTTP(w, r)
	}), stderr)
}

// backend is git http-backend as a CGI handler for the repositories under
// root, with env added to its environment.
func backend(t testing.TB, root string, env []string) (*cgi.Handler, *lockedBuffer) {
	t.Helper()
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(gitExecPath(t), "git-http-backend")
	if _, err := os.Stat(path); err != nil {
		t.Skipf("git http-backend not available: %v", err)
	}
	stderr := &lockedBuffer{}
	return &cgi.Handler{
		Path:   path,
		Dir:    root,
		Env:    testrepo.Env(append([]string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}, env...)...),
		Stderr: stderr,
	}, stderr
}

// serve serves h on a loopback httptest.Server until cleanup and returns its
// URL.
//
// git sends a push body larger than http.postBuffer (1 MiB) chunked, which
// web servers in front of http-backend accept but net/http/cgi refuses (400,
// CGI needs CONTENT_LENGTH): serve reads such a body whole first and passes
// it on with its length, as a web server that buffers request bodies does.
func serve(t testing.TB, h http.Handler, stderr *lockedBuffer) string {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if slices.Contains(r.TransferEncoding, "chunked") {
			body, err := io.ReadAll(r.Body)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadRequest)
				return
			}
			r.Body, r.ContentLength, r.TransferEncoding = io.NopCloser(bytes.NewReader(body)), int64(len(body)), nil
		}
		h.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.Close()
		if t.Failed() {
			if s := strings.TrimSpace(stderr.String()); s != "" {
				t.Logf("git http-backend stderr (end):\n%s", tail(s, 4096))
			}
		}
	})
	return srv.URL
}

// NewBare creates the bare repository root/name, installs tally's server
// hook in it with the real binary (`tally hooks install --server`), checks
// the objects pushed to it under testrepo.FsckVar, enables pushing over smart HTTP, keeps automatic gc in the foreground, logs every
// ref update in the reflog (see ServerLog), and returns its path.
func NewBare(t testing.TB, root, name string) string {
	t.Helper()
	dir := filepath.Join(root, name)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	testrepo.Git(t, dir, "init", "-q", "--bare", "-b", "main")
	testrepo.CheckObjects(t, dir)
	testrepo.Git(t, dir, "config", "http.receivepack", "true")
	// receive-pack may start an automatic gc; in the foreground it stays in
	// the server's process group, so it ends with the server at cleanup
	// instead of outliving the test in a removed directory.
	testrepo.Git(t, dir, "config", "gc.autoDetach", "false")
	// Every ref update the server makes is kept in its reflog, for tests to
	// explain a failure with.
	testrepo.Git(t, dir, "config", "core.logAllRefUpdates", "always")
	r := testrepo.Run(t, dir, "server", nil, "--json", "hooks", "install", "--server")
	if r.Code != 0 {
		t.Fatalf("tally hooks install --server in %s: exit %d\n%s%s", dir, r.Code, r.Stdout, r.Stderr)
	}
	hook := filepath.Join(dir, "hooks", "pre-receive")
	if b, err := os.ReadFile(hook); err != nil || !bytes.Contains(b, []byte("tally")) {
		t.Fatalf("tally hooks install --server did not write %s: %v", hook, err)
	}
	return dir
}

// ServerLog returns the last n updates of ref in the server repository bare,
// newest first, from its reflog (NewBare turns it on for every ref).
func ServerLog(t testing.TB, bare, ref string, n int) string {
	t.Helper()
	cmd := exec.Command("git", "reflog", "show", "--date=iso-strict", "--format=%H %gd %gs", "-n", strconv.Itoa(n), ref)
	cmd.Dir, cmd.Env = bare, testrepo.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Sprintf("git reflog %s: %v: %s", ref, err, out)
	}
	return string(out)
}

func tail(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return "..." + s[len(s)-n:]
}

// gitExecPath is where git keeps its programs (git --exec-path).
func gitExecPath(t testing.TB) string {
	t.Helper()
	out, err := exec.Command("git", "--exec-path").Output()
	if err != nil {
		t.Fatalf("git --exec-path: %v", err)
	}
	return strings.TrimSpace(string(out))
}

// SSHServer is OpenSSH's sshd serving the repositories under a root on the
// loopback interface, and what a client needs to reach it without an agent
// or the user's known_hosts: a key that sshd accepts, one it refuses, and a
// known_hosts file with sshd's host key.
type SSHServer struct {
	// URL is ssh://USER@127.0.0.1:PORT followed by the root's absolute path
	// (repositories are URL + "/" + directory name).
	URL, User, Port string
	Key, WrongKey   string // private key files
	KnownHosts      string
}

// Command is an ssh command (for GIT_SSH_COMMAND or core.sshCommand) that
// reaches the server with key and the server's known_hosts only: no user or
// system ssh configuration, no agent, never a prompt.
func (s *SSHServer) Command(key string) string {
	return "ssh -F /dev/null -o BatchMode=yes -o IdentitiesOnly=yes -o IdentityAgent=none -o UserKnownHostsFile=" +
		s.KnownHosts + " -o GlobalKnownHostsFile=/dev/null -i " + key
}

// SSHD is where OpenSSH's server is installed (Debian's openssh-server).
const SSHD = "/usr/sbin/sshd"

// SSH starts sshd on a free loopback port for the repositories under root,
// with a fresh host key and user key in a temporary directory, logging in
// as the current user with public keys only. Sessions run with the test
// environment (testrepo.Env) plus env, so git-receive-pack and the server's
// hooks find git and see env (TALLY_NOW for their clock). It skips the test
// when sshd is not installed, and fails it under CI=true (.ci/run installs
// openssh-server there).
func SSH(t testing.TB, root string, env ...string) *SSHServer {
	t.Helper()
	return SSHWith(t, root, SSHOptions{}, env...)
}

// SSHOptions change the sshd SSH starts.
type SSHOptions struct {
	// Config are more sshd_config lines (MaxStartups 1, say).
	Config []string
	// Log, when set, also receives sshd's log (its stderr, LogLevel VERBOSE).
	Log io.Writer
}

// SSHWith is SSH with options.
func SSHWith(t testing.TB, root string, opts SSHOptions, env ...string) *SSHServer {
	t.Helper()
	if _, err := os.Stat(SSHD); err != nil {
		testrepo.Missing(t, fmt.Sprintf("gitserver: %s not installed (apt-get install openssh-server); skipping the ssh test", SSHD))
	}
	root, err := filepath.Abs(root)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	keygen := func(name string) string {
		path := filepath.Join(dir, name)
		if out, err := exec.Command("ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", name, "-f", path).CombinedOutput(); err != nil {
			t.Fatalf("ssh-keygen: %v: %s", err, out)
		}
		return path
	}
	host, key, wrong := keygen("host"), keygen("user"), keygen("wrong")
	pub, err := os.ReadFile(key + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "authorized_keys"), pub, 0o600); err != nil {
		t.Fatal(err)
	}
	hostPub, err := os.ReadFile(host + ".pub")
	if err != nil {
		t.Fatal(err)
	}
	u, err := user.Current()
	if err != nil {
		t.Fatal(err)
	}
	// sshd running as root wants its privilege separation directory.
	if os.Geteuid() == 0 {
		os.MkdirAll("/run/sshd", 0o755)
	}
	var lastErr error
	for attempt := 0; attempt < 20; attempt++ {
		port, err := freePort()
		if err != nil {
			t.Fatal(err)
		}
		p := strconv.Itoa(port)
		kh := filepath.Join(dir, "known_hosts")
		if err := os.WriteFile(kh, []byte("[127.0.0.1]:"+p+" "+string(hostPub)), 0o644); err != nil {
			t.Fatal(err)
		}
		conf := []string{"Port " + p, "ListenAddress 127.0.0.1", "HostKey " + host,
			"AuthorizedKeysFile " + filepath.Join(dir, "authorized_keys"), "StrictModes no",
			"PubkeyAuthentication yes", "PasswordAuthentication no", "KbdInteractiveAuthentication no",
			"PermitRootLogin prohibit-password", "UsePAM no", "PidFile none", "LogLevel VERBOSE"}
		var setEnv []string
		for _, kv := range testrepo.Env(env...) {
			if !strings.ContainsAny(kv, " \"'\t\\") {
				setEnv = append(setEnv, kv)
			}
		}
		conf = append(conf, "SetEnv "+strings.Join(setEnv, " "))
		conf = append(conf, opts.Config...)
		cfg := filepath.Join(dir, "sshd_config")
		if err := os.WriteFile(cfg, []byte(strings.Join(conf, "\n")+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := startSSHD(t, cfg, port, opts.Log); err != nil {
			lastErr = err
			continue
		}
		s := &SSHServer{URL: "ssh://" + u.Username + "@127.0.0.1:" + p + root, User: u.Username, Port: p,
			Key: key, WrongKey: wrong, KnownHosts: kh}
		return s
	}
	t.Fatalf("gitserver: sshd did not start: %v", lastErr)
	return nil
}

func startSSHD(t testing.TB, cfg string, port int, log io.Writer) error {
	cmd := exec.Command(SSHD, "-D", "-e", "-f", cfg)
	proctree.NewGroup(cmd)
	dieWithParent(cmd)
	stderr := &lockedBuffer{}
	cmd.Stdout, cmd.Stderr = stderr, stderr
	if log != nil {
		both := io.MultiWriter(stderr, log) // one writer: exec copies one pipe into it
		cmd.Stdout, cmd.Stderr = both, both
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	exited := make(chan struct{})
	go func() { cmd.Wait(); close(exited) }()
	stop := func() {
		proctree.KillGroup(cmd)
		<-exited
	}
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(stderr.String(), "Server listening on 127.0.0.1 port "+strconv.Itoa(port)) {
		select {
		case <-exited:
			return fmt.Errorf("sshd on port %d exited: %s", port, strings.TrimSpace(stderr.String()))
		default:
		}
		if time.Now().After(deadline) {
			stop()
			return fmt.Errorf("sshd on port %d: not listening after 15s: %s", port, stderr.String())
		}
		time.Sleep(5 * time.Millisecond) // startup polling only
	}
	t.Cleanup(func() {
		stop()
		if t.Failed() {
			if s := strings.TrimSpace(stderr.String()); s != "" {
				t.Logf("sshd stderr (end):\n%s", tail(s, 4096))
			}
		}
	})
	return nil
}

// HTTPCheck is HTTP behind a web server that lets a request through only
// when allow says so, and answers any other with 401 and a Basic challenge
// (after which git asks its credential helpers and tries again): for tests
// of credentials git finds in its configuration (credential helpers,
// http.extraHeader).
func HTTPCheck(t testing.TB, root string, allow func(*http.Request) bool, env ...string) string {
	t.Helper()
	h, stderr := backend(t, root, env)
	return serve(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !allow(r) {
			w.Header().Set("WWW-Authenticate", `Basic realm="gitserver"`)
			http.Error(w, "authentication required", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(w, r)
	}), stderr)
}
