// Package identity handles the keys that prove who appended a ledger entry:
// SSH ed25519 public keys registered per actor in the ledger, and SSHSIG
// signatures on ledger commits in the form `git verify-commit` accepts (the
// armored signature in the commit's gpgsig header, namespace "git").
package identity

import (
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"fmt"
)

// gitNamespace is the SSHSIG namespace git uses for commit signatures.
const gitNamespace = "git"

// ErrBadSignature is returned when a signature does not verify.
var ErrBadSignature = errors.New("bad signature")

// NormalizeKey parses an SSH public key line ("ssh-ed25519 AAAA... [comment]")
// and returns it as "ssh-ed25519 <base64>", without the comment, and its
// SHA256 fingerprint. Only ed25519 keys are accepted.
func NormalizeKey(line string) (key, fingerprint string, err error) {
	pub, err := parseKeyLine(line)
	if err != nil {
		return "", "", err
	}
	return authorizedLine(pub), fingerprintOf(pub), nil
}

// Signer signs ledger commits.
type Signer struct {
	priv ed25519.PrivateKey
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
	return &Signer{priv: priv, PublicKey: authorizedLine(priv.Public().(ed25519.PublicKey))}, nil
}

// SignCommit returns the armored SSHSIG signature of a commit payload, the
// value of its gpgsig header.
func (s *Signer) SignCommit(payload []byte) (string, error) {
	return sign(s.priv, payload, gitNamespace).armor(), nil
}

// commitHash is the one SSHSIG hash algorithm a commit signature may name
// (FORMAT.md §7). SSHSIG also allows sha256; accepting both would give every
// signed entry a second commit id that its key holder never made.
const commitHash = "sha512"

// CheckCommitSignature tells whether armored is a commit signature in the one
// form FORMAT.md §7 allows, without checking it against any key. It is
// exactly the text SignCommit writes for its blob: PEM's armor (a "-----BEGIN SSH SIGNATURE-----" line, standard padded
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
func parseCommitSignature(armored string) (*signature, error) {
	sig, err := unarmor(armored)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadSignature, err)
	}
	switch {
	case sig.hash != commitHash:
		return nil, fmt.Errorf("%w: SSHSIG hash algorithm %q, commit signatures use %q", ErrBadSignature, sig.hash, commitHash)
	case sig.namespace != gitNamespace:
		return nil, fmt.Errorf("%w: SSHSIG namespace %q, commit signatures use %q", ErrBadSignature, sig.namespace, gitNamespace)
	case sig.format != keyType || len(sig.sig) != ed25519.SignatureSize || len(sig.rest) != 0:
		return nil, fmt.Errorf("%w: not a plain ssh-ed25519 signature", ErrBadSignature)
	case !canonicalScalar(sig.sig[32:]):
		// ed25519.Verify refuses it too; checked here so that a signature
		// no key can check has the one form as well.
		return nil, fmt.Errorf("%w: Ed25519 S is not below the group order", ErrBadSignature)
	}
	// Re-encoding from the fields that matter covers what is left: the
	// reserved field (a signer writes it empty) and every freedom of the
	// armor and its base64 (unarmor refuses another version and bytes after
	// the blob).
	canon := signature{pub: sig.pub, namespace: gitNamespace, hash: commitHash, format: keyType, sig: sig.sig}
	if canon.armor() != armored {
		return nil, fmt.Errorf("%w: not in canonical form (armor, base64 or an SSHSIG field differs from what a signer writes)", ErrBadSignature)
	}
	return sig, nil
}

// groupOrder is L, the order of the Ed25519 base point: 2^252 +
// 27742317777372353535851937790883648493, little-endian as a signature's S.
var groupOrder = [32]byte{0xed, 0xd3, 0xf5, 0x5c, 0x1a, 0x63, 0x12, 0x58, 0xd6, 0x9c, 0xf7, 0xa2, 0xde, 0xf9, 0xde, 0x14,
	0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0x10}

// canonicalScalar reports whether s, 32 bytes little-endian, is below L, as
// RFC 8032 §5.1.7 requires of a signature's S: S and S + L are otherwise the
// same signature.
func canonicalScalar(s []byte) bool {
	for i := len(groupOrder) - 1; i >= 0; i-- {
		if s[i] != groupOrder[i] {
			return s[i] < groupOrder[i]
		}
	}
	return false // S = L
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
		pub, err := parseKeyLine(k)
		if err != nil {
			continue
		}
		if sig.verify(payload, pub) {
			return k, nil
		}
	}
	return "", fmt.Errorf("%w: made by %s, which is not a registered key of the actor", ErrBadSignature,
		fingerprintOf(sig.pub))
}

// Generate makes a new ed25519 key pair: the OpenSSH private key file content
// and the public key line.
func Generate(comment string) (private []byte, public string, err error) {
	pub, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		return nil, "", err
	}
	if private, err = marshalPrivateKey(priv, comment); err != nil {
		return nil, "", err
	}
	public = authorizedLine(pub)
	if comment != "" {
		public += " " + comment
	}
	return private, public, nil
}
