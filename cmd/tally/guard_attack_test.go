package main

// The edit guard under attack (issue 29): payloads an agent, a confused
// harness or a hostile tree could produce to get a held path written, each
// through the real binary. Every one must end in a refusal in the
// harness's form: a crash, exit 1 or a hang reads as "allow" to the
// harnesses.

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
)

// claudeWrite is Claude Code's Write of path from cwd; extra members are
// spliced into tool_input verbatim (to repeat a name).
func claudeWrite(cwd, path, extra string) string {
	p, _ := json.Marshal(path)
	c, _ := json.Marshal(cwd)
	return `{"hook_event_name":"PreToolUse","session_id":"s","cwd":` + string(c) +
		`,"tool_name":"Write","tool_input":{"file_path":` + string(p) + extra + `,"content":"x"}}`
}

// codexPatch is Codex's apply_patch of patch (tool_input.command) from cwd.
func codexPatch(cwd, patch string) string {
	return toolPayload("codex", cwd, "apply_patch", map[string]any{"command": patch})
}

func TestGuardAttacks(t *testing.T) {
	r := guardRepo(t) // bob locks src/API/**, carol's cell holds db/**
	dir := r.dir
	r.file("src/API/x.go", "package api\n")
	r.file("src/API/sub/y.go", "package sub\n")
	outside := t.TempDir()
	link := func(target, name string) {
		t.Helper()
		if err := os.Symlink(target, name); err != nil {
			t.Fatal(err)
		}
	}
	link("src/API/x.go", filepath.Join(dir, "alias.go"))                                                    // a file link under another name
	link("src/API", filepath.Join(dir, "api"))                                                              // a directory link
	link("src/API/sub", filepath.Join(dir, "deep"))                                                         // deep/.. is src/API, not the root
	link(filepath.Join(dir, "src/API"), filepath.Join(outside, "in"))                                       // outside, pointing back in
	link(filepath.Join(outside, "in"), filepath.Join(dir, "out"))                                           // inside -> outside -> inside
	link("src/API/new.go", filepath.Join(dir, "dangling.go"))                                               // dangling, to a held path
	link("db/none/../x.sql", filepath.Join(dir, "dangling-dots.sql"))                                       // dangling, with ..
	if err := os.Link(r.file("src/API/h.go", "package api\n"), filepath.Join(dir, "hard.go")); err != nil { // one file, two names
		t.Fatal(err)
	}
	link("loop2", filepath.Join(dir, "loop1"))                          // a loop
	link("loop1", filepath.Join(dir, "loop2"))                          //
	link(filepath.Join(dir, ".git"), filepath.Join(dir, "gitalias"))    // git's own directory, renamed
	link(filepath.Join(dir, ".git/hooks"), filepath.Join(outside, "h")) // and reached from outside
	// A separate git directory: its files are git's, wherever they lie.
	sep := filepath.Join(outside, "sep")
	testrepo.Git(t, outside, "init", "-q", "--separate-git-dir", filepath.Join(outside, "sep.git"), sep)

	deep := strings.Repeat("[", 20000) + strings.Repeat("]", 20000)
	for _, tc := range []struct {
		name, agent, payload, want string
	}{
		// Symbolic links: judged where the write lands.
		{"file link", "claude", claudeWrite(dir, "alias.go", ""), "src/API/x.go is held by bob"},
		{"directory link", "claude", claudeWrite(dir, filepath.Join(dir, "api/z.go"), ""), "src/API/z.go is held by bob"},
		{"link then ..", "claude", claudeWrite(dir, "deep/../x.go", ""), "src/API/x.go is held by bob"},
		{"out then in", "claude", claudeWrite(dir, "out/x.go", ""), "src/API/x.go is held by bob"},
		{"from outside", "claude", claudeWrite(outside, "in/sub/y.go", ""), "src/API/sub/y.go is held by bob"},
		{"dangling link", "claude", claudeWrite(dir, "dangling.go", ""), "src/API/new.go is held by bob"},
		{"dangling link with ..", "claude", claudeWrite(dir, "dangling-dots.sql", ""), "db/x.sql is held by carol"},
		{"hard link", "claude", claudeWrite(dir, "hard.go", ""), "2 names (hard links)"},
		{"link loop", "claude", claudeWrite(dir, "loop1", ""), "too many levels of symbolic links"},
		{"through a link loop", "claude", claudeWrite(dir, "loop1/x", ""), "too many levels of symbolic links"},
		// Spellings of a held path.
		{"..", "claude", claudeWrite(dir, "docs/../src/API/x.go", ""), "held by bob"},
		{"./ and //", "claude", claudeWrite(dir, ".//src//API/./x.go", ""), "src/API/x.go is held by bob"},
		{"trailing slash", "claude", claudeWrite(dir, "src/API/new/", ""), "src/API/new is held by bob"},
		{"a directory", "cursor", toolPayload("cursor", dir, "Delete", map[string]any{"target_file": "src"}), "is a directory"},
		{"the work tree itself", "cursor", toolPayload("cursor", dir, "Delete", map[string]any{"target_file": "."}), "is a directory"},
		{"backslashes", "claude", claudeWrite(dir, `src\API\x.go`, ""), "src/API/x.go is held by bob"},
		{"drive letter", "claude", claudeWrite(dir, `C:\repo\src\API\x.go`, ""), "Windows drive"},
		{"drive letter, slashes", "claude", claudeWrite(dir, `c:/repo/README`, ""), "Windows drive"},
		{"UNC share", "claude", claudeWrite(dir, `\\host\share\x.go`, ""), "Windows drive or share"},
		{"NUL in the path", "claude", claudeWrite(dir, "src/API\x00/x.go", ""), "NUL"},
		// Codex patches.
		{"absolute patch path", "codex", codexPatch(dir, "*** Begin Patch\n*** Update File: "+dir+"/src/API/x.go\n@@\n-a\n+b\n*** End Patch\n"), "held by bob"},
		{"move into a held path", "codex", codexPatch(dir, "*** Begin Patch\n*** Update File: README\n*** Move to: src/API/moved.go\n@@\n-a\n+b\n*** End Patch\n"), "src/API/moved.go is held by bob"},
		{"CRLF patch", "codex", codexPatch(dir, "*** Begin Patch\r\n*** Update File: src/API/x.go\r\n@@\r\n-a\r\n+b\r\n*** End Patch\r\n"), "src/API/x.go is held by bob"},
		{"indented header in a heredoc", "codex", codexPatch(dir, "<<'EOF'\n*** Begin Patch\n*** Add File: free.txt\n+x\n   *** Update File: src/API/x.go\n@@\n-a\n+b\n*** End Patch\nEOF\n"), "src/API/x.go is held by bob"},
		{"marker case", "codex", codexPatch(dir, "*** Begin Patch\n*** update file: src/API/x.go\n@@\n-a\n+b\n*** End Patch\n"), "src/API/x.go is held by bob"},
		{"two patch fields", "codex", toolPayload("codex", dir, "apply_patch", map[string]any{
			"patch":   "*** Begin Patch\n*** Add File: free.txt\n+x\n*** End Patch\n",
			"command": []any{"apply_patch", "*** Begin Patch\n*** Delete File: db/a.sql\n*** End Patch\n"}}), "db/a.sql is held by carol"},
		{"a file path beside a patch", "codex", toolPayload("codex", dir, "Write", map[string]any{
			"file_path": "free.txt", "command": "*** Begin Patch\n*** Delete File: src/API/x.go\n*** End Patch\n"}), "src/API/x.go is held by bob"},
		{"opencode patch beside a path", "opencode", toolPayload("opencode", dir, "edit", map[string]any{
			"filePath": "free.txt", "patchText": "*** Begin Patch\n*** Delete File: src/API/x.go\n*** End Patch\n"}), "src/API/x.go is held by bob"},
		// Payloads the guard could read otherwise than the harness.
		{"a name twice", "claude", claudeWrite(dir, "src/API/x.go", `,"file_path":"free.txt"`), "named twice"},
		{"a name twice, case folded", "claude", claudeWrite(dir, "src/API/x.go", `,"FILE_PATH":"free.txt"`), "named twice"},
		{"a name twice, Kelvin sign", "claude", strings.Replace(toolPayload("claude", dir, "NotebookEdit", map[string]any{"notebook_path": "src/API/n.ipynb"}),
			`"src/API/n.ipynb"`, `"src/API/n.ipynb","noteboo\u212a_path":"free.ipynb"`, 1), "named twice"},
		{"a top-level name twice", "claude", strings.Replace(claudeWrite(dir, "src/API/x.go", ""), `"cwd":`, `"cwd":"/","cwd":`, 1), "named twice"},
		{"deeply nested", "claude", claudeWrite(dir, "free.txt", `,"x":`+deep), "USAGE"},
		{"a path of the wrong type", "claude", toolPayload("claude", dir, "Write", map[string]any{"file_path": 7}), "tool_input is not a JSON object"},
		{"tool_input an array", "claude", strings.Replace(toolPayload("claude", dir, "Write", map[string]any{}), `"tool_input":{}`, `"tool_input":[]`, 1), "tool_input is not a JSON object"},
		{"no path at all", "claude", toolPayload("claude", dir, "Write", map[string]any{"content": "x"}), "names no file path"},
		{"stdin closed at once", "claude", "", "not a JSON object"},
		{"a cwd that does not exist", "claude", claudeWrite(filepath.Join(dir, "gone"), "free.txt", ""), "not an existing absolute directory"},
		{"a relative cwd", "claude", claudeWrite("repo", "free.txt", ""), "not an existing absolute directory"},
		// Git's own files: hooks, config, the ledger.
		{"a hook", "claude", claudeWrite(dir, ".git/hooks/pre-commit", ""), "NOT-SUPPORTED"},
		{"tally's records", "codex", codexPatch(dir, "*** Begin Patch\n*** Add File: .git/tally/appended\n+{}\n*** End Patch\n"), "NOT-SUPPORTED"},
		{"a .git file", "claude", claudeWrite(dir, "docs/.git", ""), "NOT-SUPPORTED"},
		{".git in another case", "claude", claudeWrite(dir, ".GIT/config", ""), "NOT-SUPPORTED"},
		{".git with a trailing dot", "claude", claudeWrite(dir, ".git./config", ""), "NOT-SUPPORTED"},
		{".git's NTFS short name", "claude", claudeWrite(dir, "GIT~1/config", ""), "NOT-SUPPORTED"},
		{".git with an HFS+ ignored character", "claude", claudeWrite(dir, ".g\u200cit/config", ""), "NOT-SUPPORTED"},
		{"git's directory through a link", "claude", claudeWrite(dir, "gitalias/config", ""), "NOT-SUPPORTED"},
		{"git's hooks from outside", "claude", claudeWrite(outside, "h/pre-commit", ""), "NOT-SUPPORTED"},
		{"a separate git directory", "claude", claudeWrite(sep, filepath.Join(outside, "sep.git/hooks/pre-commit"), ""), "NOT-SUPPORTED"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ok, why := runGuard(t, "alice", tc.agent, tc.payload, r.env()...).decision(t, tc.agent)
			if ok || !strings.Contains(why, tc.want) {
				t.Errorf("allowed %v, want a refusal naming %q: %q", ok, tc.want, why)
			}
		})
	}
	// A .git file left in a held directory (by a shell command: the edit
	// tools may not write one), pointing at a repository without a ledger,
	// makes src/API a work tree of its own; the outer repository still
	// judges the path.
	fake := filepath.Join(outside, "fake.git")
	testrepo.Git(t, outside, "init", "-q", "--bare", fake)
	r.file("src/API/.git", "gitdir: "+fake+"\n")
	if ok, why := runGuard(t, "alice", "claude", claudeWrite(dir, "src/API/x.go", ""), r.env()...).decision(t, "claude"); ok || !strings.Contains(why, "src/API/x.go is held by bob") {
		t.Errorf("a .git file pointing away: allowed %v: %q", ok, why)
	}
	// What the attacks above must not take away: the same shapes on paths
	// nobody holds are allowed.
	for _, p := range []string{claudeWrite(dir, "free.txt", ""), claudeWrite(dir, "docs/../free/./a.txt", ""),
		claudeWrite(outside, "elsewhere.txt", ""), codexPatch(dir, "*** Begin Patch\r\n   *** Add File: free.txt\r\n+x\r\n*** End Patch\r\n")} {
		agent := "claude"
		if strings.Contains(p, "apply_patch") {
			agent = "codex"
		}
		if ok, why := runGuard(t, "alice", agent, p, r.env()...).decision(t, agent); !ok {
			t.Errorf("%s: refused: %q", p, why)
		}
	}
}

// TestGuardAttackUnicode: macOS file systems open one file for the
// composed (NFC) and decomposed (NFD) forms of a name, so a hold covers
// both forms of its paths (FORMAT.md §9c, "Paths"), in the guard and in
// pre-commit alike.
func TestGuardAttackUnicode(t *testing.T) {
	r := newRepo(t).at(0)
	r.ok("admin", "init")
	r.ok("bob", "lock", "src/caf\u00e9/**", "docs/nai\u0308ve.md") // NFC, then NFD
	for _, p := range []string{"src/cafe\u0301/x.go", "docs/na\u00efve.md"} {
		if ok, why := runGuard(t, "alice", "claude", claudeWrite(r.dir, p, ""), r.env()...).decision(t, "claude"); ok || !strings.Contains(why, "held by bob") {
			t.Errorf("%q: allowed %v: %q", p, ok, why)
		}
	}
	if ok, why := runGuard(t, "alice", "claude", claudeWrite(r.dir, "src/cafe/x.go", ""), r.env()...).decision(t, "claude"); !ok {
		t.Errorf("src/cafe/x.go, another name: refused: %q", why)
	}
}

// TestGuardAttackRepository: the repository judging a path is the one it
// lies in, whatever the hook's environment names, and its ledger must
// still verify from this clone's record.
func TestGuardAttackRepository(t *testing.T) {
	r := guardRepo(t)
	other := newRepo(t) // a ledger where nobody holds anything
	other.ok("admin", "init")
	edit := claudeWrite(r.dir, "src/API/x.go", "")
	for _, v := range []string{"GIT_DIR=" + filepath.Join(other.dir, ".git"), "GIT_COMMON_DIR=" + filepath.Join(other.dir, ".git")} {
		if ok, why := runGuard(t, "alice", "claude", edit, append(r.env(), v)...).decision(t, "claude"); ok || !strings.Contains(why, "held by bob") {
			t.Errorf("%s: allowed %v: %q", v, ok, why)
		}
	}
	// The ledger moved back to before bob's lock: refused as a rollback,
	// not judged on the older state.
	r.git("update-ref", "refs/tally/ledger", "refs/tally/ledger~2")
	if ok, why := runGuard(t, "alice", "claude", edit, r.env()...).decision(t, "claude"); ok || !strings.Contains(why, "ROLLBACK-DETECTED") {
		t.Errorf("a ledger moved back: allowed %v: %q", ok, why)
	}
}

// TestGuardAttackStdinLeftOpen: a harness that writes its payload and
// never closes stdin gets its answer without closing it; a guard waiting
// for the end of input would run into the harness's timeout, an "allow".
// (Should the guard wait, this test fails at go test's -timeout.)
func TestGuardAttackStdinLeftOpen(t *testing.T) {
	r := guardRepo(t)
	cmd := exec.Command(testrepo.Tally(t), "guard", "--agent", "claude")
	cmd.Dir = t.TempDir()
	cmd.Env = testrepo.Env(append(r.env(), "TALLY_ACTOR=alice")...)
	stdin, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	defer stdin.Close()
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	if _, err := io.WriteString(stdin, claudeWrite(r.dir, "src/API/x.go", "")+"\n"); err != nil {
		t.Fatal(err)
	}
	var ee *exec.ExitError
	if err := cmd.Wait(); !errors.As(err, &ee) || ee.ExitCode() != 2 || !strings.Contains(stderr.String(), "held by bob") {
		t.Fatalf("exit %v: %q", err, stderr.String())
	}
	// Text after the value is not read as part of it, nor ignored.
	out := runGuard(t, "alice", "claude", claudeWrite(r.dir, "free.txt", "")+`{"tool_input":{"file_path":"src/API/x.go"}}`, r.env()...)
	if ok, why := out.decision(t, "claude"); ok || !strings.Contains(why, "text after its JSON value") {
		t.Errorf("two values: allowed %v: %q", ok, why)
	}
}
