package main

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// gitCommands runs tally as netRun does with git's command trace in a new
// file and returns the result and the git commands it ran ("push",
// "fetch", ...), each once per run.
func gitCommands(t testing.TB, bin, dir, actor string, env []string, args ...string) (testrepo.Result, []string) {
	f, err := os.CreateTemp(t.TempDir(), "trace")
	if err != nil {
		return testrepo.Result{Err: err}, nil
	}
	f.Close()
	p := netRun(bin, dir, actor, append([]string{"GIT_TRACE=" + f.Name()}, env...), args...)
	b, err := os.ReadFile(f.Name())
	if err != nil && p.Err == nil {
		p.Err = err
	}
	var cmds []string
	for _, m := range regexp.MustCompile(`(?m)trace: built-in: git (\S+)`).FindAllSubmatch(b, -1) {
		cmds = append(cmds, string(m[1]))
	}
	return p, cmds
}

// viaGit makes a clone reach the server through a url.<base>.insteadOf
// that maps the server's URL onto itself: what `git push` reaches is
// unchanged, but only git applies insteadOf, so tally leaves the push of a
// request to git.
func viaGit(t testing.TB, dir, url string) {
	testrepo.Git(t, dir, "config", "url."+url+".insteadOf", url)
}

// errorOf is the error of a refused run without what names the request
// (its commit, and the server's quarantine directory and process ids in a
// message that quotes git), so that two runs compare.
func errorOf(p testrepo.Result) any {
	e := p.JSON["error"]
	b := fmt.Sprint(e)
	return regexp.MustCompile(`[0-9a-f]{40}|incoming-[A-Za-z0-9]+|\[[0-9]+\]`).ReplaceAllString(b, "X")
}

// TestSequencedNativePush: over git daemon a sequenced claim pushes its
// request itself: after the first claim (which fetches) a claim runs no git
// process at all — no `git push`, no pack-objects — and every grant is
// good. The server cannot tell the two pushes apart: its proc-receive hook
// sees the same environment (the pusher variables among it) for a request
// pushed by tally as for one pushed by `git push` (a clone whose insteadOf
// leaves the push to git). The outcomes match too: the same refusal by the
// rules (NO-READY-CELL, same code, message, details and exit), the same
// refusal by pre-receive where the server does not route requests
// (SEQUENCER-ABSENT), and a receive-pack killed mid-request (the connection
// cut before the report) is the same retryable REMOTE-UNREACHABLE with
// nothing appended, after which claims are served. Over smart HTTP the
// request is pushed with git push, as before.
func TestSequencedNativePush(t *testing.T) {
	t.Parallel()
	c := newNetCluster(t, gitserver.GitDaemon)
	seed := c.seeded("native", 6)
	dirs := c.agents(2)
	native, cli := dirs[0], dirs[1]
	sequenced(t, native, cli)
	viaGit(t, cli, c.url)
	envLog := filepath.Join(c.bare, "hook-env")
	wrapSequencer(t, c.bare, func(real string) string {
		return `#!/bin/sh
mode=$(cat '` + c.bare + `/cut-mode' 2>/dev/null)
env >>'` + envLog + `'
echo ---- >>'` + envLog + `'
if [ "$mode" = cut ]; then kill -9 $PPID; exit 1; fi
exec '` + real + `' "$@"
`
	})
	claim := []string{"--remote", "origin", "claim", "--next", "--ttl", "3600"}
	for i, dir := range dirs {
		if p, cmds := gitCommands(t, c.bin, dir, netAgent(i), nil, claim...); p.Code != 0 || !slices.Contains(cmds, "fetch") {
			t.Fatalf("first claim of %s: %s, git %v: want a grant and a fetch", netAgent(i), p, cmds)
		}
	}
	os.Remove(envLog)
	p, cmds := gitCommands(t, c.bin, native, netAgent(0), nil, claim...)
	if p.Code != 0 || len(cmds) != 0 {
		t.Fatalf("sequenced claim over git daemon: %s, ran git %v; want a grant and no git process", p, cmds)
	}
	p, cmds = gitCommands(t, c.bin, cli, netAgent(1), nil, claim...)
	if p.Code != 0 || !reflect.DeepEqual(cmds, []string{"push", "pack-objects"}) {
		t.Fatalf("sequenced claim through insteadOf: %s, ran git %v; want a grant and git push (and its pack-objects)", p, cmds)
	}
	envs := hookEnvs(t, envLog)
	if len(envs) != 2 || !reflect.DeepEqual(envs[0], envs[1]) {
		t.Fatalf("the sequencer's environment, pushed by tally then by git:\n%v\n%v", envs[0], envs[1])
	}

	// The rules' refusal: two cells left, taken by the two; then neither
	// gets one.
	c.ok(native, netAgent(0), nil, claim...)
	c.ok(cli, netAgent(1), nil, claim...)
	a := c.refused(1, "NO-READY-CELL", native, netAgent(0), nil, claim...)
	b := c.refused(1, "NO-READY-CELL", cli, netAgent(0), nil, claim...)
	if !reflect.DeepEqual(a.JSON["error"], b.JSON["error"]) {
		t.Fatalf("refusal pushed by tally %v, by git %v", a.JSON["error"], b.JSON["error"])
	}

	// A cut connection: receive-pack killed once the sequencer runs.
	testrepo.Git(t, seed, "fetch", "-q", "origin")
	before := c.serverTip()
	if err := os.WriteFile(filepath.Join(c.bare, "cut-mode"), []byte("cut"), 0o644); err != nil {
		t.Fatal(err)
	}
	a = c.refused(1, "REMOTE-UNREACHABLE", native, netAgent(0), nil, claim...)
	b = c.refused(1, "REMOTE-UNREACHABLE", cli, netAgent(1), nil, claim...)
	if after := c.serverTip(); after != before {
		t.Fatalf("cut requests moved the ledger from %s to %s", before, after)
	}
	t.Logf("cut: by tally %v; by git %v", errorOf(a), errorOf(b))
	os.Remove(filepath.Join(c.bare, "cut-mode"))

	// pre-receive's refusal: the server no longer routes requests, and
	// these clones chose the sequencer (tally.sequencer=true).
	testrepo.Git(t, c.bare, "config", "--unset-all", "receive.procReceiveRefs")
	a = c.refused(2, "SEQUENCER-ABSENT", native, netAgent(0), nil, claim...)
	b = c.refused(2, "SEQUENCER-ABSENT", cli, netAgent(1), nil, claim...)
	if errorOf(a) != errorOf(b) {
		t.Fatalf("pre-receive refusal pushed by tally:\n%v\nby git:\n%v", errorOf(a), errorOf(b))
	}
	if refs := c.lsRemote(); strings.Contains(refs, "refs/for/") {
		t.Fatalf("request refs on the server:\n%s", refs)
	}

	// Over smart HTTP tally leaves the push to git.
	h := newNetCluster(t, gitserver.SmartHTTP)
	h.seeded("http", 2)
	dir := h.agents(1)[0]
	sequenced(t, dir)
	h.ok(dir, netAgent(0), nil, claim...)
	if p, cmds := gitCommands(t, h.bin, dir, netAgent(0), nil, claim...); p.Code != 0 || !slices.Contains(cmds, "push") {
		t.Fatalf("sequenced claim over http: %s, ran git %v; want a grant and git push", p, cmds)
	}
}

// hookEnvs reads the environments a wrapped sequencer logged (env, then a
// "----" line), each without the variables that name one connection or
// process (the client's port, the quarantine directory's random name, the
// shell's own).
func hookEnvs(t *testing.T, log string) [][]string {
	b, err := os.ReadFile(log)
	if err != nil {
		t.Fatal(err)
	}
	var out [][]string
	for _, block := range strings.Split(string(b), "----\n") {
		if strings.TrimSpace(block) == "" {
			continue
		}
		var env []string
		for _, kv := range strings.Split(strings.TrimSpace(block), "\n") {
			k, v, _ := strings.Cut(kv, "=")
			switch k {
			case "REMOTE_PORT", "SHLVL", "_", "OLDPWD":
				continue
			case "GIT_QUARANTINE_PATH", "GIT_OBJECT_DIRECTORY":
				v = regexp.MustCompile(`incoming-[A-Za-z0-9]+`).ReplaceAllString(v, "incoming-X")
			}
			env = append(env, k+"="+v)
		}
		sort.Strings(env)
		out = append(out, env)
	}
	return out
}

// TestSequencedNativePushWritesNoPack: a request pushed over git daemon is
// sent from memory: the clone creates no pack for it (counted from strace:
// the packs whose files a claim creates in objects/pack), only the one of
// the range the server sent back, and runs no other program.
func TestSequencedNativePushWritesNoPack(t *testing.T) {
	strace := testrepo.Strace(t)
	t.Parallel()
	c, _, dir := sequencedAgent(t, "nopack", 4)
	claim := []string{"--remote", "origin", "claim", "--next", "--ttl", "3600"}
	c.ok(dir, netAgent(0), nil, claim...) // the first one fetches
	trace := filepath.Join(t.TempDir(), "trace")
	cmd := exec.Command(strace, append([]string{"-f", "-qq", "-o", trace, "-e", "trace=openat,execve", c.bin, "-C", dir, "--json"}, claim...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + netAgent(0))
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("tally %v: %v %s", claim, err, out)
	}
	b, err := os.ReadFile(trace)
	if err != nil {
		t.Fatal(err)
	}
	packs := map[string]bool{}
	for _, m := range regexp.MustCompile(`openat\(AT_FDCWD, "[^"]*/objects/pack/(pack-[0-9a-f]{40})\.[a-z]+", [^)]*O_CREAT`).FindAllSubmatch(b, -1) {
		packs[string(m[1])] = true
	}
	if len(packs) != 1 {
		t.Errorf("a sequenced claim created the files of %d packs %v, want 1 (the sent range's)", len(packs), packs)
	}
	if n := len(regexp.MustCompile(`(?m)^\d+ +execve\(`).FindAll(b, -1)); n != 1 {
		t.Errorf("a sequenced claim ran %d programs, want 1 (tally itself)", n)
	}
}
