package ledger_test

// Verification of good ledgers: from genesis and incrementally, in process
// and through `tally verify --json`, with the reported head and Merkle root
// checked against values recomputed here from the entry blobs git returns.

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/ledger"
)

func oid(t *testing.T, s string) gitstore.ObjectID {
	t.Helper()
	id, err := gitstore.ParseObjectID(s)
	if err != nil {
		t.Fatal(err)
	}
	return id
}

// expectReport checks a verification report against the chain read with git:
// size, head seq/hash/commit and the independently computed Merkle root.
func expectReport(t *testing.T, what string, rep *ledger.Report, entries []chainEntry) {
	t.Helper()
	hashes := make([]string, len(entries))
	for i, e := range entries {
		hashes[i] = entryHashHex(e.Raw)
	}
	last := entries[len(entries)-1]
	if rep.Entries != uint64(len(entries)) || rep.Head.Seq != last.Seq || rep.Head.Hash.String() != hashes[len(hashes)-1] ||
		rep.Head.Commit != last.Commit || rep.Root.String() != merkleRootHex(t, hashes) {
		t.Fatalf("%s: report %+v (root %s), want %d entries, head #%d %s at %s, root %s",
			what, rep, rep.Root, len(entries), last.Seq, hashes[len(hashes)-1], last.Commit, merkleRootHex(t, hashes))
	}
}

func TestVerifyFullAndIncrementalAgree(t *testing.T) {
	t.Parallel()
	dir, commits := buildRepo(t, 60)
	entries := readChain(t, dir)
	l := openLedger(t, dir)

	full, err := l.VerifyRange(gitstore.ObjectID{}, oid(t, commits[59]))
	if err != nil {
		t.Fatal(err)
	}
	if full.Checked != 60 {
		t.Fatalf("full verification checked %d of 60", full.Checked)
	}
	expectReport(t, "from genesis", full, entries)

	// the same ledger in three steps, each trusting the previous tip
	cuts := []int{0, 10, 31, 60}
	var base gitstore.ObjectID
	var sum uint64
	var rep *ledger.Report
	for i := 1; i < len(cuts); i++ {
		if rep, err = l.VerifyRange(base, oid(t, commits[cuts[i]-1])); err != nil {
			t.Fatal(err)
		}
		if rep.Checked != uint64(cuts[i]-cuts[i-1]) {
			t.Fatalf("step %d checked %d entries, want %d", i, rep.Checked, cuts[i]-cuts[i-1])
		}
		expectReport(t, fmt.Sprintf("step to %d", cuts[i]), rep, entries[:cuts[i]])
		sum += rep.Checked
		base = oid(t, commits[cuts[i]-1])
	}
	if sum != 60 || rep.Head != full.Head || rep.Root != full.Root || rep.Entries != full.Entries {
		t.Fatalf("incremental %+v differs from full %+v", rep, full)
	}

	// and through the command line, verifying after each batch of appends
	verifyOK(t, dir, false)
	for batch := range 3 {
		for i := range batch + 2 {
			if r := testrepo.Run(t, dir, "agent", nil, "note", fmt.Sprintf("b%d-%d", batch, i)); r.Code != 0 {
				t.Fatal(r.Stderr)
			}
		}
		if j := verifyOK(t, dir, false); j["checked"] != float64(batch+2) {
			t.Fatalf("batch %d: incremental verify checked %v, want %d", batch, j["checked"], batch+2)
		}
	}
	inc := verifyOK(t, dir, false)
	all := verifyOK(t, dir, true)
	delete(inc, "checked")
	delete(all, "checked")
	if !reflect.DeepEqual(inc, all) {
		t.Fatalf("incremental %v, full %v", inc, all)
	}
	entries = readChain(t, dir)
	hashes := make([]string, len(entries))
	for i, e := range entries {
		hashes[i] = entryHashHex(e.Raw)
	}
	if all["root"] != merkleRootHex(t, hashes) || all["entries"] != float64(len(entries)) {
		t.Fatalf("tally verify: %v; recomputed root %s over %d entries", all, merkleRootHex(t, hashes), len(entries))
	}
}

func keys(m map[string]any) string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return strings.Join(ks, ",")
}

func TestVerifyJSONShape(t *testing.T) {
	t.Parallel()
	dir, commits := buildRepo(t, 5)
	entries := readChain(t, dir)
	j := verifyOK(t, dir, true)
	if keys(j) != "checked,entries,head,ok,root" {
		t.Fatalf("success object has members %s: %v", keys(j), j)
	}
	head, _ := j["head"].(map[string]any)
	if keys(head) != "commit,hash,seq" {
		t.Fatalf("head has members %s: %v", keys(head), head)
	}
	hashes := make([]string, len(entries))
	for i, e := range entries {
		hashes[i] = entryHashHex(e.Raw)
	}
	if j["ok"] != true || j["entries"] != 5.0 || j["checked"] != 5.0 || head["seq"] != 4.0 ||
		head["hash"] != hashes[4] || head["commit"] != commits[4] || j["root"] != merkleRootHex(t, hashes) {
		t.Fatalf("verify --json: %v; want 5 entries, head #4 %s at %s, root %s", j, hashes[4], commits[4], merkleRootHex(t, hashes))
	}

	// a failure: exactly one object, ok false, the error's code, seq, message
	// and retryable, exit 3
	raw := strings.Replace(string(entries[2].Raw), `"text":"note-2"`, `"text":"note-X"`, 1)
	c := catCommit(t, dir, commits[2])
	c = withTree(c, setBlob(t, dir, commitTree(c), ledger.EntryKey, []byte(raw)))
	forceRef(t, dir, reparent(t, dir, writeObject(t, dir, "commit", []byte(c)), commits[3:]))
	r := verifyFails(t, dir, "HASH-MISMATCH", 2, "--full")
	if keys(r.JSON) != "error,ok" {
		t.Fatalf("failure object has members %s: %s", keys(r.JSON), r.Stdout)
	}
	if e := r.JSON["error"].(map[string]any); keys(e) != "code,message,retryable,seq" {
		t.Fatalf("error has members %s: %s", keys(e), r.Stdout)
	}
	// without --json: nothing on stdout, the reason on stderr, still exit 3
	r = testrepo.Run(t, dir, "verifier", nil, "verify", "--full")
	if r.Code != 3 || r.Stdout != "" || !strings.Contains(r.Stderr, "HASH-MISMATCH") {
		t.Fatalf("verify without --json: exit %d, stdout %q, stderr %q", r.Code, r.Stdout, r.Stderr)
	}
}

func TestVerifyNotInitialized(t *testing.T) {
	t.Parallel()
	dir := testrepo.New(t)
	for _, args := range [][]string{{"verify"}, {"verify", "--full"}, {"log"}, {"note", "too early"}} {
		r := testrepo.Run(t, dir, "agent", nil, append([]string{"--json"}, args...)...)
		if r.Code != 2 || r.ErrorCode() != "NOT-INITIALIZED" || r.JSON["ok"] != false {
			t.Errorf("tally %v on a repository without a ledger: exit %d %s", args, r.Code, r.Stdout)
		}
	}
	if tip(t, dir) != "" {
		t.Fatal("a ledger ref appeared")
	}
	if _, err := os.Stat(filepath.Join(gitDir(t, dir), "tally", "verified")); err == nil {
		t.Fatal("a verify record was written for a ledger that does not exist")
	}
}

func TestInitTwice(t *testing.T) {
	t.Parallel()
	dir := initRepo(t)
	before := tip(t, dir)
	r := testrepo.Run(t, dir, "agent", nil, "--json", "init")
	if r.Code != 2 || r.ErrorCode() != "ALREADY-INITIALIZED" || r.JSON["ok"] != false {
		t.Fatalf("second tally init: exit %d %s", r.Code, r.Stdout)
	}
	if tip(t, dir) != before {
		t.Fatal("second init moved the ledger")
	}
	if j := verifyOK(t, dir, true); j["entries"] != 1.0 {
		t.Fatalf("after a refused init: %v", j)
	}
}

// A linear chain of 1,000 entries (crossing level-1 and level-2 tile
// boundaries) built in this process, partly one entry per append and partly
// in batches, verifies in process and with the CLI, and its root is the one
// recomputed from the entries.
func TestVerifyThousandEntries(t *testing.T) {
	t.Parallel()
	const n = 1000
	dir := testrepo.New(t)
	t.Cleanup(func() { waitMaintenance(t, dir) })
	l := openLedger(t, dir)
	if _, err := l.Append("builder", genesisDraft("test/thousand")); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; {
		if i < 50 || i%200 == 0 {
			if _, err := l.Append(fmt.Sprintf("a%d", i%7), noteDraft(fmt.Sprintf("n%d", i))); err != nil {
				t.Fatal(err)
			}
			i++
			continue
		}
		var batch []ledger.BuildFunc
		for ; i < n && len(batch) < 97 && !(i%200 == 0); i++ {
			batch = append(batch, noteDraft(fmt.Sprintf("n%d", i)))
		}
		if _, err := l.AppendBatch(fmt.Sprintf("a%d", i%7), batch); err != nil {
			t.Fatal(err)
		}
	}
	entries := readChain(t, dir)
	if len(entries) != n {
		t.Fatalf("git lists %d commits, want %d", len(entries), n)
	}
	checkChainLinks(t, entries)
	for i, e := range entries[1:] {
		if e.Text != fmt.Sprintf("n%d", i+1) {
			t.Fatalf("entry %d is %q", i+1, e.Text)
		}
	}
	rep, err := l.Verify(true)
	if err != nil {
		t.Fatal(err)
	}
	expectReport(t, "in process", rep, entries)
	j := verifyOK(t, dir, true)
	if j["entries"] != float64(n) || j["checked"] != float64(n) || j["root"] != rep.Root.String() {
		t.Fatalf("tally verify --full: %v, in process %+v", j, rep)
	}
	fsck(t, dir)
}

// A verification that fails early returns while the entries after the
// failure are still being read ahead from the mapped packs; closing the
// ledger then (as every command does right after) must not pull the mappings
// from under that reader. The loop runs in a child process, so that a crash
// (SIGSEGV on an unmapped pack) fails this test instead of the test binary.
func TestVerifyFailureThenClose(t *testing.T) {
	if dir := os.Getenv("TALLY_TEST_VERIFY_CLOSE_DIR"); dir != "" {
		verifyCloseLoop(t, dir)
		return
	}
	t.Parallel()
	dir := testrepo.New(t)
	l := openLedger(t, dir)
	if _, err := l.Append("builder", genesisDraft("test/close")); err != nil {
		t.Fatal(err)
	}
	for b := range 2 {
		var batch []ledger.BuildFunc
		for i := range 200 {
			// long, poorly compressible texts: much of the reader's time is
			// spent inflating from the mapped pack
			batch = append(batch, noteDraft(fmt.Sprintf("b%d-%d-%s", b, i, strings.Repeat(fmt.Sprintf("%x", i*7919+b), 300))))
		}
		if _, err := l.AppendBatch("builder", batch); err != nil {
			t.Fatal(err)
		}
	}
	commits := revList(t, dir, ledgerRef)
	entries := readChain(t, dir)
	raw := strings.Replace(string(entries[1].Raw), `"text":"b0-0-`, `"text":"bX-0-`, 1)
	replaceEntry(t, dir, commits, 1, []byte(raw), false)

	cmd := exec.Command(os.Args[0], "-test.run=^TestVerifyFailureThenClose$", "-test.count=1", "-test.v")
	cmd.Env = append(os.Environ(), "TALLY_TEST_VERIFY_CLOSE_DIR="+dir)
	out, err := cmd.CombinedOutput()
	if err != nil {
		if len(out) > 3000 {
			out = out[:3000]
		}
		t.Fatalf("verify-then-close loop: %v\n%s", err, out)
	}
}

func verifyCloseLoop(t *testing.T, dir string) {
	id := oid(t, tip(t, dir))
	deadline := time.Now().Add(5 * time.Second)
	n := 0
	for ; n < 400 && time.Now().Before(deadline); n++ {
		l, err := ledger.Open(dir, ledger.Options{})
		if err != nil {
			t.Fatal(err)
		}
		_, err = l.VerifyRange(gitstore.ObjectID{}, id)
		if errCode(err) != "HASH-MISMATCH" {
			t.Fatalf("run %d: %v", n, err)
		}
		l.Close()
	}
	t.Logf("%d failing verifications closed cleanly", n)
}
