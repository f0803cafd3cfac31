package main

// The edit guard as the real agent harnesses run it: Claude Code, Codex,
// Gemini CLI and opencode, at the versions testdata/harness/package-lock.json
// pins (`npm ci` there; .ci/run does it), run headless in the repository
// with the hooks `tally hooks install --agent` writes. Each talks to a
// scripted model on 127.0.0.1 that asks it to write a file and then records
// what the harness sends back: the test reads the file on disk and the tool
// result the model was given. Each harness runs in a network namespace of
// its own with only loopback up, the scripted model listening inside it, so
// nothing it tries reaches past the machine (DESIGN.md "Agent harness
// hooks" lists what each needs to run offline).

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tally-dev/tally/internal/testrepo"
)

// harnessDir holds the pinned harnesses' package.json and lockfile.
const harnessDir = "testdata/harness"

// harnessEditPath is the file every scripted model asks to write, relative
// to the repository; harnessEditText is what it writes there. It holds
// harnessEditMark, which no request holds until the harness has been asked
// to write it, and which JSON writes as it is at any depth of quoting.
const (
	harnessEditPath = "src/app.go"
	harnessEditMark = "written-by-the-scripted-model"
	harnessEditText = "package app // " + harnessEditMark + "\n"
)

// A harness is one agent program the tests drive.
type harness struct {
	name string // as --agent takes it
	bin  string // under node_modules/.bin
	api  string // the scripted model's wire protocol
	// setup writes the harness's own configuration for a run in repo with
	// home as its home directory and returns the environment to add and
	// the arguments to run with.
	setup func(t *testing.T, repo, home, baseURL string) (env, args []string)
}

var harnesses = []harness{
	{name: "claude", bin: "claude", api: "anthropic", setup: claudeSetup},
	{name: "codex", bin: "codex", api: "responses", setup: codexSetup},
	{name: "gemini", bin: "gemini", api: "gemini", setup: geminiSetup},
	{name: "opencode", bin: "opencode", api: "chat", setup: opencodeSetup},
}

const harnessPrompt = "Write the file " + harnessEditPath + "."

func claudeSetup(t *testing.T, repo, home, baseURL string) ([]string, []string) {
	return []string{"ANTHROPIC_BASE_URL=" + baseURL, "ANTHROPIC_API_KEY=scripted",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "DISABLE_TELEMETRY=1", "DISABLE_AUTOUPDATER=1"},
		[]string{"-p", harnessPrompt, "--output-format", "json", "--permission-mode", "acceptEdits"}
}

// codexSetup trusts the project (Codex ignores an untrusted project's
// .codex/), bypasses hook trust (untrusted hooks are skipped silently),
// names a model Codex knows (only then is apply_patch offered) and turns
// off plugins, analytics and otel, which reach for outside hosts.
func codexSetup(t *testing.T, repo, home, baseURL string) ([]string, []string) {
	codexHome := filepath.Join(home, ".codex")
	writeHarnessFile(t, filepath.Join(codexHome, "config.toml"), fmt.Sprintf(`model = "gpt-5.5"
model_provider = "scripted"

[model_providers.scripted]
name = "scripted"
base_url = "%s/v1"
wire_api = "responses"

[projects.%q]
trust_level = "trusted"

[analytics]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"
`, baseURL, repo))
	return []string{"CODEX_HOME=" + codexHome, "OPENAI_API_KEY=scripted"},
		[]string{"exec", "--dangerously-bypass-hook-trust", "--dangerously-bypass-approvals-and-sandbox",
			"--disable", "plugins", "--skip-git-repo-check", harnessPrompt}
}

// geminiSetup: Gemini CLI takes GOOGLE_GEMINI_BASE_URL headless only with
// the gemini-api-key auth type selected, and runs project hooks only in a
// trusted workspace. A model named skips the router, which asks a small
// model for JSON first and retries its answer for a minute and a half.
func geminiSetup(t *testing.T, repo, home, baseURL string) ([]string, []string) {
	writeHarnessFile(t, filepath.Join(home, ".gemini", "settings.json"), `{
  "security": {"auth": {"selectedType": "gemini-api-key"}},
  "privacy": {"usageStatisticsEnabled": false},
  "general": {"disableAutoUpdate": true, "disableUpdateNag": true}
}
`)
	return []string{"GOOGLE_GEMINI_BASE_URL=" + baseURL, "GEMINI_API_KEY=scripted", "GEMINI_CLI_TRUST_WORKSPACE=true"},
		[]string{"-p", harnessPrompt, "--approval-mode", "yolo", "--model", "gemini-2.5-flash"}
}

// opencodeSetup: a provider on @ai-sdk/openai-compatible at the scripted
// model. Before it loads plugins, opencode installs @opencode-ai/plugin into
// each configuration folder whose node_modules/ is missing or whose
// package-lock.json does not list it, which offline stalls for over a
// minute; so each gets the pinned package and a lockfile naming it.
func opencodeSetup(t *testing.T, repo, home, baseURL string) ([]string, []string) {
	config := filepath.Join(home, ".config")
	writeHarnessFile(t, filepath.Join(config, "opencode", "opencode.json"), fmt.Sprintf(`{
  "$schema": "https://opencode.ai/config.json",
  "autoupdate": false,
  "share": "disabled",
  "snapshot": false,
  "permission": {"edit": "allow", "bash": "allow", "external_directory": "allow"},
  "provider": {
    "scripted": {
      "npm": "@ai-sdk/openai-compatible",
      "name": "scripted",
      "options": {"baseURL": "%s/v1", "apiKey": "scripted"},
      "models": {"model": {"name": "model", "tool_call": true}}
    }
  }
}
`, baseURL))
	plugin, err := filepath.Abs(filepath.Join(harnessDir, "node_modules", "@opencode-ai"))
	if err != nil {
		t.Fatal(err)
	}
	var pkg struct{ Version string }
	if err := json.Unmarshal([]byte(readFile(t, filepath.Join(plugin, "plugin", "package.json"))), &pkg); err != nil {
		t.Fatal(err)
	}
	for _, dir := range []string{filepath.Join(config, "opencode"), filepath.Join(repo, ".opencode")} {
		if err := os.MkdirAll(filepath.Join(dir, "node_modules"), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.Symlink(plugin, filepath.Join(dir, "node_modules", "@opencode-ai")); err != nil {
			t.Fatal(err)
		}
		writeHarnessFile(t, filepath.Join(dir, "package-lock.json"),
			`{"lockfileVersion":3,"packages":{"":{"dependencies":{"@opencode-ai/plugin":"`+pkg.Version+`"}}}}`)
	}
	return []string{"XDG_CONFIG_HOME=" + config, "XDG_DATA_HOME=" + filepath.Join(home, ".local", "share"),
			"XDG_CACHE_HOME=" + filepath.Join(home, ".cache"), "XDG_STATE_HOME=" + filepath.Join(home, ".local", "state"),
			"OPENCODE_DISABLE_AUTOUPDATE=1", "OPENCODE_DISABLE_MODELS_FETCH=1", "OPENCODE_DISABLE_DEFAULT_PLUGINS=1",
			"OPENCODE_DISABLE_LSP_DOWNLOAD=1"},
		[]string{"run", "-m", "scripted/model", harnessPrompt}
}

func writeHarnessFile(t *testing.T, path, text string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(text), 0o644); err != nil {
		t.Fatal(err)
	}
}

// harnessProgram returns the harness's program, or skips the test (failing
// it under CI=true) when node or the pinned packages are missing.
func harnessProgram(t *testing.T, h harness) string {
	t.Helper()
	if _, err := exec.LookPath("node"); err != nil {
		testrepo.Missing(t, "node is not on PATH (apt-get install nodejs npm): cannot run the agent harnesses")
	}
	bin, err := filepath.Abs(filepath.Join(harnessDir, "node_modules", ".bin", h.bin))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(bin); err != nil {
		testrepo.Missing(t, "the agent harnesses are not installed (run npm install --no-save in cmd/tally/"+harnessDir+")")
	}
	if h.name == "gemini" {
		out, err := exec.Command("node", "-p", "process.versions.node.split('.')[0] >= 20").Output()
		if err != nil || strings.TrimSpace(string(out)) != "true" {
			testrepo.Missing(t, "Gemini CLI needs node 20 or later")
		}
	}
	return bin
}

// loopbackListener moves a thread into a new network namespace whose one
// interface is loopback, up, and returns a listener on 127.0.0.1 opened
// there and a function that starts a command from that thread: the command,
// and all it starts, live in the namespace, so nothing they try leaves the
// machine. The thread is never unlocked, so it ends with its goroutine and
// nothing else of the test runs in there. Without the right to make the
// namespace (CAP_SYS_ADMIN) the test is skipped (failed under CI=true).
func loopbackListener(t *testing.T) (net.Listener, func(*exec.Cmd) error) {
	t.Helper()
	type opened struct {
		ln        net.Listener
		namespace error // making the namespace failed
		err       error
	}
	openc := make(chan opened, 1)
	startc, startErr := make(chan *exec.Cmd), make(chan error, 1)
	t.Cleanup(func() { close(startc) })
	go func() {
		runtime.LockOSThread()
		if err := unix.Unshare(unix.CLONE_NEWNET); err != nil {
			openc <- opened{namespace: fmt.Errorf("unshare(CLONE_NEWNET): %w", err)}
			return
		}
		if err := loopbackUp(); err != nil {
			openc <- opened{namespace: fmt.Errorf("bringing lo up: %w", err)}
			return
		}
		ifaces, err := net.Interfaces()
		if err != nil || len(ifaces) != 1 || ifaces[0].Name != "lo" || ifaces[0].Flags&net.FlagUp == 0 {
			openc <- opened{err: fmt.Errorf("the namespace's interfaces are %v (%v), want lo alone, up", ifaces, err)}
			return
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		openc <- opened{ln: ln, err: err}
		if err != nil {
			return
		}
		for cmd := range startc {
			startErr <- cmd.Start()
		}
	}()
	o := <-openc
	if o.namespace != nil {
		testrepo.Missing(t, "cannot make a loopback-only network namespace to run the harness in: "+o.namespace.Error())
	}
	if o.err != nil {
		t.Fatal(o.err)
	}
	return o.ln, func(cmd *exec.Cmd) error {
		startc <- cmd
		return <-startErr
	}
}

// loopbackUp is `ip link set lo up` in the calling thread's namespace.
func loopbackUp() error {
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_DGRAM|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		return err
	}
	defer unix.Close(fd)
	ifr, err := unix.NewIfreq("lo")
	if err != nil {
		return err
	}
	if err := unix.IoctlIfreq(fd, unix.SIOCGIFFLAGS, ifr); err != nil {
		return err
	}
	ifr.SetUint16(ifr.Uint16() | unix.IFF_UP)
	return unix.IoctlIfreq(fd, unix.SIOCSIFFLAGS, ifr)
}

// scriptedModel is a model server that answers the harness's first request
// with a call of its tool that writes harnessEditPath, and every request
// after the harness has it (one that holds harnessEditMark) with a short
// text that ends the turn. It keeps every request.
type scriptedModel struct {
	api  string
	repo string // the repository the harness runs in

	mu       sync.Mutex
	requests []modelRequest
}

type modelRequest struct {
	Path string
	Body []byte
	At   time.Time
}

func (m *scriptedModel) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	body, _ := io.ReadAll(r.Body)
	m.mu.Lock()
	m.requests = append(m.requests, modelRequest{Path: r.URL.Path + "?" + r.URL.RawQuery, Body: body, At: time.Now()})
	m.mu.Unlock()
	followUp := bytes.Contains(body, []byte(harnessEditMark))
	var req struct {
		Stream bool            `json:"stream"`
		Tools  json.RawMessage `json:"tools"`
	}
	json.Unmarshal(body, &req)
	// A request without tools is a side request (a title, a check):
	// text answers it.
	edit := !followUp && len(req.Tools) > 2
	switch {
	case m.api == "anthropic" && strings.HasSuffix(r.URL.Path, "/v1/messages"):
		m.anthropic(w, req.Stream, edit)
	case m.api == "responses" && strings.HasSuffix(r.URL.Path, "/responses"):
		m.responses(w, edit)
	case m.api == "gemini" && strings.HasSuffix(r.URL.Path, ":streamGenerateContent"):
		m.gemini(w, true, edit)
	case m.api == "gemini" && strings.HasSuffix(r.URL.Path, ":generateContent"):
		m.gemini(w, false, false)
	case m.api == "chat" && strings.HasSuffix(r.URL.Path, "/chat/completions"):
		m.chat(w, req.Stream, edit)
	default:
		http.NotFound(w, r)
	}
}

func (m *scriptedModel) absEditPath() string { return filepath.Join(m.repo, harnessEditPath) }

func sse(w http.ResponseWriter, events ...string) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	for _, e := range events {
		io.WriteString(w, e+"\n\n")
	}
}

func jsonText(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return string(b)
}

// anthropic answers the Messages API: a Write tool_use, or text.
func (m *scriptedModel) anthropic(w http.ResponseWriter, stream, edit bool) {
	block := map[string]any{"type": "text", "text": "Done."}
	stop := "end_turn"
	input := map[string]any{"file_path": m.absEditPath(), "content": harnessEditText}
	if edit {
		block = map[string]any{"type": "tool_use", "id": "toolu_tally_edit", "name": "Write", "input": input}
		stop = "tool_use"
	}
	usage := map[string]any{"input_tokens": 10, "output_tokens": 10}
	msg := map[string]any{"id": "msg_scripted", "type": "message", "role": "assistant", "model": "claude-scripted",
		"content": []any{block}, "stop_reason": stop, "stop_sequence": nil, "usage": usage}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jsonText(msg))
		return
	}
	start := map[string]any{}
	for k, v := range msg {
		start[k] = v
	}
	start["content"], start["stop_reason"] = []any{}, nil
	event := func(name string, data any) string { return "event: " + name + "\ndata: " + jsonText(data) }
	var delta any = map[string]any{"type": "text_delta", "text": "Done."}
	open := map[string]any{"type": "text", "text": ""}
	if edit {
		delta = map[string]any{"type": "input_json_delta", "partial_json": jsonText(input)}
		open = map[string]any{"type": "tool_use", "id": "toolu_tally_edit", "name": "Write", "input": map[string]any{}}
	}
	sse(w,
		event("message_start", map[string]any{"type": "message_start", "message": start}),
		event("content_block_start", map[string]any{"type": "content_block_start", "index": 0, "content_block": open}),
		event("content_block_delta", map[string]any{"type": "content_block_delta", "index": 0, "delta": delta}),
		event("content_block_stop", map[string]any{"type": "content_block_stop", "index": 0}),
		event("message_delta", map[string]any{"type": "message_delta", "delta": map[string]any{"stop_reason": stop, "stop_sequence": nil}, "usage": map[string]any{"output_tokens": 10}}),
		event("message_stop", map[string]any{"type": "message_stop"}))
}

// responses answers OpenAI's Responses API as Codex streams it: apply_patch
// as a custom_tool_call adding the file, or a message.
func (m *scriptedModel) responses(w http.ResponseWriter, edit bool) {
	item := map[string]any{"type": "message", "id": "msg_scripted", "role": "assistant", "status": "completed",
		"content": []any{map[string]any{"type": "output_text", "text": "Done.", "annotations": []any{}}}}
	if edit {
		patch := "*** Begin Patch\n*** Add File: " + harnessEditPath + "\n+" + strings.TrimSuffix(harnessEditText, "\n") + "\n*** End Patch\n"
		item = map[string]any{"type": "custom_tool_call", "id": "ctc_scripted", "status": "completed",
			"call_id": "call_tally_edit", "name": "apply_patch", "input": patch}
	}
	event := func(data map[string]any) string {
		return "event: " + data["type"].(string) + "\ndata: " + jsonText(data)
	}
	resp := map[string]any{"id": "resp_scripted", "object": "response", "status": "in_progress", "model": "gpt-5.5", "output": []any{}}
	done := map[string]any{"id": "resp_scripted", "object": "response", "status": "completed", "model": "gpt-5.5", "output": []any{item},
		"usage": map[string]any{"input_tokens": 10, "input_tokens_details": map[string]any{"cached_tokens": 0},
			"output_tokens": 10, "output_tokens_details": map[string]any{"reasoning_tokens": 0}, "total_tokens": 20}}
	sse(w,
		event(map[string]any{"type": "response.created", "response": resp}),
		event(map[string]any{"type": "response.output_item.added", "output_index": 0, "item": item}),
		event(map[string]any{"type": "response.output_item.done", "output_index": 0, "item": item}),
		event(map[string]any{"type": "response.completed", "response": done}))
}

// gemini answers generateContent (streamed as server-sent events, or not):
// a write_file functionCall, or text.
func (m *scriptedModel) gemini(w http.ResponseWriter, stream, edit bool) {
	part := map[string]any{"text": "Done."}
	if edit {
		part = map[string]any{"functionCall": map[string]any{"name": "write_file",
			"args": map[string]any{"file_path": m.absEditPath(), "content": harnessEditText}}}
	}
	resp := map[string]any{
		"candidates":    []any{map[string]any{"content": map[string]any{"role": "model", "parts": []any{part}}, "finishReason": "STOP", "index": 0}},
		"usageMetadata": map[string]any{"promptTokenCount": 10, "candidatesTokenCount": 10, "totalTokenCount": 20},
		"modelVersion":  "gemini-scripted",
	}
	if !stream {
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jsonText(resp))
		return
	}
	sse(w, "data: "+jsonText(resp))
}

// chat answers OpenAI chat completions as @ai-sdk/openai-compatible reads
// them: a write tool call, or text.
func (m *scriptedModel) chat(w http.ResponseWriter, stream, edit bool) {
	delta := map[string]any{"role": "assistant", "content": "Done."}
	finish := "stop"
	if edit {
		delta = map[string]any{"role": "assistant", "tool_calls": []any{map[string]any{"index": 0, "id": "call_tally_edit", "type": "function",
			"function": map[string]any{"name": "write", "arguments": jsonText(map[string]any{"filePath": m.absEditPath(), "content": harnessEditText})}}}}
		finish = "tool_calls"
	}
	usage := map[string]any{"prompt_tokens": 10, "completion_tokens": 10, "total_tokens": 20}
	if !stream {
		msg := map[string]any{}
		for k, v := range delta {
			msg[k] = v
		}
		w.Header().Set("Content-Type", "application/json")
		io.WriteString(w, jsonText(map[string]any{"id": "chatcmpl-scripted", "object": "chat.completion", "created": 0, "model": "model",
			"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}}, "usage": usage}))
		return
	}
	chunk := func(choice map[string]any, extra map[string]any) string {
		c := map[string]any{"id": "chatcmpl-scripted", "object": "chat.completion.chunk", "created": 0, "model": "model", "choices": []any{choice}}
		for k, v := range extra {
			c[k] = v
		}
		return "data: " + jsonText(c)
	}
	sse(w,
		chunk(map[string]any{"index": 0, "delta": delta, "finish_reason": nil}, nil),
		chunk(map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}, map[string]any{"usage": usage}),
		"data: [DONE]")
}

// toolResults are the tool results in the requests that came after the
// harness had the edit: every object in them shaped as one of the four
// protocols' tool results, as JSON text.
func (m *scriptedModel) toolResults() []string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []string
	for _, r := range m.requests {
		if !bytes.Contains(r.Body, []byte(harnessEditMark)) {
			continue
		}
		var v any
		if json.Unmarshal(r.Body, &v) == nil {
			collectToolResults(v, &out)
		}
	}
	return out
}

func collectToolResults(v any, out *[]string) {
	switch v := v.(type) {
	case map[string]any:
		typ, _ := v["type"].(string)
		if typ == "tool_result" || typ == "custom_tool_call_output" || typ == "function_call_output" || v["role"] == "tool" || v["functionResponse"] != nil {
			*out = append(*out, jsonText(v))
			return
		}
		for _, x := range v {
			collectToolResults(x, out)
		}
	case []any:
		for _, x := range v {
			collectToolResults(x, out)
		}
	}
}

func (m *scriptedModel) log() string {
	m.mu.Lock()
	defer m.mu.Unlock()
	var b strings.Builder
	for i, r := range m.requests {
		body := string(r.Body)
		if len(body) > 2000 {
			body = body[:1000] + " … " + body[len(body)-1000:]
		}
		fmt.Fprintf(&b, "request %d at %s %s\n%s\n", i, r.At.Format("15:04:05.000"), r.Path, body)
	}
	return b.String()
}

// harnessRun is what one run of a harness left.
type harnessRun struct {
	output  string
	written bool // harnessEditPath exists
	results []string
}

// runHarness runs h in repo as actor, against a scripted model, inside a
// loopback-only network namespace, and returns what it left. A run that
// does not end within harnessTimeout is killed and fails the test.
func runHarness(t *testing.T, h harness, repo, actor string) harnessRun {
	t.Helper()
	program := harnessProgram(t, h)
	home := t.TempDir()
	model := &scriptedModel{api: h.api, repo: repo}
	ln, start := loopbackListener(t)
	srv := &http.Server{Handler: model}
	go srv.Serve(ln)
	defer srv.Close()
	env, args := h.setup(t, repo, home, "http://"+ln.Addr().String())
	cmd := exec.Command(program, args...)
	cmd.Dir = repo
	// PWD too: opencode takes its project from it, not from the working
	// directory.
	cmd.Env = testrepo.Env(append([]string{"HOME=" + home, "PWD=" + repo, "TALLY_ACTOR=" + actor, "CI=", "NO_COLOR=1", "TERM=dumb"}, env...)...)
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	cmd.SysProcAttr = &unix.SysProcAttr{Setpgid: true}
	if err := start(cmd); err != nil {
		t.Fatalf("%s: %v", h.name, err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(harnessTimeout):
		unix.Kill(-cmd.Process.Pid, unix.SIGKILL)
		<-done
		t.Fatalf("%s did not finish within %v\noutput:\n%s\nmodel:\n%s", h.name, harnessTimeout, out.String(), model.log())
	}
	unix.Kill(-cmd.Process.Pid, unix.SIGKILL) // whatever it left behind
	run := harnessRun{output: out.String(), results: model.toolResults()}
	if b, err := os.ReadFile(filepath.Join(repo, harnessEditPath)); err == nil {
		run.written = true
		if strings.TrimSpace(string(b)) != strings.TrimSpace(harnessEditText) {
			t.Fatalf("%s wrote %s as %q, want %q", h.name, harnessEditPath, b, harnessEditText)
		}
	}
	if len(run.results) == 0 {
		t.Fatalf("%s (exit %v) sent the model no tool result\noutput:\n%s\nmodel:\n%s", h.name, err, run.output, model.log())
	}
	return run
}

// harnessTimeout bounds one harness run; each takes seconds.
const harnessTimeout = 3 * time.Minute

// firstLines is text's first n lines, for a failure message.
func firstLines(text string, n int) string {
	var b strings.Builder
	sc := bufio.NewScanner(strings.NewReader(text))
	for i := 0; i < n && sc.Scan(); i++ {
		b.WriteString(sc.Text() + "\n")
	}
	return b.String()
}

// A harnessScenario is one state of the ledger an agent edits in.
type harnessScenario struct {
	name string
	// prepare sets the ledger up in r and returns the tally binary the
	// hooks are to call.
	prepare func(t *testing.T, r *repo, bin string) string
	written bool // the edit is applied
	// want is in the tool result the model is given, when refused, with
	// {bin} standing for the binary the hooks call.
	want string
}

// harnessActor is the agent's identity (TALLY_ACTOR in the harness's
// environment, which its hooks inherit); harnessOther is another agent.
const (
	harnessActor = "alice"
	harnessOther = "bob"
)

var harnessScenarios = []harnessScenario{
	{name: "other-lock", want: harnessOther, prepare: func(t *testing.T, r *repo, bin string) string {
		r.ok(harnessOther, "lock", "src/**", "--ttl", "1h")
		return bin
	}},
	{name: "own-lock", written: true, prepare: func(t *testing.T, r *repo, bin string) string {
		r.ok(harnessActor, "lock", "src/**", "--ttl", "1h")
		return bin
	}},
	{name: "other-cell", want: harnessOther, prepare: func(t *testing.T, r *repo, bin string) string {
		r.ok("H", "plan", r.file("plan.json", `{"wave":"w","cells":[{"id":"api","paths":["src/**"]}]}`))
		r.ok(harnessOther, "claim", "w/api", "--ttl", "1h")
		return bin
	}},
	{name: "unverified-ledger", want: "verif", prepare: func(t *testing.T, r *repo, bin string) string {
		r.ok(harnessActor, "lock", "src/**", "--ttl", "1h")
		// A commit on the ledger's tip with its parent's tree: an entry
		// that does not verify.
		tip := r.tip()
		forged := r.git("commit-tree", tip+"~1^{tree}", "-p", tip, "-m", "forged")
		r.git("update-ref", "refs/tally/ledger", forged, tip)
		if res := r.run(harnessActor, "verify"); res.Code == 0 {
			t.Fatalf("the forged ledger verifies: %s", res)
		}
		return bin
	}},
	// Claude Code quotes the hook's command in the tool result, so what
	// shows the refusal ran is the binary's path in the message.
	{name: "tally-removed", want: "the tally binary {bin} is missing", prepare: func(t *testing.T, r *repo, bin string) string {
		r.ok(harnessActor, "lock", "src/**", "--ttl", "1h")
		gone := filepath.Join(t.TempDir(), "tally")
		b, err := os.ReadFile(bin)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(gone, b, 0o755); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { os.Remove(gone) })
		return gone // removed once the hooks name it
	}},
}

// TestHarnessGuard: each harness, in each scenario, runs the guard tally
// hooks install wrote before the scripted model's edit: the edit is applied
// exactly where the agent may make it, and where it is refused the model is
// told why in the tool result of its next request.
func TestHarnessGuard(t *testing.T) {
	for _, h := range harnesses {
		t.Run(h.name, func(t *testing.T) {
			t.Parallel()
			harnessProgram(t, h)
			for _, sc := range harnessScenarios {
				t.Run(sc.name, func(t *testing.T) {
					t.Parallel()
					r := newRepo(t)
					r.ok("H", "init")
					bin := sc.prepare(t, r, testrepo.Tally(t))
					res := testrepo.Run(t, r.dir, harnessActor, nil, "hooks", "install", "--agent", h.name, "--tally", bin, "--json")
					if res.Code != 0 {
						t.Fatalf("hooks install: %s", res)
					}
					if sc.name == "tally-removed" {
						if err := os.Remove(bin); err != nil {
							t.Fatal(err)
						}
					}
					start := time.Now()
					run := runHarness(t, h, r.dir, harnessActor)
					results := strings.Join(run.results, "\n")
					t.Logf("%s ran %v; the model was given:\n%s", h.name, time.Since(start).Round(time.Millisecond), results)
					if run.written != sc.written {
						t.Fatalf("%s wrote %s: %v, want %v\ntool results: %s\noutput:\n%s", h.name, harnessEditPath, run.written, sc.written, results, firstLines(run.output, 40))
					}
					if want := strings.ReplaceAll(sc.want, "{bin}", bin); !sc.written && !strings.Contains(results, want) {
						t.Fatalf("%s: the model was not told %q; tool results:\n%s\noutput:\n%s", h.name, want, results, firstLines(run.output, 40))
					}
				})
			}
		})
	}
}
