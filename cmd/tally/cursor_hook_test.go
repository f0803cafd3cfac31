package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// cursorHook is one entry of .cursor/hooks.json.
type cursorHook struct {
	Command    string `json:"command"`
	Matcher    string `json:"matcher"`
	FailClosed bool   `json:"failClosed"`
}

// runCursorHook runs a hook command as Cursor does (a shell command, the
// payload on stdin, in the workspace) and returns stdout, stderr and exit.
func runCursorHook(t *testing.T, dir, command, actor string, payload map[string]any) (string, string, int) {
	t.Helper()
	cmd := exec.Command("sh", "-c", command)
	cmd.Dir = dir
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	b, _ := json.Marshal(payload)
	cmd.Stdin = bytes.NewReader(b)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) {
		t.Fatal(err)
	}
	return stdout.String(), stderr.String(), cmd.ProcessState.ExitCode()
}

// TestCursorHooks: Cursor has no CLI to drive, so its hooks as `tally hooks
// install --agent cursor` writes them are run as Cursor runs them, with
// payloads in its documented form: the edit hook fails closed and matches
// Cursor's editing tools; an edit of a path another actor holds is denied
// in Cursor's answer naming the holder, one's own is allowed; session start
// answers context; with the tally binary gone the hook exits 2, which
// failClosed makes a deny.
func TestCursorHooks(t *testing.T) {
	r := newRepo(t)
	r.ok("H", "init")
	r.ok("bob", "lock", "src/**", "--ttl", "1h")
	r.ok("alice", "lock", "docs/**", "--ttl", "1h")
	bin := filepath.Join(t.TempDir(), "tally")
	b, err := os.ReadFile(testrepo.Tally(t))
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(bin, b, 0o755); err != nil {
		t.Fatal(err)
	}
	if res := testrepo.Run(t, r.dir, "alice", nil, "hooks", "install", "--agent", "cursor", "--tally", bin, "--json"); res.Code != 0 {
		t.Fatalf("hooks install: %s", res)
	}
	var config struct {
		Version int                     `json:"version"`
		Hooks   map[string][]cursorHook `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(r.dir, ".cursor", "hooks.json"))), &config); err != nil {
		t.Fatal(err)
	}
	pre, start := config.Hooks["preToolUse"], config.Hooks["sessionStart"]
	if config.Version != 1 || len(pre) != 1 || !pre[0].FailClosed || len(start) != 1 || len(config.Hooks["sessionEnd"]) != 1 {
		t.Fatalf(".cursor/hooks.json: %+v", config)
	}
	matcher := regexp.MustCompile("^(?:" + pre[0].Matcher + ")$")
	for _, tool := range []string{"Write", "Edit", "StrReplace", "MultiEdit", "Delete", "EditNotebook", "TabWrite"} {
		if !matcher.MatchString(tool) {
			t.Errorf("the matcher %q misses Cursor's %s", pre[0].Matcher, tool)
		}
	}
	edit := func(path string) map[string]any {
		return map[string]any{"conversation_id": "c1", "generation_id": "g1", "hook_event_name": "preToolUse",
			"tool_name": "Write", "tool_input": map[string]any{"file_path": path, "contents": "x"},
			"cwd": r.dir, "workspace_roots": []string{r.dir}}
	}
	answer := func(stdout string) map[string]any {
		var a map[string]any
		if err := json.Unmarshal([]byte(stdout), &a); err != nil {
			t.Fatalf("hook stdout %q: %v", stdout, err)
		}
		return a
	}
	stdout, stderr, code := runCursorHook(t, r.dir, pre[0].Command, "alice", edit("src/app.go"))
	if a := answer(stdout); code != 0 || a["permission"] != "deny" || !strings.Contains(a["agent_message"].(string), "bob") {
		t.Fatalf("alice's edit of bob's src/app.go: exit %d %s%s, want deny naming bob", code, stdout, stderr)
	}
	stdout, stderr, code = runCursorHook(t, r.dir, pre[0].Command, "alice", edit("docs/guide.md"))
	if a := answer(stdout); code != 0 || a["permission"] != "allow" {
		t.Fatalf("alice's edit of her own docs/guide.md: exit %d %s%s, want allow", code, stdout, stderr)
	}
	stdout, stderr, code = runCursorHook(t, r.dir, start[0].Command, "alice",
		map[string]any{"conversation_id": "c1", "hook_event_name": "sessionStart", "workspace_roots": []string{r.dir}})
	if a := answer(stdout); code != 0 || !strings.Contains(a["additional_context"].(string), "docs/**") {
		t.Fatalf("session start: exit %d %s%s, want context naming alice's docs/**", code, stdout, stderr)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	stdout, stderr, code = runCursorHook(t, r.dir, pre[0].Command, "alice", edit("docs/guide.md"))
	if code != 2 || !strings.Contains(stderr, bin+" is missing") {
		t.Fatalf("with %s gone: exit %d %s%s, want exit 2 naming it", bin, code, stdout, stderr)
	}
}
