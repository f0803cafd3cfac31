package hooks

import (
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/errs"
)

// userClaude is a Claude Code project settings file as a user keeps it: keys
// in their own order, a hook of their own on the same event, and strings
// with characters encoding/json would escape.
const userClaude = `{
  "permissions": {"allow": ["Bash(npm test)"], "deny": ["Read(.env)"]},
  "model": "a<b>&c \u00e9",
  "hooks": {
    "PreToolUse": [
      {"matcher": "Bash", "hooks": [{"type": "command", "command": "./lint.sh >&2"}]},
      {"matcher": "Edit", "hooks": [{"type": "command", "command": "./fmt.sh"}]}
    ],
    "Stop": [{"hooks": [{"type": "command", "command": "./done.sh"}]}]
  },
  "env": {"A": "1"}
}
`

func writeTestFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

func readTestFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// fakeTally is an executable file standing in for the tally binary.
func fakeTally(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "tally")
	writeTestFile(t, bin, "#!/bin/sh\n")
	if err := os.Chmod(bin, 0o755); err != nil {
		t.Fatal(err)
	}
	return bin
}

// canonical is a JSON text with its whitespace removed, keys in their order.
func canonical(t *testing.T, text string) string {
	t.Helper()
	var b bytes.Buffer
	if err := json.Compact(&b, []byte(text)); err != nil {
		t.Fatalf("%v in:\n%s", err, text)
	}
	return b.String()
}

func mustChange(t *testing.T, ch AgentChange, err error, action string) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
	if ch.Action != action {
		t.Fatalf("%s %s: %s, want %s", ch.Agent, ch.File, ch.Action, action)
	}
}

// TestAgentInstallMergesIdempotentUninstallRestores: install merges into the
// user's settings (their keys in order, their hooks and bytes kept, tally's
// hooks last), a second install writes nothing, a reinstall naming another
// binary replaces tally's entries rather than adding more, and uninstall
// leaves exactly the user's document.
func TestAgentInstallMergesIdempotentUninstallRestores(t *testing.T) {
	wt := t.TempDir()
	path := filepath.Join(wt, ".claude", "settings.json")
	writeTestFile(t, path, userClaude)
	bin := fakeTally(t)
	ch, err := InstallAgent(wt, AgentClaude, bin)
	mustChange(t, ch, err, "updated")
	got := readTestFile(t, path)
	var doc struct {
		Hooks map[string][]hookGroup `json:"hooks"`
	}
	if err := json.Unmarshal([]byte(got), &doc); err != nil {
		t.Fatal(err)
	}
	pre := doc.Hooks["PreToolUse"]
	if len(pre) != 3 || pre[0].Matcher != "Bash" || pre[1].Matcher != "Edit" || pre[2].Matcher != "Edit|Write|MultiEdit|NotebookEdit" {
		t.Fatalf("PreToolUse: %+v", pre)
	}
	if c := pre[2].Hooks[0].Command; commandBinary(c) != bin || !strings.Contains(c, "exit 2") {
		t.Fatalf("tally's command %q: names %q, want %q and exit 2 when it is gone", c, commandBinary(c), bin)
	}
	for _, ev := range []string{"SessionStart", "SessionEnd", "Stop"} {
		if len(doc.Hooks[ev]) != 1 {
			t.Fatalf("%s: %+v", ev, doc.Hooks[ev])
		}
	}
	for _, want := range []string{`"model": "a<b>&c \u00e9"`, `"./lint.sh >&2"`, `>&2; exit 2;`} {
		if !strings.Contains(got, want) {
			t.Errorf("installed settings lack %s (escaped or lost):\n%s", want, got)
		}
	}
	keys := []string{`"permissions"`, `"model"`, `"hooks"`, `"env"`}
	for i := 1; i < len(keys); i++ {
		if strings.Index(got, keys[i-1]) > strings.Index(got, keys[i]) {
			t.Errorf("key order lost: %s after %s:\n%s", keys[i-1], keys[i], got)
		}
	}

	ch, err = InstallAgent(wt, AgentClaude, bin)
	mustChange(t, ch, err, "unchanged")
	if again := readTestFile(t, path); again != got {
		t.Fatalf("a second install changed the file:\n%s", again)
	}

	other := fakeTally(t)
	ch, err = InstallAgent(wt, AgentClaude, other)
	mustChange(t, ch, err, "updated")
	moved := readTestFile(t, path)
	if strings.Contains(moved, bin) || strings.Count(moved, other) != 3 {
		t.Fatalf("reinstall with another binary: want 3 entries naming %s and none %s:\n%s", other, bin, moved)
	}

	ch, err = UninstallAgent(wt, AgentClaude)
	mustChange(t, ch, err, "removed")
	if after := readTestFile(t, path); canonical(t, after) != canonical(t, userClaude) {
		t.Fatalf("uninstall left:\n%s\nwant the user's:\n%s", after, userClaude)
	}
	ch, err = UninstallAgent(wt, AgentClaude)
	mustChange(t, ch, err, "absent")
}

// TestAgentInstallCreatesAndUninstallDeletes: where the harness had no
// configuration, install creates it (Cursor's with version 1 and
// failClosed) and uninstall removes the file and the directory it made,
// but not a directory holding a file of the user's.
func TestAgentInstallCreatesAndUninstallDeletes(t *testing.T) {
	wt := t.TempDir()
	bin := fakeTally(t)
	writeTestFile(t, filepath.Join(wt, ".gemini", "GEMINI.md"), "notes\n")
	for _, agent := range Agents {
		ch, err := InstallAgent(wt, agent, bin)
		mustChange(t, ch, err, "created")
	}
	var cursor struct {
		Version int
		Hooks   map[string][]commandHook
	}
	if err := json.Unmarshal([]byte(readTestFile(t, filepath.Join(wt, ".cursor", "hooks.json"))), &cursor); err != nil {
		t.Fatal(err)
	}
	if e := cursor.Hooks["preToolUse"]; cursor.Version != 1 || len(e) != 1 || !e[0].FailClosed || commandBinary(e[0].Command) != bin || len(cursor.Hooks["sessionStart"]) != 1 {
		t.Fatalf("cursor hooks.json: %+v", cursor)
	}
	if p := readTestFile(t, filepath.Join(wt, ".opencode", "plugins", "tally-guard.js")); pluginBinary(p) != bin {
		t.Fatalf("the opencode plugin names %q, want %q:\n%s", pluginBinary(p), bin, p)
	}
	for _, s := range StatusAgents(wt, AgentTrust{}) {
		if !s.Installed || !s.Active || s.Binary != bin {
			t.Errorf("status after install: %+v", s)
		}
	}
	for _, agent := range Agents {
		ch, err := UninstallAgent(wt, agent)
		mustChange(t, ch, err, "deleted")
	}
	entries, _ := os.ReadDir(wt)
	if len(entries) != 1 || entries[0].Name() != ".gemini" {
		t.Fatalf("left in the work tree: %v, want only the user's .gemini/", entries)
	}
	if readTestFile(t, filepath.Join(wt, ".gemini", "GEMINI.md")) != "notes\n" {
		t.Fatal("the user's file changed")
	}
}

// TestAgentInstallRefusesWhatItCannotMerge: a settings file that is not a
// JSON object, an event that is not an array, and an opencode plugin of
// tally's name that is not tally's are refused and left as they are.
func TestAgentInstallRefusesWhatItCannotMerge(t *testing.T) {
	bin := fakeTally(t)
	for _, c := range []struct{ agent, file, text string }{
		{AgentGemini, ".gemini/settings.json", "{\"a\": 1,}\n"},
		{AgentCodex, ".codex/hooks.json", `{"hooks": {"PreToolUse": {"matcher": "x"}}}`},
		{AgentClaude, ".claude/settings.json", `["not", "an", "object"]`},
		{AgentOpencode, ".opencode/plugins/tally-guard.js", "export const Mine = 1;\n"},
	} {
		wt := t.TempDir()
		path := filepath.Join(wt, c.file)
		writeTestFile(t, path, c.text)
		_, err := InstallAgent(wt, c.agent, bin)
		if errs.CodeOf(err) != errs.Usage {
			t.Errorf("%s over %q: %v, want a usage refusal", c.agent, c.text, err)
		}
		if readTestFile(t, path) != c.text {
			t.Errorf("%s: the file changed", c.agent)
		}
	}
}

// TestAgentStatusNeeds: status says what Codex and Gemini CLI still need
// until their own trust files trust the work tree, and says a hook naming a
// binary that is gone is inactive.
func TestAgentStatusNeeds(t *testing.T) {
	wt := t.TempDir()
	home := t.TempDir()
	bin := fakeTally(t)
	for _, agent := range []string{AgentCodex, AgentGemini} {
		if _, err := InstallAgent(wt, agent, bin); err != nil {
			t.Fatal(err)
		}
	}
	trust := AgentTrust{CodexConfig: filepath.Join(home, "config.toml"), GeminiTrusted: filepath.Join(home, "trustedFolders.json")}
	byAgent := func() map[string]AgentStatus {
		out := map[string]AgentStatus{}
		for _, s := range StatusAgents(wt, trust) {
			out[s.Agent] = s
		}
		return out
	}
	st := byAgent()
	if n := st[AgentCodex].Needs; len(n) != 2 || !strings.Contains(n[1], "trust_level") {
		t.Fatalf("codex needs %q, want hook trust and project trust", n)
	}
	if n := st[AgentGemini].Needs; len(n) != 1 || !strings.Contains(n[0], "trusted workspace") {
		t.Fatalf("gemini needs %q, want workspace trust", n)
	}
	writeTestFile(t, trust.CodexConfig, "model = \"x\"\n\n[projects."+tomlQuote(filepath.Dir(wt))+"]\ntrust_level = \"trusted\"\n")
	writeTestFile(t, trust.GeminiTrusted, `{"`+wt+`": "TRUST_FOLDER"}`)
	st = byAgent()
	if n := st[AgentCodex].Needs; len(n) != 1 {
		t.Fatalf("codex with the project's parent trusted needs %q, want hook trust alone", n)
	}
	if n := st[AgentGemini].Needs; len(n) != 0 {
		t.Fatalf("gemini in a trusted folder needs %q", n)
	}
	if err := os.Remove(bin); err != nil {
		t.Fatal(err)
	}
	if s := byAgent()[AgentGemini]; s.Active || s.BinaryExists || len(s.Problems) != 1 {
		t.Fatalf("status with the binary gone: %+v", s)
	}
}
