package identity

import (
	"crypto/ed25519"
	"fmt"

	"golang.org/x/crypto/ssh"
)

// ParseEd25519 parses an unencrypted OpenSSH ed25519 private key file's
// content b, the form ParseSigner accepts, and returns the raw key, for
// signers other than SSHSIG (such as checkpoint notes). path names the file
// in errors; the caller reads it (this package does no I/O).
func ParseEd25519(b []byte, path string) (ed25519.PrivateKey, error) {
	raw, err := ssh.ParseRawPrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	priv, ok := raw.(*ed25519.PrivateKey)
	if !ok {
		return nil, fmt.Errorf("%s: only unencrypted ssh-ed25519 private keys are supported", path)
	}
	return *priv, nil
}

// ParseEd25519Public parses an SSH public key line ("ssh-ed25519 AAAA...
// [comment]") and returns the raw ed25519 key.
func ParseEd25519Public(line string) (ed25519.PublicKey, error) {
	pub, err := parseEd25519Line(line)
	if err != nil {
		return nil, err
	}
	return pub.(ssh.CryptoPublicKey).CryptoPublicKey().(ed25519.PublicKey), nil
}

// parseEd25519Line parses an authorized_keys line holding an ed25519 key.
func parseEd25519Line(line string) (ssh.PublicKey, error) {
	pub, _, _, _, err := ssh.ParseAuthorizedKey([]byte(line))
	if err != nil {
		return nil, fmt.Errorf("not an SSH public key: %v", err)
	}
	if _, ok := pub.(ssh.CryptoPublicKey); !ok || pub.Type() != ssh.KeyAlgoED25519 {
		return nil, fmt.Errorf("key type %s: only ssh-ed25519 is accepted", pub.Type())
	}
	return pub, nil
}
