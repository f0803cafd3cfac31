package anchor_test

// End-to-end tests of checkpoints, proofs and anchors: real git repositories,
// the real tally binary (testrepo.Run, --json decoded), the git CLI to clone,
// fetch, push, roll back and forge, and independent checks of what tally
// prints: x/mod's note.Open for signatures, transparency-dev's verifiers for
// proofs, hashes recomputed from the entry blobs git shows.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/transparency-dev/merkle/proof"
	"github.com/zeebo/blake3"
	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

const actor = "auditor"

// newLedger makes a repository whose ledger has a genesis of origin
// "test/<name>" and notes more entries.
func newLedger(t *testing.T, name string, notes int) string {
	t.Helper()
	dir := testrepo.New(t)
	l, err := ledger.Open(dir, ledger.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	builds := []ledger.BuildFunc{func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: chain.KindGenesis, Body: chain.GenesisBody{Origin: "test/" + name}}, nil
	}}
	for i := range notes {
		builds = append(builds, func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
			return &ledger.Draft{Kind: "note", Body: lease.NoteBody{Text: fmt.Sprintf("note %d", i)}}, nil
		})
	}
	if _, err := l.AppendBatch(actor, builds); err != nil {
		t.Fatal(err)
	}
	return dir
}

// tally runs tally with --json and fails unless it exits with code.
func tally(t *testing.T, dir string, code int, args ...string) testrepo.Result {
	t.Helper()
	r := testrepo.Run(t, dir, actor, nil, append(args, "--json")...)
	if r.Code != code {
		t.Fatalf("tally %v: exit %d, want %d\n%s%s", args, r.Code, code, r.Stdout, r.Stderr)
	}
	return r
}

// refused runs tally and checks the exit code, the error code and details.
func refused(t *testing.T, dir string, code int, errCode string, details map[string]any, args ...string) {
	t.Helper()
	r := tally(t, dir, code, args...)
	if r.ErrorCode() != errCode {
		t.Fatalf("tally %v: error %q, want %q\n%s", args, r.ErrorCode(), errCode, r.Stdout)
	}
	e := r.JSON["error"].(map[string]any)
	for k, want := range details {
		if fmt.Sprint(e[k]) != fmt.Sprint(want) {
			t.Errorf("tally %v: detail %s = %v, want %v", args, k, e[k], want)
		}
	}
}

// checkpoint takes a checkpoint with tally and writes its note to a file.
func checkpoint(t *testing.T, dir string, args ...string) (path string, res map[string]any) {
	t.Helper()
	r := tally(t, dir, 0, append([]string{"checkpoint"}, args...)...)
	path = filepath.Join(t.TempDir(), "checkpoint")
	if err := os.WriteFile(path, []byte(r.JSON["note"].(string)), 0o644); err != nil {
		t.Fatal(err)
	}
	return path, r.JSON
}

// gitIn runs git with stdin.
func gitIn(t *testing.T, dir, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir, cmd.Env, cmd.Stdin = dir, testrepo.Env(), strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("git %v: %v\n%s", args, err, out)
	}
	return strings.TrimSpace(string(out))
}

// clone clones a repository and fetches its tally refs.
func clone(t *testing.T, src string) string {
	t.Helper()
	dst := filepath.Join(t.TempDir(), "clone")
	testrepo.Git(t, filepath.Dir(dst), "clone", "-q", src, dst)
	testrepo.Git(t, dst, "fetch", "-q", "origin", "refs/tally/*:refs/tally/*")
	return dst
}

// metaAt reads the chain meta of a ledger commit with git.
func metaAt(t *testing.T, dir, rev string) (size uint64, root []byte) {
	t.Helper()
	var m struct {
		Size uint64 `json:"size"`
		Root string `json:"root"`
	}
	if err := json.Unmarshal([]byte(testrepo.Git(t, dir, "show", rev+":meta")), &m); err != nil {
		t.Fatal(err)
	}
	root, err := hex.DecodeString(m.Root)
	if err != nil || len(root) != 32 {
		t.Fatalf("meta root %q", m.Root)
	}
	return m.Size, root
}

func TestForkDetected(t *testing.T) {
	a := newLedger(t, "fork", 3)
	b := clone(t, a)
	base, _ := checkpoint(t, a) // 4 entries, shared
	tally(t, a, 0, "note", "only on a")
	tally(t, b, 0, "note", "only on b")
	cpA, _ := checkpoint(t, a)
	cpB, _ := checkpoint(t, b)
	for _, c := range []struct{ dir, cp string }{{a, cpB}, {b, cpA}} {
		refused(t, c.dir, 3, "FORK-DETECTED", map[string]any{"checkpoint_size": 5, "ledger_size": 5, "checkpoint": c.cp},
			"verify", "--checkpoint", c.cp)
	}
	for _, dir := range []string{a, b} {
		r := tally(t, dir, 0, "verify", "--checkpoint", base)
		if cs := r.JSON["checkpoints"].([]any); len(cs) != 1 {
			t.Fatalf("verify reports %v", r.JSON)
		}
	}
	tally(t, a, 0, "verify", "--checkpoint", cpA, "--checkpoint", base)
	// a grows past b's checkpoint: still a fork; b cannot tell a's larger
	// checkpoint from one it lost entries of.
	tally(t, a, 0, "note", "a1")
	tally(t, a, 0, "note", "a2")
	refused(t, a, 3, "FORK-DETECTED", map[string]any{"checkpoint_size": 5, "ledger_size": 7}, "verify", "--checkpoint", cpB)
	cpA7, _ := checkpoint(t, a)
	refused(t, b, 3, "ROLLBACK-DETECTED", map[string]any{"checkpoint_size": 7, "ledger_size": 5}, "verify", "--checkpoint", cpA7)
	// A checkpoint of another ledger is no evidence either way.
	other, _ := checkpoint(t, newLedger(t, "other", 1))
	refused(t, a, 3, "CHECKPOINT-INVALID", nil, "verify", "--checkpoint", other)
}

func TestRollbackDetected(t *testing.T) {
	a := newLedger(t, "rollback", 5) // 6 entries
	cp, _ := checkpoint(t, a)
	old := testrepo.Git(t, a, "rev-parse", "refs/tally/ledger~2")
	testrepo.Git(t, a, "update-ref", "refs/tally/ledger", old)
	// The local verify record already sees it ...
	refused(t, a, 3, "ROLLBACK-DETECTED", nil, "verify")
	// ... the checkpoint sees it without the record ...
	refused(t, a, 3, "ROLLBACK-DETECTED", map[string]any{"checkpoint_size": 6, "ledger_size": 4}, "verify", "--full", "--checkpoint", cp)
	// ... and in a fresh clone, where only the checkpoint can.
	c := clone(t, a)
	tally(t, c, 0, "verify")
	refused(t, c, 3, "ROLLBACK-DETECTED", map[string]any{"checkpoint_size": 6, "ledger_size": 4}, "verify", "--checkpoint", cp)
}

// sshVerifierKey derives the note verifier key of an OpenSSH public key file
// without tally's code.
func sshVerifierKey(t *testing.T, pubPath, name string) string {
	t.Helper()
	b, err := os.ReadFile(pubPath)
	if err != nil {
		t.Fatal(err)
	}
	pub, _, _, _, err := ssh.ParseAuthorizedKey(b)
	if err != nil {
		t.Fatal(err)
	}
	vkey, err := note.NewEd25519VerifierKey(name, pub.(ssh.CryptoPublicKey).CryptoPublicKey().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	return vkey
}

func TestSignedCheckpointCLI(t *testing.T) {
	a := newLedger(t, "signed", 2)
	keys := t.TempDir()
	key, other := filepath.Join(keys, "k"), filepath.Join(keys, "other")
	tally(t, a, 0, "keys", "generate", "--out", key)
	tally(t, a, 0, "keys", "generate", "--out", other)
	skey, noteVkey, err := note.GenerateKey(rand.Reader, "witness.example")
	if err != nil {
		t.Fatal(err)
	}
	skeyFile := filepath.Join(keys, "note.key")
	os.WriteFile(skeyFile, []byte(skey+"\n"), 0o600)

	cp, res := checkpoint(t, a, "--sign", key, "--sign", skeyFile)
	text := []byte(res["note"].(string))
	vkey := sshVerifierKey(t, key+".pub", "test/signed")
	if got := fmt.Sprint(res["verifier_keys"]); got != fmt.Sprint([]string{vkey, noteVkey}) {
		t.Errorf("verifier_keys %s, want %s", got, []string{vkey, noteVkey})
	}
	// x/mod's note.Open accepts it with either verifier key, and the body is
	// the C2SP checkpoint of the ledger's meta.
	size, root := metaAt(t, a, "refs/tally/ledger")
	want := fmt.Sprintf("test/signed\n%d\n%s\ntally-commit %s\n", size, base64.StdEncoding.EncodeToString(root), testrepo.Git(t, a, "rev-parse", "refs/tally/ledger"))
	for _, vk := range []string{vkey, noteVkey} {
		v, err := note.NewVerifier(vk)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open(text, note.VerifierList(v))
		if err != nil {
			t.Fatalf("note.Open with %s: %v\n%s", vk, err, text)
		}
		if n.Text != want {
			t.Fatalf("checkpoint body %q, want %q", n.Text, want)
		}
	}
	r := tally(t, a, 0, "verify", "--checkpoint", cp, "--checkpoint-key", key+".pub", "--checkpoint-key", noteVkey)
	if got := r.JSON["checkpoints"].([]any)[0].(map[string]any)["signed_by"]; fmt.Sprint(got) != fmt.Sprint([]string{vkey, noteVkey}) {
		t.Errorf("signed_by %v", got)
	}
	// A tampered body fails note.Open and tally verify.
	bad := bytes.Replace(text, []byte(fmt.Sprintf("\n%d\n", size)), []byte(fmt.Sprintf("\n%d\n", size-1)), 1)
	v, _ := note.NewVerifier(vkey)
	if _, err := note.Open(bad, note.VerifierList(v)); err == nil {
		t.Fatal("note.Open accepted a tampered checkpoint")
	}
	badFile := filepath.Join(t.TempDir(), "bad")
	os.WriteFile(badFile, bad, 0o644)
	refused(t, a, 3, "CHECKPOINT-INVALID", map[string]any{"checkpoint": badFile}, "verify", "--checkpoint", badFile, "--checkpoint-key", key+".pub")
	// A key that did not sign, and a signed-for key on an unsigned checkpoint.
	refused(t, a, 3, "CHECKPOINT-INVALID", nil, "verify", "--checkpoint", cp, "--checkpoint-key", other+".pub")
	bare, res := checkpoint(t, a)
	if res["note"] != want {
		t.Fatalf("unsigned checkpoint %q, want the bare body %q", res["note"], want)
	}
	tally(t, a, 0, "verify", "--checkpoint", bare)
	refused(t, a, 3, "CHECKPOINT-INVALID", nil, "verify", "--checkpoint", bare, "--checkpoint-key", key+".pub")
	refused(t, a, 2, "USAGE", nil, "verify", "--checkpoint-key", key+".pub")
	refused(t, a, 2, "USAGE", nil, "checkpoint", "--sign", filepath.Join(keys, "missing"))
	// An OpenSSH key signs under --name when given.
	_, res = checkpoint(t, a, "--sign", key, "--name", "auditor.example")
	if got := res["verifier_keys"].([]any)[0]; got != sshVerifierKey(t, key+".pub", "auditor.example") {
		t.Errorf("named verifier key %v", got)
	}
}

// proofFile runs tally prove and writes the proof text to a file.
func proofFile(t *testing.T, dir string, args ...string) (string, []byte) {
	t.Helper()
	r := testrepo.Run(t, dir, actor, nil, append([]string{"prove"}, args...)...)
	if r.Code != 0 {
		t.Fatalf("tally prove %v: exit %d\n%s", args, r.Code, r.Stderr)
	}
	path := filepath.Join(t.TempDir(), "proof")
	os.WriteFile(path, []byte(r.Stdout), 0o644)
	return path, []byte(r.Stdout)
}

func TestProofs(t *testing.T) {
	const n = 41
	a := newLedger(t, "proofs", n-1)
	nowhere := t.TempDir() // not a repository: verify-proof must not need one
	_, root := metaAt(t, a, "refs/tally/ledger")
	for _, seq := range []uint64{0, 1, 16, 17, 40} {
		path, text := proofFile(t, a, "inclusion", fmt.Sprint(seq))
		r := tally(t, nowhere, 0, "verify-proof", path)
		if r.JSON["type"] != "inclusion" || r.JSON["index"] != float64(seq) {
			t.Fatalf("verify-proof: %v", r.JSON)
		}
		f, hashes := parseRefProof(t, text)
		// The entry hash is that of the entry blob git shows at seq.
		raw := testrepo.Git(t, a, "show", fmt.Sprintf("refs/tally/ledger~%d:entry", n-1-seq))
		h := blake3.New()
		h.Write([]byte("tally/entry/v1\x00" + raw))
		entry := h.Sum(nil)
		if f["entry"] != fmt.Sprintf("%x", entry) {
			t.Fatalf("proof entry %s, git's entry %d hashes to %x", f["entry"], seq, entry)
		}
		if err := proof.VerifyInclusion(refHasher{}, seq, n, refHasher{}.HashLeaf(entry), hashes, root); err != nil {
			t.Fatalf("transparency-dev VerifyInclusion of entry %d: %v", seq, err)
		}
	}
	for _, c := range [][2]uint64{{1, n}, {16, n}, {17, 33}, {32, 32}, {0, 5}} {
		path, text := proofFile(t, a, "consistency", fmt.Sprint(c[0]), fmt.Sprint(c[1]))
		tally(t, nowhere, 0, "verify-proof", path)
		_, hashes := parseRefProof(t, text)
		newSize, newRoot := metaAt(t, a, fmt.Sprintf("refs/tally/ledger~%d", n-c[1]))
		oldRoot := refHasher{}.EmptyRoot()
		if c[0] > 0 {
			_, oldRoot = metaAt(t, a, fmt.Sprintf("refs/tally/ledger~%d", n-c[0]))
		}
		if newSize != c[1] {
			t.Fatalf("meta size %d", newSize)
		}
		if err := proof.VerifyConsistency(refHasher{}, c[0], c[1], hashes, oldRoot, newRoot); err != nil {
			t.Fatalf("transparency-dev VerifyConsistency(%d, %d): %v", c[0], c[1], err)
		}
	}
	// Tampered proofs are PROOF-INVALID, exit 3.
	_, text := proofFile(t, a, "inclusion", "17")
	lines := strings.Split(string(text), "\n")
	for i := 1; i < len(lines)-1; i++ {
		tampered := append([]string{}, lines...)
		tampered[i] = strings.Replace(strings.Replace(tampered[i], "A", "B", 1), "1", "2", 1)
		if tampered[i] == lines[i] || strings.HasPrefix(lines[i], "type ") || strings.HasPrefix(lines[i], "size ") {
			continue // the tree size is bound by a checkpoint, tested below
		}
		path := filepath.Join(t.TempDir(), "tampered")
		os.WriteFile(path, []byte(strings.Join(tampered, "\n")), 0o644)
		refused(t, nowhere, 3, "PROOF-INVALID", nil, "verify-proof", path)
	}
	// Against a signed checkpoint: the right one, then one of another size.
	key := filepath.Join(t.TempDir(), "k")
	tally(t, a, 0, "keys", "generate", "--out", key)
	cp, _ := checkpoint(t, a, "--sign", key)
	incl, _ := proofFile(t, a, "inclusion", "17")
	tally(t, nowhere, 0, "verify-proof", incl, "--checkpoint", cp, "--checkpoint-key", key+".pub")
	cons, _ := proofFile(t, a, "consistency", "20")
	tally(t, nowhere, 0, "verify-proof", cons, "--checkpoint", cp, "--checkpoint-key", key+".pub")
	tally(t, a, 0, "note", "one more")
	later, _ := checkpoint(t, a)
	refused(t, nowhere, 3, "PROOF-INVALID", nil, "verify-proof", incl, "--checkpoint", later)
	resized := filepath.Join(t.TempDir(), "resized")
	os.WriteFile(resized, bytes.Replace(mustRead(t, incl), []byte("size 41\n"), []byte("size 42\n"), 1), 0o644)
	refused(t, nowhere, 3, "PROOF-INVALID", nil, "verify-proof", resized, "--checkpoint", cp)
	refused(t, nowhere, 3, "CHECKPOINT-INVALID", nil, "verify-proof", incl, "--checkpoint", cp, "--checkpoint-key", filepath.Join(keys(t, a), "k.pub"))
	refused(t, a, 2, "USAGE", nil, "prove", "inclusion", "42")
	refused(t, a, 2, "USAGE", nil, "prove", "consistency", "5", "43")
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// keys returns a directory with a fresh key pair k, k.pub.
func keys(t *testing.T, dir string) string {
	t.Helper()
	d := t.TempDir()
	tally(t, dir, 0, "keys", "generate", "--out", filepath.Join(d, "k"))
	return d
}

func TestAnchor(t *testing.T) {
	a := newLedger(t, "anchor", 2) // 3 entries
	testrepo.Git(t, a, "commit", "-q", "--allow-empty", "-m", "work")
	testrepo.Git(t, a, "tag", "v1")
	head := testrepo.Git(t, a, "rev-parse", "HEAD")
	kd := keys(t, a)
	key := filepath.Join(kd, "k")

	_, rootBefore := metaAt(t, a, "refs/tally/ledger")
	r := tally(t, a, 0, "anchor", "--sign", key)
	if got := fmt.Sprint(r.JSON["refs"]); got != fmt.Sprint(map[string]any{"refs/heads/main": head}) {
		t.Fatalf("anchored refs %s", got)
	}
	cpRes := r.JSON["checkpoint"].(map[string]any)
	if cpRes["ref"] != "refs/tally/checkpoints/4" || cpRes["size"] != float64(4) {
		t.Fatalf("checkpoint %v", cpRes)
	}
	// The entry records the checkpoint of the ledger before it.
	var e struct {
		Seq  uint64           `json:"seq"`
		Body lease.AnchorBody `json:"body"`
	}
	json.Unmarshal([]byte(testrepo.Git(t, a, "show", "refs/tally/ledger:entry")), &e)
	if e.Seq != 3 || e.Body.Checkpoint.Size != 3 || e.Body.Checkpoint.Origin != "test/anchor" ||
		!bytes.Equal(e.Body.Checkpoint.Root[:], rootBefore) || e.Body.Refs["refs/heads/main"] != head {
		t.Fatalf("anchor entry %+v", e)
	}
	// The stored checkpoint is a blob holding a note signed by the key, of the ledger with the anchor.
	if typ := testrepo.Git(t, a, "cat-file", "-t", "refs/tally/checkpoints/4"); typ != "blob" {
		t.Fatalf("checkpoint ref points at a %s", typ)
	}
	stored := testrepo.Git(t, a, "cat-file", "-p", "refs/tally/checkpoints/4") + "\n"
	v, _ := note.NewVerifier(sshVerifierKey(t, key+".pub", "test/anchor"))
	n, err := note.Open([]byte(stored), note.VerifierList(v))
	_, root := metaAt(t, a, "refs/tally/ledger")
	if err != nil || n.Text != "test/anchor\n4\n"+base64.StdEncoding.EncodeToString(root)+"\ntally-commit "+testrepo.Git(t, a, "rev-parse", "refs/tally/ledger")+"\n" {
		t.Fatalf("stored checkpoint %q: %v", stored, err)
	}
	r = tally(t, a, 0, "anchor", "--ref", "v1", "--ref", "refs/heads/main")
	if len(r.JSON["refs"].(map[string]any)) != 2 {
		t.Fatalf("anchored refs %v", r.JSON["refs"])
	}
	var latest lease.Anchor
	json.Unmarshal([]byte(testrepo.Git(t, a, "show", "refs/tally/ledger:anchors/latest")), &latest)
	if latest.Seq != 4 || latest.Refs["refs/tags/v1"] != head || latest.Checkpoint.Size != 4 {
		t.Fatalf("anchors/latest %+v", latest)
	}
	tally(t, a, 0, "verify", "--full") // the anchors replay

	// Pushed with refs/tally/* to a bare remote, readable there and usable by a clone.
	remote := filepath.Join(t.TempDir(), "remote.git")
	testrepo.Git(t, filepath.Dir(remote), "init", "-q", "--bare", remote)
	testrepo.Git(t, a, "push", "-q", remote, "refs/tally/*:refs/tally/*", "main")
	if got := testrepo.Git(t, remote, "cat-file", "-p", "refs/tally/checkpoints/4") + "\n"; got != stored {
		t.Fatalf("remote checkpoint %q, want %q", got, stored)
	}
	c := clone(t, remote)
	cpFile := filepath.Join(t.TempDir(), "cp4")
	os.WriteFile(cpFile, []byte(testrepo.Git(t, c, "cat-file", "-p", "refs/tally/checkpoints/4")+"\n"), 0o644)
	tally(t, c, 0, "verify", "--checkpoint", cpFile, "--checkpoint-key", key+".pub")

	// Saving the same checkpoint with another key adds its signature.
	kd2 := keys(t, a)
	tally(t, a, 0, "checkpoint", "--save", "--sign", filepath.Join(kd2, "k"))
	merged := testrepo.Git(t, a, "cat-file", "-p", "refs/tally/checkpoints/5") + "\n"
	v2, _ := note.NewVerifier(sshVerifierKey(t, filepath.Join(kd2, "k.pub"), "test/anchor"))
	if n, err := note.Open([]byte(merged), note.VerifierList(v2)); err != nil || len(n.Sigs) != 1 {
		t.Fatalf("merged checkpoint %q: %v", merged, err)
	}
	// Another checkpoint stored at a size the ledger has is a fork.
	blob := gitIn(t, a, "test/anchor\n5\n"+base64.StdEncoding.EncodeToString(make([]byte, 32))+"\n", "hash-object", "-w", "--stdin")
	testrepo.Git(t, a, "update-ref", "refs/tally/checkpoints/5", blob)
	refused(t, a, 3, "FORK-DETECTED", map[string]any{"checkpoint_size": 5}, "checkpoint", "--save")

	refused(t, a, 2, "USAGE", nil, "anchor", "--ref", "nope")
	testrepo.Git(t, a, "checkout", "-q", "--detach")
	refused(t, a, 2, "USAGE", nil, "anchor")
}

// TestForgedAnchor replaces an anchor commit with one whose entry records a
// wrong checkpoint but is otherwise well formed (canonical, linked, trailer
// matching): verify replays the rule and refuses it.
func TestForgedAnchor(t *testing.T) {
	a := newLedger(t, "forged", 2)
	tally(t, a, 0, "anchor")
	raw := testrepo.Git(t, a, "show", "refs/tally/ledger:entry")
	forged := strings.Replace(raw, `"size":3`, `"size":2`, 1)
	if forged == raw {
		t.Fatalf("entry %s has no checkpoint size 3", raw)
	}
	blob := gitIn(t, a, forged, "hash-object", "-w", "--stdin")
	var tree []string
	for _, l := range strings.Split(testrepo.Git(t, a, "ls-tree", "refs/tally/ledger"), "\n") {
		if strings.HasSuffix(l, "\tentry") {
			l = "100644 blob " + blob + "\tentry"
		}
		tree = append(tree, l)
	}
	treeID := gitIn(t, a, strings.Join(tree, "\n")+"\n", "mktree")
	h := blake3.New()
	h.Write([]byte("tally/entry/v1\x00" + forged))
	msg := fmt.Sprintf("anchor\n\nTally-Seq: 3\nTally-Entry: %x\n", h.Sum(nil))
	parent := testrepo.Git(t, a, "rev-parse", "refs/tally/ledger~1")
	commit := gitIn(t, a, msg, "commit-tree", treeID, "-p", parent)
	testrepo.Git(t, a, "update-ref", "refs/tally/ledger", commit)
	refused(t, a, 3, "RULE-VIOLATION", map[string]any{"rule": "CHECKPOINT-INVALID", "seq": 3}, "verify", "--full")
}

// A checkpoint stored before tally wrote the commit line stays as it is
// when the same checkpoint is saved again with the line: stored checkpoints
// are append-only, and the two bodies are one checkpoint, not a fork. A
// stored note whose commit line names another commit is a fork.
func TestSaveBesideCheckpointWithoutCommitLine(t *testing.T) {
	a := newLedger(t, "oldcp", 2)
	keys := t.TempDir()
	oldKey, _, err := note.GenerateKey(rand.Reader, "old.witness")
	if err != nil {
		t.Fatal(err)
	}
	newKey, _, err := note.GenerateKey(rand.Reader, "new.witness")
	if err != nil {
		t.Fatal(err)
	}
	newFile := filepath.Join(keys, "new")
	os.WriteFile(newFile, []byte(newKey), 0o600)
	cp := tally(t, a, 0, "checkpoint").JSON
	size := fmt.Sprint(cp["size"])
	body := cp["note"].(string)
	bare := body[:strings.Index(body, "tally-commit ")]
	store := func(text string) string {
		f := filepath.Join(keys, "note")
		os.WriteFile(f, []byte(text), 0o644)
		blob := testrepo.Git(t, a, "hash-object", "-w", f)
		testrepo.Git(t, a, "update-ref", "refs/tally/checkpoints/"+size, blob)
		return blob
	}
	signer, err := note.NewSigner(oldKey)
	if err != nil {
		t.Fatal(err)
	}
	sign := func(body string) string {
		text, err := note.Sign(&note.Note{Text: body}, signer)
		if err != nil {
			t.Fatal(err)
		}
		return string(text)
	}

	old := store(sign(bare))
	tally(t, a, 0, "checkpoint", "--sign", newFile, "--save")
	if got := testrepo.Git(t, a, "rev-parse", "refs/tally/checkpoints/"+size); got != old {
		t.Fatalf("the stored checkpoint without a commit line was replaced: %s", testrepo.Git(t, a, "cat-file", "-p", got))
	}

	store(sign(bare + "tally-commit " + testrepo.Git(t, a, "rev-parse", "HEAD") + "\n"))
	if r := tally(t, a, 3, "checkpoint", "--sign", newFile, "--save"); r.ErrorCode() != "FORK-DETECTED" {
		t.Fatalf("a stored checkpoint naming another commit: %s", r)
	}
}

// verify --checkpoint checks a checkpoint's commit line too: a signed
// checkpoint of the right origin, size and root that names another commit
// than the ledger's is a fork.
func TestVerifyCheckpointCommitLine(t *testing.T) {
	a := newLedger(t, "cpcommit", 3)
	skey, vkey, err := note.GenerateKey(rand.Reader, "witness.example")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := note.NewSigner(skey)
	if err != nil {
		t.Fatal(err)
	}
	body := tally(t, a, 0, "checkpoint").JSON["note"].(string)
	dir := t.TempDir()
	for _, tc := range []struct {
		name, body string
		code       int
	}{
		{"own", body, 0},
		{"other", body[:strings.Index(body, "tally-commit ")] + "tally-commit " + testrepo.Git(t, a, "rev-parse", "refs/tally/ledger~1") + "\n", 3},
	} {
		text, err := note.Sign(&note.Note{Text: tc.body}, signer)
		if err != nil {
			t.Fatal(err)
		}
		f := filepath.Join(dir, tc.name)
		os.WriteFile(f, text, 0o644)
		r := tally(t, a, tc.code, "verify", "--checkpoint", f, "--checkpoint-key", vkey)
		if tc.code != 0 && r.ErrorCode() != "FORK-DETECTED" {
			t.Fatalf("%s: %s, want FORK-DETECTED", tc.name, r)
		}
	}
}
