package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/cliopt"
	"github.com/tally-dev/tally/internal/testrepo"
)

// lonelyTally copies the tally binary into a directory of its own, so that
// no tally-mcp is beside it, and returns the copy.
func lonelyTally(t *testing.T) string {
	t.Helper()
	b, err := os.ReadFile(testrepo.Tally(t))
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(t.TempDir(), "tally")
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// fakeServer writes a tally-mcp into dir that reports, as its first line of
// output, who it is (mark), its process id, its arguments and $TALLY_PROBE,
// then echoes one line of its stdin.
func fakeServer(t *testing.T, dir, mark string) {
	t.Helper()
	script := fmt.Sprintf("#!/bin/sh\necho \"%s $$ $TALLY_PROBE $*\"\nread line\necho \"got $line\"\n", mark)
	if err := os.WriteFile(filepath.Join(dir, cliopt.MCPProgram), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
}

// tally mcp does not serve: it becomes tally-mcp (the same process, so the
// agent's signals and the holder process its claims record stay right),
// found beside tally's executable before PATH, with every flag the command
// line set, the environment and stdio.
func TestMCPExecsTheServer(t *testing.T) {
	dir := testrepo.New(t)
	bin := lonelyTally(t)
	onPath := t.TempDir()
	fakeServer(t, onPath, "path")
	start := func() (pid int, first string, out *bufio.Reader, in io.WriteCloser, cmd *exec.Cmd) {
		t.Helper()
		cmd = exec.Command(bin, "--actor", "agent 1", "-C", dir, "mcp", "--auto-renew", "--renew-interval", "2s")
		cmd.Env = testrepo.Env("PATH="+onPath+string(os.PathListSeparator)+os.Getenv("PATH"), "TALLY_PROBE=probe")
		in, err := cmd.StdinPipe()
		if err != nil {
			t.Fatal(err)
		}
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// A server that says nothing (the real one, waiting for a request)
		// is killed rather than waited for.
		timer := time.AfterFunc(time.Minute, func() { cmd.Process.Kill() })
		defer timer.Stop()
		out = bufio.NewReader(stdout)
		first, err = out.ReadString('\n')
		if err != nil {
			t.Fatalf("no line from the server (not the fake tally-mcp?): %v", err)
		}
		return cmd.Process.Pid, strings.TrimSpace(first), out, in, cmd
	}
	check := func(mark string) {
		t.Helper()
		pid, first, out, in, cmd := start()
		want := fmt.Sprintf("%s %d probe --actor=agent 1 --auto-renew=true --renew-interval=2s --repo=%s", mark, pid, dir)
		if first != want {
			t.Errorf("the server says %q, want %q", first, want)
		}
		fmt.Fprintln(in, "hello")
		if echo, _ := out.ReadString('\n'); echo != "got hello\n" {
			t.Errorf("the server's stdin: it echoes %q", echo)
		}
		in.Close()
		if err := cmd.Wait(); err != nil {
			t.Errorf("tally mcp: %v", err)
		}
	}
	check("path")
	fakeServer(t, filepath.Dir(bin), "beside")
	check("beside")
}

// Without tally-mcp beside it or on PATH, tally mcp is refused with
// NOT-INSTALLED, naming the command that installs it; through the real
// server, a refusal before serving keeps the command line's error contract.
func TestMCPNotInstalled(t *testing.T) {
	dir := testrepo.New(t)
	res := testrepo.Exec(lonelyTally(t), dir, "agent", []string{"PATH=" + t.TempDir()}, "mcp", "--json")
	if res.Code != 2 || res.ErrorCode() != string(errs.NotInstalled) || res.ErrorField("install") != cliopt.MCPInstall {
		t.Fatalf("without tally-mcp: %s", res)
	}
	notRepo := t.TempDir()
	res = testrepo.Exec(testrepo.Tally(t), notRepo, "agent", nil, "mcp", "--json")
	if res.Code != 2 || res.ErrorCode() != string(errs.NotARepo) {
		t.Fatalf("tally mcp outside a repository: %s", res)
	}
	if res.Err != nil || res.JSON["ok"] != false {
		t.Fatalf("tally mcp --json outside a repository: %v, stdout %q", res.Err, res.Stdout)
	}
}
