package main

// The edit guard (FORMAT.md §9c) through the real binary: each harness's
// payload in its documented shape (Cursor's too: it has no CLI to drive),
// the decision read back in that harness's answer form.

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// guardOut is one run of tally guard.
type guardOut struct {
	code           int
	stdout, stderr string
}

// runGuard runs `tally guard --agent agent` as actor with payload on
// stdin, from a directory in no repository: the payload's cwd names the
// repository, as a harness running its hooks elsewhere would find.
func runGuard(t *testing.T, actor, agent, payload string, env ...string) guardOut {
	t.Helper()
	cmd := exec.Command(testrepo.Tally(t), "guard", "--agent", agent)
	cmd.Dir = t.TempDir()
	cmd.Env = testrepo.Env(append([]string{"TALLY_ACTOR=" + actor}, env...)...)
	cmd.Stdin = strings.NewReader(payload)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	out := guardOut{stdout: stdout.String(), stderr: stderr.String()}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		out.code = ee.ExitCode()
	} else if err != nil {
		t.Fatal(err)
	}
	return out
}

// decision reads a guard's answer in agent's form: allowed, and the reason
// of a refusal. An answer in no valid form fails the test.
func (g guardOut) decision(t *testing.T, agent string) (allowed bool, reason string) {
	t.Helper()
	var m map[string]any
	jsonOut := json.Unmarshal([]byte(g.stdout), &m) == nil
	switch agent {
	case "cursor":
		if g.code == 0 && jsonOut && m["permission"] == "allow" {
			return true, ""
		}
		if g.code == 0 && jsonOut && m["permission"] == "deny" && m["agent_message"] == m["user_message"] {
			return false, m["agent_message"].(string)
		}
	case "opencode":
		if g.code == 0 && jsonOut && m["decision"] == "allow" {
			return true, ""
		}
		if g.code != 0 && jsonOut && m["decision"] == "deny" {
			return false, m["reason"].(string)
		}
	default:
		if g.code == 0 && jsonOut && m["hookSpecificOutput"] == nil {
			return true, ""
		}
		if g.code == 2 && strings.TrimSpace(g.stderr) != "" {
			return false, g.stderr
		}
	}
	t.Fatalf("%s: no answer in its form: exit %d stdout %q stderr %q", agent, g.code, g.stdout, g.stderr)
	return false, ""
}

// editPayload is a write of path (relative to cwd) by agent's editing tool,
// in the harness's documented payload shape.
func editPayload(agent, cwd, path string) string {
	abs := filepath.Join(cwd, path)
	var p map[string]any
	switch agent {
	case "claude":
		p = map[string]any{"hook_event_name": "PreToolUse", "session_id": "sess-1", "cwd": cwd, "permission_mode": "acceptEdits",
			"tool_name": "Write", "tool_input": map[string]any{"file_path": abs, "content": "x\n"}}
	case "codex":
		patch := "*** Begin Patch\n*** Update File: " + path + "\n@@\n-a\n+b\n*** End Patch\n"
		p = map[string]any{"hook_event_name": "PreToolUse", "session_id": "sess-1", "cwd": cwd,
			"tool_name": "apply_patch", "tool_input": map[string]any{"command": patch}}
	case "gemini":
		p = map[string]any{"hook_event_name": "BeforeTool", "session_id": "sess-1", "cwd": cwd,
			"tool_name": "replace", "tool_input": map[string]any{"file_path": abs, "old_string": "a", "new_string": "b"}}
	case "opencode":
		p = map[string]any{"hook_event_name": "tool.execute.before", "tool": "edit", "session_id": "sess-1", "cwd": cwd,
			"tool_input": map[string]any{"filePath": path, "oldString": "a", "newString": "b"}}
	case "cursor":
		p = map[string]any{"hook_event_name": "preToolUse", "conversation_id": "conv-1", "generation_id": "gen-1",
			"tool_name": "Write", "tool_use_id": "tu-1", "cwd": cwd, "workspace_roots": []string{cwd},
			"tool_input": map[string]any{"file_path": path, "content": "x\n"}}
	}
	b, _ := json.Marshal(p)
	return string(b)
}

// toolPayload is agent's pre-edit payload for tool with input.
func toolPayload(agent, cwd, tool string, input map[string]any) string {
	event := map[string]string{"claude": "PreToolUse", "codex": "PreToolUse", "gemini": "BeforeTool",
		"opencode": "tool.execute.before", "cursor": "preToolUse"}[agent]
	p := map[string]any{"hook_event_name": event, "cwd": cwd, "tool_name": tool, "tool_input": input}
	if agent == "opencode" {
		p["tool"] = tool
		delete(p, "tool_name")
	}
	b, _ := json.Marshal(p)
	return string(b)
}

var guardAgents = []string{"claude", "codex", "gemini", "opencode", "cursor"}

// guardRepo is a ledger where bob locks src/API/**, carol holds cell w/c
// (paths db/**) and alice locks docs.
func guardRepo(t *testing.T) *repo {
	r := newRepo(t).at(0)
	r.ok("admin", "init")
	r.ok("admin", "plan", r.file("w.json", `{"wave":"w","cells":[{"id":"c","paths":["db/**"]},{"id":"d"}]}`))
	r.ok("carol", "claim", "w/c")
	r.ok("bob", "lock", "src/API/**", "--ttl", "600")
	r.ok("alice", "lock", "docs", "--ttl", "90")
	return r
}

func TestGuardDecisions(t *testing.T) {
	r := guardRepo(t)
	env := r.env()
	for _, agent := range guardAgents {
		t.Run(agent, func(t *testing.T) {
			edit := func(actor, path string) (bool, string) {
				t.Helper()
				return runGuard(t, actor, agent, editPayload(agent, r.dir, path), env...).decision(t, agent)
			}
			if ok, why := edit("alice", "src/API/x.go"); ok || !strings.Contains(why, "held by bob") || !strings.Contains(why, "src/API/**") ||
				!strings.Contains(why, "10m0s left") || !strings.Contains(why, "tally lock --wait") {
				t.Fatalf("another actor's lock: allowed %v, %q", ok, why)
			}
			if ok, why := edit("alice", "docs/guide.md"); !ok {
				t.Fatalf("own lock refused: %q", why)
			}
			if ok, why := edit("alice", "README"); !ok {
				t.Fatalf("a path nobody holds refused: %q", why)
			}
			if ok, why := edit("alice", "db/schema.sql"); ok || !strings.Contains(why, "held by carol through cell w/c") || !strings.Contains(why, "tally next") {
				t.Fatalf("another actor's cell: allowed %v, %q", ok, why)
			}
			if ok, why := edit("carol", "db/schema.sql"); !ok {
				t.Fatalf("own cell refused: %q", why)
			}
			out := runGuard(t, "alice", agent, `{"hook_event_name": not json`, env...)
			if ok, why := out.decision(t, agent); ok || !strings.Contains(why, "USAGE") || !strings.Contains(why, "not a JSON object") {
				t.Fatalf("garbage payload: allowed %v, %q", ok, why)
			}
			out = runGuard(t, "alice", agent, toolPayload(agent, r.dir, "FrobnicateFile", map[string]any{"file_path": "README"}), env...)
			if ok, why := out.decision(t, agent); ok || !strings.Contains(why, "FrobnicateFile") || !strings.Contains(why, "not one tally knows") {
				t.Fatalf("unknown tool: allowed %v, %q", ok, why)
			}
			reader := map[string]string{"claude": "Read", "codex": "shell", "gemini": "read_file", "opencode": "read", "cursor": "Read"}[agent]
			out = runGuard(t, "alice", agent, toolPayload(agent, r.dir, reader, map[string]any{"file_path": filepath.Join(r.dir, "src/API/x.go")}), env...)
			if ok, why := out.decision(t, agent); !ok {
				t.Fatalf("a reading tool refused: %q", why)
			}
		})
	}
}

// TestGuardPaths: relative, "..", symbolic links, another worktree of the
// same repository, outside every repository, and core.ignorecase.
func TestGuardPaths(t *testing.T) {
	r := guardRepo(t)
	env := r.env()
	cwd := r.dir
	edit := func(path string) (bool, string) {
		t.Helper()
		p := toolPayload("claude", cwd, "Write", map[string]any{"file_path": path})
		return runGuard(t, "alice", "claude", p, env...).decision(t, "claude")
	}
	other := guardRepo(t) // another repository with its own ledger: bob holds src/API/** there too
	plain := newRepo(t)   // a repository without a ledger
	wt := filepath.Join(t.TempDir(), "wt")
	r.git("worktree", "add", "-q", wt)
	outside := t.TempDir()
	if err := os.Symlink(filepath.Join(r.dir, "src"), filepath.Join(outside, "link")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path  string
		allow bool
	}{
		{"src/API/x.go", false},
		{"docs/../src/API/new/y.go", false},
		{filepath.Join(r.dir, "src", "..", "src", "API", "x.go"), false},
		{filepath.Join(wt, "src/API/x.go"), false},              // another worktree of this repository
		{filepath.Join(outside, "link/API/x.go"), false},        // a link into the work tree
		{filepath.Join(outside, "free.go"), true},               // in no repository
		{"src/api/x.go", true},                                  // case matters: core.ignorecase is false
		{filepath.Join(r.dir, ".git", "COMMIT_EDITMSG"), false}, // git's own files: no agent edit
		{filepath.Join(other.dir, "src/API/x.go"), false},       // judged by its own ledger
		{filepath.Join(other.dir, "README"), true},
		{filepath.Join(plain.dir, "src/API/x.go"), true}, // no ledger there: not tally's
	} {
		if ok, why := edit(tc.path); ok != tc.allow {
			t.Errorf("%s: allowed %v, want %v: %q", tc.path, ok, tc.allow, why)
		}
	}
	// From outside every repository the paths are still judged where they lie.
	cwd = t.TempDir()
	if ok, why := edit(filepath.Join(r.dir, "src/API/x.go")); ok || !strings.Contains(why, "held by bob") {
		t.Errorf("from outside: allowed %v: %q", ok, why)
	}
	if ok, why := edit(filepath.Join(cwd, "x")); !ok {
		t.Errorf("outside from outside: %q", why)
	}
	cwd = r.dir
	r.git("config", "core.ignorecase", "true")
	for _, p := range []string{"src/api/x.go", `SRC\api\x.go`} {
		if ok, why := edit(p); ok || !strings.Contains(why, "held by bob") {
			t.Errorf("%s under core.ignorecase: allowed %v: %q", p, ok, why)
		}
	}
}

// TestGuardFailsClosed: a ledger that does not verify, no ledger, an unknown
// agent: every one a refusal in the harness's form.
func TestGuardFailsClosed(t *testing.T) {
	r := guardRepo(t)
	forge(t, r.dir, "lock", "mallory", tsAt(time.Second), lease.LockBody{Patterns: []string{"src/API/**"}, TTL: 60}, false)
	bare := newRepo(t) // no ledger
	for _, agent := range guardAgents {
		out := runGuard(t, "alice", agent, editPayload(agent, r.dir, "README"), r.env()...)
		if ok, why := out.decision(t, agent); ok || !strings.Contains(why, "RULE-VIOLATION") {
			t.Errorf("%s, a ledger that does not verify: allowed %v, %q", agent, ok, why)
		}
		out = runGuard(t, "alice", agent, editPayload(agent, bare.dir, "README"))
		if ok, why := out.decision(t, agent); ok || !strings.Contains(why, "NOT-INITIALIZED") {
			t.Errorf("%s, no ledger: allowed %v, %q", agent, ok, why)
		}
	}
	out := runGuard(t, "alice", "emacs", "{}")
	if out.code != 2 || !strings.Contains(out.stderr, "--agent must be one of") {
		t.Fatalf("unknown agent: exit %d %q", out.code, out.stderr)
	}
}

// TestGuardSession: session start tells the agent its leases and the ready
// cells; a pre-edit pass renews a lease past a third of its TTL; session end
// releases under session_end release and not otherwise.
func TestGuardSession(t *testing.T) {
	r := guardRepo(t)
	start := `{"hook_event_name":"SessionStart","session_id":"s","cwd":"` + r.dir + `","source":"startup"}`
	out := runGuard(t, "alice", "claude", start, r.env()...)
	var m struct {
		HSO struct{ HookEventName, AdditionalContext string } `json:"hookSpecificOutput"`
	}
	if out.code != 0 || json.Unmarshal([]byte(out.stdout), &m) != nil || m.HSO.HookEventName != "SessionStart" ||
		!strings.Contains(m.HSO.AdditionalContext, "you act as alice") || !strings.Contains(m.HSO.AdditionalContext, "- docs (lock, epoch 1") ||
		!strings.Contains(m.HSO.AdditionalContext, "- w/d") {
		t.Fatalf("session start: exit %d %s %s", out.code, out.stdout, out.stderr)
	}
	out = runGuard(t, "alice", "cursor", strings.Replace(start, "SessionStart", "sessionStart", 1), r.env()...)
	if out.code != 0 || !strings.Contains(out.stdout, `"additional_context":"tally: `) {
		t.Fatalf("cursor session start: %s", out.stdout)
	}

	// More locks than one lock entry names (lease.MaxLockPatterns): renewal
	// and release take several entries.
	var many []string
	for i := range 40 {
		many = append(many, fmt.Sprintf("n/%02d", i))
	}
	r.ok("alice", append([]string{"lock", "--ttl", "90"}, many[:32]...)...)
	r.ok("alice", append([]string{"lock", "--ttl", "90"}, many[32:]...)...)
	expiry := func() string { // of alice's locks, "" if none, "mixed" if they differ
		at := ""
		for _, l := range arr(t, r.ok("alice", "locks"), "locks") {
			if l := l.(map[string]any); l["actor"] == "alice" {
				if e := l["expires_at"].(string); at == "" || at == e {
					at = e
				} else {
					at = "mixed"
				}
			}
		}
		return at
	}
	edit := editPayload("claude", r.dir, "docs/a.md")
	r.at(29 * time.Second) // 61 s of 90 left: not yet a third used
	if ok, _ := runGuard(t, "alice", "claude", edit, r.env()...).decision(t, "claude"); !ok || expiry() != tsAt(90*time.Second) {
		t.Fatalf("renewed before a third of the TTL: %s", expiry())
	}
	r.at(31 * time.Second)
	if ok, _ := runGuard(t, "alice", "claude", edit, r.env()...).decision(t, "claude"); !ok || expiry() != tsAt(121*time.Second) {
		t.Fatalf("not renewed past a third of the TTL: %s", expiry())
	}

	end := `{"hook_event_name":"SessionEnd","session_id":"s","cwd":"` + r.dir + `","reason":"exit"}`
	if out := runGuard(t, "alice", "claude", end, r.env()...); out.code != 0 || expiry() == "" {
		t.Fatalf("session end under expire: exit %d, lock %q", out.code, expiry())
	}
	r.ok("admin", "policy", "set", "--session-end", "release", "--edit-leases", "warn")
	if p := obj(t, r.ok("admin", "policy", "show"), "policy"); p["session_end"] != "release" || p["edit_leases"] != "warn" {
		t.Fatalf("policy show: %v", p)
	}
	out = runGuard(t, "alice", "claude", editPayload("claude", r.dir, "README"), r.env()...)
	if ok, _ := out.decision(t, "claude"); !ok || !strings.Contains(out.stdout, `"systemMessage":"tally: README leased to nobody`) {
		t.Fatalf("edit_leases warn: %s", out.stdout)
	}
	out = runGuard(t, "carol", "gemini", end, r.env()...)
	if out.code != 0 || !strings.Contains(out.stderr, "released db/** (cell w/c)") {
		t.Fatalf("session end under release: exit %d %s", out.code, out.stderr)
	}
	if c := obj(t, r.ok("carol", "show", "w/c"), "cell"); c["state"] != "pending" {
		t.Fatalf("carol's cell after session end: %v", c["state"])
	}
	if out := runGuard(t, "alice", "claude", end, r.env()...); out.code != 0 || expiry() != "" {
		t.Fatalf("alice's 41 locks after session end under release: %q %s", expiry(), out.stderr)
	}
}

// TestGuardCaseInsensitive (issue 30): under core.ignorecase=true a lease on
// src/API/** holds against src/api/x in an edit, a commit (pre-commit) and
// a push (pre-receive).
func TestGuardCaseInsensitive(t *testing.T) {
	r := newRepo(t) // the wall clock: the server hook judges by its own
	r.git("config", "core.ignorecase", "true")
	r.ok("admin", "init")
	r.ok("admin", "policy", "set", "--path-leases", "enforce")
	r.ok("bob@example.com", "lock", "src/API/**")
	srv := filepath.Join(t.TempDir(), "srv.git")
	testrepo.Git(t, r.dir, "init", "-q", "--bare", srv)
	testrepo.Git(t, srv, "config", "core.ignorecase", "true")
	testrepo.Git(t, r.dir, "push", "-q", srv, "main", "refs/tally/ledger:refs/tally/ledger")
	for dir, args := range map[string][]string{srv: {"--server"}, r.dir: {"--client"}} {
		if res := testrepo.Run(t, dir, "admin", nil, append([]string{"hooks", "install", "--json"}, args...)...); res.Code != 0 {
			t.Fatalf("hooks install %v: %s %s", args, res.Stdout, res.Stderr)
		}
	}

	if ok, why := runGuard(t, "alice@example.com", "claude", editPayload("claude", r.dir, "src/api/x")).decision(t, "claude"); ok || !strings.Contains(why, "held by bob@example.com") {
		t.Fatalf("edit of src/api/x: allowed %v %q", ok, why)
	}

	r.file("src/api/x", "x\n")
	r.git("add", "src/api/x")
	git := func(args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = r.dir
		cmd.Env = testrepo.Env("TALLY_ACTOR=alice@example.com", "GIT_AUTHOR_EMAIL=alice@example.com")
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	if out, err := git("commit", "-q", "-m", "x"); err == nil || !strings.Contains(out, "src/api/x is held by bob@example.com: lock on src/API/**") {
		t.Fatalf("commit of src/api/x: %v %s", err, out)
	}
	if out, err := git("commit", "-q", "--no-verify", "-m", "x"); err != nil {
		t.Fatalf("commit --no-verify: %v %s", err, out)
	}
	if out, err := git("push", "--no-verify", srv, "main"); err == nil || !strings.Contains(out, "PATH-HELD") || !strings.Contains(out, "changes src/api/x, leased to bob@example.com") {
		t.Fatalf("push of src/api/x: %v %s", err, out)
	}
}

// TestPreCommitMerge: concluding a merge, pre-commit judges only what the
// merge itself changes (as the push hooks do): another actor's work merged
// in on its own paths passes; an edit of them in the resolution does not.
func TestPreCommitMerge(t *testing.T) {
	r := newRepo(t)
	r.ok("admin", "init")
	r.ok("bob", "lock", "src/**")
	if res := testrepo.Run(t, r.dir, "admin", nil, "hooks", "install", "--client", "--json"); res.Code != 0 {
		t.Fatalf("hooks install: %s %s", res.Stdout, res.Stderr)
	}
	git := func(actor string, args ...string) (string, error) {
		cmd := exec.Command("git", args...)
		cmd.Dir = r.dir
		cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	must := func(actor string, args ...string) {
		t.Helper()
		if out, err := git(actor, args...); err != nil {
			t.Fatalf("git %v as %s: %v %s", args, actor, err, out)
		}
	}
	r.file("README", "base\n")
	must("alice", "add", "README")
	must("alice", "commit", "-q", "-m", "readme")
	must("bob", "checkout", "-q", "-b", "bob")
	r.file("src/a.go", "bob\n")
	r.file("README", "bob\n")
	must("bob", "add", "src/a.go", "README")
	must("bob", "commit", "-q", "-m", "bob's work")
	must("alice", "checkout", "-q", "main")
	r.file("README", "alice\n")
	must("alice", "commit", "-q", "-am", "alice's readme")
	if out, err := git("alice", "merge", "bob"); err == nil || !strings.Contains(out, "CONFLICT") {
		t.Fatalf("merge without a conflict: %v %s", err, out)
	}
	r.file("README", "both\n")
	must("alice", "add", "README")
	r.file("src/a.go", "alice\n") // an evil merge: alice's own change to bob's path
	must("alice", "add", "src/a.go")
	if out, err := git("alice", "commit", "-q", "--no-edit"); err == nil || !strings.Contains(out, "src/a.go is held by bob") {
		t.Fatalf("evil merge committed: %v %s", err, out)
	}
	r.file("src/a.go", "bob\n")
	must("alice", "add", "src/a.go")
	must("alice", "commit", "-q", "--no-edit") // bob's work merged in as bob made it
}
