package main

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/testrepo"
)

// packOf is the pack file (its .idx path) of dir holding object id, read
// with git show-index; "" if no pack holds it.
func packOf(t *testing.T, dir, id string) string {
	t.Helper()
	idxs, _ := filepath.Glob(filepath.Join(dir, ".git", "objects", "pack", "*.idx"))
	for _, idx := range idxs {
		f, err := os.Open(idx)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("git", "show-index")
		cmd.Dir, cmd.Env, cmd.Stdin = dir, testrepo.Env(), f
		out, err := cmd.Output()
		f.Close()
		if err != nil {
			t.Fatalf("git show-index %s: %v", idx, err)
		}
		if strings.Contains(string(out), " "+id+" ") {
			return idx
		}
	}
	return ""
}

// done --next finishes the cell and claims the next ready one in one
// append: the done's and the claim's commits are in one pack that holds
// no earlier entry, the claim is of the cell the done made ready, and
// "next" is the object claim --next prints. Once the receipt stands, done
// exits 0 whatever the claim gives: NO-READY-CELL and PLAN-COMPLETE come
// back as "next" with "ok": false, after the done alone. A refused done
// claims nothing.
func TestDoneNext(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("p.json", `{"wave":"w","cells":[{"id":"a"},{"id":"b"},{"id":"c","deps":["a"]}]}`))
	first := r.ok("A", "claim", "--next")
	r.ok("B", "claim", "w/b")
	r.refuse(2, string(errs.Usage), "A", "done", "w/a", "--epoch", "1", "--wave", "w")
	r.refuse(2, string(errs.Usage), "A", "done", "w/a", "--epoch", "1", "--wait", "1s")
	r.refuse(2, string(errs.EpochMismatch), "A", "done", "w/a", "--epoch", "2", "--next")

	before := readLedger(t, r.dir)
	res := r.ok("A", "done", "w/a", "--epoch", "1", "--next", "--wave", "w")
	after := readLedger(t, r.dir)
	if len(after) != len(before)+2 || after[len(before)].Entry.Kind != "done" || after[len(before)+1].Entry.Kind != "claim" {
		t.Fatalf("done --next appended %d entries, want a done and a claim", len(after)-len(before))
	}
	doneC, claimC, prevC := after[len(before)].Commit, after[len(before)+1].Commit, before[len(before)-1].Commit
	if p := packOf(t, r.dir, claimC); p == "" || p != packOf(t, r.dir, doneC) || p == packOf(t, r.dir, prevC) {
		t.Fatalf("the claim's pack %q, the done's %q, the entry before's %q: want one pack of those two", p, packOf(t, r.dir, doneC), packOf(t, r.dir, prevC))
	}
	next := obj(t, res, "next")
	wantKeys(t, "next", next, keys(first)...)
	if next["ok"] != true || next["cell"] != "c" || num(t, obj(t, next, "entry"), "seq") != int64(after[len(before)+1].Entry.Seq) ||
		num(t, obj(t, res, "entry"), "seq") != int64(after[len(before)].Entry.Seq) || obj(t, res, "receipt")["cell"] != "a" {
		t.Fatalf("done --next: %v", res)
	}

	// Nothing ready (B holds b): the done stands alone, exit 0.
	res = r.ok("A", "done", "w/c", "--epoch", "1", "--next")
	if e := obj(t, obj(t, res, "next"), "error"); obj(t, res, "next")["ok"] != false || e["code"] != string(errs.NoReadyCell) || e["retryable"] != true || e["open"] != float64(1) {
		t.Fatalf("done --next with nothing ready: %v", res)
	}
	if got := readLedger(t, r.dir); len(got) != len(after)+1 || got[len(after)].Entry.Kind != "done" {
		t.Fatalf("done --next with nothing ready appended %d entries, want the done", len(got)-len(after))
	}
	res = r.ok("B", "done", "w/b", "--epoch", "1", "--next", "--wait", "1m")
	if e := obj(t, obj(t, res, "next"), "error"); e["code"] != string(errs.PlanComplete) || e["retryable"] != false {
		t.Fatalf("done --next of the last cell: %v", res)
	}
	for _, c := range []string{"w/a", "w/b", "w/c"} {
		if st := obj(t, r.ok("A", "show", c), "cell")["state"]; st != "done" {
			t.Fatalf("%s is %v", c, st)
		}
	}
	if n := strings.Count(r.git("notes", "--ref=tally", "show", "HEAD"), "cell=w/"); n != 3 {
		t.Fatalf("%d note lines, want one a done", n)
	}
	r.ok("A", "verify", "--full")
}

// TestCrashDoneNext: done --next is killed with SIGKILL at random points,
// 40 rounds (200 with TALLY_STRESS=1), on a plan whose cells are all
// ready. A killed run leaves the ledger with both its entries, the done
// and the claim, or with neither; never the done alone. An acknowledged
// run's claim is in the ledger. After every round each receipt in the
// ledger has its note line once and no note names a receipt the ledger
// lacks: a run killed after its append landed (between the ledger's
// rename and the notes ref's, among other points) has its note's move
// finished by the next writer, so receipt repair finds nothing to write.
// No lock is left under refs/, and verify --full and git fsck pass.
func TestCrashDoneNext(t *testing.T) {
	t.Parallel()
	rounds := 40
	if stress() {
		rounds = 200
	}
	r := newRepo(t)
	r.ok("A", "init")
	var plan strings.Builder
	plan.WriteString("wave: w\ncells:\n")
	for i := range rounds + 1 {
		fmt.Fprintf(&plan, "  - id: c%03d\n", i)
	}
	r.ok("A", "plan", r.file("plan.yaml", plan.String()))
	claim := r.ok("A", "claim", "--next")
	cell, epoch := claim["cell"].(string), fmt.Sprint(num(t, obj(t, claim, "lease"), "epoch"))
	var span time.Duration
	killed, landed := 0, 0
	for i := range rounds {
		args := []string{"done", "w/" + cell, "--epoch", epoch, "--next"}
		before := len(readLedger(t, r.dir))
		var ack map[string]any
		if i == 0 {
			t0 := time.Now()
			ack = r.ok("A", args...)
			span = 3 * time.Since(t0) / 2 // kill points over the whole run
		} else {
			var k bool
			if ack, k = killedRun(t, r.dir, "A", span, args...); k {
				killed++
			}
		}
		entries := readLedger(t, r.dir)
		claimed := entries[len(entries)-1] // the claim, if the run landed
		switch added := entries[before:]; {
		case len(added) == 0 && ack == nil:
			checkReceiptNotes(t, r.dir, entries, i)
			continue // killed before the append: the same done again
		case len(added) == 2 && added[0].Entry.Kind == "done" && added[1].Entry.Kind == "claim" && added[1].Entry.Actor == "A":
			if ack == nil {
				landed++
				// A kill between the ledger's rename and the notes ref's
				// leaves the note's move to the next writer: any append.
				r.ok("A", "note", fmt.Sprintf("after round %d", i))
				entries = readLedger(t, r.dir)
			}
		default:
			t.Fatalf("round %d (acknowledged %v): done --next left %d entries: %+v", i, ack != nil, len(added), added)
		}
		checkReceiptNotes(t, r.dir, entries, i)
		next := obj(t, r.ok("A", "show", "w/"+cell), "cell")
		if next["state"] != "done" {
			t.Fatalf("round %d: %s is %v after its done landed", i, cell, next["state"])
		}
		// The claim the ledger holds: the acknowledged one, or the one a
		// killed run appended (the agent finds it in the ledger).
		var body struct {
			Cell string `json:"cell"`
		}
		if err := json.Unmarshal(claimed.Entry.Body, &body); err != nil {
			t.Fatal(err)
		}
		if ack != nil && obj(t, ack, "next")["cell"] != body.Cell {
			t.Fatalf("round %d: acknowledged next %v, the ledger's claim is of %s", i, obj(t, ack, "next"), body.Cell)
		}
		cell = body.Cell
		epoch = fmt.Sprint(num(t, obj(t, obj(t, r.ok("A", "show", "w/"+cell), "cell"), "lease"), "epoch"))
	}
	t.Logf("%d rounds: %d runs killed, %d of them after their append landed", rounds, killed, landed)
	if written := arr(t, r.ok("A", "receipt", "repair"), "written"); len(written) != 0 {
		t.Errorf("receipt repair wrote %v: the next writers left notes missing", written)
	}
	// An empty lockfile counts as a killed writer's only once it is older
	// than git keeps one empty (a second): age those the last rounds left,
	// and the next writer removes every lock a run killed before landing left.
	if young, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "*", "*.lock")); len(young) > 0 {
		for _, l := range young {
			if fi, err := os.Stat(l); err == nil && fi.Size() == 0 {
				past := time.Now().Add(-2 * time.Second)
				os.Chtimes(l, past, past)
			}
		}
	}
	r.ok("A", "note", "after the crashes")
	if locks, _ := filepath.Glob(filepath.Join(r.dir, ".git", "refs", "*", "*.lock")); len(locks) > 0 {
		t.Errorf("locks left under refs/ after the next writer: %v", locks)
	}
	r.git("fsck", "--strict", "--no-progress")
	r.ok("A", "verify", "--full")
}

// done answers its uncommitted-edits question from git's index when that
// proves the tracked files unchanged, without a git process; with an edit
// left uncommitted it asks git status, and warns as before.
func TestDoneStatusFromIndex(t *testing.T) {
	r := newRepo(t)
	r.ok("A", "init")
	r.ok("A", "plan", r.file("p.json", `{"wave":"w","cells":[{"id":"a"},{"id":"b"}]}`))
	past := time.Now().Add(-time.Hour)
	r.file("src/x.go", "package x\n")
	os.Chtimes(filepath.Join(r.dir, "src/x.go"), past, past) // not racily clean in the index
	r.git("add", "src/x.go")
	r.git("commit", "-q", "-m", "x")
	realGit, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	bin, log := t.TempDir(), filepath.Join(t.TempDir(), "git.log")
	script := "#!/bin/sh\necho \"$*\" >> " + log + "\nexec " + realGit + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(bin, "git"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	done := func(cell string) (warnings []any, spawned string) {
		t.Helper()
		os.Remove(log)
		epoch := fmt.Sprint(num(t, obj(t, r.ok("A", "claim", "w/"+cell), "lease"), "epoch"))
		res := testrepo.Run(t, r.dir, "A", []string{"PATH=" + bin + string(os.PathListSeparator) + os.Getenv("PATH")},
			"done", "w/"+cell, "--epoch", epoch, "--json")
		if res.Code != 0 {
			t.Fatalf("done: %s", res)
		}
		b, _ := os.ReadFile(log)
		return arr(t, res.JSON, "warnings"), string(b)
	}
	warnings, spawned := done("a")
	if strings.Contains(spawned, "status") || len(warnings) != 1 { // "changes nothing since the base"
		t.Fatalf("done in a clean work tree ran git %q, warned %v", spawned, warnings)
	}
	r.file("src/x.go", "package x // edited\n")
	warnings, spawned = done("b")
	if !strings.Contains(spawned, "status") || !strings.Contains(fmt.Sprint(warnings), "uncommitted edits are not in the receipt: src/x.go") {
		t.Fatalf("done with an edit left ran git %q, warned %v", spawned, warnings)
	}
}

// checkReceiptNotes checks refs/notes/tally against the ledger's entries
// after round: every receipt (done entry) has its note line exactly once,
// and no note line names a receipt the ledger lacks.
func checkReceiptNotes(t *testing.T, dir string, entries []loggedEntry, round int) {
	t.Helper()
	notes := receiptNoteLines(t, dir)
	receipts := map[string]bool{}
	for _, le := range entries {
		if le.Entry.Kind != "done" {
			continue
		}
		var body struct {
			Wave  string `json:"wave"`
			Cell  string `json:"cell"`
			Epoch int64  `json:"epoch"`
		}
		if err := json.Unmarshal(le.Entry.Body, &body); err != nil {
			t.Fatal(err)
		}
		key := fmt.Sprintf("%d %s/%s %d", le.Entry.Seq, body.Wave, body.Cell, body.Epoch)
		receipts[key] = true
		if notes[key] != 1 {
			t.Fatalf("round %d: the note line of receipt %q is in refs/notes/tally %d times", round, key, notes[key])
		}
	}
	for key := range notes {
		if !receipts[key] {
			t.Fatalf("round %d: a note line names %q, a receipt the ledger lacks", round, key)
		}
	}
}
