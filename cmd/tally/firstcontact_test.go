package main

// First contact from a trusted checkpoint (FORMAT.md §9a): a fresh clone
// that trusts a checkpoint key fetches the ledger shallow, down to the
// commit a signed checkpoint names, and replays only what came after it.
// The server is a real git daemon with tally's hook; attacks are what a
// server's owner can do to its own repository (git update-ref and
// hash-object there, bypassing the hook), and each must be refused.

import (
	"crypto/rand"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"golang.org/x/mod/sumdb/note"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/gitserver"
	"github.com/tally-dev/tally/internal/testrepo"
)

// fcServer is a served ledger with a checkpoint signed by a key, stored on
// the server, and entries after it.
type fcServer struct {
	*netCluster
	seed       string
	skey, vkey string // the checkpoint key: signer and verifier forms
	cpSize     int    // size of the stored checkpoint
	cpNote     string // its note
	entries    int    // the served ledger's length
}

// newFCServer serves a ledger of before entries, checkpointed and signed by
// a new key and stored on the server, followed by after more entries.
func newFCServer(t *testing.T, before, after int) *fcServer {
	t.Helper()
	c := newNetCluster(t, gitserver.GitDaemon)
	s := &fcServer{netCluster: c, seed: c.clone("seed")}
	var err error
	if s.skey, s.vkey, err = note.GenerateKey(rand.Reader, "witness.example"); err != nil {
		t.Fatal(err)
	}
	c.ok(s.seed, "seed", nil, "--remote", "origin", "init")
	for i := 1; i < before; i++ {
		c.ok(s.seed, "seed", nil, "--remote", "origin", "note", "before "+strconv.Itoa(i))
	}
	keyFile := filepath.Join(t.TempDir(), "witness.key")
	if err := os.WriteFile(keyFile, []byte(s.skey), 0o600); err != nil {
		t.Fatal(err)
	}
	cp := c.ok(s.seed, "seed", nil, "--remote", "origin", "checkpoint", "--sign", keyFile, "--save")
	s.cpSize, s.cpNote = int(cp["size"].(float64)), cp["note"].(string)
	if s.cpSize != before {
		t.Fatalf("checkpoint of %d entries, want %d", s.cpSize, before)
	}
	if !strings.Contains(s.cpNote, "\ntally-commit "+cp["commit"].(string)+"\n") {
		t.Fatalf("checkpoint note does not name its commit %v:\n%s", cp["commit"], s.cpNote)
	}
	testrepo.Git(t, s.seed, "push", "-q", "origin", "+refs/tally/checkpoints/*")
	for i := 0; i < after; i++ {
		c.ok(s.seed, "seed", nil, "--remote", "origin", "note", "after "+strconv.Itoa(i))
	}
	s.entries = before + after
	return s
}

// trusting clones the server into a new directory that trusts vkey.
func (s *fcServer) trusting(name, vkey string) string {
	s.t.Helper()
	dir := s.clone(name)
	testrepo.Git(s.t, dir, "config", "--add", "tally.checkpointKey", vkey)
	return dir
}

// serverCommitAt is the server's ledger commit of entry seq.
func (s *fcServer) serverCommitAt(seq int) string {
	s.t.Helper()
	return testrepo.Git(s.t, s.bare, "rev-parse", fmt.Sprintf("refs/tally/ledger~%d", s.entries-1-seq))
}

// storeNote stores text on the server as the checkpoint of size, as the
// server's owner can (the hook does not see it).
func (s *fcServer) storeNote(size int, text string) {
	s.t.Helper()
	f := filepath.Join(s.t.TempDir(), "note")
	if err := os.WriteFile(f, []byte(text), 0o644); err != nil {
		s.t.Fatal(err)
	}
	blob := testrepo.Git(s.t, s.bare, "hash-object", "-w", f)
	testrepo.Git(s.t, s.bare, "update-ref", "refs/tally/checkpoints/"+strconv.Itoa(size), blob)
}

// signBody signs a checkpoint body with a note signer key.
func signBody(t *testing.T, skey, body string) string {
	t.Helper()
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	text, err := note.Sign(&note.Note{Text: body}, signer)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// noteBody is the signed body of a note (what precedes the blank line).
func noteBody(text string) string {
	body, _, _ := strings.Cut(text, "\n\n")
	return body + "\n"
}

func isShallow(t *testing.T, dir string) bool {
	t.Helper()
	return testrepo.Git(t, dir, "rev-parse", "--is-shallow-repository") == "true"
}

// The first command in a fresh clone that trusts the checkpoint key fetches
// only the entries from the checkpoint's last one on, replays those, and
// says so; appends, fsck, gc and views keep working there; walks that reach
// the boundary refuse clearly; and verify --full fetches all of the history
// and replays it from genesis, after which nothing says "from" any more.
func TestFirstContactFromTrustedCheckpoint(t *testing.T) {
	s := newFCServer(t, 12, 5)
	dir := s.trusting("fresh", s.vkey)

	st := s.ok(dir, "agent", nil, "--remote", "origin", "status")
	v := st["verified"].(map[string]any)
	if v["through"] != float64(s.entries-1) {
		t.Fatalf("verified through %v, want %d", v["through"], s.entries-1)
	}
	from, _ := v["from"].(map[string]any)
	if from == nil || from["checkpoint_size"] != float64(s.cpSize) || from["key"] != "witness.example" ||
		from["commit"] != s.serverCommitAt(s.cpSize-1) {
		t.Fatalf("verified %v, want from the checkpoint of %d entries by witness.example at %s", v, s.cpSize, s.serverCommitAt(s.cpSize-1))
	}
	track := "refs/remotes/origin/tally/ledger"
	if got := testrepo.Git(t, dir, "rev-list", "--count", track); got != strconv.Itoa(s.entries-s.cpSize+1) {
		t.Fatalf("%s commits fetched, want the %d from the checkpoint's on", got, s.entries-s.cpSize+1)
	}
	if !isShallow(t, dir) {
		t.Fatal("the clone is not shallow after a first contact from a checkpoint")
	}
	human := testrepo.Run(t, dir, "agent", nil, "--remote", "origin", "status")
	if human.Code != 0 || !strings.Contains(human.Stderr, "verified from the checkpoint of 12 entries signed by witness.example") {
		t.Fatalf("human status does not say what it verified: %s", human)
	}

	// A first verify starts there too, and reports what it replayed.
	rep := s.ok(s.trusting("fresh-verify", s.vkey), "agent", nil, "--remote", "origin", "verify")
	if from, _ := rep["from"].(map[string]any); from == nil || from["checkpoint_size"] != float64(s.cpSize) ||
		rep["checked"] != float64(s.entries-s.cpSize) || rep["entries"] != float64(s.entries) {
		t.Fatalf("first verify: %v, want %d entries, the %d after the checkpoint checked", rep, s.entries, s.entries-s.cpSize)
	}

	// Appends, and another clone's appends fetched incrementally.
	s.ok(dir, "agent", nil, "--remote", "origin", "note", "from the shallow clone")
	s.ok(s.seed, "seed", nil, "--remote", "origin", "note", "from the seed")
	st = s.ok(dir, "agent", nil, "--remote", "origin", "status")
	if v := st["verified"].(map[string]any); v["through"] != float64(s.entries+1) || v["from"] == nil {
		t.Fatalf("after appends: verified %v", v)
	}
	testrepo.Git(t, dir, "fsck", "--no-progress")
	testrepo.Git(t, dir, "gc", "--quiet")
	s.ok(dir, "agent", nil, "--remote", "origin", "status")

	// Walks to the boundary fail closed, with a code of their own.
	s.refused(2, string(errs.HistoryShallow), dir, "agent", nil, "--remote", "origin", "log")
	s.refused(2, string(errs.HistoryShallow), dir, "agent", nil, "--local", "verify", "--full")

	full := s.ok(dir, "agent", nil, "--remote", "origin", "verify", "--full")
	if full["checked"] != float64(s.entries+2) || full["from"] != nil {
		t.Fatalf("verify --full: %v, want all %d entries checked, not from a checkpoint", full, s.entries+2)
	}
	if isShallow(t, dir) {
		t.Fatal("verify --full left the clone shallow")
	}
	st = s.ok(dir, "agent", nil, "--remote", "origin", "status")
	if v := st["verified"].(map[string]any); v["from"] != nil {
		t.Fatalf("after verify --full: verified %v still from a checkpoint", v)
	}
	s.ok(dir, "agent", nil, "--remote", "origin", "log")
}

// A checkpoint the clone does not trust starts nothing: one signed by
// another key, or one by a trusted key without the commit line (as tally
// wrote them before it had it). The clone then fetches all of the history
// and verifies it from genesis. The control: a clone that trusts the other
// key starts from that key's checkpoint.
func TestFirstContactIgnoresUntrustedCheckpoints(t *testing.T) {
	s := newFCServer(t, 6, 3)
	attackerS, attackerV, err := note.GenerateKey(rand.Reader, "attacker.example")
	if err != nil {
		t.Fatal(err)
	}
	tip := s.ok(s.seed, "seed", nil, "--remote", "origin", "checkpoint")
	s.storeNote(s.entries, signBody(t, attackerS, tip["note"].(string)))
	body := noteBody(s.cpNote)
	s.storeNote(s.cpSize, signBody(t, s.skey, body[:strings.Index(body, "tally-commit ")]))

	dir := s.trusting("fresh", s.vkey)
	st := s.ok(dir, "agent", nil, "--remote", "origin", "status")
	if v := st["verified"].(map[string]any); v["from"] != nil || v["through"] != float64(s.entries-1) {
		t.Fatalf("verified %v, want all %d entries from genesis", v, s.entries)
	}
	if isShallow(t, dir) {
		t.Fatal("the clone is shallow: it started from a checkpoint it does not trust")
	}

	control := s.trusting("control", attackerV)
	st = s.ok(control, "agent", nil, "--remote", "origin", "status")
	if from, _ := st["verified"].(map[string]any)["from"].(map[string]any); from == nil ||
		from["key"] != "attacker.example" || from["checkpoint_size"] != float64(s.entries) {
		t.Fatalf("a clone trusting attacker.example: verified %v, want from its checkpoint of %d", st["verified"], s.entries)
	}
}

// A trusted checkpoint whose commit line names another commit than the
// ledger's at its last seq: the server's ledger is not the one the signer
// saw.
func TestFirstContactCheckpointCommitMismatch(t *testing.T) {
	s := newFCServer(t, 6, 3)
	other := s.serverCommitAt(s.cpSize - 2)
	body := noteBody(s.cpNote)
	forged := body[:strings.Index(body, "tally-commit ")] + "tally-commit " + other + "\n"
	s.storeNote(s.cpSize, signBody(t, s.skey, forged))
	dir := s.trusting("fresh", s.vkey)
	p := s.refused(3, string(errs.ForkDetected), dir, "agent", nil, "--remote", "origin", "status")
	if p.ErrorField("checkpoint_size") != float64(s.cpSize) {
		t.Fatalf("%s: want checkpoint_size %d", p, s.cpSize)
	}
}

// A server that rewrote the state tree of its tip after the checkpoint: the
// replay from the checkpoint's commit rebuilds the tip's state and finds
// it differs.
func TestFirstContactTamperedTipState(t *testing.T) {
	s := newFCServer(t, 6, 3)
	tip := testrepo.Git(t, s.bare, "rev-parse", "refs/tally/ledger")
	blob := testrepo.Git(t, s.bare, "hash-object", "-w", "--stdin")
	tree := testrepo.Git(t, s.bare, "ls-tree", tip)
	tree += "\n100644 blob " + blob + "\tinjected\n"
	treeFile := filepath.Join(t.TempDir(), "tree")
	os.WriteFile(treeFile, []byte(tree), 0o644)
	newTree := gitStdin(t, s.bare, treeFile, "mktree")
	commit := testrepo.Git(t, s.bare, "cat-file", "commit", tip)
	oldTree := testrepo.Git(t, s.bare, "rev-parse", tip+"^{tree}")
	commitFile := filepath.Join(t.TempDir(), "commit")
	os.WriteFile(commitFile, []byte(strings.Replace(commit, "tree "+oldTree, "tree "+newTree, 1)+"\n"), 0o644)
	forged := testrepo.Git(t, s.bare, "hash-object", "-t", "commit", "-w", commitFile)
	testrepo.Git(t, s.bare, "update-ref", "refs/tally/ledger", forged, tip)

	dir := s.trusting("fresh", s.vkey)
	s.refused(3, string(errs.StateMismatch), dir, "agent", nil, "--remote", "origin", "status")
	if !isShallow(t, dir) {
		t.Fatal("the clone fetched all history: the tampering was not caught by the replay from the checkpoint")
	}
}

// A server that rolls its ledger back: a clone that made first contact
// before is told ROLLBACK-DETECTED from its record (not HISTORY-SHALLOW: the
// walk that would tell is into history it does not have), and a fresh clone
// is told so by the trusted checkpoint the shorter ledger falls behind.
func TestFirstContactRollback(t *testing.T) {
	s := newFCServer(t, 6, 3)
	atCheckpoint, beforeIt := s.serverCommitAt(s.cpSize), s.serverCommitAt(s.cpSize-3)
	early := s.trusting("early", s.vkey)
	s.ok(early, "agent", nil, "--remote", "origin", "status")
	testrepo.Git(t, s.bare, "update-ref", "refs/tally/ledger", atCheckpoint)
	if p := s.refused(3, string(errs.RollbackDetected), early, "agent", nil, "--remote", "origin", "status"); p.ErrorField("verified_size") != float64(s.entries) {
		t.Fatalf("%s: want verified_size %d", p, s.entries)
	}

	testrepo.Git(t, s.bare, "update-ref", "refs/tally/ledger", beforeIt)
	dir := s.trusting("fresh", s.vkey)
	p := s.refused(3, string(errs.RollbackDetected), dir, "agent", nil, "--remote", "origin", "status")
	if p.ErrorField("checkpoint_size") != float64(s.cpSize) || p.ErrorField("ledger_size") != float64(s.cpSize-2) {
		t.Fatalf("%s: want checkpoint_size %d, ledger_size %d", p, s.cpSize, s.cpSize-2)
	}
}

// gitStdin runs git in dir with file as its stdin and returns its trimmed
// stdout.
func gitStdin(t *testing.T, dir, file string, args ...string) string {
	t.Helper()
	f, err := os.Open(file)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testrepo.Env(), f
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %v: %v", args, err)
	}
	return strings.TrimSpace(string(out))
}

// A shallow clone keeps working where history is not walked: sync both
// ways, and a code push judged by the client pre-push hook.
func TestFirstContactShallowCloneSyncsAndPushes(t *testing.T) {
	s := newFCServer(t, 8, 3)
	dir := s.trusting("fresh", s.vkey)
	s.ok(dir, "agent", nil, "--remote", "origin", "status")
	if !isShallow(t, dir) {
		t.Fatal("the clone is not shallow after a first contact from a checkpoint")
	}
	s.ok(s.seed, "seed", nil, "--remote", "origin", "note", "from the seed")
	s.ok(dir, "agent", nil, "--remote", "origin", "sync")
	s.ok(dir, "agent", nil, "--remote", "origin", "note", "from the shallow clone")
	s.ok(dir, "agent", nil, "--remote", "origin", "sync")

	s.ok(dir, "agent", nil, "hooks", "install")
	if hook, err := os.ReadFile(filepath.Join(dir, ".git", "hooks", "pre-push")); err != nil || !strings.Contains(string(hook), "tally") {
		t.Fatalf("no tally pre-push hook installed: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, "work.txt"), []byte("work\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	testrepo.Git(t, dir, "add", "work.txt")
	testrepo.Git(t, dir, "commit", "-q", "-m", "work")
	testrepo.Git(t, dir, "push", "-q", "origin", "HEAD:refs/heads/main")

	st := s.ok(s.seed, "seed", nil, "--remote", "origin", "status")
	if v := st["verified"].(map[string]any); v["through"] != float64(s.entries+1) {
		t.Fatalf("the seed sees %v, want both notes (through %d)", v, s.entries+1)
	}
	testrepo.Git(t, dir, "fsck", "--no-progress")
}
