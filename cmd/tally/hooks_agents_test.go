package main

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestHooksInstallAgents: through the binary, `hooks install --agent`
// takes a comma list and "all", reports per harness what it did, changes
// no byte on a second run, is listed by `hooks status` with what each
// harness still needs, and `hooks uninstall --agent` leaves the user's own
// settings as they were while plain `hooks uninstall` (git shims) leaves
// the agent hooks alone.
func TestHooksInstallAgents(t *testing.T) {
	r := newRepo(t)
	user := "{\n  \"theme\": \"dark\",\n  \"hooks\": {\"BeforeTool\": [{\"matcher\": \"run_shell_command\", \"hooks\": [{\"type\": \"command\", \"command\": \"./audit.sh\"}]}]}\n}\n"
	r.file(".gemini/settings.json", user)
	actions := func(res testrepo.Result) map[string]string {
		t.Helper()
		if res.Code != 0 {
			t.Fatalf("%s", res)
		}
		out := map[string]string{}
		for _, a := range arr(t, res.JSON, "agents") {
			a := a.(map[string]any)
			out[a["agent"].(string)] = a["action"].(string)
		}
		return out
	}
	got := actions(r.run("alice", "hooks", "install", "--agent", "claude,gemini", "--agent", "codex"))
	if got["claude"] != "created" || got["gemini"] != "updated" || got["codex"] != "created" || len(got) != 3 {
		t.Fatalf("install: %v", got)
	}
	snapshot := func() map[string]string {
		out := map[string]string{}
		for _, f := range []string{".claude/settings.json", ".gemini/settings.json", ".codex/hooks.json"} {
			out[f] = readFile(t, filepath.Join(r.dir, f))
		}
		return out
	}
	before := snapshot()
	got = actions(r.run("alice", "hooks", "install", "--agent", "all"))
	if got["claude"] != "unchanged" || got["gemini"] != "unchanged" || got["codex"] != "unchanged" || got["opencode"] != "created" || got["cursor"] != "created" {
		t.Fatalf("install --agent all after claude,gemini,codex: %v", got)
	}
	for f, text := range snapshot() {
		if text != before[f] {
			t.Errorf("a second install changed %s", f)
		}
	}
	if res := r.run("alice", "hooks", "install", "--agent", "vim"); res.Code != 2 || res.ErrorCode() != "USAGE" {
		t.Fatalf("--agent vim: %s", res)
	}

	st := r.ok("alice", "hooks", "status")
	for _, a := range arr(t, st, "agents") {
		a := a.(map[string]any)
		if a["installed"] != true || a["active"] != true {
			t.Errorf("status of %s: %v", a["agent"], a)
		}
		if needs, _ := a["needs"].([]any); (a["agent"] == "codex" || a["agent"] == "gemini") != (len(needs) > 0) {
			t.Errorf("status of %s needs %v", a["agent"], needs)
		}
	}

	r.ok("alice", "hooks", "uninstall")
	if _, err := os.Stat(filepath.Join(r.dir, ".cursor", "hooks.json")); err != nil {
		t.Fatalf("plain hooks uninstall removed the agent hooks: %v", err)
	}
	got = actions(r.run("alice", "hooks", "uninstall", "--agent", "all"))
	if got["gemini"] != "removed" || got["claude"] != "deleted" || got["cursor"] != "deleted" {
		t.Fatalf("uninstall: %v", got)
	}
	if after := readFile(t, filepath.Join(r.dir, ".gemini", "settings.json")); canonicalJSON(t, after) != canonicalJSON(t, user) {
		t.Fatalf("uninstall left the user's gemini settings as:\n%s", after)
	}
	for _, dir := range []string{".claude", ".codex", ".cursor", ".opencode"} {
		if _, err := os.Stat(filepath.Join(r.dir, dir)); !os.IsNotExist(err) {
			t.Errorf("uninstall left %s/ (install made it): %v", dir, err)
		}
	}
}

// canonicalJSON is a JSON text without its insignificant whitespace.
func canonicalJSON(t *testing.T, text string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		t.Fatalf("%v in:\n%s", err, text)
	}
	return b.String()
}
