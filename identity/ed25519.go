package identity

import (
	"crypto/ed25519"
	"fmt"
)

// ParseEd25519 parses an unencrypted OpenSSH ed25519 private key file's
// content b, the form ParseSigner accepts, and returns the raw key, for
// signers other than SSHSIG (such as checkpoint notes). path names the file
// in errors; the caller reads it (this package does no I/O).
func ParseEd25519(b []byte, path string) (ed25519.PrivateKey, error) {
	priv, err := parsePrivateKey(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %v", path, err)
	}
	return priv, nil
}

// ParseEd25519Public parses an SSH public key line ("ssh-ed25519 AAAA...
// [comment]") and returns the raw ed25519 key.
func ParseEd25519Public(line string) (ed25519.PublicKey, error) {
	return parseKeyLine(line)
}
