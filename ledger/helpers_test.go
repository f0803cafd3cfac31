package ledger_test

// Helpers shared by the ledger tests. Everything here talks to real git
// repositories through the real git CLI (and the real tally binary where a
// test says so); chain contents are read back with git itself, and hashes and
// Merkle roots are recomputed independently of package chain, so a test does
// not merely compare tally with itself.

import (
	"bufio"
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/zeebo/blake3"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

const ledgerRef = "refs/tally/ledger"

// stress reports whether the long-running mode was asked for (TALLY_STRESS=1).
func stress() bool { return os.Getenv("TALLY_STRESS") == "1" }

func noteDraft(text string) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: text}}, nil
	}
}

func genesisDraft(origin string) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: origin}}, nil
	}
}

// gitTry runs git in dir with the test environment and returns its trimmed
// stdout and an error carrying stderr; it does not fail the test.
func gitTry(dir string, stdin []byte, args ...string) (string, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = testrepo.Env()
	if stdin != nil {
		cmd.Stdin = bytes.NewReader(stdin)
	}
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	if err != nil {
		err = fmt.Errorf("git %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return strings.TrimSpace(stdout.String()), err
}

// gitIn runs git with stdin and fails the test on error.
func gitIn(t testing.TB, dir string, stdin []byte, args ...string) string {
	t.Helper()
	out, err := gitTry(dir, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// gitDir returns the absolute common git directory of the repository at dir.
func gitDir(t testing.TB, dir string) string {
	t.Helper()
	return testrepo.Git(t, dir, "rev-parse", "--path-format=absolute", "--git-common-dir")
}

// tip returns the ledger ref's commit as git sees it ("" if there is none).
func tip(t testing.TB, dir string) string {
	t.Helper()
	out, err := gitTry(dir, nil, "rev-parse", "-q", "--verify", ledgerRef)
	if err != nil {
		return ""
	}
	return out
}

// tallyCmd returns an unstarted `tally -C dir args...` for actor, in the test
// environment (used directly where a test needs to start or kill processes).
func tallyCmd(t testing.TB, dir, actor string, args ...string) *exec.Cmd {
	cmd := exec.Command(testrepo.Tally(t), append([]string{"-C", dir}, args...)...)
	cmd.Env = testrepo.Env("TALLY_ACTOR=" + actor)
	return cmd
}

// initRepo creates a repository with a ledger (its genesis appended in
// this process).
func initRepo(t testing.TB) string {
	t.Helper()
	dir := testrepo.New(t)
	t.Cleanup(func() { waitMaintenance(t, dir) })
	if _, err := openLedger(t, dir).Append("init", genesisDraft("test/"+filepath.Base(dir))); err != nil {
		t.Fatal(err)
	}
	return dir
}

// openLedger opens the ledger at dir in this process; maintenance it starts
// is waited for at cleanup.
func openLedger(t testing.TB, dir string) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.WaitMaintenance(); l.Close() })
	return l
}

// buildRepo creates a repository with a ledger of n entries (genesis and n-1
// notes "note-1" ...), appended in this process. It returns the directory and
// the commits, oldest first, as git lists them.
func buildRepo(t testing.TB, n int) (string, []string) {
	t.Helper()
	dir := testrepo.New(t)
	t.Cleanup(func() { waitMaintenance(t, dir) })
	l := openLedger(t, dir)
	if _, err := l.Append("builder", genesisDraft("test/"+filepath.Base(dir))); err != nil {
		t.Fatal(err)
	}
	for i := 1; i < n; i++ {
		if _, err := l.Append(fmt.Sprintf("actor-%d", i%3), noteDraft(fmt.Sprintf("note-%d", i))); err != nil {
			t.Fatal(err)
		}
	}
	commits := revList(t, dir, ledgerRef)
	if len(commits) != n {
		t.Fatalf("built %d entries, git lists %d commits", n, len(commits))
	}
	return dir, commits
}

// revList lists the first-parent chain ending at rev, oldest first.
func revList(t testing.TB, dir, rev string) []string {
	t.Helper()
	out := gitIn(t, dir, nil, "rev-list", "--first-parent", "--reverse", rev)
	if out == "" {
		return nil
	}
	return strings.Split(out, "\n")
}

// chainEntry is one ledger commit as read with git: the commit, the entry
// blob's bytes and the fields the tests look at.
type chainEntry struct {
	Commit string
	Raw    []byte
	Seq    uint64
	Kind   string
	Prev   string
	TS     string
	Actor  string
	Text   string // body.text of a note
}

// readChain reads the whole ledger with git (rev-list and cat-file), not with
// tally's readers, oldest first.
func readChain(t testing.TB, dir string) []chainEntry {
	t.Helper()
	commits := revList(t, dir, ledgerRef)
	var in bytes.Buffer
	for _, c := range commits {
		fmt.Fprintf(&in, "%s:entry\n", c)
	}
	cmd := exec.Command("git", "cat-file", "--batch")
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testrepo.Env(), &in
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git cat-file --batch: %v", err)
	}
	r := bufio.NewReader(bytes.NewReader(out))
	entries := make([]chainEntry, 0, len(commits))
	for _, c := range commits {
		header, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("cat-file output: %v", err)
		}
		f := strings.Fields(header)
		if len(f) != 3 || f[1] != "blob" {
			t.Fatalf("commit %s: entry is not a blob: %q", c, header)
		}
		size, _ := strconv.Atoi(f[2])
		raw := make([]byte, size+1)
		if _, err := io.ReadFull(r, raw); err != nil {
			t.Fatal(err)
		}
		raw = raw[:size]
		var e struct {
			Seq   uint64 `json:"seq"`
			Kind  string `json:"kind"`
			Prev  string `json:"prev"`
			TS    string `json:"ts"`
			Actor string `json:"actor"`
			Body  struct {
				Text string `json:"text"`
			} `json:"body"`
		}
		if err := json.Unmarshal(raw, &e); err != nil {
			t.Fatalf("commit %s: entry %q: %v", c, raw, err)
		}
		entries = append(entries, chainEntry{Commit: c, Raw: raw, Seq: e.Seq, Kind: e.Kind, Prev: e.Prev,
			TS: e.TS, Actor: e.Actor, Text: e.Body.Text})
	}
	return entries
}

// entryHashHex recomputes an entry hash as docs/FORMAT.md §2 defines it.
func entryHashHex(raw []byte) string {
	h := blake3.New()
	h.Write([]byte("tally/entry/v1\x00"))
	h.Write(raw)
	return fmt.Sprintf("%x", h.Sum(nil))
}

// merkleRootHex computes the RFC 6962 root over entry hashes with BLAKE3, as
// docs/FORMAT.md §3 defines it, recursively (independently of package chain).
func merkleRootHex(t testing.TB, entryHashes []string) string {
	t.Helper()
	leaves := make([][]byte, len(entryHashes))
	for i, s := range entryHashes {
		var b []byte
		if _, err := fmt.Sscanf(s, "%x", &b); err != nil || len(b) != 32 {
			t.Fatalf("bad entry hash %q", s)
		}
		sum := blake3.Sum256(append([]byte{0}, b...))
		leaves[i] = sum[:]
	}
	var root func(l [][]byte) []byte
	root = func(l [][]byte) []byte {
		if len(l) == 1 {
			return l[0]
		}
		k := 1
		for k*2 < len(l) {
			k *= 2
		}
		left, right := root(l[:k]), root(l[k:])
		sum := blake3.Sum256(append(append([]byte{1}, left...), right...))
		return sum[:]
	}
	if len(leaves) == 0 {
		sum := blake3.Sum256(nil)
		return fmt.Sprintf("%x", sum[:])
	}
	return fmt.Sprintf("%x", root(leaves))
}

// checkChainLinks checks with the independent readers that the chain read by
// git is contiguous and linked: seq i at position i, prev the hash of i-1.
func checkChainLinks(t testing.TB, entries []chainEntry) {
	t.Helper()
	prev := strings.Repeat("0", 64)
	for i, e := range entries {
		if e.Seq != uint64(i) || e.Prev != prev {
			t.Fatalf("position %d (commit %s): seq %d prev %s, want seq %d prev %s", i, e.Commit, e.Seq, e.Prev, i, prev)
		}
		prev = entryHashHex(e.Raw)
	}
}

// fsck runs git fsck --strict, once no compaction runs (a pack removed while
// fsck lists them is reported as an error), and fails the test on any error.
func fsck(t testing.TB, dir string) {
	t.Helper()
	waitMaintenance(t, dir)
	cmd := exec.Command("git", "fsck", "--strict", "--no-progress")
	cmd.Dir, cmd.Env = dir, testrepo.Env()
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git fsck --strict: %v\n%s", err, out)
	}
	for _, line := range strings.Split(string(out), "\n") {
		if strings.HasPrefix(line, "error") || strings.HasPrefix(line, "missing") || strings.HasPrefix(line, "broken") ||
			strings.HasPrefix(line, "bad") {
			t.Fatalf("git fsck --strict reported: %s\n%s", line, out)
		}
	}
}

// verifyOK verifies the ledger at dir in this process as `tally verify`
// does (through the facade, so a clone's tally.remote is honoured; with
// --full if full), requires success and returns the report as the JSON
// object the command prints.
func verifyOK(t testing.TB, dir string, full bool) map[string]any {
	t.Helper()
	c, err := tally.Open(dir, tally.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	rep, err := c.Verify(full)
	if err != nil {
		t.Fatalf("verify (full %v): %v", full, err)
	}
	obj, err := tally.ResultObject(rep)
	if err != nil {
		t.Fatal(err)
	}
	return obj
}

// lockFiles lists the *.lock files under refs/ and packed-refs.lock.
func lockFiles(t testing.TB, dir string) []string {
	t.Helper()
	gd := gitDir(t, dir)
	var locks []string
	filepath.WalkDir(filepath.Join(gd, "refs"), func(p string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() && strings.HasSuffix(p, ".lock") {
			locks = append(locks, p)
		}
		return nil
	})
	if _, err := os.Stat(filepath.Join(gd, "packed-refs.lock")); err == nil {
		locks = append(locks, filepath.Join(gd, "packed-refs.lock"))
	}
	return locks
}

// waitMaintenance waits until no compaction runs in the repository at dir
// (work tree or bare), so that the test may check it with fsck or remove it.
func waitMaintenance(t testing.TB, dir string) {
	t.Helper()
	gd, err := gitTry(dir, nil, "rev-parse", "--path-format=absolute", "--git-common-dir")
	if err != nil {
		return
	}
	testrepo.WaitCompaction(t, gd)
}

// --- building and rewriting ledger commits with git plumbing ---

// catCommit returns the raw bytes of a commit object.
func catCommit(t testing.TB, dir, id string) string {
	t.Helper()
	cmd := exec.Command("git", "cat-file", "commit", id)
	cmd.Dir, cmd.Env = dir, testrepo.Env()
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git cat-file commit %s: %v", id, err)
	}
	return string(out)
}

// writeObject stores an object with git hash-object -w and returns its id.
func writeObject(t testing.TB, dir, typ string, data []byte) string {
	t.Helper()
	return gitIn(t, dir, data, "hash-object", "-w", "-t", typ, "--stdin", "--literally")
}

// withParents returns the raw commit with its parent lines replaced.
func withParents(raw string, parents ...string) string {
	header, msg, _ := strings.Cut(raw, "\n\n")
	var b strings.Builder
	for _, line := range strings.Split(header, "\n") {
		if strings.HasPrefix(line, "parent ") {
			continue
		}
		b.WriteString(line)
		b.WriteByte('\n')
		if strings.HasPrefix(line, "tree ") {
			for _, p := range parents {
				fmt.Fprintf(&b, "parent %s\n", p)
			}
		}
	}
	return b.String() + "\n" + msg
}

// withTree returns the raw commit with its tree replaced.
func withTree(raw, tree string) string {
	header, msg, _ := strings.Cut(raw, "\n\n")
	lines := strings.Split(header, "\n")
	lines[0] = "tree " + tree
	return strings.Join(lines, "\n") + "\n\n" + msg
}

func commitTree(raw string) string {
	first, _, _ := strings.Cut(raw, "\n")
	return strings.TrimPrefix(first, "tree ")
}

// reparent rewrites commits (oldest first) onto newParent, keeping their trees,
// authors, committers and messages byte for byte; it returns the new tip.
func reparent(t testing.TB, dir, newParent string, commits []string) string {
	t.Helper()
	cur := newParent
	for _, c := range commits {
		cur = writeObject(t, dir, "commit", []byte(withParents(catCommit(t, dir, c), cur)))
	}
	return cur
}

// setBlob returns the tree tree with the root-level blob name replaced by data
// (git ls-tree, hash-object, mktree).
func setBlob(t testing.TB, dir, tree, name string, data []byte) string {
	t.Helper()
	blob := writeObject(t, dir, "blob", data)
	var out strings.Builder
	found := false
	for _, line := range strings.Split(gitIn(t, dir, nil, "ls-tree", tree), "\n") {
		meta, path, _ := strings.Cut(line, "\t")
		if path == name {
			meta = "100644 blob " + blob
			found = true
		}
		fmt.Fprintf(&out, "%s\t%s\n", meta, path)
	}
	if !found {
		t.Fatalf("tree %s has no %s", tree, name)
	}
	return gitIn(t, dir, []byte(out.String()), "mktree")
}

// forceRef moves the ledger ref with git update-ref, unconditionally.
func forceRef(t testing.TB, dir, commit string) {
	t.Helper()
	gitIn(t, dir, nil, "update-ref", ledgerRef, commit)
}

// buildEntryCommit makes the ledger commit recording entry on top of parent the
// way a correct writer would: ledger.Step applied to the parent's state tree,
// the tree and its new objects written with gitstore's pack writer, and the
// commit ledger.CommitFor prescribes. adjust, if not nil, may edit the parent
// state before the step (to build an entry Step alone would refuse, such as a
// timestamp earlier than its predecessor's: changing the meta's ts changes
// nothing else the step computes). It returns the commit id and the entry hash.
func buildEntryCommit(t testing.TB, dir, parent string, e *chain.Entry, adjust func(*gitstore.Tree)) (string, string) {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	pid, err := gitstore.ParseObjectID(parent)
	if err != nil {
		t.Fatal(err)
	}
	snap, err := l.SnapshotAt(pid)
	if err != nil {
		t.Fatal(err)
	}
	if adjust != nil {
		adjust(snap.Tree)
	}
	raw, err := e.Encode()
	if err != nil {
		t.Fatal(err)
	}
	applied, err := ledger.Step(snap.Tree, raw)
	if err != nil {
		t.Fatalf("Step: %v", err)
	}
	pw := gitstore.NewPackWriter()
	tree, err := snap.Tree.Hash(pw)
	if err != nil {
		t.Fatal(err)
	}
	id := pw.Add(gitstore.CommitObject, ledger.CommitFor(applied, tree, pid).Encode())
	if _, err := pw.WriteTo(l.Repo.ObjectDir); err != nil {
		t.Fatal(err)
	}
	return id.String(), applied.Hash.String()
}

// decodeEntry parses canonical entry bytes with package chain.
func decodeEntry(t testing.TB, raw []byte) *chain.Entry {
	t.Helper()
	e, err := chain.Decode(raw)
	if err != nil {
		t.Fatalf("decode %q: %v", raw, err)
	}
	return e
}

// relink rebuilds entries (oldest first) on top of parent, each re-linked to
// its new predecessor (prev) and otherwise unchanged, so that the result is a
// well-formed chain from parent on. It returns the new tip.
func relink(t testing.TB, dir, parent, parentHash string, entries []chainEntry) string {
	t.Helper()
	cur, h := parent, parentHash
	for _, ce := range entries {
		e := decodeEntry(t, ce.Raw)
		ph, err := chain.ParseHash(h)
		if err != nil {
			t.Fatal(err)
		}
		e.Prev = ph
		cur, h = buildEntryCommit(t, dir, cur, e, nil)
	}
	return cur
}

// verifyFails runs `tally verify --json` (args added) and requires exit 3 with
// the given code and seq (seq < 0: no seq expected).
func verifyFails(t testing.TB, dir string, code string, seq int, args ...string) testrepo.Result {
	t.Helper()
	r := testrepo.Run(t, dir, "verifier", nil, append([]string{"--json", "verify"}, args...)...)
	e, _ := r.JSON["error"].(map[string]any)
	gotSeq, hasSeq := e["seq"].(float64)
	bad := r.Code != 3 || r.JSON["ok"] != false || r.ErrorCode() != code || e["retryable"] != false
	if seq >= 0 {
		bad = bad || !hasSeq || int(gotSeq) != seq
	}
	if msg, _ := e["message"].(string); msg == "" {
		bad = true
	}
	if bad {
		log, _ := gitTry(dir, nil, "log", "--format=%H %P%n    %s", ledgerRef)
		t.Fatalf("tally verify %v: want exit 3 %s at seq %d, got exit %d: %s%s\nledger history (newest first):\n%s",
			args, code, seq, r.Code, r.Stdout, r.Stderr, log)
	}
	return r
}

// errCode is the tally error code of err.
func errCode(err error) string { return string(errs.From(err).Code) }
