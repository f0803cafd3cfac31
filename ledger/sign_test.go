package ledger_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/internal/testrepo"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// sigKey makes an ed25519 key pair in dir and returns its signer and public line.
func sigKey(t *testing.T, dir, name string) (*identity.Signer, string) {
	t.Helper()
	priv, pub, err := identity.Generate(name)
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	s, err := identity.ParseSigner(priv, path)
	if err != nil {
		t.Fatal(err)
	}
	return s, pub
}

func sigDraft(kind chain.Kind, body any) ledger.BuildFunc {
	return func(*ledger.Snapshot, time.Time) (*ledger.Draft, error) {
		return &ledger.Draft{Kind: kind, Body: body}, nil
	}
}

// signedAs opens the ledger at dir signing with s (nil: unsigned).
func signedAs(t *testing.T, dir string, s *identity.Signer) *ledger.Ledger {
	t.Helper()
	l, err := ledger.Open(dir, ledger.Options{Signer: s})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { l.Close() })
	return l
}

// sigSetup makes a ledger where alice has a registered key; bob's key is not
// registered for anyone.
func sigSetup(t *testing.T) (dir string, l *ledger.Ledger, alice, bob *identity.Signer, alicePub string) {
	t.Helper()
	dir = testrepo.New(t)
	keys := t.TempDir()
	alice, alicePub = sigKey(t, keys, "alice")
	bob, _ = sigKey(t, keys, "bob")
	if _, err := signedAs(t, dir, nil).Append("alice", genesis()); err != nil {
		t.Fatal(err)
	}
	l = signedAs(t, dir, alice)
	norm, _, _ := identity.NormalizeKey(alicePub)
	if _, err := l.Append("alice", sigDraft("keys", lease.KeysBody{Op: "add", Actor: "alice", Key: norm})); err != nil {
		t.Fatal(err)
	}
	return dir, l, alice, bob, alicePub
}

// git verify-commit, given an allowed_signers file, accepts a signed ledger
// commit: the signature is the SSHSIG form git itself checks.
func TestGitVerifyCommitAcceptsLedgerCommit(t *testing.T) {
	if _, err := exec.LookPath("ssh-keygen"); err != nil {
		t.Skip("git verifies SSH signatures with ssh-keygen, which is not installed")
	}
	dir, l, _, _, alicePub := sigSetup(t)
	if _, err := l.Append("alice", note("signed")); err != nil {
		t.Fatal(err)
	}
	allowed := filepath.Join(t.TempDir(), "allowed_signers")
	os.WriteFile(allowed, []byte("alice "+alicePub+"\n"), 0o644)
	cmd := exec.Command("git", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", "-v", "refs/tally/ledger")
	cmd.Dir, cmd.Env = dir, testrepo.Env()
	out, err := cmd.CombinedOutput()
	if err != nil || !strings.Contains(string(out), `Good "git" signature for alice`) {
		t.Fatalf("git verify-commit: %v\n%s", err, out)
	}
	// And git refuses it against a file naming another key.
	_, otherPub := sigKey(t, t.TempDir(), "other")
	os.WriteFile(allowed, []byte("alice "+otherPub+"\n"), 0o644)
	cmd = exec.Command("git", "-c", "gpg.ssh.allowedSignersFile="+allowed, "verify-commit", "refs/tally/ledger")
	cmd.Dir, cmd.Env = dir, testrepo.Env()
	if out, err := cmd.CombinedOutput(); err == nil {
		t.Fatalf("git verify-commit accepted a signature from an unlisted key:\n%s", out)
	}
}

// An entry claiming actor alice but signed with bob's key is refused by the
// writer (KEY-UNKNOWN, exit 2: nothing is corrupt yet), and, forged into the
// ledger, fails verify with BAD-SIGNATURE.
func TestWrongKeyRefusedByWriterAndVerify(t *testing.T) {
	dir, l, _, bob, _ := sigSetup(t)
	if _, err := signedAs(t, dir, bob).Append("alice", note("as alice, with bob's key")); !errs.Is(err, "KEY-UNKNOWN") || errs.From(err).Class() != errs.Refused {
		t.Fatalf("writer: got %v, want KEY-UNKNOWN (refused)", err)
	}
	p, err := l.Prepare("alice", note("to be re-signed"))
	if err != nil {
		t.Fatal(err)
	}
	forged := sigResign(t, l, p.Commit, bob)
	testrepo.Git(t, dir, "update-ref", l.Ref, forged.String(), p.Parent.String())
	_, err = l.Verify(true)
	if e := errs.From(err); e.Code != "BAD-SIGNATURE" || e.Details["seq"] != p.Entry.Seq {
		t.Fatalf("verify: got %v (details %v), want BAD-SIGNATURE at seq %d", err, e.Details, p.Entry.Seq)
	}
}

// With require_signatures, an unsigned entry is refused by the writer
// (KEY-REQUIRED, exit 2) and, forged into the ledger, fails verify with
// UNSIGNED (exit 3).
func TestRequireSignatures(t *testing.T) {
	dir, l, _, _, _ := sigSetup(t)
	yes, admins := true, []string{"alice"}
	if _, err := l.Append("alice", sigDraft("policy", lease.PolicySet{RequireSignatures: &yes, Admins: &admins})); err != nil {
		t.Fatal(err)
	}
	if _, err := signedAs(t, dir, nil).Append("alice", note("unsigned")); !errs.Is(err, "KEY-REQUIRED") || errs.From(err).Class() != errs.Refused {
		t.Fatalf("writer: got %v, want KEY-REQUIRED (refused)", err)
	}
	p, err := l.Prepare("alice", note("signature to be stripped"))
	if err != nil {
		t.Fatal(err)
	}
	stripped := sigResign(t, l, p.Commit, nil)
	testrepo.Git(t, dir, "update-ref", l.Ref, stripped.String(), p.Parent.String())
	_, err = l.Verify(true)
	if e := errs.From(err); e.Code != "UNSIGNED" || e.Details["seq"] != p.Entry.Seq {
		t.Fatalf("verify: got %v, want UNSIGNED at seq %d", err, p.Entry.Seq)
	}
	// The untouched, signed chain up to the parent verifies.
	testrepo.Git(t, dir, "update-ref", l.Ref, p.Parent.String(), stripped.String())
	if _, err := l.Verify(true); err != nil {
		t.Fatalf("signed chain: %v", err)
	}
}

// sigResign rewrites a commit with another signature (none with nil) and
// writes it; the tree, parents and message stay the same.
func sigResign(t *testing.T, l *ledger.Ledger, id gitstore.ObjectID, s *identity.Signer) gitstore.ObjectID {
	t.Helper()
	db, err := l.Repo.Objects()
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.ReadCommit(id)
	if err != nil {
		t.Fatal(err)
	}
	payload := c.Payload()
	out := &gitstore.Commit{Tree: c.Tree, Parents: c.Parents, Author: c.Author, Committer: c.Committer, Message: c.Message}
	if s != nil {
		if out.Signature, err = s.SignCommit(payload); err != nil {
			t.Fatal(err)
		}
	}
	if !bytes.Equal(out.Payload(), payload) {
		t.Fatal("re-encoding changed the commit")
	}
	pw := gitstore.NewPackWriter()
	nid := pw.Add(gitstore.CommitObject, out.Encode())
	if _, err := pw.WriteTo(l.Repo.ObjectDir); err != nil {
		t.Fatal(err)
	}
	return nid
}

// sigWriteCommit writes raw commit bytes and returns their id.
func sigWriteCommit(t *testing.T, l *ledger.Ledger, raw []byte) gitstore.ObjectID {
	t.Helper()
	pw := gitstore.NewPackWriter()
	id := pw.Add(gitstore.CommitObject, raw)
	if _, err := pw.WriteTo(l.Repo.ObjectDir); err != nil {
		t.Fatal(err)
	}
	return id
}

// sigVerifyFails points the ledger at forged (whose parent is p.Parent) and
// requires verify to fail with code at p's seq, then puts the ref back.
func sigVerifyFails(t *testing.T, dir string, l *ledger.Ledger, p *ledger.Prepared, forged gitstore.ObjectID, code errs.Code) {
	t.Helper()
	testrepo.Git(t, dir, "update-ref", l.Ref, forged.String())
	_, err := l.Verify(true)
	if err == nil {
		t.Errorf("verify accepted it, want %s at seq %d", code, p.Entry.Seq)
	} else if e := errs.From(err); e.Code != code || e.Details["seq"] != p.Entry.Seq {
		t.Errorf("verify: got %v (details %v), want %s at seq %d", err, e.Details, code, p.Entry.Seq)
	}
	testrepo.Git(t, dir, "update-ref", l.Ref, p.Parent.String())
}

// A signed ledger commit has its signature in one header, in one place: each
// way of adding or moving a signature header outside what the signature
// signs gives the entry another commit id without the key, and fails verify
// with BAD-SIGNATURE. The commit as written verifies.
func TestSignatureHeaderOneForm(t *testing.T) {
	dir, l, alice, _, _ := sigSetup(t)
	yes, admins := true, []string{"alice"}
	if _, err := l.Append("alice", sigDraft("policy", lease.PolicySet{RequireSignatures: &yes, Admins: &admins})); err != nil {
		t.Fatal(err)
	}
	p, err := l.Prepare("alice", note("signed once"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := l.Repo.Objects()
	if err != nil {
		t.Fatal(err)
	}
	_, raw, err := db.Read(p.Commit)
	if err != nil {
		t.Fatal(err)
	}
	header, msg, _ := strings.Cut(string(raw), "\n\n")
	start := strings.Index(header, "\ngpgsig ")
	if start < 0 {
		t.Fatalf("prepared commit is not signed:\n%s", raw)
	}
	sigLines := header[start+1:] // "gpgsig -----BEGIN…\n …\n -----END SSH SIGNATURE-----"
	unsigned := header[:start]   // tree … committer
	other, err := alice.SignCommit([]byte("another payload"))
	if err != nil {
		t.Fatal(err)
	}
	otherLines := "gpgsig " + strings.ReplaceAll(strings.TrimSuffix(other, "\n"), "\n", "\n ")
	authorAt := strings.Index(unsigned, "\nauthor ")
	forgeries := map[string]string{
		"gpgsig twice":                  unsigned + "\n" + sigLines + "\n" + sigLines,
		"another gpgsig before it":      unsigned + "\n" + otherLines + "\n" + sigLines,
		"gpgsig-sha256 beside it":       unsigned + "\n" + sigLines + "\n" + strings.Replace(otherLines, "gpgsig ", "gpgsig-sha256 ", 1),
		"gpgsig before author":          unsigned[:authorAt] + "\n" + sigLines + unsigned[authorAt:],
		"only a gpgsig-sha256":          unsigned + "\n" + strings.Replace(sigLines, "gpgsig ", "gpgsig-sha256 ", 1),
		"blank continuation line after": unsigned + "\n" + sigLines + "\n ",
	}
	for name, h := range forgeries {
		t.Run(name, func(t *testing.T) {
			forged := sigWriteCommit(t, l, []byte(h+"\n\n"+msg))
			sigVerifyFails(t, dir, l, p, forged, "BAD-SIGNATURE")
		})
	}
	testrepo.Git(t, dir, "update-ref", l.Ref, p.Commit.String())
	if _, err := l.Verify(true); err != nil {
		t.Fatalf("the commit as written: %v", err)
	}
}

// A signature that cannot be checked (the actor has no key, signatures are
// not required) is still accepted only in its canonical form: a re-armored
// copy of it is BAD-SIGNATURE.
func TestUncheckableSignatureCanonical(t *testing.T) {
	dir, _, _, bob, _ := sigSetup(t)
	l := signedAs(t, dir, bob) // carol has no key: bob's signature on her entry is not checkable
	p, err := l.Prepare("carol", note("signed, not checkable"))
	if err != nil {
		t.Fatal(err)
	}
	db, err := l.Repo.Objects()
	if err != nil {
		t.Fatal(err)
	}
	c, err := db.ReadCommit(p.Commit)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSuffix(c.Signature, "\n"), "\n")
	b64 := strings.Join(lines[1:len(lines)-1], "")
	var rewrapped []string
	for len(b64) > 70 { // ssh-keygen's line length
		rewrapped, b64 = append(rewrapped, b64[:70]), b64[70:]
	}
	rewrapped = append(rewrapped, b64)
	forged := &gitstore.Commit{Tree: c.Tree, Parents: c.Parents, Author: c.Author, Committer: c.Committer, Message: c.Message,
		Signature: lines[0] + "\n" + strings.Join(rewrapped, "\n") + "\n" + lines[len(lines)-1] + "\n"}
	if forged.Signature == c.Signature {
		t.Fatal("re-armoring changed nothing")
	}
	sigVerifyFails(t, dir, l, p, sigWriteCommit(t, l, forged.Encode()), "BAD-SIGNATURE")
	testrepo.Git(t, dir, "update-ref", l.Ref, p.Commit.String())
	if _, err := l.Verify(true); err != nil {
		t.Fatalf("the commit as written: %v", err)
	}
}
