package receipt_test

// These tests drive the real tally binary in real git repositories and check
// the results with git itself (and, for export, with the in-toto and
// transparency-dev libraries), so they do not merely compare tally with itself.

import (
	"bytes"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	attv1 "github.com/in-toto/attestation/go/v1"
	"github.com/transparency-dev/merkle/proof"
	"github.com/zeebo/blake3"
	"google.golang.org/protobuf/encoding/protojson"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
	"github.com/tally-dev/tally/receipt"
)

const ledgerRef = "refs/tally/ledger"

// t0 is the clock of tests that need one (TALLY_NOW).
var t0 = time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC)

func at(d time.Duration) []string { return []string{"TALLY_NOW=" + t0.Add(d).Format(time.RFC3339)} }

// run runs the binary with --json and fails the test unless it exits with
// want (and, for a failure, the error code code).
func run(t *testing.T, dir, actor string, env []string, want int, code string, args ...string) testrepo.Result {
	t.Helper()
	r := testrepo.Run(t, dir, actor, env, append([]string{"--json"}, args...)...)
	if r.Code != want || r.ErrorCode() != code {
		t.Fatalf("tally %v: exit %d %q, want %d %q\nstdout: %s\nstderr: %s", args, r.Code, r.ErrorCode(), want, code, r.Stdout, r.Stderr)
	}
	return r
}

// gitRaw runs git in dir with stdin and returns its stdout untouched.
func gitRaw(t *testing.T, dir string, stdin []byte, args ...string) []byte {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testrepo.Env(), bytes.NewReader(stdin)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v: %s", args, err, stderr.String())
	}
	return out
}

// setup makes a repository with a ledger and wave w1: cell a may change only
// src/a/**, cell b anything.
func setup(t *testing.T, env []string) string {
	dir := testrepo.New(t)
	run(t, dir, "admin", env, 0, "", "init", "--origin", "test/"+filepath.Base(dir))
	plan := filepath.Join(t.TempDir(), "plan.yaml")
	os.WriteFile(plan, []byte("wave: w1\ncells:\n  - {id: a, paths: [\"src/a/**\"]}\n  - {id: b}\n"), 0o644)
	run(t, dir, "admin", env, 0, "", "plan", plan)
	return dir
}

// commit writes files (path, content pairs) and commits them; it returns the commit.
func commit(t *testing.T, dir, msg string, files ...string) string {
	for i := 0; i < len(files); i += 2 {
		p := filepath.Join(dir, files[i])
		os.MkdirAll(filepath.Dir(p), 0o755)
		if err := os.WriteFile(p, []byte(files[i+1]), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	testrepo.Git(t, dir, "add", "-A")
	testrepo.Git(t, dir, "commit", "-q", "-m", msg)
	return testrepo.Git(t, dir, "rev-parse", "HEAD")
}

// receipted claims w1/a as agent-1, commits work in its scope, records a run
// and files the receipt. It returns the receipted commit.
func receipted(t *testing.T, dir string) string {
	run(t, dir, "agent-1", nil, 0, "", "claim", "w1/a")
	c := commit(t, dir, "work on a", "src/a/x.go", "package a\n", "src/a/y.go", "package a // y\n")
	run(t, dir, "agent-1", nil, 0, "", "run", "w1/a", "--", "true")
	run(t, dir, "agent-1", nil, 0, "", "done", "w1/a", "--epoch", "1")
	return c
}

func ref(t *testing.T, dir, name string) string {
	out, _ := exec.Command("git", "-C", dir, "rev-parse", "-q", "--verify", name).Output()
	return strings.TrimSpace(string(out))
}

func jsonGet(v any, path ...any) any {
	for _, p := range path {
		switch k := p.(type) {
		case string:
			m, _ := v.(map[string]any)
			v = m[k]
		case int:
			a, _ := v.([]any)
			if k >= len(a) {
				return nil
			}
			v = a[k]
		}
	}
	return v
}

// A lease taken over after it expired fences off its old holder: the old
// holder's done is refused with EPOCH-MISMATCH and nothing is written,
// whether another agent or the same actor (a restarted agent) took it over.
func TestDoneAfterTakeoverRefused(t *testing.T) {
	for _, tc := range []struct{ taker, code string }{{"agent-2", "EPOCH-MISMATCH"}, {"agent-1", "EPOCH-MISMATCH"}} {
		t.Run(tc.taker, func(t *testing.T) {
			dir := setup(t, at(0))
			run(t, dir, "agent-1", at(0), 0, "", "claim", "w1/a", "--ttl", "30")
			r := run(t, dir, tc.taker, at(31*time.Second), 0, "", "claim", "w1/a")
			if jsonGet(r.JSON, "takeover") != "expired" || jsonGet(r.JSON, "lease", "epoch") != 2.0 {
				t.Fatalf("takeover: %s", r.Stdout)
			}
			c := commit(t, dir, "late work", "src/a/x.go", "package a\n")
			before := ref(t, dir, ledgerRef)
			r = run(t, dir, "agent-1", at(32*time.Second), 2, tc.code, "done", "w1/a", "--epoch", "1", "--commit", c)
			if jsonGet(r.JSON, "error", "epoch") != 2.0 || jsonGet(r.JSON, "error", "holder") != tc.taker {
				t.Errorf("refusal does not name the live lease: %s", r.Stdout)
			}
			if after := ref(t, dir, ledgerRef); after != before {
				t.Errorf("ledger moved from %s to %s", before, after)
			}
			if n := ref(t, dir, "refs/notes/tally"); n != "" {
				t.Errorf("a note was written: %s", n)
			}
			// The live holder can finish, and its receipt verifies.
			run(t, dir, tc.taker, at(33*time.Second), 0, "", "done", "w1/a", "--epoch", "2", "--commit", c)
			r = run(t, dir, "x", at(34*time.Second), 0, "", "receipt", "verify", c)
			if jsonGet(r.JSON, "receipts", 0, "epoch") != 2.0 || jsonGet(r.JSON, "receipts", 0, "actor") != tc.taker {
				t.Errorf("receipt: %s", r.Stdout)
			}
		})
	}
}

// A receipt changing paths outside its cell's scope is refused, naming them,
// and nothing is written.
func TestDoneOutOfScopeRefused(t *testing.T) {
	dir := setup(t, nil)
	run(t, dir, "agent-1", nil, 0, "", "claim", "w1/a")
	commit(t, dir, "too much", "src/a/x.go", "package a\n", "README", "hi\n", "docs/y.md", "y\n")
	before := ref(t, dir, ledgerRef)
	r := run(t, dir, "agent-1", nil, 2, "RECEIPT-SCOPE", "done", "w1/a", "--epoch", "1")
	if got := fmt.Sprint(jsonGet(r.JSON, "error", "paths")); got != "[README docs/y.md]" {
		t.Errorf("paths outside the scope: %s, want [README docs/y.md]", got)
	}
	if after := ref(t, dir, ledgerRef); after != before {
		t.Errorf("ledger moved from %s to %s", before, after)
	}
	if n := ref(t, dir, "refs/notes/tally"); n != "" {
		t.Errorf("a note was written: %s", n)
	}
	run(t, dir, "x", nil, 2, "RECEIPT-MISSING", "receipt", "verify", "HEAD")
}

// tally run stores evidence under a temporary name and renames it, so done
// only ever sees whole runs; a run file that is damaged anyway is refused as
// CORRUPT (exit 3), naming the file, and nothing is written.
func TestCorruptPendingEvidence(t *testing.T) {
	dir := setup(t, nil)
	run(t, dir, "agent-1", nil, 0, "", "claim", "w1/a")
	run(t, dir, "agent-1", nil, 0, "", "run", "w1/a", "--", "true")
	evDir := filepath.Join(dir, ".git", "tally", "evidence", "w1", "a", "1")
	runs, _ := filepath.Glob(filepath.Join(evDir, "*"))
	if len(runs) != 1 || !strings.HasPrefix(filepath.Base(runs[0]), "run-") || !strings.HasSuffix(runs[0], ".json") {
		t.Fatalf("evidence directory holds %v, want one run-*.json", runs)
	}
	if err := os.WriteFile(filepath.Join(evDir, "run-torn.json"), []byte(`{"argv":["tr`), 0o644); err != nil {
		t.Fatal(err)
	}
	commit(t, dir, "work", "src/a/x.go", "package a\n")
	before := ref(t, dir, ledgerRef)
	r := run(t, dir, "agent-1", nil, 3, "CORRUPT", "done", "w1/a", "--epoch", "1")
	if msg, _ := jsonGet(r.JSON, "error", "message").(string); !strings.Contains(msg, "run-torn.json") {
		t.Errorf("CORRUPT does not name the file: %q", msg)
	}
	if after := ref(t, dir, ledgerRef); after != before {
		t.Errorf("ledger moved from %s to %s", before, after)
	}
}

// Receipts and notes live in ordinary git objects reachable from refs, so
// they survive git gc and a full repack; receipt show reports the done
// entry and receipt verify passes afterwards.
func TestReceiptSurvivesGC(t *testing.T) {
	dir := setup(t, nil)
	c := receipted(t, dir)
	v := run(t, dir, "x", nil, 0, "", "receipt", "verify", c)
	testrepo.Git(t, dir, "gc", "-q", "--prune=now")
	testrepo.Git(t, dir, "repack", "-q", "-adf")
	if loose := testrepo.Git(t, dir, "count-objects"); !strings.HasPrefix(loose, "0 objects") {
		t.Errorf("objects left loose after repack: %s", loose)
	}
	seq := int(jsonGet(v.JSON, "receipts", 0, "seq").(float64))
	hash := jsonGet(v.JSON, "receipts", 0, "hash").(string)
	line := fmt.Sprintf("tally-receipt origin=test/%s seq=%d entry=%s cell=w1/a epoch=1", filepath.Base(dir), seq, hash)
	if log := testrepo.Git(t, dir, "log", "--notes=tally", "-1", c); !strings.Contains(log, line) {
		t.Errorf("git log --notes=tally lacks %q:\n%s", line, log)
	}
	r := run(t, dir, "x", nil, 0, "", "receipt", "verify", c)
	if jsonGet(r.JSON, "match") != "commit" || len(jsonGet(r.JSON, "warnings").([]any)) != 0 {
		t.Errorf("verify after gc: %s", r.Stdout)
	}
	for k, ok := range jsonGet(r.JSON, "receipts", 0, "checks").(map[string]any) {
		if ok != true {
			t.Errorf("check %s: %v", k, ok)
		}
	}
	run(t, dir, "x", nil, 0, "", "verify", "--full")

	r = run(t, dir, "x", nil, 0, "", "receipt", "show", c)
	s := jsonGet(r.JSON, "receipts", 0).(map[string]any)
	base := testrepo.Git(t, dir, "rev-parse", c+"^")
	tree := testrepo.Git(t, dir, "rev-parse", c+"^{tree}")
	want := map[string]any{"wave": "w1", "cell": "a", "epoch": 1.0, "actor": "agent-1", "commit": c, "tree": tree,
		"base": base, "seq": float64(seq), "hash": hash}
	for k, w := range want {
		if s[k] != w {
			t.Errorf("receipt show %s = %v, want %v", k, s[k], w)
		}
	}
	if fmt.Sprint(s["changed"]) != "[src/a/x.go src/a/y.go]" || jsonGet(s, "evidence", 0, "argv", 0) != "true" || s["ts"] == nil {
		t.Errorf("receipt show: %s", r.Stdout)
	}
}

// rechain rewrites ledger entry seq with edit and re-links every later entry
// (prev, blob, tree, Tally-Entry trailer, parent) with git plumbing, so the
// chain of hashes is intact and only replaying the state can tell.
func rechain(t *testing.T, dir string, seq int, edit func([]byte) []byte) {
	commits := strings.Fields(testrepo.Git(t, dir, "rev-list", "--first-parent", "--reverse", ledgerRef))
	parent := commits[seq-1]
	var oldPrev, newPrev string
	for i := seq; i < len(commits); i++ {
		raw := gitRaw(t, dir, nil, "cat-file", "blob", commits[i]+":entry")
		oldHash := chain.EntryHash(raw).String()
		if i == seq {
			raw = edit(raw)
		} else {
			raw = bytes.Replace(raw, []byte(`"prev":"`+oldPrev+`"`), []byte(`"prev":"`+newPrev+`"`), 1)
		}
		oldPrev, newPrev = oldHash, chain.EntryHash(raw).String()
		blob := strings.TrimSpace(string(gitRaw(t, dir, raw, "hash-object", "-w", "--stdin")))
		var tree []string
		for _, l := range strings.Split(strings.TrimSpace(string(gitRaw(t, dir, nil, "ls-tree", commits[i]))), "\n") {
			if strings.HasSuffix(l, "\tentry") {
				l = "100644 blob " + blob + "\tentry"
			}
			tree = append(tree, l)
		}
		treeID := strings.TrimSpace(string(gitRaw(t, dir, []byte(strings.Join(tree, "\n")+"\n"), "mktree")))
		c := string(gitRaw(t, dir, nil, "cat-file", "commit", commits[i]))
		hdr, msg, _ := strings.Cut(c, "\n\n")
		hdr = strings.Replace(hdr, "tree "+commitTree(hdr), "tree "+treeID, 1)
		hdr = strings.Replace(hdr, "\nparent "+commits[i-1], "\nparent "+parent, 1)
		msg = strings.Replace(msg, "Tally-Entry: "+oldHash, "Tally-Entry: "+newPrev, 1)
		parent = strings.TrimSpace(string(gitRaw(t, dir, []byte(hdr+"\n\n"+msg), "hash-object", "-t", "commit", "-w", "--stdin")))
	}
	testrepo.Git(t, dir, "update-ref", ledgerRef, parent)
}

func commitTree(hdr string) string { return strings.Fields(hdr)[1] }

// A done entry rewritten after the fact is caught: the clone's record of the
// last verified tip exposes the rewritten history as a fork, and a full
// replay finds the first entry whose state does not follow.
func TestTamperedReceiptEntry(t *testing.T) {
	dir := setup(t, nil)
	c := receipted(t, dir)
	run(t, dir, "admin", nil, 0, "", "note", "after the receipt")
	r := run(t, dir, "x", nil, 0, "", "receipt", "verify", c)
	seq := int(jsonGet(r.JSON, "receipts", 0, "seq").(float64))
	other := testrepo.Git(t, dir, "rev-parse", c+"^")
	rechain(t, dir, seq, func(raw []byte) []byte {
		out := bytes.Replace(raw, []byte(`"commit":"`+c+`"`), []byte(`"commit":"`+other+`"`), 1)
		if bytes.Equal(out, raw) {
			t.Fatalf("entry %d does not name %s: %s", seq, c, raw)
		}
		return out
	})
	run(t, dir, "x", nil, 3, "FORK-DETECTED", "verify")
	run(t, dir, "x", nil, 3, "FORK-DETECTED", "receipt", "verify", c)
	r = run(t, dir, "x", nil, 3, "STATE-MISMATCH", "verify", "--full")
	if jsonGet(r.JSON, "error", "seq") != float64(seq) {
		t.Errorf("full verify names %v, want seq %d", jsonGet(r.JSON, "error", "seq"), seq)
	}
}

// A tally note naming another entry or seq for the commit is caught; a
// missing note is only a warning; a note copied to a rebased commit is fine.
func TestTamperedNote(t *testing.T) {
	dir := setup(t, nil)
	c := receipted(t, dir)
	r := run(t, dir, "x", nil, 0, "", "receipt", "verify", c)
	seq := int(jsonGet(r.JSON, "receipts", 0, "seq").(float64))
	hash := jsonGet(r.JSON, "receipts", 0, "hash").(string)
	origin := jsonGet(r.JSON, "ledger", "origin").(string)
	note := func(seq int, hash string) string {
		return fmt.Sprintf("tally-receipt origin=%s seq=%d entry=%s cell=w1/a epoch=1", origin, seq, hash)
	}
	wrong := strings.Repeat("0", 64)
	for _, bad := range []string{note(seq, wrong), note(seq-1, hash), note(seq, hash) + "\n" + note(seq+1, wrong)} {
		testrepo.Git(t, dir, "notes", "--ref=tally", "add", "-f", "-m", bad, c)
		r = run(t, dir, "x", nil, 3, "RECEIPT-INVALID", "receipt", "verify", c)
		if jsonGet(r.JSON, "error", "check") != "note" {
			t.Errorf("note %q: %s", bad, r.Stdout)
		}
		run(t, dir, "x", nil, 3, "RECEIPT-INVALID", "receipt", "export", c)
	}
	testrepo.Git(t, dir, "notes", "--ref=tally", "remove", c)
	r = run(t, dir, "x", nil, 0, "", "receipt", "verify", c)
	if jsonGet(r.JSON, "receipts", 0, "checks", "note") != false || len(jsonGet(r.JSON, "warnings").([]any)) != 1 {
		t.Errorf("missing note: %s", r.Stdout)
	}
	testrepo.Git(t, dir, "notes", "--ref=tally", "add", "-m", "reviewed by a human\n\n"+note(seq, hash), c)
	r = run(t, dir, "x", nil, 0, "", "receipt", "verify", c)
	if jsonGet(r.JSON, "receipts", 0, "checks", "note") != true || len(jsonGet(r.JSON, "warnings").([]any)) != 0 {
		t.Errorf("restored note: %s", r.Stdout)
	}
	// Amending only the message keeps the tree; a note copied along is legitimate.
	testrepo.Git(t, dir, "commit", "-q", "--amend", "-m", "reworded")
	testrepo.Git(t, dir, "notes", "--ref=tally", "copy", c, "HEAD")
	r = run(t, dir, "x", nil, 0, "", "receipt", "verify", "HEAD")
	if jsonGet(r.JSON, "match") != "tree" {
		t.Errorf("amended commit: %s", r.Stdout)
	}
	// ... and stays so once the amended commit has a receipt of its own.
	run(t, dir, "agent-2", nil, 0, "", "claim", "w1/b")
	run(t, dir, "agent-2", nil, 0, "", "done", "w1/b", "--epoch", "1")
	r = run(t, dir, "x", nil, 0, "", "receipt", "verify", "HEAD")
	if jsonGet(r.JSON, "match") != "commit" || jsonGet(r.JSON, "receipts", 0, "cell") != "b" ||
		jsonGet(r.JSON, "receipts", 0, "checks", "note") != true || len(jsonGet(r.JSON, "warnings").([]any)) != 0 {
		t.Errorf("amended commit with its own receipt: %s", r.Stdout)
	}
}

// Work rebased onto another base or squashed keeps its tree: its new commit
// has no receipt but verifies by tree, naming the receipted commit; a commit
// with another tree has no receipt at all.
func TestReceiptMatchesRebasedTree(t *testing.T) {
	dir := setup(t, nil)
	root := testrepo.Git(t, dir, "rev-parse", "HEAD")
	run(t, dir, "agent-1", nil, 0, "", "claim", "w1/a")
	commit(t, dir, "part 1", "src/a/x.go", "package a\n")
	c := commit(t, dir, "part 2", "src/a/y.go", "package a // y\n")
	run(t, dir, "agent-1", nil, 0, "", "done", "w1/a", "--epoch", "1")
	tree := testrepo.Git(t, dir, "rev-parse", c+"^{tree}")

	testrepo.Git(t, dir, "reset", "-q", "--soft", root)
	testrepo.Git(t, dir, "commit", "-q", "-m", "squashed")
	squashed := testrepo.Git(t, dir, "rev-parse", "HEAD")
	testrepo.Git(t, dir, "checkout", "-q", "-b", "moved", root)
	testrepo.Git(t, dir, "commit", "-q", "--allow-empty", "-m", "another base")
	testrepo.Git(t, dir, "cherry-pick", "--allow-empty", squashed)
	picked := testrepo.Git(t, dir, "rev-parse", "HEAD")

	for _, rev := range []string{squashed, picked} {
		if got := testrepo.Git(t, dir, "rev-parse", rev+"^{tree}"); got != tree || rev == c {
			t.Fatalf("%s has tree %s, want the receipted tree %s", rev, got, tree)
		}
		r := run(t, dir, "x", nil, 0, "", "receipt", "verify", rev)
		if jsonGet(r.JSON, "match") != "tree" || jsonGet(r.JSON, "commit") != rev || jsonGet(r.JSON, "tree") != tree ||
			jsonGet(r.JSON, "receipts", 0, "commit") != c || jsonGet(r.JSON, "receipts", 0, "checks", "note") != true {
			t.Errorf("verify %s: %s", rev, r.Stdout)
		}
		text := testrepo.Run(t, dir, "x", nil, "receipt", "verify", rev)
		if want := fmt.Sprintf("no receipt for %s; its tree equals the receipted tree of %s (rebased or squashed)", rev, c); text.Code != 0 || !strings.Contains(text.Stdout, want) {
			t.Errorf("verify %s text: exit %d, want %q in\n%s", rev, text.Code, want, text.Stdout)
		}
		r = run(t, dir, "x", nil, 0, "", "receipt", "show", rev)
		if jsonGet(r.JSON, "match") != "tree" || jsonGet(r.JSON, "receipts", 0, "commit") != c {
			t.Errorf("show %s: %s", rev, r.Stdout)
		}
	}
	other := commit(t, dir, "more", "src/a/z.go", "package a // z\n")
	run(t, dir, "x", nil, 2, "RECEIPT-MISSING", "receipt", "verify", other)
	run(t, dir, "x", nil, 2, "RECEIPT-MISSING", "receipt", "show", other)
	run(t, dir, "x", nil, 2, "COMMIT-MISSING", "receipt", "verify", "no-such-rev")
}

// rfc6962Blake3 is transparency-dev's RFC 6962 hasher with BLAKE3, to check
// exported inclusion proofs with a verifier that is not tally's.
type rfc6962Blake3 struct{}

func (rfc6962Blake3) EmptyRoot() []byte { return blake3.New().Sum(nil) }
func (rfc6962Blake3) Size() int         { return 32 }
func (rfc6962Blake3) HashLeaf(b []byte) []byte {
	s := blake3.Sum256(append([]byte{0}, b...))
	return s[:]
}
func (rfc6962Blake3) HashChildren(l, r []byte) []byte {
	s := blake3.Sum256(append(append([]byte{1}, l...), r...))
	return s[:]
}

// The in-toto export is a valid Statement v1 whose subjects carry the
// commit's and the tree's digests as git reports them, and whose inclusion
// proof checks against the ledger's Merkle root with an independent verifier.
func TestReceiptExportInToto(t *testing.T) {
	dir := setup(t, nil)
	c := receipted(t, dir)
	run(t, dir, "admin", nil, 0, "", "note", "later")
	r := testrepo.Run(t, dir, "x", nil, "receipt", "export", c, "--format", "in-toto")
	if r.Code != 0 {
		t.Fatalf("export: exit %d %s", r.Code, r.Stderr)
	}
	var st attv1.Statement
	if err := protojson.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("not an in-toto statement: %v\n%s", err, r.Stdout)
	}
	if err := st.Validate(); err != nil {
		t.Fatalf("invalid statement: %v", err)
	}
	tree := testrepo.Git(t, dir, "rev-parse", c+"^{tree}")
	subj := st.GetSubject()
	if len(subj) != 2 || subj[0].GetName() != "git+commit:"+c || subj[0].GetDigest()["gitCommit"] != testrepo.Git(t, dir, "rev-parse", c) ||
		subj[1].GetName() != "git+tree:"+tree || subj[1].GetDigest()["gitTree"] != tree {
		t.Errorf("subjects: %v", subj)
	}
	if st.GetType() != "https://in-toto.io/Statement/v1" || st.GetPredicateType() != "https://tally.dev/receipt/v1" {
		t.Errorf("types: %s %s", st.GetType(), st.GetPredicateType())
	}
	p := st.GetPredicate().AsMap()
	if p["cell"] != "w1/a" || p["actor"] != "agent-1" || p["epoch"] != 1.0 || p["base"] != testrepo.Git(t, dir, "rev-parse", c+"^") ||
		fmt.Sprint(p["changed"]) != "[src/a/x.go src/a/y.go]" || jsonGet(p, "evidence", 0, "exit_code") != 0.0 {
		t.Errorf("predicate: %v", p)
	}
	var meta struct {
		Origin string `json:"origin"`
		Size   int    `json:"size"`
		Root   string `json:"root"`
	}
	json.Unmarshal(gitRaw(t, dir, nil, "show", ledgerRef+":meta"), &meta)
	lg := p["ledger"].(map[string]any)
	if lg["origin"] != meta.Origin || lg["ref"] != ledgerRef || lg["size"] != float64(meta.Size) || lg["root"] != meta.Root {
		t.Errorf("predicate ledger %v, meta %+v", lg, meta)
	}
	seq := uint64(lg["seq"].(float64))
	hexes := func(v any) (out [][]byte) {
		for _, s := range v.([]any) {
			b, _ := hex.DecodeString(s.(string))
			out = append(out, b)
		}
		return out
	}
	entry, root := hexes([]any{lg["entry_hash"]})[0], hexes([]any{lg["root"]})[0]
	if got := chain.EntryHash(gitRaw(t, dir, nil, "cat-file", "blob", fmt.Sprintf("%s~%d:entry", ledgerRef, meta.Size-1-int(seq)))); hex.EncodeToString(got[:]) != lg["entry_hash"] {
		t.Errorf("entry_hash %v is not the hash of entry %d (%x)", lg["entry_hash"], seq, got)
	}
	h := rfc6962Blake3{}
	if err := proof.VerifyInclusion(h, seq, uint64(meta.Size), h.HashLeaf(entry), hexes(lg["inclusion_proof"]), root); err != nil {
		t.Errorf("inclusion proof: %v", err)
	}

	w := run(t, dir, "x", nil, 0, "", "receipt", "export", c, "--format", "in-toto")
	if jsonGet(w.JSON, "statement", "subject", 0, "digest", "gitCommit") != c || jsonGet(w.JSON, "statement", "_type") != st.GetType() {
		t.Errorf("--json export: %s", w.Stdout)
	}
	run(t, dir, "x", nil, 2, "USAGE", "receipt", "export", c, "--format", "slsa")
	run(t, dir, "x", nil, 2, "RECEIPT-MISSING", "receipt", "export", c+"^")
}

// forge appends a done entry with a hand-made body, as a writer that lies
// about its work could: the rules accept it (they see only the entry), so the
// ledger verifies, and only receipt verify, which recomputes the receipt from
// the repository, catches it.
func forge(t *testing.T, dir, actor string, body lease.DoneBody) {
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	defer l.WaitMaintenance()
	if _, err := l.Append(actor, func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: "done", Body: body}, nil
	}); err != nil {
		t.Fatal(err)
	}
}

func TestForgedReceiptBody(t *testing.T) {
	dir := setup(t, nil)
	root := testrepo.Git(t, dir, "rev-parse", "HEAD")
	run(t, dir, "agent-1", nil, 0, "", "claim", "w1/a")
	ca := commit(t, dir, "a, and more", "src/a/x.go", "package a\n", "README", "out of scope\n")
	forge(t, dir, "agent-1", lease.DoneBody{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: "w1", Cell: "a"}, Epoch: 1},
		Commit: ca, Tree: testrepo.Git(t, dir, "rev-parse", ca+"^{tree}"), Base: root,
		Changed: []string{"src/a/x.go"}, Evidence: []lease.Evidence{}})
	run(t, dir, "agent-2", nil, 0, "", "claim", "w1/b")
	cb := commit(t, dir, "b", "b.txt", "b\n")
	forge(t, dir, "agent-2", lease.DoneBody{EpochBody: lease.EpochBody{CellRef: lease.CellRef{Wave: "w1", Cell: "b"}, Epoch: 1},
		Commit: cb, Tree: testrepo.Git(t, dir, "rev-parse", root+"^{tree}"), Base: ca,
		Changed: []string{"b.txt"}, Evidence: []lease.Evidence{}})

	run(t, dir, "x", nil, 0, "", "verify", "--full")
	// root has the tree the forged receipt of cb claims: matched by tree, the
	// receipt is still checked against its own commit.
	for rev, check := range map[string]string{ca: "changed", cb: "commit", root: "commit"} {
		r := run(t, dir, "x", nil, 3, "RECEIPT-INVALID", "receipt", "verify", rev)
		if jsonGet(r.JSON, "error", "check") != check {
			t.Errorf("receipt verify %s: %s, want check %s", rev, r.Stdout, check)
		}
	}
}

// Check does not take the state it reads on trust: given a ledger head whose
// state tree (not its entries) was altered after verification, it finds the
// index, the cell or the Merkle tiles disagreeing with the done entry.
func TestCheckDoesNotTrustState(t *testing.T) {
	dir := setup(t, nil)
	c := receipted(t, dir)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	rep, err := l.Verify(false)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := receipt.Check(l, rep, c); err != nil {
		t.Fatal(err)
	}
	s, _ := l.SnapshotAt(rep.Commit)
	ix, _ := lease.ReadReceipts(s, lease.ReceiptKey(c))
	seq := ix.Receipts[0].Seq
	sum := blake3.Sum256([]byte("a"))
	cellKey := fmt.Sprintf("waves/w1/cells/%x/a", sum[:1]) // docs/FORMAT.md §6
	canonical := func(v any) []byte { b, _ := chain.MarshalCanonical(v); return b }

	for check, edit := range map[string]func(tr *gitstore.Tree, pw *gitstore.PackWriter){
		"index": func(tr *gitstore.Tree, _ *gitstore.PackWriter) {
			ix.Receipts[0].Epoch = 2
			tr.Set(lease.ReceiptKey(c), canonical(ix))
		},
		"kind": func(tr *gitstore.Tree, _ *gitstore.PackWriter) { // point the index at the plan entry
			tr.Set(lease.ReceiptKey(c), canonical(lease.ReceiptIndex{Receipts: []lease.ReceiptRef{{Seq: 1, Commit: c}}}))
		},
		"cell_state": func(tr *gitstore.Tree, _ *gitstore.PackWriter) {
			cell, _ := lease.ReadCell(s, "w1", "a")
			cell.Receipt = nil
			if _, ok, _ := tr.Get(cellKey); !ok {
				t.Fatalf("no cell at %s", cellKey)
			}
			tr.Set(cellKey, canonical(cell))
		},
		"inclusion": func(tr *gitstore.Tree, pw *gitstore.PackWriter) { // swap the entry and its tile record
			_, _, raw, _ := s.Entry(seq)
			raw = bytes.Replace(raw, []byte(`"epoch":1`), []byte(`"epoch":7`), 1)
			h, loc := chain.EntryHash(raw), pw.Add(gitstore.BlobObject, raw)
			path := chain.TilePath(0, seq/16)
			tile, _, _ := tr.Get(path)
			tile = bytes.Clone(tile)
			copy(tile[seq%16*52:], append(h[:], loc[:]...))
			tr.Set(path, tile)
		},
	} {
		t.Run(check, func(t *testing.T) {
			s, _ := l.SnapshotAt(rep.Commit)
			pw := gitstore.NewPackWriter()
			edit(s.Tree, pw)
			tree, err := s.Tree.Hash(pw)
			if err != nil {
				t.Fatal(err)
			}
			who := gitstore.Ident{Name: "x", Email: "x", TZ: "+0000"}
			id := pw.Add(gitstore.CommitObject, (&gitstore.Commit{Tree: tree, Parents: []gitstore.ObjectID{rep.Commit},
				Author: who, Committer: who, Message: "altered state\n"}).Encode())
			db, _ := l.Repo.Objects()
			name, err := pw.WriteTo(l.Repo.ObjectDir)
			if err != nil || db.AddPack(name) != nil {
				t.Fatal(err)
			}
			_, err = receipt.Check(l, &ledger.Report{Entries: rep.Entries, Root: rep.Root, Commit: id}, c)
			if e := errs.From(err); e == nil || e.Code != "RECEIPT-INVALID" || e.Details["check"] != check {
				t.Errorf("Check = %v %v, want RECEIPT-INVALID check %s", err, e.Details, check)
			}
		})
	}
}
