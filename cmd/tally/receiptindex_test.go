package main

// The chunked receipts index (FORMAT.md §6, "The receipts index") at the
// command line and at a server: the one-way switch, and ledger commits
// whose index was forged (a chunk missing, chunks reordered, a chunk over
// 16, a count that lies), refused by verify --full and by the pre-receive
// hook when pushed with plain git.

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// legacyInit writes, in dir, the genesis tally init wrote before the
// chunked index existed: no receipt_index.
func legacyInit(t testing.TB, dir string) {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	if _, err := l.Append("A", func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "legacy"}}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

// receiptIndexShown is what policy show says of the receipts index.
func receiptIndexShown(r *repo) any {
	r.t.Helper()
	return obj(r.t, r.ok("A", "policy", "show"), "policy")["receipt_index"]
}

// TestReceiptIndexSwitch: tally init's ledger has the chunked index, and
// switching it again or off is USAGE; a ledger from before (single) is
// switched once by policy set --receipt-index chunked, by an admin only,
// and then likewise cannot be switched again or back.
func TestReceiptIndexSwitch(t *testing.T) {
	t.Parallel()
	r := newRepo(t)
	r.ok("A", "init")
	if got := receiptIndexShown(r); got != lease.ReceiptIndexChunked {
		t.Fatalf("init's ledger: receipt_index %v", got)
	}
	for _, v := range []string{"chunked", "single", ""} {
		r.refuse(2, "USAGE", "A", "policy", "set", "--receipt-index", v)
	}

	old := newRepo(t)
	legacyInit(t, old.dir)
	if got := receiptIndexShown(old); got != lease.ReceiptIndexSingle {
		t.Fatalf("a ledger without the switch: receipt_index %v", got)
	}
	old.ok("A", "policy", "set", "--admins", "A")
	old.refuse(2, "POLICY", "B", "policy", "set", "--receipt-index", "chunked")
	old.refuse(2, "USAGE", "A", "policy", "set", "--receipt-index", "single")
	if s := old.ok("A", "policy", "set", "--receipt-index", "chunked")["summary"]; s != "policy: set receipt_index" {
		t.Fatalf("the switch's summary %v", s)
	}
	if got := receiptIndexShown(old); got != lease.ReceiptIndexChunked {
		t.Fatalf("after the switch: receipt_index %v", got)
	}
	for _, v := range []string{"chunked", "single"} {
		old.refuse(2, "USAGE", "A", "policy", "set", "--receipt-index", v)
	}
	res := testrepo.Run(t, old.dir, "A", nil, "policy", "show")
	if res.Code != 0 || !strings.Contains(res.Stdout, "receipt_index: chunked\n") {
		t.Fatalf("policy show: exit %d\n%s%s", res.Code, res.Stdout, res.Stderr)
	}
	old.ok("A", "verify", "--full")
}

// TestPushForgedReceiptIndex: a clone finishes 34 cells on one commit in
// its local ledger (a head of 16, chunks of 16 and 2) and pushes the ledger
// and the notes with plain git: the server's hook accepts both, the notes
// of receipts in chunks included. Then a done whose state tree forges the
// index is refused by verify --full and by the hook with STATE-MISMATCH,
// for each forgery; the same done with the rules' own state is accepted.
func TestPushForgedReceiptIndex(t *testing.T) {
	t.Parallel()
	const cells = 35
	c := newNetCluster(t, gitserver.GitDaemon)
	c.seeded("w", cells)
	x := c.clone("agent")
	testrepo.Git(t, x, "fetch", "-q", "origin", "+refs/tally/ledger:refs/tally/ledger")
	for i := range cells - 1 {
		id := fmt.Sprintf("w/c%03d", i)
		c.ok(x, "A", nil, "--local", "claim", id)
		c.ok(x, "A", nil, "--local", "done", id, "--epoch", "1")
	}
	c.ok(x, "A", nil, "--local", "claim", fmt.Sprintf("w/c%03d", cells-1))
	if exit, stderr := c.push(x, "origin", "refs/tally/ledger", "refs/notes/tally"); exit != 0 {
		t.Fatalf("honest push of the ledger and its notes refused:\n%s", stderr)
	}
	tip := c.serverTip()

	head := testrepo.Git(t, x, "rev-parse", "HEAD")
	key := lease.ReceiptKey(head)
	chunk := func(k int) string { return fmt.Sprintf("%s.chunks/%x", key, k) }
	count := key + ".chunks/count"
	body := lease.DoneBody{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: "w", Cell: fmt.Sprintf("c%03d", cells-1)}, Epoch: 1},
		Commit: head, Tree: testrepo.Git(t, x, "rev-parse", "HEAD^{tree}"), Base: head, Changed: []string{}, Evidence: []lease.Evidence{}}

	// forgeries edit what the rules would write (res) on the state before
	// the done (kv): the done's receipt goes to chunk 2, its third.
	forgeries := []struct {
		what string
		edit func(t *testing.T, kv chain.KV, res *lease.Result)
	}{
		{"chunk missing", func(t *testing.T, kv chain.KV, res *lease.Result) { res.Changes[chunk(1)] = nil }},
		{"chunks reordered", func(t *testing.T, kv chain.KV, res *lease.Result) {
			res.Changes[chunk(1)], res.Changes[chunk(2)] = res.Changes[chunk(2)], blob(t, kv, chunk(1))
		}},
		{"chunk over 16", func(t *testing.T, kv chain.KV, res *lease.Result) {
			var c1, c2 lease.ReceiptIndex
			decode(t, blob(t, kv, chunk(1)), &c1)
			decode(t, res.Changes[chunk(2)], &c2)
			c1.Receipts = append(c1.Receipts, c2.Receipts[len(c2.Receipts)-1])
			res.Changes[chunk(1)] = canon(t, c1)
			delete(res.Changes, chunk(2))
		}},
		{"count lies", func(t *testing.T, kv chain.KV, res *lease.Result) { res.Changes[count] = []byte(`{"chunks":3}`) }},
	}
	for _, f := range forgeries {
		testrepo.Git(t, x, "update-ref", "refs/tally/ledger", tip)
		forged := forgeBy(t, x, "done", "A", netNowTS(0), body, func(kv chain.KV, e *chain.Entry) (*lease.Result, error) {
			res, err := lease.Apply(kv, e)
			if err != nil {
				return nil, err
			}
			if got := string(res.Changes[count]); got != "" {
				t.Fatalf("the done rewrote the count (%s): the forgeries assume it appends to chunk 2", got)
			}
			f.edit(t, kv, res)
			return res, nil
		})
		res := c.refused(3, "STATE-MISMATCH", x, "auditor", nil, "--local", "verify", "--full")
		if res.ErrorField("seq") != float64(forged.Seq) {
			t.Fatalf("%s: verify --full: %s, want seq %d", f.what, res, forged.Seq)
		}
		c.pushRefused(x, f.what, "STATE-MISMATCH")
	}

	testrepo.Git(t, x, "update-ref", "refs/tally/ledger", tip)
	honest := forge(t, x, "done", "A", netNowTS(0), body, true)
	if exit, stderr := c.push(x, "origin", "refs/tally/ledger"); exit != 0 || c.serverTip() != honest.Commit {
		t.Fatalf("the done with the rules' own state refused (exit %d):\n%s", exit, stderr)
	}
	c.ok(x, "auditor", nil, "--remote", "origin", "verify", "--full")
}

// blob reads a state blob that must exist.
func blob(t *testing.T, kv chain.KV, key string) []byte {
	t.Helper()
	b, ok, err := kv.Get(key)
	if err != nil || !ok {
		t.Fatalf("state %s: %v %v", key, ok, err)
	}
	return b
}

func decode(t *testing.T, b []byte, v any) {
	t.Helper()
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}

func canon(t *testing.T, v any) []byte {
	t.Helper()
	b, err := chain.MarshalCanonical(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestOldBinaryAndChunkedIndex runs with TALLY_OLD_BIN naming a tally built
// from before the chunked index (b40d165):
//
//	git archive b40d165 | tar -x -C /tmp/old && (cd /tmp/old && go build -o /tmp/tally-old ./cmd/tally)
//	TALLY_OLD_BIN=/tmp/tally-old go test ./cmd/tally -run OldBinary
//
// A ledger the old tally wrote, with 40 receipts on one commit, verifies in
// full with this one (its states replay byte for byte), and is switched
// here. The old tally refuses both new ledgers when it verifies them: the
// one from this init at its genesis (STATE-MISMATCH: it does not write the
// layout blob), the switched one at the policy entry (RULE-VIOLATION, rule
// USAGE: a member its body decoding does not know).
func TestOldBinaryAndChunkedIndex(t *testing.T) {
	old := os.Getenv("TALLY_OLD_BIN")
	if old == "" {
		t.Skip("TALLY_OLD_BIN names no tally built from before the chunked receipts index")
	}
	t.Parallel()
	oldRun := func(r *repo, want int, args ...string) testrepo.Result {
		t.Helper()
		res := testrepo.Exec(old, r.dir, "A", nil, append([]string{"--json"}, args...)...)
		if res.Err != nil || res.Code != want {
			t.Fatalf("old tally %v: %s, want exit %d", args, res, want)
		}
		return res
	}

	fresh := newRepo(t)
	fresh.ok("A", "init")
	if res := oldRun(fresh, 3, "verify", "--full"); res.ErrorCode() != "STATE-MISMATCH" || res.ErrorField("seq") != 0.0 {
		t.Fatalf("old tally on init's ledger: %s", res)
	}

	r := newRepo(t)
	oldRun(r, 0, "init")
	oldRun(r, 0, "plan", netPlan(t, r.dir, "w", 41, nil))
	for i := range 40 {
		id := fmt.Sprintf("w/c%03d", i)
		oldRun(r, 0, "claim", id)
		oldRun(r, 0, "done", id, "--epoch", "1")
	}
	r.ok("A", "verify", "--full")
	if got := receiptIndexShown(r); got != lease.ReceiptIndexSingle {
		t.Fatalf("the old tally's ledger: receipt_index %v", got)
	}
	seq := r.ok("A", "policy", "set", "--receipt-index", "chunked")["entry"].(map[string]any)["seq"]
	r.ok("A", "claim", "w/c040")
	r.ok("A", "done", "w/c040", "--epoch", "1")
	head := r.git("rev-parse", "HEAD")
	if _, err := netGit(r.dir, nil, "cat-file", "-e", "refs/tally/ledger:"+lease.ReceiptKey(head)+".chunks/1"); err != nil {
		t.Fatal("the done after the switch wrote no chunk")
	}
	r.ok("A", "verify", "--full")
	if res := oldRun(r, 3, "verify", "--full"); res.ErrorCode() != "RULE-VIOLATION" || res.ErrorField("seq") != seq {
		t.Fatalf("old tally on the switched ledger: %s, want RULE-VIOLATION at %v", res, seq)
	}
}
