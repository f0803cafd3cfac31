package identity

// The OpenSSH formats tally reads and writes, for ed25519 keys only: the
// public key blob (RFC 8709 §4) and its authorized_keys line, the
// unencrypted "openssh-key-v1" private key file (OpenSSH's PROTOCOL.key),
// and SSHSIG signatures (PROTOCOL.sshsig). They are written here rather than
// taken from golang.org/x/crypto/ssh because that package's initializers
// (its Diffie-Hellman groups parsed with math/big, the NIST curves) ran in
// every tally process: ≈ 0.5 M instructions, a tenth of a `tally note`.
// identity_test.go checks the output against x/crypto/ssh and
// hiddeco/sshsig byte for byte.

import (
	"bytes"
	"crypto/ed25519"
	"crypto/rand"
	"crypto/sha256"
	"crypto/sha512"
	"encoding/base64"
	"encoding/binary"
	"encoding/pem"
	"errors"
	"fmt"
)

// keyType is the one key and signature algorithm tally accepts.
const keyType = "ssh-ed25519"

// appendString appends s in the SSH wire form of a string: its length as a
// big-endian uint32, then its bytes.
func appendString(b, s []byte) []byte {
	return append(binary.BigEndian.AppendUint32(b, uint32(len(s))), s...)
}

// wire reads SSH wire fields from b; the first short read sets bad, after
// which every read returns zero values.
type wire struct {
	b   []byte
	bad bool
}

func (w *wire) uint32() uint32 {
	if w.bad || len(w.b) < 4 {
		w.bad = true
		return 0
	}
	v := binary.BigEndian.Uint32(w.b)
	w.b = w.b[4:]
	return v
}

func (w *wire) string() []byte {
	n := w.uint32()
	if w.bad || uint64(n) > uint64(len(w.b)) {
		w.bad = true
		return nil
	}
	s := w.b[:n]
	w.b = w.b[n:]
	return s
}

// done reports whether every read succeeded and nothing is left.
func (w *wire) done() bool { return !w.bad && len(w.b) == 0 }

// publicBlob is pub's wire form: the key type, then the 32-byte key.
func publicBlob(pub ed25519.PublicKey) []byte {
	return appendString(appendString(nil, []byte(keyType)), pub)
}

// parsePublicBlob parses an ed25519 public key blob with nothing after it.
func parsePublicBlob(b []byte) (ed25519.PublicKey, error) {
	w := wire{b: b}
	typ, key := w.string(), w.string()
	switch {
	case !w.done():
		return nil, errors.New("malformed public key")
	case string(typ) != keyType:
		return nil, fmt.Errorf("key type %s: only ssh-ed25519 is accepted", typ)
	case len(key) != ed25519.PublicKeySize:
		return nil, errors.New("malformed ssh-ed25519 public key")
	}
	return ed25519.PublicKey(bytes.Clone(key)), nil
}

// authorizedLine is pub as a normalized public key line: "ssh-ed25519
// <base64 of the blob>", without a comment.
func authorizedLine(pub ed25519.PublicKey) string {
	return keyType + " " + base64.StdEncoding.EncodeToString(publicBlob(pub))
}

// fingerprintOf is OpenSSH's SHA256 fingerprint of pub: "SHA256:" and the
// unpadded base64 of the blob's SHA-256.
func fingerprintOf(pub ed25519.PublicKey) string {
	sum := sha256.Sum256(publicBlob(pub))
	return "SHA256:" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// parseKeyLine parses the first key of authorized_keys text: blank lines
// and '#' comments are skipped, and on the first other line the key is the
// base64 field after the field "ssh-ed25519" (options may come before it,
// a comment after). Another key type is refused by name.
func parseKeyLine(text string) (ed25519.PublicKey, error) {
	for line := range bytes.Lines([]byte(text)) {
		fields := bytes.Fields(line)
		if len(fields) == 0 || fields[0][0] == '#' {
			continue
		}
		i := 0
		for i < len(fields) && string(fields[i]) != keyType {
			i++
		}
		if i+1 >= len(fields) {
			if len(fields) >= 2 {
				return nil, fmt.Errorf("key type %s: only ssh-ed25519 is accepted", fields[0])
			}
			return nil, errors.New("not an SSH public key: no key found")
		}
		blob, err := base64.StdEncoding.DecodeString(string(fields[i+1]))
		if err != nil {
			return nil, fmt.Errorf("not an SSH public key: %v", err)
		}
		return parsePublicBlob(blob)
	}
	return nil, errors.New("not an SSH public key: no key found")
}

// The unencrypted OpenSSH private key file: a PEM block of this type around
// the magic, then cipher "none", KDF "none", empty KDF options, one key (its
// public blob) and the private section, which holds two equal check
// numbers, the key type, the public key, the 64-byte private key (seed ‖
// public), a comment, and padding 1, 2, 3, … to a multiple of 8 bytes.
const (
	privateKeyPEM   = "OPENSSH PRIVATE KEY"
	privateKeyMagic = "openssh-key-v1\x00"
)

// errPrivateKey is the refusal of every key file but an unencrypted
// ed25519 one.
var errPrivateKey = errors.New("only unencrypted ssh-ed25519 private keys are supported")

// parsePrivateKey parses an unencrypted OpenSSH ed25519 private key file.
func parsePrivateKey(file []byte) (ed25519.PrivateKey, error) {
	block, _ := pem.Decode(file)
	if block == nil {
		return nil, errors.New("no OpenSSH private key found")
	}
	rest, ok := bytes.CutPrefix(block.Bytes, []byte(privateKeyMagic))
	if block.Type != privateKeyPEM || !ok {
		return nil, errPrivateKey
	}
	w := wire{b: rest}
	cipher, kdf, kdfOpts, n := w.string(), w.string(), w.string(), w.uint32()
	w.string() // the public key, checked against the private one below
	sec := wire{b: w.string()}
	if !w.done() || n != 1 {
		return nil, errors.New("malformed OpenSSH private key")
	}
	if string(cipher) != "none" || string(kdf) != "none" || len(kdfOpts) != 0 {
		return nil, errPrivateKey
	}
	check1, check2, typ := sec.uint32(), sec.uint32(), sec.string()
	pub, priv, _ := sec.string(), sec.string(), sec.string()
	switch {
	case sec.bad || check1 != check2:
		return nil, errors.New("malformed OpenSSH private key")
	case string(typ) != keyType:
		return nil, errPrivateKey
	case len(priv) != ed25519.PrivateKeySize || !bytes.Equal(pub, priv[32:]) ||
		!bytes.Equal(ed25519.NewKeyFromSeed(priv[:32]), priv):
		return nil, errors.New("malformed ssh-ed25519 private key")
	}
	for i, p := range sec.b {
		if int(p) != i+1 {
			return nil, errors.New("malformed OpenSSH private key padding")
		}
	}
	return ed25519.PrivateKey(bytes.Clone(priv)), nil
}

// marshalPrivateKey writes priv as an unencrypted OpenSSH private key file,
// as ssh-keygen does (check numbers random).
func marshalPrivateKey(priv ed25519.PrivateKey, comment string) ([]byte, error) {
	var check [4]byte
	if _, err := rand.Read(check[:]); err != nil {
		return nil, err
	}
	pub := priv.Public().(ed25519.PublicKey)
	sec := append(check[:], check[:]...)
	sec = appendString(sec, []byte(keyType))
	sec = appendString(sec, pub)
	sec = appendString(sec, priv)
	sec = appendString(sec, []byte(comment))
	for i := byte(1); len(sec)%8 != 0; i++ {
		sec = append(sec, i)
	}
	b := []byte(privateKeyMagic)
	for _, s := range []string{"none", "none", ""} {
		b = appendString(b, []byte(s))
	}
	b = binary.BigEndian.AppendUint32(b, 1)
	b = appendString(b, publicBlob(pub))
	b = appendString(b, sec)
	return pem.EncodeToMemory(&pem.Block{Type: privateKeyPEM, Bytes: b}), nil
}

// An SSHSIG signature: the blob is the magic, version 1, the signer's public
// key blob, the namespace, an empty reserved field, the hash algorithm and
// the signature (its algorithm and its bytes); what is signed is the magic,
// the namespace, the reserved field, the hash algorithm and the message's
// hash. Armored, the blob is a PEM block of type "SSH SIGNATURE".
const (
	sigMagic = "SSHSIG"
	sigPEM   = "SSH SIGNATURE"
)

// signature is a decoded SSHSIG blob.
type signature struct {
	pub       ed25519.PublicKey
	namespace string
	reserved  []byte
	hash      string
	format    string // the signature's algorithm
	sig       []byte
	rest      []byte // bytes after the signature inside its field
}

// signedData is what an SSHSIG signature of a message hashed to sum signs.
func signedData(namespace, hash string, sum []byte) []byte {
	b := []byte(sigMagic)
	b = appendString(b, []byte(namespace))
	b = appendString(b, nil)
	b = appendString(b, []byte(hash))
	return appendString(b, sum)
}

// sign makes the SSHSIG signature of message in namespace, hashed with
// SHA-512, by priv.
func sign(priv ed25519.PrivateKey, message []byte, namespace string) *signature {
	sum := sha512.Sum512(message)
	return &signature{pub: priv.Public().(ed25519.PublicKey), namespace: namespace, hash: commitHash, format: keyType,
		sig: ed25519.Sign(priv, signedData(namespace, commitHash, sum[:]))}
}

// verify checks s as the SSHSIG signature of message by pub, in s's own
// namespace and with its hash, which the caller has checked.
func (s *signature) verify(message []byte, pub ed25519.PublicKey) bool {
	sum := sha512.Sum512(message)
	return s.format == keyType && bytes.Equal(s.pub, pub) &&
		ed25519.Verify(pub, signedData(s.namespace, s.hash, sum[:]), s.sig)
}

// armor is s's armored text, each line of the base64 64 characters long.
func (s *signature) armor() string {
	b := []byte(sigMagic)
	b = binary.BigEndian.AppendUint32(b, 1)
	b = appendString(b, publicBlob(s.pub))
	b = appendString(b, []byte(s.namespace))
	b = appendString(b, s.reserved)
	b = appendString(b, []byte(s.hash))
	b = appendString(b, append(appendString(appendString(nil, []byte(s.format)), s.sig), s.rest...))
	return string(pem.EncodeToMemory(&pem.Block{Type: sigPEM, Bytes: b}))
}

// unarmor decodes the first SSHSIG block of armored, as leniently as PEM
// allows (the caller requires the canonical text by re-armoring).
func unarmor(armored string) (*signature, error) {
	block, _ := pem.Decode([]byte(armored))
	if block == nil || block.Type != sigPEM {
		return nil, errors.New("not an armored SSH signature")
	}
	rest, ok := bytes.CutPrefix(block.Bytes, []byte(sigMagic))
	w := wire{b: rest}
	version := w.uint32()
	pubBlob, namespace, reserved, hash := w.string(), w.string(), w.string(), w.string()
	inner := wire{b: w.string()}
	format, sig := inner.string(), inner.string()
	if !ok || !w.done() || inner.bad {
		return nil, errors.New("malformed SSHSIG blob")
	}
	if version != 1 {
		return nil, fmt.Errorf("SSHSIG version %d, only 1 is known", version)
	}
	pub, err := parsePublicBlob(pubBlob)
	if err != nil {
		return nil, err
	}
	return &signature{pub: pub, namespace: string(namespace), reserved: reserved, hash: string(hash),
		format: string(format), sig: sig, rest: inner.b}, nil
}
