package gitstore

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"strings"
	"syscall"
	"time"
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
	args := g.Args
	if g.Dir != "" {
		args = append([]string{"-C", g.Dir}, args...)
	}
	cmd := exec.CommandContext(ctx, "git", args...)
	if len(g.Env) > 0 {
		cmd.Env = append(os.Environ(), g.Env...)
	}
	if g.Timeout > 0 {
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
		cmd.WaitDelay = time.Second // a grandchild holding the pipes must not keep Run waiting
	}
	cmd.Stdin = g.Stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
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
		err = ctx.Err()
	}
	return stdout.Bytes(), &GitError{Args: g.Args, Code: code, Stderr: stderr.String(), Err: err}
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
