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
	"math/big"
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

// ParseSigner makes a commit signer from an unencrypted OpenSSH ed25519
// private key file's content b (path names the file in errors).
func ParseSigner(b []byte, path string) (*Signer, error) {
	priv, err := ParseEd25519(b, path)
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
	sig, err := sshsig.Sign(bytes.NewReader(payload), s.signer, commitHash, gitNamespace)
	if err != nil {
		return "", err
	}
	return string(sshsig.Armor(sig)), nil
}

// commitHash is the one SSHSIG hash algorithm a commit signature may name
// (FORMAT.md §7). SSHSIG also allows sha256; accepting both would give every
// signed entry a second commit id that its key holder never made.
const commitHash = sshsig.HashSHA512

// CheckCommitSignature tells whether armored is a commit signature in the one
// form FORMAT.md §7 allows, without checking it against any key. It is
// exactly the text SignCommit writes for its blob: the armor of
// sshsig.Armor (a "-----BEGIN SSH SIGNATURE-----" line, standard padded
// base64 in lines of 64 characters, an "-----END SSH SIGNATURE-----" line,
// each ending in a newline, nothing before, between or after), around an
// SSHSIG blob of version 1 with an ed25519 public key, namespace "git", an
// empty reserved field, hash "sha512" and an "ssh-ed25519" signature of 64
// bytes with nothing after it. Every other spelling of the same signature
// (another line length, PEM headers, unused base64 bits set, a reserved
// value, trailing bytes) verifies just as well, so accepting it would let
// anyone change a signed entry's commit id without the key.
func CheckCommitSignature(armored string) error {
	_, err := parseCommitSignature(armored)
	return err
}

// parseCommitSignature decodes armored if CheckCommitSignature accepts it.
func parseCommitSignature(armored string) (*sshsig.Signature, error) {
	sig, err := sshsig.Unarmor([]byte(armored))
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	switch {
	case sig.HashAlgorithm != commitHash:
		return nil, fmt.Errorf("%w: SSHSIG hash algorithm %q, commit signatures use %q", ErrBadSignature, sig.HashAlgorithm, commitHash)
	case sig.Namespace != gitNamespace:
		return nil, fmt.Errorf("%w: SSHSIG namespace %q, commit signatures use %q", ErrBadSignature, sig.Namespace, gitNamespace)
	case sig.PublicKey.Type() != ssh.KeyAlgoED25519 || sig.Signature.Format != ssh.KeyAlgoED25519 ||
		len(sig.Signature.Blob) != ed25519.SignatureSize || len(sig.Signature.Rest) != 0:
		return nil, fmt.Errorf("%w: not a plain ssh-ed25519 signature", ErrBadSignature)
	case !canonicalScalar(sig.Signature.Blob[32:]):
		// ed25519.Verify refuses it too; checked here so that a signature
		// no key can check has the one form as well.
		return nil, fmt.Errorf("%w: Ed25519 S is not below the group order", ErrBadSignature)
	}
	// Re-encoding from the fields that matter covers what is left: the
	// version (Unarmor accepts only 1), the reserved field (Marshal writes it
	// empty), bytes after the blob, and every freedom of the armor and its
	// base64.
	canon := sshsig.Signature{Version: 1, PublicKey: sig.PublicKey, Namespace: gitNamespace, HashAlgorithm: commitHash,
		Signature: &ssh.Signature{Format: sig.Signature.Format, Blob: sig.Signature.Blob}}
	if string(sshsig.Armor(&canon)) != armored {
		return nil, fmt.Errorf("%w: not in canonical form (armor, base64 or an SSHSIG field differs from what a signer writes)", ErrBadSignature)
	}
	return sig, nil
}

// groupOrder is L, the order of the Ed25519 base point: 2^252 +
// 27742317777372353535851937790883648493.
var groupOrder, _ = new(big.Int).SetString("7237005577332262213973186563042994240857116359379907606001950938285454250989", 10)

// canonicalScalar reports whether s, 32 bytes little-endian, is below L, as
// RFC 8032 §5.1.7 requires of a signature's S: S and S + L are otherwise the
// same signature.
func canonicalScalar(s []byte) bool {
	be := make([]byte, len(s))
	for i, b := range s {
		be[len(s)-1-i] = b
	}
	return new(big.Int).SetBytes(be).Cmp(groupOrder) < 0
}

// VerifyCommit checks an armored commit signature over payload against the
// candidate public keys (normalized lines) and returns the key that made it.
// The signature must be in the one form CheckCommitSignature accepts.
func VerifyCommit(payload []byte, armored string, keys []string) (string, error) {
	sig, err := parseCommitSignature(armored)
	if err != nil {
		return "", err
	}
	for _, k := range keys {
		pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(k))
		if err != nil {
			continue
		}
		if sshsig.Verify(bytes.NewReader(payload), sig, pub, commitHash, gitNamespace) == nil {
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
