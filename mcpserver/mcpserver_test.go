package mcpserver_test

// These tests run the real tally binary (built once by testrepo) as
// `tally mcp` subprocesses on real git repositories and drive them with the
// SDK's client over stdio, beside the tally and git command lines.

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/modelcontextprotocol/go-sdk/mcp"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/mcpserver"
)

// newRepo creates a repository with an initialized ledger and a wave w1 of
// cells c0..c(n-1) without dependencies.
func newRepo(t *testing.T, n int) string {
	t.Helper()
	dir := testrepo.New(t)
	cells := make([]string, n)
	for i := range cells {
		cells[i] = fmt.Sprintf(`{"id":"c%d"}`, i)
	}
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"wave":"w1","cells":[`+strings.Join(cells, ",")+`]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, dir, "init")
	cli(t, dir, "plan", plan)
	return dir
}

// cli runs a tally command with --json that must succeed.
func cli(t *testing.T, dir string, args ...string) map[string]any {
	t.Helper()
	res := testrepo.Run(t, dir, "cli", nil, append(args, "--json")...)
	if res.Code != 0 {
		t.Fatalf("tally %v: exit %d: %s%s", args, res.Code, res.Stdout, res.Stderr)
	}
	return res.JSON
}

// server is a `tally mcp` subprocess and a client session on it.
type server struct {
	*mcp.ClientSession
	cmd    *exec.Cmd
	stderr string // the server's log file
}

// start starts `tally mcp -C dir --actor actor extra...`, under sh if
// wrapped: then the server's parent, the agent it serves, is that sh.
func start(t *testing.T, dir, actor string, wrapped bool, extra ...string) *server {
	t.Helper()
	argv := append([]string{testrepo.Tally(t), "mcp", "-C", dir, "--actor", actor}, extra...)
	if wrapped {
		// A background job's stdin is /dev/null unless redirected: pass ours on.
		argv = append([]string{"sh", "-c", `exec 3<&0; "$@" <&3 3<&- & wait`, "sh"}, argv...)
	}
	s := &server{cmd: exec.Command(argv[0], argv[1:]...), stderr: filepath.Join(t.TempDir(), "stderr")}
	s.cmd.Env = testrepo.Env()
	f, err := os.Create(s.stderr)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	s.cmd.Stderr = f
	client := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if s.ClientSession, err = client.Connect(ctx, &mcp.CommandTransport{Command: s.cmd}, nil); err != nil {
		t.Fatalf("connect to %v: %v", argv, err)
	}
	t.Cleanup(func() {
		s.Close()
		if t.Failed() {
			b, _ := os.ReadFile(s.stderr)
			t.Logf("%s's server log:\n%s", actor, b)
		}
	})
	return s
}

// call calls a tool and decodes its one text content, a JSON object. A
// success's structured content is that object, with "ok": true; an error
// (the second result) has none: clients check structured content against
// the output schema, which describes successes.
func (s *server) call(t *testing.T, tool string, args map[string]any) (map[string]any, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	res, err := s.CallTool(ctx, &mcp.CallToolParams{Name: tool, Arguments: args})
	if err != nil {
		t.Fatalf("%s %v: %v", tool, args, err)
	}
	if len(res.Content) != 1 {
		t.Fatalf("%s: %d content blocks", tool, len(res.Content))
	}
	text, ok := res.Content[0].(*mcp.TextContent)
	var m map[string]any
	if !ok || json.Unmarshal([]byte(text.Text), &m) != nil || m == nil {
		t.Fatalf("%s %v: the content is not a JSON object: %#v", tool, args, res.Content[0])
	}
	if res.IsError {
		if res.StructuredContent != nil {
			t.Fatalf("%s %v: an error with structured content %v", tool, args, res.StructuredContent)
		}
		return m, true
	}
	if m["ok"] != true || !jsonEqual(text.Text, mustJSON(t, res.StructuredContent)) {
		t.Fatalf("%s: the structured content %v is not the text content %s with \"ok\": true", tool, res.StructuredContent, text.Text)
	}
	return m, false
}

// ok calls a tool that must succeed.
func (s *server) ok(t *testing.T, tool string, args map[string]any) map[string]any {
	t.Helper()
	m, isErr := s.call(t, tool, args)
	if isErr {
		t.Fatalf("%s %v failed: %v", tool, args, m)
	}
	return m
}

// refuse calls a tool that must fail with code, checks the error object's
// shape (the command line's --json error) and returns the error.
func (s *server) refuse(t *testing.T, code string, retryable bool, tool string, args map[string]any) map[string]any {
	t.Helper()
	m, isErr := s.call(t, tool, args)
	e, _ := m["error"].(map[string]any)
	if !isErr || len(m) != 2 || m["ok"] != false || e == nil {
		t.Fatalf("%s %v: want an error object, got isError=%v %v", tool, args, isErr, m)
	}
	if e["code"] != code || e["retryable"] != retryable || e["message"] == "" {
		t.Fatalf("%s %v: want %s (retryable %v), got %v", tool, args, code, retryable, e)
	}
	return e
}

func jsonEqual(a, b string) bool {
	var x, y any
	if json.Unmarshal([]byte(a), &x) != nil || json.Unmarshal([]byte(b), &y) != nil {
		return false
	}
	xa, _ := json.Marshal(x)
	ya, _ := json.Marshal(y)
	return string(xa) == string(ya)
}

// get follows a path of object keys.
func get(t *testing.T, v any, path ...string) any {
	t.Helper()
	for _, k := range path {
		m, ok := v.(map[string]any)
		if !ok {
			t.Fatalf("no object at %q in %v", k, v)
		}
		v = m[k]
	}
	return v
}

// tip is the ledger ref's commit.
func tip(t *testing.T, dir string) string {
	return testrepo.Git(t, dir, "rev-parse", "refs/tally/ledger")
}

// renews counts the renew entries of actor on cell in the ledger, read with
// the command line.
func renews(t *testing.T, dir, actor, cell string) int {
	t.Helper()
	n := 0
	for _, e := range cli(t, dir, "log")["entries"].([]any) {
		e := e.(map[string]any)
		if e["kind"] == "renew" && e["actor"] == actor && strings.Contains(e["summary"].(string), cell) {
			n++
		}
	}
	return n
}

// TestTools lists the tools and walks one agent through claim, renew, run and
// done, with a second agent refused, then verifies the ledger.
func TestTools(t *testing.T) {
	dir := newRepo(t, 2)
	a := start(t, dir, "agent-1", false)

	ctx := context.Background()
	list, err := a.ListTools(ctx, nil)
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"claim", "done", "fail", "lock", "locks", "log", "next", "release", "renew", "run", "show", "status", "unlock", "verify"}
	var names []string
	schemas := map[string]map[string]any{}
	for _, tool := range list.Tools {
		names = append(names, tool.Name)
		in, _ := tool.InputSchema.(map[string]any)
		if in["type"] != "object" || tool.OutputSchema == nil || tool.Description == "" {
			t.Errorf("%s: input schema %v, output schema %v, description %q", tool.Name, tool.InputSchema, tool.OutputSchema, tool.Description)
		}
		schemas[tool.Name] = in
	}
	slices.Sort(names)
	if !slices.Equal(names, want) {
		t.Fatalf("tools %v, want %v", names, want)
	}
	for _, p := range []string{"wave", "cell", "next", "ttl", "steal", "reclaim_dead"} {
		if get(t, schemas["claim"], "properties", p) == nil {
			t.Errorf("claim's input schema lacks %q: %v", p, schemas["claim"])
		}
	}
	if req := fmt.Sprint(schemas["done"]["required"]); req != "[wave cell epoch]" {
		t.Errorf("done requires %s", req)
	}
	// Ranges and defaults are the lease rules'; successes say "ok": true.
	// A relock without ttl keeps the lock's own TTL, so lock states no
	// default (an SDK that fills defaults in would reset it).
	for tool, def := range map[string]any{"claim": float64(lease.TTLDefault), "lock": nil} {
		ttl := get(t, schemas[tool], "properties", "ttl")
		if get(t, ttl, "minimum") != float64(lease.TTLMin) || get(t, ttl, "maximum") != float64(lease.TTLMax) ||
			get(t, ttl, "default") != def {
			t.Errorf("%s's ttl: %v", tool, ttl)
		}
	}
	if ttl := get(t, schemas["renew"], "properties", "ttl"); get(t, ttl, "minimum") != float64(lease.TTLMin) || get(t, ttl, "default") != nil {
		t.Errorf("renew's ttl (default: keep the lease's): %v", ttl)
	}
	if get(t, schemas["renew"], "properties", "epoch", "minimum") != 1.0 {
		t.Errorf("renew's epoch: %v", get(t, schemas["renew"], "properties", "epoch"))
	}
	for _, tool := range list.Tools {
		out, _ := json.Marshal(tool.OutputSchema)
		var m map[string]any
		json.Unmarshal(out, &m)
		if get(t, m, "properties", "ok", "const") != true || !slices.Contains(get(t, m, "required").([]any), any("ok")) {
			t.Errorf("%s's output schema does not require \"ok\": true: %s", tool.Name, out)
		}
	}
	if v := a.InitializeResult().ServerInfo.Version; v == "" || v == "dev" {
		t.Errorf("serverInfo.version %q", v)
	}

	// Claim: the lease, at epoch 1, held by this server's actor and, as
	// its process, the server's parent: this test.
	if got := a.ok(t, "next", nil)["ready"].([]any); len(got) != 2 {
		t.Fatalf("next: %v", got)
	}
	cl := a.ok(t, "claim", map[string]any{"wave": "w1", "cell": "c0", "ttl": 600})
	if get(t, cl, "lease", "epoch") != 1.0 || get(t, cl, "lease", "actor") != "agent-1" ||
		get(t, cl, "lease", "pid") != float64(os.Getpid()) || get(t, cl, "cell") != "c0" || get(t, cl, "entry", "seq") != 2.0 {
		t.Fatalf("claim: %v", cl)
	}
	rn := a.ok(t, "renew", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "ttl": 900})
	if get(t, rn, "lease", "epoch") != 1.0 || get(t, rn, "lease", "ttl_seconds") != 900.0 || get(t, rn, "entry", "seq") != 3.0 {
		t.Fatalf("renew: %v", rn)
	}
	if n := renews(t, dir, "agent-1", "w1/c0"); n != 1 {
		t.Fatalf("%d renew entries", n)
	}
	st := a.ok(t, "status", map[string]any{"wave": "w1"})
	if c := get(t, st, "waves").([]any)[0].(map[string]any)["cells"].([]any)[0]; get(t, c, "holder") != "agent-1" || get(t, c, "state") != "claimed" {
		t.Fatalf("status: %v", st)
	}

	// Refusals: the ledger does not move, the error object is the CLI's.
	before := tip(t, dir)
	a.refuse(t, "EPOCH-MISMATCH", false, "renew", map[string]any{"wave": "w1", "cell": "c0", "epoch": 2})
	a.refuse(t, "USAGE", false, "claim", map[string]any{"wave": "w1", "cell": "c1", "next": true})
	a.refuse(t, "USAGE", false, "claim", map[string]any{"wave": "w1", "cel": "c1"})  // schema: unknown property
	a.refuse(t, "USAGE", false, "renew", map[string]any{"wave": "w1", "cell": "c0"}) // schema: epoch is required
	// Schema ranges: nothing outside them reaches the rules.
	a.refuse(t, "USAGE", false, "renew", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "ttl": lease.TTLMin - 1})
	a.refuse(t, "USAGE", false, "lock", map[string]any{"patterns": []string{"a/**"}, "wait_seconds": -1})
	a.refuse(t, "USAGE", false, "run", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "argv": []string{"true"}, "timeout_seconds": -1})
	a.refuse(t, "USAGE", false, "log", map[string]any{"n": -1})
	b := start(t, dir, "agent-2", false)
	e := b.refuse(t, "LEASE-HELD", true, "claim", map[string]any{"wave": "w1", "cell": "c0"})
	if e["holder"] != "agent-1" || e["epoch"] != 1.0 || e["expires_at"] == nil {
		t.Fatalf("LEASE-HELD details: %v", e)
	}
	cliErr := testrepo.Run(t, dir, "agent-2", nil, "claim", "w1/c0", "--json").JSON["error"]
	if !jsonEqual(mustJSON(t, cliErr), mustJSON(t, e)) {
		t.Fatalf("the tool's error %v is not the command line's %v", e, cliErr)
	}
	if after := tip(t, dir); after != before {
		t.Fatalf("refusals moved the ledger")
	}

	// Run records evidence; a failing command is COMMAND-FAILED (refused), as
	// tally run answers, with the evidence recorded and the output's tails.
	run := a.refuse(t, "COMMAND-FAILED", false, "run", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "argv": []string{"sh", "-c", "pwd; echo oops >&2; exit 3"}})
	wt, _ := filepath.EvalSymlinks(dir)
	if run["exit_code"] != 3.0 || get(t, run, "evidence", "exit_code") != 3.0 || get(t, run, "stdout_tail") != wt+"\n" || get(t, run, "stderr_tail") != "oops\n" ||
		get(t, run, "evidence", "stderr", "size") != 5.0 || get(t, run, "evidence", "epoch") != 1.0 {
		t.Fatalf("run: %v", run)
	}
	b.refuse(t, "ACTOR-MISMATCH", false, "run", map[string]any{"wave": "w1", "cell": "c0", "argv": []string{"true"}})

	// Done, on a commit made meanwhile: the receipt names it and carries the evidence.
	if err := os.WriteFile(filepath.Join(dir, "work.txt"), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testrepo.Git(t, dir, "add", "work.txt")
	testrepo.Git(t, dir, "commit", "-q", "-m", "work")
	head := testrepo.Git(t, dir, "rev-parse", "HEAD")
	done := a.ok(t, "done", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1})
	if get(t, done, "receipt", "commit") != head || get(t, done, "receipt", "epoch") != 1.0 {
		t.Fatalf("done: %v", done)
	}
	show := a.ok(t, "show", map[string]any{"wave": "w1", "cell": "c0"})
	hist := get(t, show, "history").([]any)
	last := hist[len(hist)-1].(map[string]any)
	if get(t, show, "cell", "state") != "done" || last["kind"] != "done" ||
		len(get(t, last, "body", "evidence").([]any)) != 1 || get(t, last, "body", "changed").([]any)[0] != "work.txt" {
		t.Fatalf("show after done: %v", show)
	}
	a.refuse(t, "CELL-STATE", false, "release", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1})

	// Verify: every entry, as the command line counts them.
	v := b.ok(t, "verify", map[string]any{"full": true})
	logged := len(a.ok(t, "log", nil)["entries"].([]any))
	if v["entries"] != float64(logged) || logged != 5 || get(t, v, "head", "seq") != 4.0 || v["root"] == "" {
		t.Fatalf("verify: %v, %d entries logged", v, logged)
	}
	if n := cli(t, dir, "verify", "--full")["entries"]; n != v["entries"] {
		t.Fatalf("tally verify counts %v entries, the tool %v", n, v["entries"])
	}
}

func mustJSON(t *testing.T, v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestClaimRace has two servers for two actors claim the same fresh cell at
// once, round after round: exactly one wins, the other gets LEASE-HELD.
func TestClaimRace(t *testing.T) {
	const rounds = 30
	dir := newRepo(t, rounds)
	agents := []*server{start(t, dir, "agent-1", false), start(t, dir, "agent-2", false)}
	wins := map[string]int{}
	for i := range rounds {
		cell := fmt.Sprintf("c%d", i)
		var wg sync.WaitGroup
		var mu sync.Mutex
		results := map[string]map[string]any{}
		failed := map[string]bool{}
		go1 := make(chan struct{})
		for j, s := range agents {
			wg.Go(func() {
				<-go1
				m, isErr := s.call(t, "claim", map[string]any{"wave": "w1", "cell": cell})
				mu.Lock()
				results[fmt.Sprint("agent-", j+1)], failed[fmt.Sprint("agent-", j+1)] = m, isErr
				mu.Unlock()
			})
		}
		close(go1)
		wg.Wait()
		var winner, loser string
		for actor, isErr := range failed {
			if isErr {
				loser = actor
			} else {
				winner = actor
			}
		}
		if winner == "" || loser == "" {
			t.Fatalf("round %d: %v", i, results)
		}
		e := results[loser]["error"].(map[string]any)
		if e["code"] != "LEASE-HELD" || e["retryable"] != true || e["holder"] != winner {
			t.Fatalf("round %d: loser %s got %v", i, loser, e)
		}
		if got := get(t, results[winner], "lease", "actor"); got != winner || get(t, results[winner], "lease", "epoch") != 1.0 {
			t.Fatalf("round %d: winner %s got %v", i, winner, results[winner])
		}
		wins[winner]++
	}
	t.Logf("wins: %v", wins)
	st := cli(t, dir, "status")
	counts := get(t, st, "waves").([]any)[0].(map[string]any)["counts"]
	if get(t, counts, "claimed") != float64(rounds) {
		t.Fatalf("status after the race: %v", counts)
	}
	if v := agents[0].ok(t, "verify", map[string]any{"full": true}); v["entries"] != float64(2+rounds) {
		t.Fatalf("verify: %v", v)
	}
}

// TestAutoRenew runs a server with --auto-renew under a sh that stands for
// the agent: leases it claimed are renewed until released, and once the
// agent is gone no more, while the server still serves; the lease then
// records the dead agent, so another actor reclaims it.
func TestAutoRenew(t *testing.T) {
	dir := newRepo(t, 2)
	s := start(t, dir, "agent-1", true, "--auto-renew", "--renew-interval", "100ms")
	sh := s.cmd.Process.Pid
	for _, c := range []string{"c0", "c1"} {
		cl := s.ok(t, "claim", map[string]any{"wave": "w1", "cell": c, "ttl": 60})
		if get(t, cl, "lease", "pid") != float64(sh) {
			t.Fatalf("claim records pid %v, want the server's parent %d", get(t, cl, "lease", "pid"), sh)
		}
	}
	waitFor := func(what string, cond func() bool) {
		t.Helper()
		for end := time.Now().Add(20 * time.Second); !cond(); time.Sleep(50 * time.Millisecond) {
			if time.Now().After(end) {
				t.Fatalf("timed out waiting for %s", what)
			}
		}
	}
	waitFor("renewals of both cells", func() bool { return renews(t, dir, "agent-1", "w1/c0") >= 2 && renews(t, dir, "agent-1", "w1/c1") >= 2 })

	// Released: no longer renewed; the other lease still is.
	s.ok(t, "release", map[string]any{"wave": "w1", "cell": "c1", "epoch": 1})
	c1 := renews(t, dir, "agent-1", "w1/c1")
	c0 := renews(t, dir, "agent-1", "w1/c0")
	waitFor("more renewals of c0", func() bool { return renews(t, dir, "agent-1", "w1/c0") >= c0+3 })
	if n := renews(t, dir, "agent-1", "w1/c1"); n != c1 {
		t.Fatalf("c1 renewed %d times after its release", n-c1)
	}

	// The agent dies: renewals stop, the server still answers.
	if p, err := os.FindProcess(sh); err != nil || p.Kill() != nil {
		t.Fatal("cannot kill the agent", err)
	}
	waitFor("the renewer to notice", func() bool {
		b, _ := os.ReadFile(s.stderr)
		return strings.Contains(string(b), "renewals stop")
	})
	c0 = renews(t, dir, "agent-1", "w1/c0")
	time.Sleep(time.Second) // ten intervals
	if n := renews(t, dir, "agent-1", "w1/c0"); n != c0 {
		t.Fatalf("c0 renewed %d times after the agent died", n-c0)
	}
	if st := s.ok(t, "status", nil); get(t, st, "waves") == nil {
		t.Fatalf("status: %v", st)
	}
	res := testrepo.Run(t, dir, "agent-2", nil, "claim", "w1/c0", "--reclaim-dead", "--json")
	if res.Code != 0 || get(t, res.JSON, "takeover") != "dead-holder" || get(t, res.JSON, "lease", "epoch") != 2.0 {
		t.Fatalf("reclaim-dead: exit %d %s%s", res.Code, res.Stdout, res.Stderr)
	}
}

// TestInProcess serves a client in this process (so the race detector sees
// the server) with auto-renew on the same client: concurrent claims of the
// next cell get distinct cells, the renewer renews them, and stops once the
// agent is reported gone.
func TestInProcess(t *testing.T) {
	const n = 8
	dir := newRepo(t, n)
	c, err := tally.Open(dir, tally.Options{Actor: "agent-1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	defer c.L.WaitMaintenance()
	var alive atomic.Bool
	alive.Store(true)
	srv := mcpserver.New(c, mcpserver.Options{PID: os.Getpid(),
		Renew: &mcpserver.RenewOptions{Interval: 20 * time.Millisecond, Alive: alive.Load}})
	ctx, cancel := context.WithCancel(context.Background())
	st, ct := mcp.NewInMemoryTransports()
	served := make(chan error, 1)
	go func() { served <- srv.Run(ctx, st) }()
	defer func() { cancel(); <-served }()
	cs, err := mcp.NewClient(&mcp.Implementation{Name: "test-agent", Version: "1"}, nil).Connect(ctx, ct, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer cs.Close()
	if v := cs.InitializeResult().ServerInfo.Version; v != "(devel)" { // this test binary's main module
		t.Errorf("serverInfo.version %q, want the build's", v)
	}
	s := &server{ClientSession: cs}

	var wg sync.WaitGroup
	cells := make([]string, n)
	for i := range n {
		wg.Go(func() { cells[i] = get(t, s.ok(t, "claim", map[string]any{"next": true}), "cell").(string) })
	}
	wg.Wait()
	slices.Sort(cells)
	if cells = slices.Compact(cells); len(cells) != n {
		t.Fatalf("claims got cells %v", cells)
	}
	count := func() int {
		k := 0
		for _, e := range s.ok(t, "log", nil)["entries"].([]any) {
			if get(t, e, "kind") == "renew" {
				k++
			}
		}
		return k
	}
	for end := time.Now().Add(20 * time.Second); count() < 2*n; time.Sleep(20 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%d renewals", count())
		}
	}
	alive.Store(false)
	time.Sleep(300 * time.Millisecond) // a renewal under way ends
	k := count()
	time.Sleep(300 * time.Millisecond)
	if count() != k {
		t.Fatalf("renewals went on after the agent was gone")
	}
}

// The claim tool's wait_seconds waits in the server for the ledger to move,
// as claim --wait, and done with next finishes a cell and claims the next
// ready one (tally done --next): next is the claim's result, a lease of the
// agent's, or once nothing is left its error object, the done standing.
func TestClaimWaitAndDoneNext(t *testing.T) {
	dir := testrepo.New(t)
	plan := filepath.Join(t.TempDir(), "plan.json")
	if err := os.WriteFile(plan, []byte(`{"wave":"w1","cells":[{"id":"c0"},{"id":"c1","deps":["c0"]},{"id":"c2","deps":["c1"]}]}`), 0o644); err != nil {
		t.Fatal(err)
	}
	cli(t, dir, "init")
	cli(t, dir, "plan", plan)
	a, b := start(t, dir, "agent-1", false), start(t, dir, "agent-2", false)
	if got := a.ok(t, "claim", map[string]any{"next": true}); got["cell"] != "c0" {
		t.Fatalf("claim: %v", got)
	}
	b.refuse(t, "NO-READY-CELL", true, "claim", map[string]any{"next": true})
	a.refuse(t, "USAGE", false, "done", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "wait_seconds": 5})
	type outcome struct {
		m     map[string]any
		isErr bool
	}
	waited := make(chan outcome, 1)
	go func() {
		m, isErr := b.call(t, "claim", map[string]any{"next": true, "wait_seconds": 60})
		waited <- outcome{m, isErr}
	}()
	a.ok(t, "done", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1})
	if got := <-waited; got.isErr || got.m["cell"] != "c1" || get(t, got.m, "lease", "actor") != "agent-2" {
		t.Fatalf("the waiting claim got %v", got.m)
	}
	d := b.ok(t, "done", map[string]any{"wave": "w1", "cell": "c1", "epoch": 1, "next": true})
	if get(t, d, "receipt", "cell") != "c1" || get(t, d, "next", "ok") != true || get(t, d, "next", "cell") != "c2" ||
		get(t, d, "next", "lease", "actor") != "agent-2" || get(t, d, "next", "entry", "seq") != get(t, d, "entry", "seq").(float64)+1 {
		t.Fatalf("done with next: %v", d)
	}
	d = b.ok(t, "done", map[string]any{"wave": "w1", "cell": "c2", "epoch": 1, "next": true, "wait_seconds": 60})
	if get(t, d, "next", "ok") != false || get(t, d, "next", "error", "code") != "PLAN-COMPLETE" {
		t.Fatalf("done with next of the last cell: %v", d)
	}
	if v := a.ok(t, "verify", map[string]any{"full": true}); v["entries"] != float64(2+6) {
		t.Fatalf("verify: %v", v)
	}
}

// The claim tool makes the cell's worktree with worktree; the done tool
// with merge lands its branch on main and binds the landed commit. A
// server started in the worktree knows its cell: done there needs no
// worktree flag. Uncommitted work refuses done with WORKTREE-DIRTY.
func TestWorktreeClaimAndMergeDone(t *testing.T) {
	dir := newRepo(t, 2)
	a := start(t, dir, "agent-1", false)
	got := a.ok(t, "claim", map[string]any{"wave": "w1", "cell": "c0", "worktree": true})
	wt, _ := get(t, got, "worktree", "path").(string)
	if get(t, got, "worktree", "branch") != "tally/w1/c0" || get(t, got, "worktree", "target") != "main" || wt == "" {
		t.Fatalf("claim with worktree: %v", got)
	}
	if err := os.WriteFile(filepath.Join(wt, "c0.txt"), []byte("c0\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	a.refuse(t, "WORKTREE-DIRTY", false, "done", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "merge": "merge"})
	testrepo.Git(t, wt, "add", "c0.txt")
	testrepo.Git(t, wt, "commit", "-q", "-m", "c0")
	d := a.ok(t, "done", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "merge": "merge"})
	if main := testrepo.Git(t, dir, "rev-parse", "main"); get(t, d, "landed", "commit") != main || get(t, d, "receipt", "commit") != main {
		t.Fatalf("done with merge: %v; main is %s", d, main)
	}
	// next_worktree goes with next. The second cell, claimed again with next
	// and worktree, then done by a server in its worktree: done there binds
	// the branch's tip.
	a.refuse(t, "USAGE", false, "done", map[string]any{"wave": "w1", "cell": "c0", "epoch": 1, "next_worktree": true})
	a.ok(t, "claim", map[string]any{"wave": "w1", "cell": "c1"})
	a.ok(t, "release", map[string]any{"wave": "w1", "cell": "c1", "epoch": 1})
	got = a.ok(t, "claim", map[string]any{"next": true, "worktree": true})
	if got["cell"] != "c1" {
		t.Fatalf("claim next with worktree: %v", got)
	}
	wt = get(t, got, "worktree", "path").(string)
	testrepo.Git(t, wt, "commit", "-q", "--allow-empty", "-m", "c1")
	in := start(t, wt, "agent-1", false)
	d = in.ok(t, "done", map[string]any{"wave": "w1", "cell": "c1", "epoch": 2})
	if tip := testrepo.Git(t, wt, "rev-parse", "HEAD"); get(t, d, "receipt", "commit") != tip {
		t.Fatalf("done in the worktree: %v; its branch is at %s", d, tip)
	}
}
