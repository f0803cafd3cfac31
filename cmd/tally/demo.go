package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// demoPlan is a small dependency graph: enough for agents to wait on each
// other, and for one crashed holder to block its dependents until taken over.
// It is built when the demo runs, not in every process's initializers.
var demoPlan = sync.OnceValue(func() lease.PlanBody {
	plan := lease.PlanBody{Wave: "demo", Cells: []lease.PlanCell{
		{ID: "schema", Title: "define the schema"},
		{ID: "storage", Title: "storage layer", Deps: []string{"schema"}},
		{ID: "api", Title: "HTTP API", Deps: []string{"schema"}},
		{ID: "auth", Title: "authentication", Deps: []string{"api"}},
		{ID: "search", Title: "search index", Deps: []string{"storage"}},
		{ID: "cli", Title: "command line", Deps: []string{"api"}},
		{ID: "web", Title: "web client", Deps: []string{"api", "auth"}},
		{ID: "metrics", Title: "metrics"},
		{ID: "docs", Title: "documentation", Deps: []string{"cli", "web"}},
		{ID: "release", Title: "release", Deps: []string{"docs", "search", "metrics"}},
	}}
	for i := range plan.Cells {
		plan.Cells[i].Paths = []string{"src/" + plan.Cells[i].ID + "/**"}
	}
	return plan
})

// agentReport is what the demo summary shows per agent.
type agentReport struct {
	Actor     string `json:"actor"`
	Claims    int    `json:"claims"`
	Takeovers int    `json:"takeovers"`
	Renewals  int    `json:"renewals"`
	Done      int    `json:"done"`
	Cells     string `json:"cells"`
}

func (a *app) demoCmd() *cobra.Command {
	var agents int
	var keep string
	cmd := &cobra.Command{
		Use:   "demo [--agents N] [--keep DIR]",
		Short: "watch agents share a repository: plan, race, renew, crash, take over, verify",
		Long: `demo creates a repository in a temporary directory, plans a wave of ten cells
with dependencies, and starts agent processes, each in its own linked worktree.
They race for cells with claim --next, renew, record evidence with tally run,
commit and file receipts with tally done. One agent crashes holding a cell; a
survivor sees its process is gone and takes the cell over with
claim --reclaim-dead. The demo ends with verify and a summary.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if agents < 2 || agents > 16 {
				return usageErr("--agents must be 2..16")
			}
			return a.demo(agents, keep)
		},
	}
	cmd.Flags().IntVar(&agents, "agents", 4, "number of agent processes (2..16)")
	cmd.Flags().StringVar(&keep, "keep", "", "build the demo in `DIR` (new or empty) and keep it")
	cmd.AddCommand(a.demoAgentCmd())
	return cmd
}

func (a *app) demo(agents int, keep string) error {
	start := time.Now()
	dir := keep
	if dir == "" {
		tmp, err := os.MkdirTemp("", "tally-demo-")
		if err != nil {
			return err
		}
		defer os.RemoveAll(tmp)
		dir = tmp
	} else if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		return usageErr("--keep %s: directory is not empty", dir)
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	log := a.stdout
	if a.jsonOut {
		log = a.stderr // stdout carries exactly one JSON object
	}
	repo := filepath.Join(dir, "repo")
	if err := demoSetup(self, repo); err != nil {
		return err
	}
	fmt.Fprintf(log, "repository %s: ledger initialized, wave %q planned (%d cells)\n", repo, demoPlan().Wave, len(demoPlan().Cells))

	var wg sync.WaitGroup
	var mu sync.Mutex
	var failures []string
	for i := range agents {
		actor := fmt.Sprintf("agent-%d", i+1)
		wt := filepath.Join(dir, actor)
		if out, err := demoGit(repo, "worktree", "add", "-q", "-b", actor, wt); err != nil {
			return fmt.Errorf("git worktree add: %v: %s", err, out)
		}
		argv := []string{"demo", "agent", "-C", wt, "--actor", actor}
		if i == 0 {
			argv = append(argv, "--crash")
		}
		agent := exec.Command(self, argv...)
		agent.Env = demoEnv()
		agent.Stdout, agent.Stderr = log, a.stderr
		if err := agent.Start(); err != nil {
			return err
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			// Waiting also reaps a crashed agent, so its pid is really gone.
			if err := agent.Wait(); err != nil && i != 0 {
				mu.Lock()
				failures = append(failures, fmt.Sprintf("%s: %v", actor, err))
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if len(failures) > 0 {
		return errs.New(errs.Internal, "demo agents failed: %s", strings.Join(failures, "; "))
	}

	l, err := ledger.Open(repo, ledger.Options{})
	if err != nil {
		return err
	}
	defer l.Close()
	rep, err := l.Verify(true)
	if err != nil {
		return err
	}
	reports, err := demoSummary(l)
	if err != nil {
		return err
	}
	elapsed := time.Since(start)
	res := map[string]any{"dir": dir, "kept": keep != "", "entries": rep.Entries, "root": rep.Root,
		"agents": reports, "elapsed_ms": elapsed.Milliseconds(), "verified": true}
	return a.emit(res, func(w io.Writer) {
		fmt.Fprintf(w, "\nverify: ok, %d entries, Merkle root %s\n\n", rep.Entries, rep.Root)
		tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
		fmt.Fprintln(tw, "agent\tclaims\ttakeovers\trenewals\tdone\tcells")
		for _, r := range reports {
			fmt.Fprintf(tw, "%s\t%d\t%d\t%d\t%d\t%s\n", r.Actor, r.Claims, r.Takeovers, r.Renewals, r.Done, r.Cells)
		}
		tw.Flush()
		fmt.Fprintf(w, "\n%d entries in %v", rep.Entries, elapsed.Round(time.Millisecond))
		if keep != "" {
			fmt.Fprintf(w, "; inspect with: git -C %s log --notes=tally --all --oneline; tally -C %s log", repo, repo)
		}
		fmt.Fprintln(w)
	})
}

// demoIdentity gives the demo's git and tally processes a fixed identity,
// whatever the machine's git configuration.
var demoIdentity = []string{"GIT_AUTHOR_NAME=tally demo", "GIT_AUTHOR_EMAIL=demo@tally.invalid",
	"GIT_COMMITTER_NAME=tally demo", "GIT_COMMITTER_EMAIL=demo@tally.invalid"}

func demoEnv() []string { return append(os.Environ(), demoIdentity...) }

func demoGit(dir string, argv ...string) (string, error) {
	out, err := gitstore.GitRun{Dir: dir, Args: argv, Env: demoIdentity}.Run()
	return strings.TrimSpace(string(out)), err
}

func demoSetup(self, repo string) error {
	if err := os.MkdirAll(repo, 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(repo, "README"), []byte("a repository shared by agents\n"), 0o644); err != nil {
		return err
	}
	for _, argv := range [][]string{{"init", "-q", "-b", "main"}, {"add", "README"}, {"commit", "-q", "-m", "start"}} {
		if out, err := demoGit(repo, argv...); err != nil {
			return fmt.Errorf("git %s: %v: %s", argv[0], err, out)
		}
	}
	plan, err := json.Marshal(demoPlan())
	if err != nil {
		return err
	}
	planFile := filepath.Join(repo, "..", "plan.json")
	if err := os.WriteFile(planFile, plan, 0o644); err != nil {
		return err
	}
	for _, argv := range [][]string{{"init", "--origin", "tally-demo"}, {"plan", planFile}} {
		cmd := exec.Command(self, append([]string{"-C", repo, "--actor", "planner"}, argv...)...)
		cmd.Env = demoEnv()
		if out, err := cmd.CombinedOutput(); err != nil {
			return fmt.Errorf("tally %s: %v: %s", argv[0], err, out)
		}
	}
	return nil
}

// demoSummary counts what each actor did, from the verified ledger.
func demoSummary(l *ledger.Ledger) ([]agentReport, error) {
	entries, err := l.Log(0)
	if err != nil {
		return nil, err
	}
	by := map[string]*agentReport{}
	cells := map[string][]string{}
	for i := len(entries) - 1; i >= 0; i-- {
		e := entries[i]
		if !strings.HasPrefix(e.Actor, "agent-") {
			continue
		}
		r := by[e.Actor]
		if r == nil {
			r = &agentReport{Actor: e.Actor}
			by[e.Actor] = r
		}
		switch e.Kind {
		case chain.KindClaim:
			r.Claims++
			if strings.Contains(e.Summary, "(") {
				r.Takeovers++
			}
		case chain.KindRenew:
			r.Renewals++
		case chain.KindDone:
			r.Done++
			cells[e.Actor] = append(cells[e.Actor], strings.Fields(e.Summary)[1])
		}
	}
	var out []agentReport
	for actor, r := range by {
		r.Cells = strings.Join(cells[actor], " ")
		if r.Cells == "" {
			r.Cells = "-"
		}
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Actor < out[j].Actor })
	return out, nil
}

// demoAgentCmd is one simulated agent: it drives tally as a separate process
// per step, exactly as an agent using the CLI would.
func (a *app) demoAgentCmd() *cobra.Command {
	var crash bool
	cmd := &cobra.Command{
		Use:    "agent",
		Hidden: true,
		Args:   args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			ag := &demoAgent{dir: a.dir, actor: a.actorFlag, out: a.stdout}
			return ag.loop(crash)
		},
	}
	cmd.Flags().BoolVar(&crash, "crash", false, "die while holding the first cell claimed")
	return cmd
}

type demoAgent struct {
	dir, actor string
	out        io.Writer
	self       string
}

// tally runs a tally command as a child of this agent and decodes its JSON.
func (g *demoAgent) tally(argv ...string) (map[string]any, error) {
	cmd := exec.Command(g.self, append([]string{"-C", g.dir, "--actor", g.actor, "--json"}, argv...)...)
	// This agent process is the holder of what it claims: a crash of it is
	// what another agent may reclaim.
	cmd.Env = append(demoEnv(), fmt.Sprintf("TALLY_PID=%d", os.Getpid()))
	var stdout bytes.Buffer
	cmd.Stdout = &stdout
	runErr := cmd.Run()
	var res map[string]any
	if err := json.Unmarshal(stdout.Bytes(), &res); err != nil {
		return nil, fmt.Errorf("tally %s: %v (%v)", argv[0], err, runErr)
	}
	if ok, _ := res["ok"].(bool); !ok {
		e, _ := res["error"].(map[string]any)
		code, _ := e["code"].(string)
		msg, _ := e["message"].(string)
		return res, errs.New(errs.Code(code), "%s", msg)
	}
	return res, nil
}

func (g *demoAgent) say(format string, args ...any) {
	fmt.Fprintf(g.out, "%-8s "+format+"\n", append([]any{g.actor}, args...)...)
}

func (g *demoAgent) loop(crash bool) error {
	var err error
	if g.self, err = os.Executable(); err != nil {
		return err
	}
	for {
		res, err := g.tally("claim", "--next", "--ttl", "120")
		switch {
		case err == nil:
		case errs.Is(err, errs.PlanComplete):
			return nil
		case errs.Is(err, errs.NoReadyCell):
			finished, rescued, err := g.rescue()
			if err != nil {
				return err
			}
			if finished {
				return nil
			}
			if rescued == nil {
				time.Sleep(20 * time.Millisecond)
				continue
			}
			res = rescued
		case errs.From(err).Retryable():
			continue
		default:
			return err
		}
		cell, _ := res["cell"].(string)
		epoch := int64(res["lease"].(map[string]any)["epoch"].(float64))
		if _, took := res["takeover"]; took {
			g.say("took over demo/%s at epoch %d from a dead holder", cell, epoch)
		} else {
			g.say("claimed   demo/%s epoch %d", cell, epoch)
		}
		if crash {
			g.say("crashes while holding demo/%s", cell)
			os.Exit(3)
		}
		if err := g.work(cell, epoch); err != nil {
			return err
		}
	}
}

// rescue looks for cells held by processes that are gone. It reports whether
// the wave is finished, or the claim it made.
func (g *demoAgent) rescue() (bool, map[string]any, error) {
	st, err := g.tally("status")
	if err != nil {
		return false, nil, err
	}
	open := false
	for _, w := range st["waves"].([]any) {
		for _, c := range w.(map[string]any)["cells"].([]any) {
			cell := c.(map[string]any)
			switch cell["state"] {
			case lease.Pending:
				open = true
			case lease.Claimed:
				open = true
				if cell["holder"] == g.actor {
					continue
				}
				// Refusals are expected here: the holder is alive (LEASE-HELD), or the
				// status was stale and the cell is done already (CELL-STATE).
				if res, err := g.tally("claim", "demo/"+cell["cell"].(string), "--reclaim-dead", "--ttl", "120"); err == nil {
					return false, res, nil
				}
			}
		}
	}
	return !open, nil, nil
}

// work does a cell: a commit inside the cell's paths, a heartbeat, a checked
// command recorded as evidence, and the receipt.
func (g *demoAgent) work(cell string, epoch int64) error {
	ref, ep := "demo/"+cell, fmt.Sprint(epoch)
	file := filepath.Join("src", cell, g.actor+".txt")
	if err := os.MkdirAll(filepath.Join(g.dir, "src", cell), 0o755); err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(g.dir, file), []byte(cell+" done by "+g.actor+"\n"), 0o644); err != nil {
		return err
	}
	for _, argv := range [][]string{{"add", file}, {"commit", "-q", "-m", "work on " + cell}} {
		if out, err := demoGit(g.dir, argv...); err != nil {
			return fmt.Errorf("git %s: %v: %s", argv[0], err, out)
		}
	}
	if _, err := g.tally("renew", ref, "--epoch", ep); err != nil {
		return err
	}
	if _, err := g.tally("run", ref, "--epoch", ep, "--", "test", "-s", file); err != nil {
		return err
	}
	res, err := g.tally("done", ref, "--epoch", ep)
	if err != nil {
		return err
	}
	g.say("done      %s epoch %d, receipt #%v on %.12s", ref, epoch, res["entry"].(map[string]any)["seq"], res["receipt"].(map[string]any)["commit"])
	return nil
}
