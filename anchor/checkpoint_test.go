package anchor_test

import (
	"crypto/ed25519"
	"crypto/rand"
	"encoding/base64"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"golang.org/x/crypto/ssh"
	"golang.org/x/mod/sumdb/note"

	"github.com/tally-dev/tally/anchor"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
)

func TestCheckpointBody(t *testing.T) {
	root := entryHash('r', 0)
	c := anchor.Checkpoint{Origin: "example.com/log", Size: 1234, Root: root}
	want := "example.com/log\n1234\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n"
	if got := string(c.Body()); got != want {
		t.Fatalf("Body = %q, want %q", got, want)
	}
	for _, text := range []string{want, want + "extension line\n"} {
		got, err := anchor.ParseBody([]byte(text))
		if err != nil || got != c {
			t.Errorf("ParseBody(%q) = %+v, %v", text, got, err)
		}
	}
	for _, text := range []string{
		strings.TrimSuffix(want, "\n"),
		"example.com/log\n1234\n",
		"example.com/log\n01234\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n",
		"example.com/log\n-1\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n",
		"example.com/log\n1234\n" + base64.StdEncoding.EncodeToString(root[:31]) + "\n",
		"example.com/log\n1234\n" + root.String() + "\n",
		"\n1234\n" + base64.StdEncoding.EncodeToString(root[:]) + "\n",
		want + "\nextension after a blank line\n",
	} {
		if _, err := anchor.ParseBody([]byte(text)); errs.CodeOf(err) != "CHECKPOINT-INVALID" {
			t.Errorf("ParseBody(%q): %v, want CHECKPOINT-INVALID", text, err)
		}
	}
}

// writeSSHKey writes an OpenSSH ed25519 key pair as tally keys generate does.
func writeSSHKey(t *testing.T) (path, pub string) {
	t.Helper()
	priv, pub, err := identity.Generate("")
	if err != nil {
		t.Fatal(err)
	}
	path = filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(path, priv, 0o600); err != nil {
		t.Fatal(err)
	}
	return path, pub
}

// TestSignedCheckpoint signs with an OpenSSH key and with a note key and
// checks the notes with x/mod's note.Open directly, with the verifier key
// built from the public key alone.
func TestSignedCheckpoint(t *testing.T) {
	l := newMemLog("example.com/tally").grow(t, 'a', 33)
	c, err := anchor.FromTiles(l.kv, l.meta)
	if err != nil {
		t.Fatal(err)
	}
	sshPath, sshPub := writeSSHKey(t)
	skey, vkey, err := note.GenerateKey(rand.Reader, "witness.example")
	if err != nil {
		t.Fatal(err)
	}
	skeyPath := filepath.Join(t.TempDir(), "note.key")
	os.WriteFile(skeyPath, []byte(skey+"\n"), 0o600)

	s1, err := anchor.LoadSigner(sshPath, "", c.Origin)
	if err != nil {
		t.Fatal(err)
	}
	s2, err := anchor.LoadSigner(skeyPath, "", c.Origin)
	if err != nil {
		t.Fatal(err)
	}
	if s2.Key != vkey {
		t.Fatalf("note key verifier %q, want %q", s2.Key, vkey)
	}
	text, err := anchor.Sign(c, gitstore.ObjectID{}, s1, s2)
	if err != nil {
		t.Fatal(err)
	}
	// The verifier key of the OpenSSH key, derived from the public key line only.
	parsed, _, _, _, err := ssh.ParseAuthorizedKey([]byte(sshPub))
	if err != nil {
		t.Fatal(err)
	}
	sshVkey, err := note.NewEd25519VerifierKey(c.Origin, parsed.(ssh.CryptoPublicKey).CryptoPublicKey().(ed25519.PublicKey))
	if err != nil {
		t.Fatal(err)
	}
	if s1.Key != sshVkey {
		t.Fatalf("OpenSSH key verifier %q, want %q", s1.Key, sshVkey)
	}
	for _, vk := range []string{sshVkey, vkey} {
		v, err := note.NewVerifier(vk)
		if err != nil {
			t.Fatal(err)
		}
		n, err := note.Open(text, note.VerifierList(v))
		if err != nil {
			t.Fatalf("note.Open with %s: %v\n%s", vk, err, text)
		}
		if n.Text != string(c.Body()) || len(n.Sigs) != 1 || len(n.UnverifiedSigs) != 1 {
			t.Fatalf("note.Open: text %q, %d sigs, %d unverified", n.Text, len(n.Sigs), len(n.UnverifiedSigs))
		}
	}
	// anchor.Open accepts the public key line, the verifier keys and files holding them.
	pubPath := filepath.Join(t.TempDir(), "key.pub")
	os.WriteFile(pubPath, []byte(sshPub+" comment\n"), 0o644)
	for _, keys := range [][]string{nil, {sshPub}, {pubPath}, {vkey}, {sshVkey, vkey}, {sshPub, sshVkey}} {
		o, err := anchor.Open(text, keys)
		if err != nil || o.Checkpoint != c {
			t.Fatalf("Open with %v: %+v, %v", keys, o, err)
		}
	}
	// A tampered body, signature or wrong key fails, with note.Open and with anchor.Open.
	v, _ := note.NewVerifier(vkey)
	_, otherV, _ := note.GenerateKey(rand.Reader, "witness.example")
	size := []byte("\n33\n")
	for name, bad := range map[string][]byte{
		"size":      []byte(strings.Replace(string(text), string(size), "\n34\n", 1)),
		"origin":    []byte(strings.Replace(string(text), "example.com/tally\n", "example.com/tallx\n", 1)),
		"signature": []byte(strings.Replace(string(text), "— witness.example ", "— witness.example AAAA", 1)),
	} {
		if _, err := note.Open(bad, note.VerifierList(v)); err == nil {
			t.Errorf("note.Open accepted a checkpoint with a tampered %s", name)
		}
		if _, err := anchor.Open(bad, []string{vkey}); errs.CodeOf(err) != "CHECKPOINT-INVALID" {
			t.Errorf("Open with a tampered %s: %v", name, err)
		}
	}
	if _, err := anchor.Open(text, []string{otherV}); errs.CodeOf(err) != "CHECKPOINT-INVALID" {
		t.Errorf("Open with a key that did not sign: %v", err)
	}
	if _, err := anchor.Open(c.Body(), []string{vkey}); errs.CodeOf(err) != "CHECKPOINT-INVALID" {
		t.Errorf("Open of an unsigned checkpoint with a required key: %v", err)
	}
	if o, err := anchor.Open(c.Body(), nil); err != nil || o.Checkpoint != c {
		t.Errorf("Open of an unsigned checkpoint: %v", err)
	}
	// Names: an OpenSSH key takes --name; a note key must match it.
	if s, err := anchor.LoadSigner(sshPath, "other.name", c.Origin); err != nil || !strings.HasPrefix(s.Key, "other.name+") {
		t.Errorf("LoadSigner with a name: %+v, %v", s, err)
	}
	if _, err := anchor.LoadSigner(skey, "other.name", c.Origin); errs.CodeOf(err) != "USAGE" {
		t.Errorf("note key under another name: %v", err)
	}
	if _, err := anchor.LoadSigner(sshPath, "", "origin with spaces"); errs.CodeOf(err) != "USAGE" {
		t.Errorf("OpenSSH key named by an origin that is no valid key name: %v", err)
	}
}

// A Tally-Checkpoint trailer spells size and root exactly as a checkpoint
// does: what ParseTrailer accepts, ParseBody accepts too.
func TestTrailerSpelling(t *testing.T) {
	root := base64.StdEncoding.EncodeToString(make([]byte, 32))
	if c, err := anchor.ParseTrailer("o 7 " + root); err != nil || c.Size != 7 || c.Origin != "o" {
		t.Fatalf("ParseTrailer: %+v %v", c, err)
	}
	for _, bad := range []string{"o 007 " + root, "o +7 " + root, "o 7 " + root[:len(root)-4], "o 7"} {
		if _, err := anchor.ParseTrailer(bad); err == nil {
			t.Errorf("ParseTrailer(%q) accepted", bad)
		}
	}
}

// The commit line names the ledger commit of the checkpoint's last entry;
// other extension lines are ignored, and a malformed or repeated commit
// line is CHECKPOINT-INVALID.
func TestCheckpointCommitLine(t *testing.T) {
	c := anchor.Checkpoint{Origin: "example.com/log", Size: 7, Root: entryHash('r', 0)}
	id := gitstore.HashObject(gitstore.BlobObject, []byte("a commit"))
	body := string(c.BodyAt(id))
	if want := string(c.Body()) + "tally-commit " + id.String() + "\n"; body != want {
		t.Fatalf("BodyAt = %q, want %q", body, want)
	}
	for _, text := range []string{body, body + "other extension\n", string(c.Body()) + "other\n" + "tally-commit " + id.String() + "\n"} {
		got, commit, err := anchor.ParseCommit([]byte(text))
		if err != nil || got != c || commit != id {
			t.Errorf("ParseCommit(%q) = %+v, %s, %v", text, got, commit, err)
		}
	}
	if _, commit, err := anchor.ParseCommit(c.Body()); err != nil || !commit.IsZero() {
		t.Errorf("ParseCommit of a body without the line: %s, %v", commit, err)
	}
	for _, text := range []string{
		body + "tally-commit " + id.String() + "\n",
		string(c.Body()) + "tally-commit " + strings.ToUpper(id.String()) + "\n",
		string(c.Body()) + "tally-commit " + id.String()[:39] + "\n",
		string(anchor.Checkpoint{Origin: c.Origin, Root: c.Root}.BodyAt(id)),
	} {
		if _, _, err := anchor.ParseCommit([]byte(text)); errs.CodeOf(err) != "CHECKPOINT-INVALID" {
			t.Errorf("ParseCommit(%q): %v, want CHECKPOINT-INVALID", text, err)
		}
	}
}

// TestFormatFactsCheckpointSizeZero pins FORMAT.md §11: a checkpoint of size
// 0 is valid without a commit line and CHECKPOINT-INVALID with one (size 0
// has no last entry for it to name).
func TestFormatFactsCheckpointSizeZero(t *testing.T) {
	c := anchor.Checkpoint{Origin: "example.com/log", Size: 0, Root: entryHash('e', 0)}
	if got, commit, err := anchor.ParseCommit(c.Body()); err != nil || got != c || !commit.IsZero() {
		t.Fatalf("ParseCommit of a size-0 body without the line: %+v, %s, %v", got, commit, err)
	}
	id := gitstore.HashObject(gitstore.BlobObject, []byte("a commit"))
	if _, _, err := anchor.ParseCommit(c.BodyAt(id)); errs.CodeOf(err) != "CHECKPOINT-INVALID" {
		t.Fatalf("ParseCommit of a size-0 body with the line: %v, want CHECKPOINT-INVALID", err)
	}
}
