package main

// The MCP server as agents on the official TypeScript SDK see it: node runs
// testdata/mcp-ts/driver.mjs, whose Client (with StdioClientTransport)
// spawns `tally mcp`, lists the tools (so that callTool() checks every
// structured result against the tool's output schema) and calls them as the
// test says. The SDK is installed there by `npm ci` (.ci/run does it).

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

// tsSDKDir is where the TypeScript SDK is installed, with the driver.
const tsSDKDir = "testdata/mcp-ts"

// tsDriver is a running driver.mjs.
type tsDriver struct {
	t   *testing.T
	in  io.WriteCloser
	out *bufio.Scanner
}

// startTSDriver starts the driver, or skips the test when node or the
// installed SDK is missing; under CI=true their absence fails it.
func startTSDriver(t *testing.T) *tsDriver {
	t.Helper()
	node, err := exec.LookPath("node")
	missing := "node is not on PATH (apt-get install nodejs npm)"
	if err == nil {
		missing = ""
		if _, err := os.Stat(filepath.Join(tsSDKDir, "node_modules", "@modelcontextprotocol", "sdk", "package.json")); err != nil {
			missing = "the TypeScript MCP SDK is not installed (run npm ci in cmd/tally/" + tsSDKDir + ")"
		}
	}
	if missing != "" {
		testrepo.Missing(t, missing)
	}
	cmd := exec.Command(node, "driver.mjs")
	cmd.Dir, cmd.Env = tsSDKDir, testrepo.Env()
	logPath := filepath.Join(t.TempDir(), "stderr")
	logFile, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	cmd.Stderr = logFile // the driver's and the servers' (inherited) logs
	d := &tsDriver{t: t}
	if d.in, err = cmd.StdinPipe(); err != nil {
		t.Fatal(err)
	}
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	d.out = bufio.NewScanner(stdout)
	d.out.Buffer(nil, 64<<20)
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.in.Close() // the driver closes its clients, so the servers exit
		if err := cmd.Wait(); err != nil {
			t.Errorf("driver: %v", err)
		}
		if t.Failed() {
			b, _ := os.ReadFile(logPath)
			t.Logf("driver and server logs:\n%s", b)
		}
	})
	return d
}

// do sends one request and returns the reply.
func (d *tsDriver) do(req map[string]any) map[string]any {
	d.t.Helper()
	b, err := json.Marshal(req)
	if err != nil {
		d.t.Fatal(err)
	}
	if _, err := d.in.Write(append(b, '\n')); err != nil {
		d.t.Fatalf("driver: %v", err)
	}
	if !d.out.Scan() {
		d.t.Fatalf("driver: no reply to %s (%v)", b, d.out.Err())
	}
	var reply map[string]any
	if err := json.Unmarshal(d.out.Bytes(), &reply); err != nil {
		d.t.Fatalf("driver: reply %q: %v", d.out.Bytes(), err)
	}
	if reply["fatal"] != nil {
		d.t.Fatalf("driver: %s: %v", b, reply["fatal"])
	}
	return reply
}

// start connects agent to `tally mcp` on dir as that actor and returns the
// server's serverInfo and its tools by name.
func (d *tsDriver) start(agent, dir string) (map[string]any, map[string]map[string]any) {
	d.t.Helper()
	reply := d.do(map[string]any{"op": "start", "agent": agent, "command": testrepo.Tally(d.t),
		"args": []string{"mcp", "-C", dir, "--actor", agent}})
	tools := map[string]map[string]any{}
	for _, tool := range arr(d.t, reply, "tools") {
		tool := tool.(map[string]any)
		tools[tool["name"].(string)] = tool
	}
	return obj(d.t, reply, "server"), tools
}

// call calls a tool as agent. callTool() must return, not throw. A success
// is its structured content, which must say "ok": true and be what the one
// text content says; a refusal has no structured content, and its one text
// content is the error object. It returns the object and isError.
func (d *tsDriver) call(agent, tool string, args map[string]any) (map[string]any, bool) {
	d.t.Helper()
	reply := d.do(map[string]any{"op": "call", "agent": agent, "tool": tool, "arguments": args})
	if reply["threw"] != nil {
		d.t.Fatalf("%s: %s %v: callTool() threw %v", agent, tool, args, reply["threw"])
	}
	res := obj(d.t, reply, "result")
	content := arr(d.t, res, "content")
	if len(content) != 1 || content[0].(map[string]any)["type"] != "text" {
		d.t.Fatalf("%s: %s: want one text content, got %v", agent, tool, content)
	}
	var text map[string]any
	if err := json.Unmarshal([]byte(content[0].(map[string]any)["text"].(string)), &text); err != nil {
		d.t.Fatalf("%s: %s: the text content is not a JSON object: %v", agent, tool, content[0])
	}
	isError := res["isError"] == true
	sc, hasSC := res["structuredContent"]
	switch {
	case isError && hasSC:
		d.t.Fatalf("%s: %s: an error result with structured content: %v", agent, tool, res)
	case !isError && (!hasSC || sc.(map[string]any)["ok"] != true || mustJSON(d.t, sc) != mustJSON(d.t, text)):
		d.t.Fatalf("%s: %s: a success must carry \"ok\":true as structured content, also as text: %v", agent, tool, res)
	}
	return text, isError
}

// ok calls a tool that must succeed.
func (d *tsDriver) ok(agent, tool string, args map[string]any) map[string]any {
	d.t.Helper()
	m, isErr := d.call(agent, tool, args)
	if isErr {
		d.t.Fatalf("%s: %s %v refused: %v", agent, tool, args, m)
	}
	return m
}

// refuse calls a tool that must be refused with code and returns the error.
func (d *tsDriver) refuse(agent, code string, retryable bool, tool string, args map[string]any) map[string]any {
	d.t.Helper()
	m, isErr := d.call(agent, tool, args)
	e, _ := m["error"].(map[string]any)
	if !isErr || len(m) != 2 || m["ok"] != false || e == nil {
		d.t.Fatalf("%s: %s %v: want an error object, got isError=%v %v", agent, tool, args, isErr, m)
	}
	if e["code"] != code || e["retryable"] != retryable || e["message"] == "" {
		d.t.Fatalf("%s: %s %v: want %s (retryable %v), got %v", agent, tool, args, code, retryable, e)
	}
	return e
}

func mustJSON(t testing.TB, v any) string {
	t.Helper()
	b, err := json.Marshal(v) // maps marshal with sorted keys: one form per value
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestMCPTypeScriptSDK: two agents on the official TypeScript SDK drain a
// plan through `tally mcp`, reading LEASE-HELD, NO-READY-CELL and
// PLAN-COMPLETE from callTool() results as the command line reports them.
func TestMCPTypeScriptSDK(t *testing.T) {
	d := startTSDriver(t)
	r := newRepo(t)
	plan := r.file("plan.json", `{"wave":"w1","cells":[{"id":"c0"},{"id":"c1"},{"id":"c2","deps":["c0","c1"]}]}`)
	r.ok("lead", "init")
	r.ok("lead", "plan", plan)

	info, tools := d.start("agent-1", r.dir)
	d.start("agent-2", r.dir)
	if want := moduleVersion(t, testrepo.Tally(t)); info["name"] != "tally" || !strings.HasPrefix(fmt.Sprint(info["version"]), want) {
		t.Fatalf("serverInfo %v, want tally at version %s", info, want)
	}

	// agent-1 takes c0; agent-2, asking for it by name, learns who holds it.
	cl := d.ok("agent-1", "claim", map[string]any{"next": true})
	if cl["cell"] != "c0" || obj(t, cl, "lease")["actor"] != "agent-1" || obj(t, cl, "lease")["epoch"] != 1.0 {
		t.Fatalf("claim: %v", cl)
	}
	held := d.refuse("agent-2", "LEASE-HELD", true, "claim", map[string]any{"wave": "w1", "cell": "c0"})
	if held["holder"] != "agent-1" || held["epoch"] != 1.0 || held["expires_at"] == nil {
		t.Fatalf("LEASE-HELD details: %v", held)
	}
	cliHeld := obj(t, r.run("agent-2", "claim", "w1/c0").JSON, "error")
	if mustJSON(t, held) != mustJSON(t, cliHeld) {
		t.Fatalf("the tool's error %v is not the command line's %v", held, cliHeld)
	}
	if cl := d.ok("agent-2", "claim", map[string]any{"next": true}); cl["cell"] != "c1" {
		t.Fatalf("agent-2's claim: %v", cl)
	}
	// c2 waits for both: nothing is ready for agent-1, yet three cells are open.
	if e := d.refuse("agent-1", "NO-READY-CELL", true, "claim", map[string]any{"next": true}); e["open"] != 3.0 {
		t.Fatalf("NO-READY-CELL: %v", e)
	}

	head := r.commit("c0's work", "c0.txt")
	if done := d.ok("agent-1", "done", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1}); obj(t, done, "receipt")["commit"] != head {
		t.Fatalf("done: %v, want commit %s", done, head)
	}
	d.ok("agent-2", "done", map[string]any{"wave": "w1", "cell": "c1", "epoch": 1})
	if cl := d.ok("agent-2", "claim", map[string]any{"next": true}); cl["cell"] != "c2" {
		t.Fatalf("claim after the deps are done: %v", cl)
	}
	if e := d.refuse("agent-1", "NO-READY-CELL", true, "claim", map[string]any{"next": true}); e["open"] != 1.0 {
		t.Fatalf("NO-READY-CELL: %v", e)
	}
	d.ok("agent-2", "done", map[string]any{"wave": "w1", "cell": "c2", "epoch": 1})

	// Drained: both agents are told to stop, not to retry.
	for _, agent := range []string{"agent-1", "agent-2"} {
		if e := d.refuse(agent, "PLAN-COMPLETE", false, "claim", map[string]any{"next": true}); e["open"] != 0.0 {
			t.Fatalf("PLAN-COMPLETE: %v", e)
		}
	}
	counts := obj(t, arr(t, r.ok("lead", "status"), "waves")[0].(map[string]any), "counts")
	if counts["done"] != 3.0 {
		t.Fatalf("status after the drain: %v", counts)
	}
	if v := d.ok("agent-1", "verify", map[string]any{"full": true}); v["entries"] != 8.0 {
		t.Fatalf("verify: %v", v)
	}

	// The schemas state the lease rules' range, and the server holds to it.
	ttl := obj(t, obj(t, obj(t, tools["claim"], "inputSchema"), "properties"), "ttl")
	if ttl["minimum"] != float64(lease.TTLMin) || ttl["maximum"] != float64(lease.TTLMax) {
		t.Fatalf("claim's ttl schema states no range %d..%d: %v", lease.TTLMin, lease.TTLMax, ttl)
	}
	d.refuse("agent-1", "USAGE", false, "claim", map[string]any{"next": true, "ttl": lease.TTLMax + 1})
}
