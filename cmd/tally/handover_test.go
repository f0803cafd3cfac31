//go:build unix

package main

// Group commit across processes (FORMAT.md §9, "Group commit"): the writer
// lock's holder appends the intents other tally writers hand it. These
// tests run real tally processes and MCP servers, and kill the holder.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tally-dev/tally/internal/testrepo"
)

// handoverCounts counts, in the strace logs of dir (connect and accept4,
// successful calls only), the intents handed over (connections to a
// writer lock's hand-over socket) and those served (connections accepted).
func handoverCounts(t *testing.T, dir string) (handed, served int) {
	t.Helper()
	logs, _ := filepath.Glob(filepath.Join(dir, "*"))
	for _, log := range logs {
		b, err := os.ReadFile(log)
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range strings.Split(string(b), "\n") {
			switch {
			case strings.Contains(l, "connect(") && strings.Contains(l, `/tally/writer.sock"`):
				handed++
			case strings.Contains(l, "accept4("):
				served++
			}
		}
	}
	return handed, served
}

// TestRaceDrainHanded: 4 `tally mcp` servers and 4 workers running a tally
// process a command drain waves together, round after round, alternately
// with claim --next + done and with done --next, while the writer lock's
// holder (a server or a process) appends the intents the others hand it.
// Each drain is checked against the ledger (checkDrained: every cell
// claimed and done once, no (cell, epoch) granted twice, every
// acknowledged claim and done at its seq by its worker, every done's note
// line once), verify --full passes at the end, and, with strace watching
// the servers, intents were handed over and served.
func TestRaceDrainHanded(t *testing.T) {
	rounds, n := 4, 60
	if stress() {
		rounds, n = 20, 200
	}
	bin := testrepo.Tally(t)
	r := newRepo(t)
	r.ok("setup", "init")
	strace, _ := exec.LookPath("strace")
	traces := t.TempDir()
	round := 0
	servers := mcpAgentsOf(func(actor string) *exec.Cmd {
		args := []string{bin, "-C", r.dir, "--actor", actor, "mcp"}
		if strace == "" {
			return exec.Command(args[0], args[1:]...)
		}
		log := filepath.Join(traces, fmt.Sprintf("%s-%d", actor, round))
		return exec.Command(strace, append([]string{"-f", "-qq", "--seccomp-bpf", "-e", "trace=connect,accept4",
			"-e", "status=successful", "-o", log}, args...)...)
	})
	processes := cliAgents(bin, r.dir)
	agents := func(actor string) (drainAgent, error) {
		if p, _ := strconv.Atoi(strings.TrimPrefix(actor, "worker-")); p%2 == 0 {
			return servers(actor)
		}
		return processes(actor)
	}
	for ; round < rounds; round++ {
		wave := fmt.Sprintf("h%d", round)
		planJSON, _, _ := drainPlan(wave, n)
		r.ok("setup", "plan", r.file(wave+".json", planJSON))
		claims, dones, _, err := drain(agents, wave, n, 8, round%2 == 1)
		if err != nil {
			t.Fatalf("round %d: %v", round, err)
		}
		checkDrained(t, r.dir, wave, n, claims, dones)
	}
	r.ok("setup", "verify", "--full")
	if strace == "" {
		t.Log("strace is not installed: the hand-overs were not counted")
		return
	}
	handed, served := handoverCounts(t, traces)
	t.Logf("%d rounds of %d cells: the servers handed %d intents over and served %d", rounds, n, handed, served)
	if handed == 0 || served == 0 {
		t.Fatalf("the servers handed %d intents over and served %d: no group commit happened", handed, served)
	}
}

// holderKill is where TestHandoverHolderKilled kills the holder: an strace
// fault injection on the first of the system calls inject names on one of
// paths (under .git), or a SIGKILL at a random moment of its batch.
type holderKill struct {
	name   string
	inject string // "": none by strace
	paths  []string
	random bool
}

// The holder's own done is refused before it moves a ref, so every ref
// move and notes sync it makes is its batch's.
var holderKills = []holderKill{
	{name: "never"},
	{"before the batch moves the ledger's ref", "rename,renameat,renameat2:error=EIO:signal=KILL", []string{"refs/tally/ledger.lock"}, false},
	{"between the ledger's and the notes' ref moves", "rename,renameat,renameat2:error=EIO:signal=KILL", []string{"refs/notes/tally.lock"}, false},
	{"after both ref moves, before any answer", "fsync:error=EIO:signal=KILL", []string{"refs/notes"}, false},
	{name: "at random in its batch", random: true},
}

// holdFor is how long strace holds the holder once it holds the writer
// lock and listens: the requesters connect meanwhile.
const holdFor = time.Second

// requester is one writer of a round of TestHandoverHolderKilled: an
// actor holding a lease (cell, epoch) or none, which it finishes with a
// done --next or replaces with a claim --next.
type requester struct {
	actor    string
	cell     string
	epoch    int64
	mcp      *mcpAgent // nil: a tally process of bin in dir a command
	bin, dir string
}

// TestHandoverHolderKilled: round after round, a holder (a tally done the
// rules refuse, held by strace for a moment once it holds the writer lock
// and listens) is handed the intents of tally processes and MCP servers
// (done --next, claim --next), and is killed with SIGKILL at a chosen point
// of its batch (before the ledger's ref moves, between the two ref moves,
// after both and before any answer, at random) or not at all. Every
// requester must succeed (its entries landed for it, found by it in the
// ledger, or appended by it), and afterwards: every outcome a requester
// reported is in the ledger at the seq it reported, by it, of its cell and
// epoch; no (cell, epoch) is granted twice and no entry lands twice; every
// done has its note line once; no lock is left; verify --full passes.
func TestHandoverHolderKilled(t *testing.T) {
	strace := testrepo.Strace(t)
	rounds := 2 * len(holderKills)
	if stress() {
		rounds = 10 * len(holderKills)
	}
	bin := testrepo.Tally(t)
	r := newRepo(t)
	r.ok("setup", "init")
	var plan strings.Builder
	plan.WriteString("wave: w\ncells:\n")
	for i := range 5 * (rounds + 1) {
		fmt.Fprintf(&plan, "  - id: c%03d\n", i)
	}
	r.ok("setup", "plan", r.file("w.yaml", plan.String()))
	r.ok("setup", "plan", r.file("h.yaml", "wave: h\ncells:\n  - id: x\n")) // the holder's, never claimed
	gd := filepath.Join(r.dir, ".git")
	socket := testrepo.HandoverSocket(gd)
	var reqs []*requester
	for i := range 2 {
		actor := fmt.Sprintf("mcp-%d", i)
		a, err := mcpAgents(bin, r.dir)(actor)
		if err != nil {
			t.Fatal(err)
		}
		defer a.close()
		reqs = append(reqs, &requester{actor: actor, mcp: a.(*mcpAgent)})
	}
	for i := range 3 {
		reqs = append(reqs, &requester{actor: fmt.Sprintf("cli-%d", i), bin: bin, dir: r.dir})
	}
	told := map[int64]told{} // by seq: what a requester was told
	tell := func(round int, kind string, q *requester, cell string, epoch int64, seq float64) {
		if prev, ok := told[int64(seq)]; ok {
			t.Fatalf("round %d: seq %d was reported twice: %s of %s to %s, and %+v", round, int64(seq), kind, cell, q.actor, prev)
		}
		told[int64(seq)] = struct {
			kind, actor, cell string
			epoch             int64
		}{kind, q.actor, cell, epoch}
	}
	for round := range rounds {
		kill := holderKills[round%len(holderKills)]
		// The holder's first read of the writer's record comes once it holds
		// the lock and listens: strace holds it there.
		log := filepath.Join(t.TempDir(), "holder.strace")
		args := []string{"-f", "-qq", "-o", log, "-P", filepath.Join(gd, "tally", "appended"),
			"-e", "trace=open,openat,rename,renameat,renameat2,fsync",
			"-e", fmt.Sprintf("inject=open,openat:delay_exit=%d:when=1", holdFor.Microseconds())}
		for _, p := range kill.paths {
			args = append(args, "-P", filepath.Join(gd, filepath.FromSlash(p)))
		}
		if kill.inject != "" {
			args = append(args, "-e", "inject="+kill.inject)
		}
		holder := exec.Command(strace, append(args, bin, "-C", r.dir, "--json", "done", "h/x", "--epoch", "1")...)
		holder.Env = testrepo.Env("TALLY_ACTOR=holder")
		if err := holder.Start(); err != nil {
			t.Fatal(err)
		}
		testrepo.AwaitSockets(t, socket, 1)
		var wg sync.WaitGroup
		outcomes := make([]proc, len(reqs))
		for i, q := range reqs {
			wg.Add(1)
			go func() {
				defer wg.Done()
				outcomes[i] = q.request()
			}()
		}
		testrepo.AwaitSockets(t, socket, 1+len(reqs))
		if kill.random {
			// Once the hold is over (strace logs the held call as it
			// returns; a kill during strace's delay confuses strace), a
			// random moment of the holder's batch.
			pid := tracee(t, holder.Process.Pid, bin)
			awaitLogged(t, log, "appended")
			time.Sleep(time.Duration(rand.Int64N(int64(30 * time.Millisecond)))) // the kill point; it waits for nothing
			syscall.Kill(pid, syscall.SIGKILL)
		}
		holder.Wait()
		wg.Wait()
		ws, _ := holder.ProcessState.Sys().(syscall.WaitStatus)
		if kill.inject != "" && !ws.Signaled() {
			t.Fatalf("round %d: the holder was not killed %s: exit %d", round, kill.name, holder.ProcessState.ExitCode())
		}
		for i, q := range reqs {
			o := outcomes[i]
			if o.Err != nil || o.Code != 0 {
				t.Fatalf("round %d (holder killed %s): %s: exit %d %s %v", round, kill.name, q.actor, o.Code, o.Stdout, o.Err)
			}
			if q.cell != "" {
				rc, _ := o.JSON["receipt"].(map[string]any)
				ent, _ := o.JSON["entry"].(map[string]any)
				if rc == nil || ent == nil {
					t.Fatalf("round %d: %s's done: %s", round, q.actor, o.Stdout)
				}
				tell(round, "done", q, q.cell, q.epoch, ent["seq"].(float64))
				o, q.cell = nextOf(o), ""
				if o.Code != 0 {
					continue // nothing was ready: claimed next round
				}
			}
			l, _ := o.JSON["lease"].(map[string]any)
			ent, _ := o.JSON["entry"].(map[string]any)
			if l == nil || ent == nil {
				t.Fatalf("round %d: %s's claim: %s", round, q.actor, o.Stdout)
			}
			q.cell, q.epoch = o.JSON["cell"].(string), int64(l["epoch"].(float64))
			tell(round, "claim", q, q.cell, q.epoch, ent["seq"].(float64))
		}
		t.Logf("round %d: holder killed %s: %v", round, kill.name, ws.Signaled())
	}
	checkTold(t, r, told)
}

// told is what a requester of TestHandoverHolderKilled was told an entry
// is.
type told = struct {
	kind, actor, cell string
	epoch             int64
}

// request runs q's command of a round: done --next of its lease, or claim
// --next when it holds none.
func (q *requester) request() proc {
	var a drainAgent = cliAgent{q.bin, q.dir, q.actor}
	if q.mcp != nil {
		a = q.mcp
	}
	if q.cell == "" {
		return a.claim("w")
	}
	return a.done("w", q.cell, q.epoch, true)
}

// checkTold checks the ledger of r against what TestHandoverHolderKilled's
// requesters were told, by seq: each entry there, by its actor, of its
// cell and epoch; no (cell, epoch) granted twice, no nonce twice; every
// done's note line once; no lock left under refs/; and verify --full and
// git fsck pass.
func checkTold(t *testing.T, r *repo, told map[int64]told) {
	t.Helper()
	r.ok("setup", "note", "the last writer")
	notes := receiptNoteLines(t, r.dir)
	granted := map[string]bool{}
	nonces := map[string]bool{}
	bySeq := map[int64]loggedEntry{}
	for _, le := range readLedger(t, r.dir) {
		bySeq[int64(le.Entry.Seq)] = le
		if nonces[le.Entry.Nonce] {
			t.Fatalf("entry %d: nonce %s landed twice", le.Entry.Seq, le.Entry.Nonce)
		}
		nonces[le.Entry.Nonce] = true
		if le.Entry.Kind == "claim" {
			key := strings.TrimPrefix(le.Subject, "claim ")
			if granted[key] {
				t.Fatalf("entry %d: %s granted twice", le.Entry.Seq, key)
			}
			granted[key] = true
		}
	}
	for seq, w := range told {
		le, ok := bySeq[seq]
		var body struct {
			Cell  string `json:"cell"`
			Epoch int64  `json:"epoch"`
		}
		if ok {
			json.Unmarshal(le.Entry.Body, &body)
		}
		if !ok || string(le.Entry.Kind) != w.kind || le.Entry.Actor != w.actor || body.Cell != w.cell ||
			(w.kind == "done" && body.Epoch != w.epoch) || (w.kind == "claim" && !strings.HasSuffix(le.Subject, fmt.Sprintf(" epoch %d", w.epoch))) {
			t.Fatalf("seq %d: %s was told %s of %s epoch %d; the ledger holds %s %s", seq, w.actor, w.kind, w.cell, w.epoch, le.Subject, le.Entry.Body)
		}
		if w.kind == "done" {
			if key := fmt.Sprintf("%d w/%s %d", seq, w.cell, w.epoch); notes[key] != 1 {
				t.Fatalf("the note line of done %q is in refs/notes/tally %d times", key, notes[key])
			}
		}
	}
	if locks, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "*", "*.lock")); len(locks) > 0 {
		t.Fatalf("locks left under refs/: %v", locks)
	}
	r.git("fsck", "--strict", "--no-progress")
	r.ok("setup", "verify", "--full")
}

// awaitLogged waits until the file log holds text.
func awaitLogged(t *testing.T, log, text string) {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		if b, _ := os.ReadFile(log); strings.Contains(string(b), text) {
			return
		}
	}
	t.Fatalf("%s does not say %q", log, text)
}

// tracee is the pid of the process running bin below process pid (an
// strace), once it runs.
func tracee(t *testing.T, pid int, bin string) int {
	t.Helper()
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(time.Millisecond) {
		for queue := []int{pid}; len(queue) > 0; queue = queue[1:] {
			p := queue[0]
			if cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", p)); strings.HasPrefix(string(cmd), bin+"\x00") {
				return p
			}
			b, _ := os.ReadFile(fmt.Sprintf("/proc/%d/task/%d/children", p, p))
			for _, f := range strings.Fields(string(b)) {
				child, _ := strconv.Atoi(f)
				queue = append(queue, child)
			}
		}
	}
	t.Fatalf("strace %d did not start %s", pid, bin)
	return 0
}
