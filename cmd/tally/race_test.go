package main

// Races between real tally processes. Each test runs many processes at
// once, many rounds, and checks invariants on the ledger afterwards, read
// with git. Nothing sleeps: processes are released together and every
// outcome is checked. TALLY_STRESS=1 runs the large versions.

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
)

func stress() bool { return os.Getenv("TALLY_STRESS") != "" }

// proc is the outcome of one tally process run from a goroutine (which may
// not call t.Fatal).
type proc struct {
	Code   int
	JSON   map[string]any
	Stdout string
	Stderr string
	Wall   time.Duration // from start to exit, the process's whole life
	Err    error         // the process could not be run or its output is not one JSON object
	// Usage is the process's resources from wait4, with those of the
	// children it waited for (done's git status).
	Usage procUsage
}

// procUsage is what processes cost, summed: CPU (user + system), minor page
// faults and context switches (voluntary and not).
type procUsage struct {
	Procs    int
	CPU      time.Duration
	Faults   int64
	Switches int64
}

func (u *procUsage) add(v procUsage) {
	u.Procs += v.Procs
	u.CPU += v.CPU
	u.Faults += v.Faults
	u.Switches += v.Switches
}

// usageOf is what an exited process cost, by wait4: itself and the
// children it waited for.
func usageOf(ps *os.ProcessState) procUsage {
	u := procUsage{Procs: 1, CPU: ps.UserTime() + ps.SystemTime()}
	u.Faults, u.Switches = faultsAndSwitches(ps)
	return u
}

func (p proc) errCode() string {
	e, _ := p.JSON["error"].(map[string]any)
	s, _ := e["code"].(string)
	return s
}

// runTally runs the tally binary with --json in dir as actor.
func runTally(bin, dir, actor string, args ...string) proc {
	cmd := exec.Command(bin, append([]string{"-C", dir, "--json"}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	err := cmd.Run()
	p := proc{Wall: time.Since(start), Stdout: stdout.String(), Stderr: stderr.String()}
	if ps := cmd.ProcessState; ps != nil {
		p.Usage = usageOf(ps)
	}
	if ee, ok := err.(*exec.ExitError); ok {
		p.Code = ee.ExitCode()
	} else if err != nil {
		p.Err = err
		return p
	}
	dec := json.NewDecoder(&stdout)
	if err := dec.Decode(&p.JSON); err != nil || dec.More() {
		p.Err = fmt.Errorf("tally %v: stdout is not one JSON object: %q %q", args, p.Stdout, p.Stderr)
	}
	return p
}

// TestRaceClaimOneWinner: 8 processes claim the same fresh cell at once,
// round after round. Exactly one wins each round; the other 7 get LEASE-HELD
// (exit 1) naming the winner; the ledger holds exactly one claim per cell.
func TestRaceClaimOneWinner(t *testing.T) {
	rounds, procs := 30, 8
	if stress() {
		rounds = 300
	}
	bin := testrepo.Tally(t)
	r := newRepo(t)
	r.ok("setup", "init")
	var cells []string
	for i := 0; i < rounds; i++ {
		cells = append(cells, fmt.Sprintf(`{"id":"c%04d"}`, i))
	}
	r.ok("setup", "plan", r.file("race.json", `{"wave":"race","cells":[`+strings.Join(cells, ",")+`]}`))

	for round := 0; round < rounds; round++ {
		cell := fmt.Sprintf("race/c%04d", round)
		out := make([]proc, procs)
		start := make(chan struct{})
		var wg sync.WaitGroup
		for p := 0; p < procs; p++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				<-start
				out[p] = runTally(bin, r.dir, fmt.Sprintf("agent-%d", p), "claim", cell)
			}()
		}
		close(start)
		wg.Wait()
		winner := ""
		for p, o := range out {
			if o.Err != nil {
				t.Fatalf("round %d agent-%d: %v", round, p, o.Err)
			}
			if o.Code == 0 {
				if winner != "" {
					t.Fatalf("round %d: two winners, %s and agent-%d", round, winner, p)
				}
				winner = fmt.Sprintf("agent-%d", p)
				l, _ := o.JSON["lease"].(map[string]any)
				if l["actor"] != winner || l["epoch"] != 1.0 {
					t.Fatalf("round %d: winner's lease %v", round, l)
				}
			}
		}
		if winner == "" {
			t.Fatalf("round %d: no winner: %+v", round, out)
		}
		for p, o := range out {
			if o.Code == 0 {
				continue
			}
			e, _ := o.JSON["error"].(map[string]any)
			if o.Code != 1 || o.errCode() != "LEASE-HELD" || e["holder"] != winner || e["epoch"] != 1.0 || e["retryable"] != true {
				t.Fatalf("round %d agent-%d: exit %d %s (winner %s)", round, p, o.Code, o.Stdout, winner)
			}
		}
	}

	claims := map[string]int{}
	for _, le := range readLedger(t, r.dir) {
		if le.Entry.Kind == "claim" {
			var b lease.ClaimBody
			if err := json.Unmarshal(le.Entry.Body, &b); err != nil {
				t.Fatal(err)
			}
			claims[b.Wave+"/"+b.Cell]++
		}
	}
	if len(claims) != rounds {
		t.Fatalf("%d cells claimed, want %d", len(claims), rounds)
	}
	for c, n := range claims {
		if n != 1 {
			t.Fatalf("%s has %d claim entries", c, n)
		}
	}
	r.ok("setup", "verify", "--full")
}

// drainPlan is a wave of n cells: in each block of ten, four independent
// cells, a chain of five (with one extra dep into the block) and a cell that
// depends on the end of the chain although it comes before it in plan order.
func drainPlan(wave string, n int) (string, map[string][]string, []string) {
	deps := map[string][]string{}
	var order, cells []string
	id := func(i int) string { return fmt.Sprintf("c%04d", i) }
	for i := 0; i < n; i++ {
		k := i - i%10
		var d []string
		switch i % 10 {
		case 4:
			if k+9 < n {
				d = []string{id(k + 9)}
			}
		case 5:
			d = []string{id(k)}
		case 6, 8, 9:
			d = []string{id(i - 1)}
		case 7:
			d = []string{id(i - 1), id(k + 1)}
		}
		deps[id(i)] = d
		order = append(order, id(i))
		b, _ := json.Marshal(map[string]any{"id": id(i), "deps": d})
		cells = append(cells, string(b))
	}
	return `{"wave":"` + wave + `","cells":[` + strings.Join(cells, ",") + `]}`, deps, order
}

type grant struct {
	actor string
	epoch int64
	seq   int64
}

// drainStats is what a drain's processes cost: the wall time of every
// successful claim process, and the resources of the processes by what they
// ran ("claim", a granted claim; "claim-refused", one that ended without a
// cell; "done"; "status"), and how many claim processes had to wait for the
// ledger to move (claim --wait says so on stderr when it starts waiting).
type drainStats struct {
	latencies []time.Duration
	usage     map[string]*procUsage
	waited    int
}

// drainAgent is how one drain worker runs the drain's commands: each
// returns what `tally --json` would (the exit code and the one JSON object),
// whether a tally process ran it (cliAgent) or a long-lived server did.
type drainAgent interface {
	// claim is claim --next --wave wave --wait 2m.
	claim(wave string) proc
	// done finishes cell at epoch; if next, it also claims the next ready
	// cell as claim does, and its JSON holds that claim's object as "next"
	// (done --next).
	done(wave, cell string, epoch int64, next bool) proc
	status(wave string) proc
	// close ends the agent and returns what its long-lived processes cost
	// (nothing for a process per command, counted by each proc).
	close() (procUsage, error)
}

// cliAgent runs every command as a tally process.
type cliAgent struct{ bin, dir, actor string }

func (a cliAgent) claim(wave string) proc {
	return runTally(a.bin, a.dir, a.actor, "claim", "--next", "--wave", wave, "--wait", "2m")
}

func (a cliAgent) done(wave, cell string, epoch int64, next bool) proc {
	args := []string{"done", wave + "/" + cell, "--epoch", strconv.FormatInt(epoch, 10)}
	if next {
		args = append(args, "--next", "--wave", wave, "--wait", "2m")
	}
	return runTally(a.bin, a.dir, a.actor, args...)
}

func (a cliAgent) status(wave string) proc { return runTally(a.bin, a.dir, a.actor, "status", wave) }

func (cliAgent) close() (procUsage, error) { return procUsage{}, nil }

// nextOf is the claim a done --next made, as the proc a claim process with
// that outcome would be: its exit code is the class of its error, if any.
func nextOf(d proc) proc {
	c := proc{Wall: d.Wall, Stderr: d.Stderr}
	next, ok := d.JSON["next"].(map[string]any)
	if !ok {
		c.Err = fmt.Errorf("done --next: no \"next\" object in %q", d.Stdout)
		return c
	}
	c.JSON = next
	if next["ok"] != true {
		c.Code = int(errs.ClassOfCode(errs.Code(c.errCode())))
	}
	return c
}

// drain runs procs workers, each a loop of `claim --next --wait` and `done`
// (or, if batched, a first claim and then `done --next --wait`) until
// PLAN-COMPLETE (claim --wait returns it at once when no cell is left open,
// and otherwise waits for the ledger to move), each through the agent
// newAgent gives it. It returns the claims and dones the workers saw, by
// cell, and what the processes cost (the agents' own under "server").
func drain(newAgent func(actor string) (drainAgent, error), wave string, n, procs int, batched bool) (claims, dones map[string][]grant, st drainStats, err error) {
	var mu sync.Mutex
	claims, dones = map[string][]grant{}, map[string][]grant{}
	st.usage = map[string]*procUsage{"claim": {}, "claim-refused": {}, "done": {}, "status": {}, "server": {}}
	count := func(kind string, p proc) {
		mu.Lock()
		st.usage[kind].add(p.Usage)
		if strings.Contains(p.Stderr, "tally: waiting up to") {
			st.waited++
		}
		mu.Unlock()
	}
	var errs []string
	var wg sync.WaitGroup
	for p := 0; p < procs; p++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			actor := fmt.Sprintf("worker-%d", p)
			fail := func(format string, args ...any) {
				mu.Lock()
				errs = append(errs, actor+": "+fmt.Sprintf(format, args...))
				mu.Unlock()
			}
			a, err := newAgent(actor)
			if err != nil {
				fail("%v", err)
				return
			}
			defer func() {
				u, err := a.close()
				if err != nil {
					fail("close: %v", err)
				}
				mu.Lock()
				st.usage["server"].add(u)
				mu.Unlock()
			}()
			c := a.claim(wave)
			for iter := 0; iter < 100*n; iter++ {
				if c.Err != nil {
					fail("%v", c.Err)
					return
				}
				switch {
				case c.Code == 0:
					count("claim", c)
					mu.Lock()
					st.latencies = append(st.latencies, c.Wall)
					mu.Unlock()
					cell, _ := c.JSON["cell"].(string)
					l, _ := c.JSON["lease"].(map[string]any)
					ent, _ := c.JSON["entry"].(map[string]any)
					epoch, _ := l["epoch"].(float64)
					seq, _ := ent["seq"].(float64)
					mu.Lock()
					claims[cell] = append(claims[cell], grant{actor, int64(epoch), int64(seq)})
					mu.Unlock()
					d := a.done(wave, cell, int64(epoch), batched)
					count("done", d)
					if d.Err != nil || d.Code != 0 {
						fail("done %s epoch %v: exit %d %s %v", cell, epoch, d.Code, d.Stdout, d.Err)
						return
					}
					rc, _ := d.JSON["receipt"].(map[string]any)
					ent, _ = d.JSON["entry"].(map[string]any)
					rcEpoch, _ := rc["epoch"].(float64)
					seq, _ = ent["seq"].(float64)
					mu.Lock()
					dones[cell] = append(dones[cell], grant{actor, int64(rcEpoch), int64(seq)})
					mu.Unlock()
					if batched {
						c = nextOf(d)
						c.Usage = procUsage{} // counted with the done
						continue
					}
				case c.Code == 2 && c.errCode() == "PLAN-COMPLETE":
					count("claim-refused", c)
					return
				case c.Code == 1 && c.errCode() == "NO-READY-CELL":
					count("claim-refused", c)
					s := a.status(wave)
					count("status", s)
					if s.Err != nil || s.Code != 0 {
						fail("status: exit %d %s %v", s.Code, s.Stdout, s.Err)
						return
					}
					ws, _ := s.JSON["waves"].([]any)
					w0, _ := ws[0].(map[string]any)
					counts, _ := w0["counts"].(map[string]any)
					if counts["done"] == float64(n) {
						return
					}
				default:
					fail("claim --next: exit %d %s", c.Code, c.Stdout)
					return
				}
				c = a.claim(wave)
			}
			fail("gave up after %d iterations", 100*n)
		}()
	}
	wg.Wait()
	if len(errs) > 0 {
		return nil, nil, st, fmt.Errorf("%s", strings.Join(errs, "\n"))
	}
	return claims, dones, st, nil
}

// cliAgents makes drain's workers tally processes of bin in dir.
func cliAgents(bin, dir string) func(string) (drainAgent, error) {
	return func(actor string) (drainAgent, error) { return cliAgent{bin, dir, actor}, nil }
}

// TestRaceDrain: 8 processes drain a wave of cells (independent cells and
// dependency chains) with claim --next and done, and again with done --next. Afterwards: every cell is
// done exactly once; no (cell, epoch) was granted twice; each done carries
// the epoch of the claim that granted it and comes from its holder; no cell
// was claimed before its deps were done; every claim --next took the first
// ready cell in plan order at its point of the chain; what the workers saw is
// what the ledger says; and verify --full passes.
func TestRaceDrain(t *testing.T) {
	t.Run("claim+done", func(t *testing.T) { raceDrain(t, false) })
	t.Run("done--next", func(t *testing.T) { raceDrain(t, true) })
}

// raceDrain is TestRaceDrain, batched as drain says.
func raceDrain(t *testing.T, batched bool) {
	n, procs := 200, 8
	if stress() {
		n = 1000
	}
	bin := testrepo.Tally(t)
	r := newRepo(t)
	r.ok("setup", "init")
	planJSON, deps, order := drainPlan("drain", n)
	r.ok("setup", "plan", r.file("drain.json", planJSON))

	seen, seenDone, _, err := drain(cliAgents(bin, r.dir), "drain", n, procs, batched)
	if err != nil {
		t.Fatal(err)
	}

	// what the workers saw
	if len(seen) != n || len(seenDone) != n {
		t.Fatalf("workers claimed %d cells and finished %d, want %d", len(seen), len(seenDone), n)
	}
	for _, c := range order {
		if len(seen[c]) != 1 || len(seenDone[c]) != 1 || seen[c][0].epoch != 1 || seenDone[c][0].epoch != 1 ||
			seen[c][0].actor != seenDone[c][0].actor {
			t.Fatalf("cell %s: claims %+v dones %+v", c, seen[c], seenDone[c])
		}
	}

	// what the ledger says, read with git and replayed with a model of the rules
	entries := readLedger(t, r.dir)
	if len(entries) != 2+2*n {
		t.Fatalf("%d entries, want genesis + plan + %d claims + %d dones", len(entries), n, n)
	}
	index := map[string]int{}
	for i, c := range order {
		index[c] = i
	}
	state := map[string]string{} // cell -> "claimed" | "done"; absent: pending
	claimsOf := map[string]int{}
	lastClaim := map[string]grant{}
	granted := map[string]bool{}
	doneAt := map[string]int64{}
	for _, le := range entries[2:] {
		e := le.Entry
		var b struct {
			Wave  string `json:"wave"`
			Cell  string `json:"cell"`
			Epoch int64  `json:"epoch"`
			Next  bool   `json:"next"`
		}
		if err := json.Unmarshal(e.Body, &b); err != nil || b.Wave != "drain" {
			t.Fatalf("entry %d: %s %v", e.Seq, e.Body, err)
		}
		switch e.Kind {
		case "claim":
			// the first pending cell in plan order whose deps are all done
			want := ""
			for _, c := range order {
				if state[c] != "" {
					continue
				}
				ready := true
				for _, d := range deps[c] {
					ready = ready && state[d] == "done"
				}
				if ready {
					want = c
					break
				}
			}
			if !b.Next || b.Cell != want {
				t.Fatalf("entry %d: claim --next took %s (next=%v), the first ready cell in plan order is %q", e.Seq, b.Cell, b.Next, want)
			}
			claimsOf[b.Cell]++
			var epoch int64
			var w string
			if _, err := fmt.Sscanf(le.Subject, "claim %s epoch %d", &w, &epoch); err != nil || w != "drain/"+b.Cell {
				t.Fatalf("entry %d: subject %q", e.Seq, le.Subject)
			}
			// epochs count the claims of the cell: never reused, never skipped
			if epoch != int64(claimsOf[b.Cell]) {
				t.Fatalf("entry %d: %s granted epoch %d on its claim number %d", e.Seq, b.Cell, epoch, claimsOf[b.Cell])
			}
			key := fmt.Sprintf("%s#%d", b.Cell, epoch)
			if granted[key] {
				t.Fatalf("entry %d: %s granted twice", e.Seq, key)
			}
			granted[key] = true
			lastClaim[b.Cell] = grant{e.Actor, epoch, int64(e.Seq)}
			state[b.Cell] = "claimed"
			if g := seen[b.Cell][0]; g != lastClaim[b.Cell] {
				t.Fatalf("entry %d: ledger claim %+v, the worker saw %+v", e.Seq, lastClaim[b.Cell], g)
			}
		case "done":
			g, ok := lastClaim[b.Cell]
			if !ok || state[b.Cell] != "claimed" {
				t.Fatalf("entry %d: done of %s which is %q", e.Seq, b.Cell, state[b.Cell])
			}
			if b.Epoch != g.epoch || e.Actor != g.actor {
				t.Fatalf("entry %d: done of %s by %s epoch %d; granted to %s at epoch %d", e.Seq, b.Cell, e.Actor, b.Epoch, g.actor, g.epoch)
			}
			for _, d := range deps[b.Cell] {
				if doneAt[d] == 0 || doneAt[d] > g.seq {
					t.Fatalf("%s was claimed (entry %d) before its dep %s was done (entry %d)", b.Cell, g.seq, d, doneAt[d])
				}
			}
			state[b.Cell] = "done"
			doneAt[b.Cell] = int64(e.Seq)
			if w := seenDone[b.Cell][0]; w.seq != int64(e.Seq) || w.actor != e.Actor {
				t.Fatalf("entry %d: ledger done by %s, the worker saw %+v", e.Seq, e.Actor, w)
			}
		default:
			t.Fatalf("entry %d: unexpected %s", e.Seq, e.Kind)
		}
	}
	for _, c := range order {
		if state[c] != "done" || claimsOf[c] != 1 {
			t.Fatalf("%s ends %q after %d claims", c, state[c], claimsOf[c])
		}
	}
	st := r.ok("setup", "status", "drain")
	w0 := arr(t, st, "waves")[0].(map[string]any)
	if counts := obj(t, w0, "counts"); len(counts) != 1 || counts["done"] != float64(n) {
		t.Fatalf("final counts %v", counts)
	}
	r.ok("setup", "verify", "--full")
}
