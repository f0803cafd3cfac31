package gitstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tally-dev/tally/proctree"
)

// Every non-test spawn of the git CLI goes through GitRun.Run: one place
// builds argv and environment, captures stdout and stderr, bounds network
// commands in time, and turns a failure into a *GitError. Callers classify
// failures from GitError alone (remoteFailure for the network).

// GitRun is one run of the git CLI.
type GitRun struct {
	// Dir is where git runs (git -C Dir); "" is the current directory.
	Dir  string
	Args []string
	// Env is added to tally's environment (later entries win).
	Env   []string
	Stdin io.Reader
	// Timeout, when set, bounds the run: git and every process it started
	// (ssh, git-remote-http, pack-objects; they share a new process group)
	// are killed when it passes.
	Timeout time.Duration
	// Idle, when set, bounds silence rather than the run: git and every
	// process it started are killed, as for Timeout, once git has written
	// nothing to stdout or stderr for Idle. A transfer that keeps reporting
	// progress (--progress) may take as long as it needs; one that stalls
	// ends.
	Idle time.Duration
	// MaxOutput, when set, bounds what git may write to stdout and stderr
	// together: git and every process it started are killed, as for
	// Timeout, once it has written more (what a server relays through git,
	// "remote: " lines, is only as bounded as this).
	MaxOutput int
	// Progress, when set, also receives git's stderr as git writes it (for
	// a command run with --progress); a GitError's Stderr then leaves git's
	// progress lines out (withoutProgress), so failures read as without it.
	Progress io.Writer
}

// GitError is a git command that did not succeed: Code is its exit code (-1
// when it did not start or was killed), Stderr what it printed there.
type GitError struct {
	Args   []string
	Code   int
	Stderr string
	Err    error
}

func (e *GitError) Error() string {
	name := "git"
	if len(e.Args) > 0 {
		name += " " + e.Args[0]
	}
	if s := strings.TrimSpace(e.Stderr); s != "" {
		return name + ": " + s
	}
	return name + ": " + e.Err.Error()
}

func (e *GitError) Unwrap() error { return e.Err }

// Run runs git and returns its stdout. A non-zero exit, a failure to start
// and a timeout are a *GitError.
func (g GitRun) Run() ([]byte, error) {
	ctx := context.Background()
	if g.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, g.Timeout)
		defer cancel()
	}
	var heard func(n int) bool
	if g.Idle > 0 || g.MaxOutput > 0 {
		var cancel context.CancelCauseFunc
		ctx, cancel = context.WithCancelCause(ctx)
		defer cancel(nil)
		silent := func() {}
		if g.Idle > 0 {
			silence := time.AfterFunc(g.Idle, func() { cancel(fmt.Errorf("git said nothing for %v", g.Idle)) })
			defer silence.Stop()
			silent = func() { silence.Reset(g.Idle) }
		}
		var written atomic.Int64
		heard = func(n int) bool {
			silent()
			if g.MaxOutput > 0 && written.Add(int64(n)) > int64(g.MaxOutput) {
				cancel(fmt.Errorf("git wrote more than %d bytes", g.MaxOutput))
				return false
			}
			return true
		}
	}
	args := g.Args
	if g.Dir != "" {
		args = append([]string{"-C", g.Dir}, args...)
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	if len(g.Env) > 0 {
		cmd.Env = append(os.Environ(), g.Env...)
	}
	if g.Timeout > 0 || heard != nil {
		proctree.KillGroupOnCancel(cmd)
		cmd.WaitDelay = time.Second // a grandchild holding the pipes must not keep Run waiting
	}
	cmd.Stdin = g.Stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = io.Writer(&stdout), io.Writer(&stderr)
	if g.Progress != nil {
		cmd.Stderr = io.MultiWriter(&stderr, g.Progress)
	}
	if heard != nil {
		cmd.Stdout, cmd.Stderr = hearing{cmd.Stdout, heard}, hearing{cmd.Stderr, heard}
	}
	err := cmd.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	code := -1
	var ee *exec.ExitError
	if errors.As(err, &ee) && ctx.Err() == nil {
		code = ee.ExitCode()
	}
	if ctx.Err() != nil {
		err = context.Cause(ctx)
	}
	said := stderr.String()
	if g.Progress != nil || g.Idle > 0 {
		said = withoutProgress(said)
	}
	return stdout.Bytes(), &GitError{Args: g.Args, Code: code, Stderr: said, Err: err}
}

// hearing is a writer that calls heard with the length of every write
// (GitRun.Idle, GitRun.MaxOutput), and drops the bytes heard refuses
// (past MaxOutput: git is being killed).
type hearing struct {
	w     io.Writer
	heard func(n int) bool
}

func (h hearing) Write(p []byte) (int, error) {
	if !h.heard(len(p)) {
		return len(p), nil
	}
	return h.w.Write(p)
}

// progressLine matches a line of git's progress output, its own or the
// server's relayed as "remote: ...": the counters of enumerating, counting,
// compressing, writing, receiving, resolving and indexing, and the summary
// "Total N (delta M), ...".
var progressLine = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^(remote: )?(Enumerating objects|Counting objects|Delta compression using|Compressing objects|Writing objects|Total [0-9]+ \(delta|Resolving deltas|Receiving objects|Unpacking objects|Indexing objects|Checking objects)`)
})

// withoutProgress returns what git printed less its progress: every line
// (git redraws one with carriage returns) that progressLine matches.
func withoutProgress(s string) string {
	var b strings.Builder
	for _, line := range strings.SplitAfter(strings.ReplaceAll(s, "\r", "\n"), "\n") {
		if !progressLine().MatchString(strings.TrimSpace(line)) && strings.TrimSpace(line) != "" {
			b.WriteString(line)
		}
	}
	return b.String()
}

// RunGit runs git in dir (git -C dir) and returns its stdout.
func RunGit(dir string, args ...string) ([]byte, error) {
	return GitRun{Dir: dir, Args: args}.Run()
}

// Git runs git in the repository and returns its stdout: in the work tree
// when there is one (commands such as status need it), else in the git
// directory.
func (r *Repo) Git(args ...string) ([]byte, error) {
	return RunGit(r.gitRunDir(), args...)
}

func (r *Repo) gitRunDir() string {
	if r.WorkTree != "" {
		return r.WorkTree
	}
	return r.GitDir
}
