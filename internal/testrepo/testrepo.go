// Package testrepo creates real git repositories for tests and benchmarks.
package testrepo

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tally-dev/tally/gitstore"
)

// serverVars are prefixes of variables git servers set for their hooks
// (gitolite and GitLab GL_*, Gitea GITEA_*, Soft Serve SOFT_SERVE_*, and a web
// server's REMOTE_USER): a test names the pusher itself or not at all.
var serverVars = []string{"GL_", "GITEA_", "SOFT_SERVE_", "REMOTE_USER="}

func namesPusher(kv string) bool {
	for _, p := range serverVars {
		if strings.HasPrefix(kv, p) {
			return true
		}
	}
	return false
}

// Env returns an environment for running git and tally in tests: no system
// or user configuration, a fixed identity, none of a git server's variables.
func Env(extra ...string) []string {
	env := []string{}
	for _, kv := range os.Environ() {
		if strings.HasPrefix(kv, "GIT_") || strings.HasPrefix(kv, "TALLY_") || strings.HasPrefix(kv, "HOME=") || namesPusher(kv) {
			continue
		}
		env = append(env, kv)
	}
	home := filepath.Join(os.TempDir(), "tally-test-home")
	os.MkdirAll(home, 0o755)
	env = append(env, "HOME="+home, "GIT_CONFIG_NOSYSTEM=1", "GIT_CONFIG_GLOBAL=/dev/null",
		"GIT_AUTHOR_NAME=test", "GIT_AUTHOR_EMAIL=test@example.com",
		"GIT_COMMITTER_NAME=test", "GIT_COMMITTER_EMAIL=test@example.com")
	return append(env, extra...)
}

// Git runs git in dir and returns its trimmed stdout, failing the test on error.
func Git(t testing.TB, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = Env()
	out, err := cmd.Output()
	if err != nil {
		stderr := ""
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("git %v in %s: %v\n%s", args, dir, err, stderr)
	}
	return strings.TrimSpace(string(out))
}

// FsckVar names the variable that, set to 1, has every repository New and
// gitserver.NewBare create check each object it receives as hardened
// servers do (receive.fsckObjects and transfer.fsckObjects: git fsck's
// checks, refusing the push or fetch of a commit git would report). CI runs
// the ledger, receipt and remote tests so once (.ci/run): a ledger, note
// or checkpoint tally writes that such a server refuses fails them.
const FsckVar = "TALLY_TEST_FSCK"

// CheckObjects turns on the object checks of FsckVar in the repository dir
// (bare or not) when the variable is 1; otherwise it does nothing, sparing
// the checks' time.
func CheckObjects(t testing.TB, dir string) {
	t.Helper()
	if os.Getenv(FsckVar) != "1" {
		return
	}
	Git(t, dir, "config", "receive.fsckObjects", "true")
	Git(t, dir, "config", "transfer.fsckObjects", "true")
}

// New creates a repository with one commit and returns its work tree. The
// test waits for background compactions there before the directory goes.
func New(t testing.TB) string {
	t.Helper()
	dir := t.TempDir()
	Git(t, dir, "init", "-q", "-b", "main")
	CheckObjects(t, dir)
	Git(t, dir, "commit", "-q", "--allow-empty", "-m", "root")
	t.Cleanup(func() { WaitCompaction(t, filepath.Join(dir, ".git")) })
	return dir
}

var (
	tallyOnce sync.Once
	tallyBin  string
	tallyErr  error
)

// Tally builds the tally command once per test process and returns its path.
// The MCP server tally-mcp, which `tally mcp` execs from beside it, is built
// into the same directory.
func Tally(t testing.TB) string {
	t.Helper()
	tallyOnce.Do(func() {
		dir, err := os.MkdirTemp("", "tally-bin-")
		if err != nil {
			tallyErr = err
			return
		}
		tallyBin = filepath.Join(dir, "tally")
		out, err := exec.Command("go", "build", "-o", dir, "github.com/tally-dev/tally/cmd/tally", "github.com/tally-dev/tally/cmd/tally-mcp").CombinedOutput()
		if err != nil {
			tallyErr = fmt.Errorf("go build: %v\n%s", err, out)
		}
	})
	if tallyErr != nil {
		t.Fatal(tallyErr)
	}
	return tallyBin
}

// Result is the outcome of one tally invocation.
type Result struct {
	Args   []string       // the arguments after -C DIR
	Code   int            // exit code
	JSON   map[string]any // decoded stdout when --json was given
	Stdout string
	Stderr string
	Wall   time.Duration
	Err    error // could not run, killed by a signal, or with --json stdout is not exactly one JSON object
}

// ErrorCode returns the JSON error code ("" on success).
func (r Result) ErrorCode() string {
	code, _ := r.ErrorField("code").(string)
	return code
}

// ErrorField returns a member of the JSON error object (nil on success).
func (r Result) ErrorField(k string) any {
	e, _ := r.JSON["error"].(map[string]any)
	return e[k]
}

func (r Result) String() string {
	return fmt.Sprintf("tally %v: exit %d %s%s", r.Args, r.Code, strings.TrimSpace(r.Stdout), strings.TrimSpace(r.Stderr))
}

// Exec runs the tally binary bin in dir as actor with args; env entries are
// added to Env(). With "--json" among args, stdout is decoded into
// Result.JSON. It touches no *testing.T, so goroutines and benchmarks'
// workers may call it; what went wrong is in Result.Err.
func Exec(bin, dir, actor string, env []string, args ...string) Result {
	cmd := exec.Command(bin, append([]string{"-C", dir}, args...)...)
	cmd.Env = Env(append([]string{"TALLY_ACTOR=" + actor}, env...)...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	res := Result{Args: args, Wall: time.Since(start), Stdout: stdout.String(), Stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		res.Code = ee.ExitCode()
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			res.Err = fmt.Errorf("killed by %v", ws.Signal())
			return res
		}
	} else if err != nil {
		res.Err = err
		return res
	}
	if slices.Contains(args, "--json") {
		dec := json.NewDecoder(&stdout)
		if err := dec.Decode(&res.JSON); err != nil || dec.More() {
			res.Err = fmt.Errorf("stdout is not one JSON object (%v)", err)
		}
	}
	return res
}

// Run is Exec with the binary built for this test process (Tally); the test
// fails, showing the outcome, if Exec's Err is set.
func Run(t testing.TB, dir, actor string, env []string, args ...string) Result {
	t.Helper()
	res := Exec(Tally(t), dir, actor, env, args...)
	if res.Err != nil {
		t.Fatalf("%s: %v", res, res.Err)
	}
	return res
}

// WaitCompaction waits until no tally compaction runs in the repository whose
// common git directory is commonDir: appends start them in the background,
// and one that is still merging packs when a test runs git fsck or removes
// the directory would make the test fail for a reason of its own.
func WaitCompaction(t testing.TB, commonDir string) {
	t.Helper()
	lock, err := gitstore.LockCompaction(gitstore.LocalPathsOf(commonDir).CompactLock(), true)
	if err != nil {
		t.Fatalf("waiting for compaction in %s: %v", commonDir, err)
	}
	lock.Close()
}

// Missing reports that software a test needs (sshd, node, chromium, strace)
// is absent: the test is skipped saying why, so `go test ./...` passes with
// only Go and git, except under CI=true, where .ci/run installs all of it and
// its absence fails the run.
func Missing(t testing.TB, why string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("%s (under CI=true, .ci/run must install it)", why)
	}
	t.Skip(why)
}

// HandoverSocket is the path of the writer lock's hand-over socket
// (FORMAT.md §9, "Group commit") of the clone whose common git directory is
// gitDir, as /proc/net/unix shows it.
func HandoverSocket(gitDir string) string {
	return gitstore.LocalPathsOf(gitDir).WriterSocket()
}

// AwaitSockets waits until a writer-lock holder listens on the socket
// name and n-1 connections to it bear its name in the network namespace's
// list of Unix sockets (which lists those not yet accepted too, and a path
// as it was bound). A socket bound but not yet listening refuses
// connections, so it does not count. It skips the test without that list.
//
// The list is read as the calling thread's namespace has it
// (/proc/thread-self/net/unix), not the process's (/proc/net/unix, which
// is the main thread's): a harness test moves a locked thread into a
// namespace of its own, and when that thread is the main one the runtime
// keeps it there for good, so the process's list would be that
// namespace's, empty of every socket the test makes.
func AwaitSockets(t testing.TB, name string, n int) {
	t.Helper()
	list := "/proc/thread-self/net/unix"
	if _, err := os.Stat(list); err != nil {
		list = "/proc/net/unix" // Linux before 3.17
	}
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(time.Millisecond) {
		b, err := os.ReadFile(list)
		if err != nil {
			t.Skipf("no %s to watch the hand-over socket: %v", list, err)
		}
		listening, got := false, 0
		for _, l := range strings.Split(string(b), "\n") {
			if f := strings.Fields(l); len(f) == 8 && f[7] == name {
				got++
				listening = listening || f[3] == "00010000" // __SO_ACCEPTCON: listen(2) was called
			}
		}
		if listening && got >= n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d sockets named %s (a listener: %v), want %d", got, name, listening, n)
		}
	}
}

// Strace returns strace's path, for the tests that kill or hold tally at an
// exact system call (Missing without it).
func Strace(t testing.TB) string {
	t.Helper()
	p, err := exec.LookPath("strace")
	if err != nil {
		Missing(t, "strace is not installed: cannot stop tally at an exact system call")
	}
	return p
}

// EachGoFile parses every Go file of the module below root (tests too when
// tests is set; .git, node_modules and testdata skipped) and calls fn with
// each, for the tests that check a rule over the whole source (error codes
// and kinds spelled as constants, With's result used).
func EachGoFile(t testing.TB, root string, tests bool, fn func(fset *token.FileSet, path string, f *ast.File)) {
	t.Helper()
	fset := token.NewFileSet()
	err := filepath.WalkDir(root, func(path string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		if d.IsDir() && (d.Name() == ".git" || d.Name() == "node_modules" || d.Name() == "testdata") {
			return filepath.SkipDir
		}
		if d.IsDir() || !strings.HasSuffix(path, ".go") || (!tests && strings.HasSuffix(path, "_test.go")) {
			return nil
		}
		f, err := parser.ParseFile(fset, path, nil, 0)
		if err != nil {
			return err
		}
		fn(fset, path, f)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// Constants parses one Go file and returns its constants of the named type,
// name -> string value: the vocabulary (error codes, entry kinds) the source
// checks compare the rest of the module against.
func Constants(t testing.TB, file, typ string) map[string]string {
	t.Helper()
	f, err := parser.ParseFile(token.NewFileSet(), file, nil, 0)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, d := range f.Decls {
		g, ok := d.(*ast.GenDecl)
		if !ok || g.Tok != token.CONST {
			continue
		}
		for _, spec := range g.Specs {
			vs := spec.(*ast.ValueSpec)
			if id, ok := vs.Type.(*ast.Ident); !ok || id.Name != typ {
				continue
			}
			for i, n := range vs.Names {
				if lit, ok := vs.Values[i].(*ast.BasicLit); ok {
					out[n.Name], _ = strconv.Unquote(lit.Value)
				}
			}
		}
	}
	return out
}

// CPUMeter measures the CPU time (user and system, of every thread: the
// collector's included) the process spends between StartCPU and Report.
// It barely moves when other work shares the cores; wall time does.
type CPUMeter struct{ start time.Duration }

// StartCPU starts a CPUMeter.
func StartCPU() CPUMeter { return CPUMeter{processCPU()} }

// Report reports the CPU spent since StartCPU over n operations as the
// benchmark metric cpu-ms/op.
func (m CPUMeter) Report(b *testing.B, n int) {
	cpu := processCPU() - m.start
	b.ReportMetric(float64(cpu)/float64(time.Millisecond)/float64(n), "cpu-ms/op")
}

// Allocated is the number of bytes f allocates on the heap (with anything
// else the process allocates meanwhile): for a test that a refusal comes
// before an allocation.
func Allocated(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}
