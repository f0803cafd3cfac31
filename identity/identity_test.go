package identity_test

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/pem"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"

	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/internal/testrepo"
)

// sshsigWire is the SSHSIG blob as PROTOCOL.sshsig lays it out, written here
// so that the malleations below do not go through the code under test.
type sshsigWire struct {
	Magic         [6]byte
	Version       uint32
	PublicKey     string
	Namespace     string
	Reserved      string
	HashAlgorithm string
	Signature     string
}

// armorWidth armors blob the way PEM does, with lines of width characters.
func armorWidth(blob []byte, width int) string {
	b64 := base64.StdEncoding.EncodeToString(blob)
	var b strings.Builder
	b.WriteString("-----BEGIN SSH SIGNATURE-----\n")
	for len(b64) > width {
		b.WriteString(b64[:width] + "\n")
		b64 = b64[width:]
	}
	b.WriteString(b64 + "\n-----END SSH SIGNATURE-----\n")
	return b.String()
}

// TestCommitSignatureOneForm: a commit signature verifies only in the exact
// text a signer writes. Each malleation below keeps what is signed (or is
// re-signed with the same key in a variant SSHSIG allows) and must be
// refused as a bad signature; most of them need no key at all, so accepting
// them would let anyone give a signed ledger commit another id.
func TestCommitSignatureOneForm(t *testing.T) {
	priv, pub, err := identity.Generate("alice")
	if err != nil {
		t.Fatal(err)
	}
	signer, err := identity.ParseSigner(priv, "alice")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := identity.ParseEd25519(priv, "alice")
	if err != nil {
		t.Fatal(err)
	}
	sshSigner, err := ssh.NewSignerFromKey(raw)
	if err != nil {
		t.Fatal(err)
	}
	key, _, err := identity.NormalizeKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\nauthor a <a> 1 +0000\ncommitter a <a> 1 +0000\n\nx\n")
	armored, err := signer.SignCommit(payload)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := identity.VerifyCommit(payload, armored, []string{key}); err != nil || got != key {
		t.Fatalf("the signer's own signature: %q, %v", got, err)
	}
	if err := identity.CheckCommitSignature(armored); err != nil {
		t.Fatalf("the signer's own signature is not canonical: %v", err)
	}

	block, rest := pem.Decode([]byte(armored))
	if block == nil || len(rest) != 0 {
		t.Fatalf("signature is not one PEM block: %q", armored)
	}
	var w sshsigWire
	if err := ssh.Unmarshal(block.Bytes, &w); err != nil {
		t.Fatal(err)
	}
	var inner struct {
		Format string
		Blob   []byte
	}
	if err := ssh.Unmarshal([]byte(w.Signature), &inner); err != nil {
		t.Fatal(err)
	}
	blob := func(f func(*sshsigWire)) []byte {
		c := w
		f(&c)
		return ssh.Marshal(c)
	}
	resign := func(h sshsig.HashAlgorithm, namespace string) string {
		s, err := sshsig.Sign(bytes.NewReader(payload), sshSigner, h, namespace)
		if err != nil {
			t.Fatal(err)
		}
		return string(sshsig.Armor(s))
	}
	lines := strings.Split(strings.TrimSuffix(armored, "\n"), "\n")
	body := strings.Join(lines[1:len(lines)-1], "")
	malleations := map[string]string{
		// re-signed by the key holder in a variant SSHSIG allows
		"hash sha256":     resign(sshsig.HashSHA256, "git"),
		"namespace file":  resign(sshsig.HashSHA512, "file"),
		"namespace empty": armorWidth(blob(func(c *sshsigWire) { c.Namespace = "" }), 64),
		// the blob, changed without the key
		"reserved field set":        armorWidth(blob(func(c *sshsigWire) { c.Reserved = "x" }), 64),
		"version 2":                 armorWidth(blob(func(c *sshsigWire) { c.Version = 2 }), 64),
		"bytes after the signature": armorWidth(blob(func(c *sshsigWire) { c.Signature += "\x00" }), 64),
		"bytes after the blob":      armorWidth(append(blob(func(*sshsigWire) {}), 0), 64),
		"signature rest field": armorWidth(blob(func(c *sshsigWire) {
			c.Signature = string(ssh.Marshal(struct {
				Format string
				Blob   []byte
				Rest   []byte `ssh:"rest"`
			}{inner.Format, inner.Blob, []byte{1, 2}}))
		}), 64),
		"Ed25519 S + L": armorWidth(blob(func(c *sshsigWire) {
			c.Signature = string(ssh.Marshal(struct {
				Format string
				Blob   []byte
			}{inner.Format, plusL(inner.Blob)}))
		}), 64),
		// the armor, changed without the key
		"lines of 70 (ssh-keygen)": armorWidth(block.Bytes, 70),
		"lines of 76":              armorWidth(block.Bytes, 76),
		"one line":                 armorWidth(block.Bytes, 1<<20),
		"PEM header":               strings.Replace(armored, "-----\n", "-----\nComment: x\n\n", 1),
		"text before":              "hello\n" + armored,
		"text after":               armored + "hello\n",
		"blank line after":         armored + "\n",
		"no final newline":         strings.TrimSuffix(armored, "\n"),
		"CRLF line ends":           strings.ReplaceAll(armored, "\n", "\r\n"),
		"space in base64":          strings.Replace(armored, lines[1], lines[1][:10]+" "+lines[1][10:], 1),
		"trailing space":           strings.Replace(armored, lines[1], lines[1]+" ", 1),
		"padding dropped":          strings.Replace(armored, "=\n", "\n", 1),
		"unused base64 bits set":   unusedBitsSet(t, armored, body),
	}
	for name, m := range malleations {
		t.Run(name, func(t *testing.T) {
			if m == armored {
				t.Fatal("the malleation changed nothing")
			}
			if _, err := identity.VerifyCommit(payload, m, []string{key}); !errors.Is(err, identity.ErrBadSignature) {
				t.Errorf("VerifyCommit accepted it (err %v):\n%s", err, m)
			}
			if err := identity.CheckCommitSignature(m); !errors.Is(err, identity.ErrBadSignature) {
				t.Errorf("CheckCommitSignature accepted it (err %v)", err)
			}
		})
	}
}

// unusedBitsSet sets the unused low bits of the last base64 character before
// the padding of armored (whose base64 text, joined, is body): the decoder
// ignores them, so the text decodes to the same blob.
func unusedBitsSet(t *testing.T, armored, body string) string {
	t.Helper()
	pad := strings.Count(body, "=")
	if pad == 0 {
		t.Fatal("the blob's base64 has no padding, so no unused bits")
	}
	i := strings.Index(armored, "=") - 1 // the last character with data
	const alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
	v := strings.IndexByte(alphabet, armored[i])
	v |= 1 << (2*pad - 1) // one '=' leaves 2 unused bits, two leave 4: set the highest unused one
	out := armored[:i] + string(alphabet[v]) + armored[i+1:]
	if out == armored {
		t.Fatal("the unused bit was already set")
	}
	dec := func(s string) []byte {
		b, _ := pem.Decode([]byte(s))
		if b == nil {
			t.Fatalf("not PEM: %q", s)
		}
		return b.Bytes
	}
	if !bytes.Equal(dec(out), dec(armored)) {
		t.Fatal("setting an unused bit changed the decoded blob")
	}
	return out
}

// plusL returns the Ed25519 signature sig (R ‖ S) with the group order L
// added to S: the same S modulo L, which a verifier that does not require
// S < L (RFC 8032 §5.1.7) accepts as well.
func plusL(sig []byte) []byte {
	// L = 2^252 + 27742317777372353535851937790883648493, little-endian.
	l := []byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
		0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}
	out := append([]byte(nil), sig...)
	carry := 0
	for i := range 32 {
		v := int(out[32+i]) + int(l[i]) + carry
		out[32+i], carry = byte(v), v>>8
	}
	return out // S < L < 2^253, so S + L < 2^254 fits in 32 bytes
}

// The formats identity writes by hand (sshwire.go) are the ones
// golang.org/x/crypto/ssh, hiddeco/sshsig and ssh-keygen write and read:
// keys both ways, public key lines and fingerprints, and signatures byte for
// byte (Ed25519 signing is deterministic).
func TestOpenSSHFormatsAsReference(t *testing.T) {
	priv, pub, err := identity.Generate("alice@example")
	if err != nil {
		t.Fatal(err)
	}
	raw, err := ssh.ParseRawPrivateKey(priv)
	if err != nil {
		t.Fatalf("x/crypto/ssh reads Generate's key: %v", err)
	}
	ours, err := identity.ParseEd25519(priv, "k")
	if err != nil {
		t.Fatal(err)
	}
	if theirs := *raw.(*ed25519.PrivateKey); !bytes.Equal(theirs, ours) {
		t.Fatal("x/crypto/ssh and identity read different keys from one file")
	}
	sshSigner, err := ssh.NewSignerFromKey(ours)
	if err != nil {
		t.Fatal(err)
	}
	line := strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sshSigner.PublicKey())))
	if pub != line+" alice@example" {
		t.Fatalf("Generate's public line %q, x/crypto/ssh's %q", pub, line)
	}
	block, err := ssh.MarshalPrivateKey(ours, "bob")
	if err != nil {
		t.Fatal(err)
	}
	if again, err := identity.ParseEd25519(pem.EncodeToMemory(block), "k"); err != nil || !bytes.Equal(again, ours) {
		t.Fatalf("identity reads x/crypto/ssh's key file: %v", err)
	}
	for _, in := range []string{line, line + " a comment", "  " + line + "\n", "# keys\n\n" + line + " c\n",
		`from="10.0.0.1" ` + line, "command=\"x y\",no-pty " + line + " c"} {
		key, fp, err := identity.NormalizeKey(in)
		if err != nil || key != line || fp != ssh.FingerprintSHA256(sshSigner.PublicKey()) {
			t.Errorf("NormalizeKey(%q) = %q, %q, %v; want %q, %q", in, key, fp, err, line, ssh.FingerprintSHA256(sshSigner.PublicKey()))
		}
	}
	for _, in := range []string{"", "# only a comment", "ssh-ed25519", "ssh-ed25519 !!!", "ssh-rsa AAAAB3NzaC1yc2EAAAADAQABAAAAgQC7",
		"ssh-ed25519 " + base64.StdEncoding.EncodeToString(append(sshSigner.PublicKey().Marshal(), 0))} {
		if _, _, err := identity.NormalizeKey(in); err == nil {
			t.Errorf("NormalizeKey(%q) accepted it", in)
		}
	}
	signer, err := identity.ParseSigner(priv, "k")
	if err != nil {
		t.Fatal(err)
	}
	payload := []byte("tree 4b825dc642cb6eb9a060e54bf8d69288fbee4904\n\nm\n")
	armored, err := signer.SignCommit(payload)
	if err != nil {
		t.Fatal(err)
	}
	ref, err := sshsig.Sign(bytes.NewReader(payload), sshSigner, sshsig.HashSHA512, "git")
	if err != nil {
		t.Fatal(err)
	}
	if want := string(sshsig.Armor(ref)); armored != want {
		t.Fatalf("SignCommit wrote\n%s\nhiddeco/sshsig\n%s", armored, want)
	}
	sig, err := sshsig.Unarmor([]byte(armored))
	if err != nil || sshsig.Verify(bytes.NewReader(payload), sig, sshSigner.PublicKey(), sshsig.HashSHA512, "git") != nil {
		t.Fatalf("hiddeco/sshsig does not verify SignCommit's signature: %v", err)
	}

	keygen, err := exec.LookPath("ssh-keygen")
	if err != nil {
		testrepo.Missing(t, "ssh-keygen is not on PATH (apt-get install openssh-client): the checks against it did not run")
	}
	dir := t.TempDir()
	file := filepath.Join(dir, "id")
	if out, err := exec.Command(keygen, "-q", "-t", "ed25519", "-N", "", "-C", "c", "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen: %v\n%s", err, out)
	}
	kb, _ := os.ReadFile(file)
	pb, _ := os.ReadFile(file + ".pub")
	s, err := identity.ParseSigner(kb, file)
	if err != nil {
		t.Fatalf("ssh-keygen's key: %v", err)
	}
	if key, _, err := identity.NormalizeKey(string(pb)); err != nil || key != s.PublicKey {
		t.Fatalf("ssh-keygen's public key %q normalizes to %q (%v), its private key's is %q", pb, key, err, s.PublicKey)
	}
	os.WriteFile(file, priv, 0o600)
	if out, err := exec.Command(keygen, "-y", "-f", file).Output(); err != nil || strings.TrimSpace(string(out)) != pub {
		t.Fatalf("ssh-keygen -y on Generate's key: %q, %v; want %q", out, err, pub)
	}
	if out, err := exec.Command(keygen, "-q", "-p", "-N", "secret", "-f", file).CombinedOutput(); err != nil {
		t.Fatalf("ssh-keygen -p: %v\n%s", err, out)
	}
	kb, _ = os.ReadFile(file)
	if _, err := identity.ParseEd25519(kb, file); err == nil || !strings.Contains(err.Error(), "unencrypted") {
		t.Fatalf("an encrypted key: %v", err)
	}
}
