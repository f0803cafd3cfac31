// Package identity handles the keys that prove who appended a ledger entry:
// SSH ed25519 public keys registered per actor in the ledger, and SSHSIG
// signatures on ledger commits in the form `git verify-commit` accepts (the
// armored signature in the commit's gpgsig header, namespace "git").
package identity

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"encoding/pem"
	"errors"
	"fmt"
	"strings"

	"github.com/hiddeco/sshsig"
	"golang.org/x/crypto/ssh"
)

// gitNamespace is the SSHSIG namespace git uses for commit signatures.
const gitNamespace = "git"

// ErrBadSignature is returned when a signature does not verify.
var ErrBadSignature = errors.New("bad signature")

// NormalizeKey parses an SSH public key line ("ssh-ed25519 AAAA... [comment]")
// and returns it as "ssh-ed25519 <base64>", without the comment, and its
// SHA256 fingerprint. Only ed25519 keys are accepted.
func NormalizeKey(line string) (key, fingerprint string, err error) {
	pub, err := parseEd25519Line(line)
	if err != nil {
		return "", "", err
	}
	return strings.TrimSpace(string(ssh.MarshalAuthorizedKey(pub))), ssh.FingerprintSHA256(pub), nil
}

// Signer signs ledger commits.
type Signer struct {
	signer ssh.Signer
	// PublicKey is the normalized public key line.
	PublicKey string
}

// LoadSigner reads an OpenSSH ed25519 private key file (unencrypted).
func LoadSigner(path string) (*Signer, error) {
	priv, err := LoadEd25519(path)
	if err != nil {
		return nil, err
	}
	s, err := ssh.NewSignerFromKey(priv)
	if err != nil {
		return nil, err
	}
	key, _, err := NormalizeKey(string(ssh.MarshalAuthorizedKey(s.PublicKey())))
	if err != nil {
		return nil, err
	}
	return &Signer{signer: s, PublicKey: key}, nil
}

// SignCommit returns the armored SSHSIG signature of a commit payload, the
// value of its gpgsig header.
func (s *Signer) SignCommit(payload []byte) (string, error) {
	sig, err := sshsig.Sign(bytes.NewReader(payload), s.signer, sshsig.HashSHA512, gitNamespace)
	if err != nil {
		return "", err
	}
	return string(sshsig.Armor(sig)), nil
}

// VerifyCommit checks an armored commit signature over payload against the
// candidate public keys (normalized lines) and returns the key that made it.
func VerifyCommit(payload []byte, armored string, keys []string) (string, error) {
	sig, err := sshsig.Unarmor([]byte(armored))
	if err != nil {
		return "", fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	for _, k := range keys {
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k))
		if err != nil {
			continue
		}
		if sshsig.Verify(bytes.NewReader(payload), sig, pub, sig.HashAlgorithm, gitNamespace) == nil {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: made by %s, which is not a registered key of the actor", ErrBadSignature,
		ssh.FingerprintSHA256(sig.PublicKey))
}

// Generate makes a new ed25519 key pair: the OpenSSH private key file content
// and the public key line.
func Generate(comment string) (private []byte, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	block, err := ssh.MarshalPrivateKey(priv, comment)
	if err != nil {
		return nil, "", err
	}
	sp, err := ssh.NewPublicKey(pub)
	if err != nil {
		return nil, "", err
	}
	public = strings.TrimSpace(string(ssh.MarshalAuthorizedKey(sp)))
	if comment != "" {
		public += " " + comment
	}
	return pem.EncodeToMemory(block), public, nil
}
