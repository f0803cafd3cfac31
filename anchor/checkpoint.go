// Package anchor makes tally's ledger checkable from outside: checkpoints
// (the C2SP tlog-checkpoint form of the ledger's size and Merkle root, as a
// signed note of golang.org/x/mod/sumdb/note), their consistency with a
// ledger, self-contained inclusion and consistency proofs, and the stored
// checkpoint refs that travel with the ledger. The "anchor" entry that
// records code refs together with a checkpoint is a rule of package lease.
// See docs/FORMAT.md §11.
package anchor

import (
	"bytes"
	"crypto/ed25519"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"

	"golang.org/x/mod/sumdb/note"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/identity"
	"github.com/tally-dev/tally/ledger"
)

// Checkpoint is the state of a ledger that a checkpoint commits to: its
// origin (the genesis body's origin), its size (number of entries) and the
// Merkle root of its first size entries.
type Checkpoint struct {
	Origin string     `json:"origin"`
	Size   uint64     `json:"size"`
	Root   chain.Hash `json:"root"`
}

// FromMeta returns the checkpoint of the ledger that m describes.
func FromMeta(m *chain.Meta) Checkpoint { return Checkpoint{m.Origin, m.Size, m.Root} }

// FromTiles returns the checkpoint of the ledger that m describes, with the
// root recomputed from the Merkle tiles kv holds (O(log n) tile reads). A
// root that differs from m's is CORRUPT.
func FromTiles(kv chain.KV, m *chain.Meta) (Checkpoint, error) {
	root, err := chain.RootFromReader(chain.TileNodeReader(kv, m.Size), m.Size)
	if err != nil {
		return Checkpoint{}, errs.Wrap(errs.Corrupt, err, "Merkle tiles")
	}
	if root != m.Root {
		return Checkpoint{}, errs.New(errs.Corrupt, "Merkle tiles give root %s, chain meta records %s", root, m.Root)
	}
	return FromMeta(m), nil
}

// Body returns the C2SP tlog-checkpoint body: the origin, the size in
// decimal and the root in standard base64, each on its own line.
func (c Checkpoint) Body() []byte {
	return fmt.Appendf(nil, "%s\n%d\n%s\n", c.Origin, c.Size, base64.StdEncoding.EncodeToString(c.Root[:]))
}

// commitLine starts the extension line of a checkpoint body that names the
// ledger commit of its last entry (entry size-1): "tally-commit <40 hex>".
// The signature covers it, so a trusted signer vouches for that commit, and
// with it for the state tree the commit holds, which the Merkle root alone
// does not bind (FORMAT.md §11).
const commitLine = "tally-commit "

// BodyAt returns Body with the commit line naming commit, the ledger commit
// of entry c.Size-1 (none for the zero id).
func (c Checkpoint) BodyAt(commit gitstore.ObjectID) []byte {
	b := c.Body()
	if commit.IsZero() {
		return b
	}
	return append(b, commitLine+commit.String()+"\n"...)
}

func invalid(format string, args ...any) *errs.Error {
	return errs.New(errs.CheckpointInvalid, format, args...)
}

// ParseBody parses a checkpoint body. Extension lines after the root are
// allowed by the C2SP format and ignored, but for tally's commit line
// (BodyAt), which ParseCommit reads; everything else must be in the one form
// Body writes.
func ParseBody(body []byte) (Checkpoint, error) {
	c, _, err := ParseCommit(body)
	return c, err
}

// ParseCommit parses a checkpoint body and its commit line: the ledger
// commit it names (zero when the body has none). A body with more than one
// commit line, one whose id is not 40 lowercase hex digits, or one of size
// 0 (which has no last entry), is CHECKPOINT-INVALID.
func ParseCommit(body []byte) (Checkpoint, gitstore.ObjectID, error) {
	var commit gitstore.ObjectID
	c, err := parseBody(body, func(ext string) error {
		hex, ok := strings.CutPrefix(ext, commitLine)
		if !ok {
			return nil
		}
		id, err := gitstore.ParseObjectID(hex)
		if err != nil || id.String() != hex || !commit.IsZero() {
			return invalid("checkpoint commit line %q is not one `tally-commit <40 lowercase hex>`", ext)
		}
		commit = id
		return nil
	})
	if err == nil && c.Size == 0 && !commit.IsZero() {
		return Checkpoint{}, commit, invalid("a checkpoint of 0 entries has no last entry for its commit line to name")
	}
	return c, commit, err
}

func parseBody(body []byte, ext func(string) error) (Checkpoint, error) {
	s := string(body)
	if !strings.HasSuffix(s, "\n") {
		return Checkpoint{}, invalid("checkpoint body does not end with a newline")
	}
	lines := strings.Split(strings.TrimSuffix(s, "\n"), "\n")
	if len(lines) < 3 {
		return Checkpoint{}, invalid("checkpoint body has %d lines, want origin, size and root", len(lines))
	}
	for _, l := range lines {
		if l == "" {
			return Checkpoint{}, invalid("checkpoint body has an empty line")
		}
	}
	var c Checkpoint
	c.Origin = lines[0]
	size, ok := parseDecimal(lines[1])
	if !ok {
		return Checkpoint{}, invalid("checkpoint size %q is not a decimal number", lines[1])
	}
	c.Size = size
	if c.Root, ok = parseHash64(lines[2]); !ok {
		return Checkpoint{}, invalid("checkpoint root %q is not a base64 32-byte hash", lines[2])
	}
	for _, l := range lines[3:] {
		if err := ext(l); err != nil {
			return Checkpoint{}, err
		}
	}
	return c, nil
}

// parseDecimal parses a size as checkpoints and proofs spell it: decimal,
// without sign or leading zeros.
func parseDecimal(s string) (uint64, bool) {
	n, err := strconv.ParseUint(s, 10, 64)
	return n, err == nil && strconv.FormatUint(n, 10) == s
}

// parseHash64 parses a hash as checkpoints and proofs spell it: standard
// base64 of its 32 bytes, in the one form the encoder writes. Decoding alone
// is not enough: it skips CR and LF and ignores the unused low bits of the
// last character, so several texts would name the same hash.
func parseHash64(s string) (chain.Hash, bool) {
	b, err := base64.StdEncoding.DecodeString(s)
	if err != nil || len(b) != len(chain.Hash{}) || base64.StdEncoding.EncodeToString(b) != s {
		return chain.Hash{}, false
	}
	return chain.Hash(b), true
}

// splitNote returns the body of a note (all of it when it has no signature
// block) and its signature lines.
func splitNote(text []byte) (body []byte, sigs []string) {
	i := bytes.Index(text, []byte("\n\n"))
	if i < 0 {
		return text, nil
	}
	return text[:i+1], strings.Split(strings.TrimSuffix(string(text[i+2:]), "\n"), "\n")
}

// Opened is a checkpoint read from its text.
type Opened struct {
	Checkpoint
	// SignedBy lists the verifier keys ("name+hash+key", the note verifier
	// key form) whose signatures verified. Empty when no key was asked for:
	// the checkpoint is then not authenticated.
	SignedBy []string `json:"signed_by"`
	// Commit is the ledger commit of the checkpoint's last entry its commit
	// line names, zero when it has none.
	Commit gitstore.ObjectID `json:"-"`
}

// Open reads a checkpoint: a signed note, or the bare body. Each of keys
// (see ParseVerifier) must have a valid signature on it, else the error is
// CHECKPOINT-INVALID; with no keys the signatures are not checked.
func Open(text []byte, keys []string) (*Opened, error) {
	body, _ := splitNote(text)
	c, commit, err := ParseCommit(body)
	if err != nil {
		return nil, err
	}
	o := &Opened{Checkpoint: c, SignedBy: []string{}, Commit: commit}
	if len(keys) == 0 {
		return o, nil
	}
	var vs []note.Verifier
	seen := map[string]bool{}
	for _, k := range keys {
		v, vkey, err := ParseVerifier(k, c.Origin)
		if err != nil {
			return nil, err
		}
		if !seen[vkey] {
			seen[vkey] = true
			vs = append(vs, v)
			o.SignedBy = append(o.SignedBy, vkey)
		}
	}
	n, err := note.Open(text, note.VerifierList(vs...))
	if err != nil {
		return nil, invalid("checkpoint signature: %v", err)
	}
	if o.Checkpoint, o.Commit, err = ParseCommit([]byte(n.Text)); err != nil { // the signed text itself
		return nil, err
	}
	for i, v := range vs {
		found := false
		for _, s := range n.Sigs {
			found = found || s.Name == v.Name() && s.Hash == v.KeyHash()
		}
		if !found {
			return nil, invalid("checkpoint is not signed by %s", o.SignedBy[i])
		}
	}
	return o, nil
}

// ParseVerifier parses a checkpoint verifier key: a note verifier key
// ("name+hash+key", as note.NewEd25519VerifierKey makes), or an SSH ed25519
// public key line, which verifies signatures made under name (the
// checkpoint's origin when the signer did not choose another). A value that
// is neither but names a readable file is read from that file. It returns
// the verifier and its note verifier key.
func ParseVerifier(key, name string) (note.Verifier, string, error) {
	v, vkey, err := parseVerifier(key, name)
	if err != nil {
		if b, ferr := os.ReadFile(key); ferr == nil {
			v, vkey, err = parseVerifier(string(b), name)
		}
	}
	if err != nil {
		return nil, "", errs.New(errs.Usage, "checkpoint key %q: %v", key, err)
	}
	return v, vkey, nil
}

func parseVerifier(key, name string) (note.Verifier, string, error) {
	key = strings.TrimSpace(key)
	if strings.HasPrefix(key, "ssh-") {
		pub, err := identity.ParseEd25519Public(key)
		if err != nil {
			return nil, "", err
		}
		if key, err = note.NewEd25519VerifierKey(name, pub); err != nil {
			return nil, "", fmt.Errorf("as a key named %q (give the note verifier key instead): %v", name, err)
		}
	}
	v, err := note.NewVerifier(key)
	if err != nil {
		return nil, "", errors.New("want a note verifier key, an ssh-ed25519 public key line or a file holding one")
	}
	return v, key, nil
}

// A Signer signs checkpoints; Key is its note verifier key, the one
// verifiers need.
type Signer struct {
	note.Signer
	Key string
}

// LoadSigner reads a checkpoint signing key: a note signer key
// ("PRIVATE+KEY+name+hash+key", as note.GenerateKey makes) given inline or
// in a file, or an unencrypted OpenSSH ed25519 private key file. An OpenSSH
// key is named name, or origin (the checkpoint's) when name is empty; a note
// key has its own name, which name, if not empty, must equal.
func LoadSigner(key, name, origin string) (*Signer, error) {
	skey := strings.TrimSpace(key)
	var file []byte
	if !strings.HasPrefix(skey, "PRIVATE+KEY+") {
		var err error
		if file, err = os.ReadFile(key); err != nil {
			return nil, errs.New(errs.Usage, "checkpoint signing key: %v", err)
		}
		skey = strings.TrimSpace(string(file))
	}
	if !strings.HasPrefix(skey, "PRIVATE+KEY+") {
		priv, err := identity.ParseEd25519(file, key)
		if err != nil {
			return nil, errs.New(errs.Usage, "checkpoint signing key: %v", err)
		}
		if name == "" {
			name = origin
		}
		if skey, err = noteSignerKey(name, priv); err != nil {
			return nil, errs.New(errs.Usage, "checkpoint signing key named %q (choose another name): %v", name, err)
		}
	}
	s, err := note.NewSigner(skey)
	if err != nil {
		return nil, errs.New(errs.Usage, "checkpoint signing key: %v", err)
	}
	if name != "" && s.Name() != name {
		return nil, errs.New(errs.Usage, "checkpoint signing key is named %q, not %q", s.Name(), name)
	}
	// The fifth field of a note signer key (base64, which may hold '+') is
	// the algorithm byte and the seed.
	seed, err := base64.StdEncoding.DecodeString(strings.SplitN(skey, "+", 5)[4])
	if err != nil || len(seed) != 1+ed25519.SeedSize {
		return nil, errs.New(errs.Usage, "checkpoint signing key is not an ed25519 note key")
	}
	vkey, err := note.NewEd25519VerifierKey(s.Name(), ed25519.NewKeyFromSeed(seed[1:]).Public().(ed25519.PublicKey))
	if err != nil {
		return nil, err
	}
	return &Signer{s, vkey}, nil
}

// noteSignerKey encodes an ed25519 key as a note signer key named name.
func noteSignerKey(name string, priv ed25519.PrivateKey) (string, error) {
	vkey, err := note.NewEd25519VerifierKey(name, priv.Public().(ed25519.PublicKey))
	if err != nil {
		return "", err
	}
	// vkey is name+hash+key; the signer key shares name and hash.
	hash := strings.Split(vkey, "+")[1]
	return "PRIVATE+KEY+" + name + "+" + hash + "+" +
		base64.StdEncoding.EncodeToString(append([]byte{1}, priv.Seed()...)), nil
}

// Sign returns the checkpoint's note, its body naming commit (BodyAt),
// signed by signers, or the bare body when there are none.
func Sign(c Checkpoint, commit gitstore.ObjectID, signers ...*Signer) ([]byte, error) {
	if len(signers) == 0 {
		return c.BodyAt(commit), nil
	}
	ns := make([]note.Signer, len(signers))
	for i, s := range signers {
		ns[i] = s.Signer
	}
	text, err := note.Sign(&note.Note{Text: string(c.BodyAt(commit))}, ns...)
	if err != nil {
		return nil, errs.New(errs.Usage, "signing checkpoint of %q: %v", c.Origin, err)
	}
	return text, nil
}

// mergeNotes returns a note with the body of a and b (which must be equal)
// and the signatures of both, a's first.
func mergeNotes(a, b []byte) ([]byte, error) {
	ba, sa := splitNote(a)
	bb, sb := splitNote(b)
	if !bytes.Equal(ba, bb) {
		return nil, errors.New("different checkpoint bodies")
	}
	sigs, seen := sa, map[string]bool{}
	for _, s := range sa {
		seen[s] = true
	}
	for _, s := range sb {
		if !seen[s] {
			sigs, seen[s] = append(sigs, s), true
		}
	}
	return joinNote(ba, sigs), nil
}

// joinNote is the inverse of splitNote: the body alone without signatures,
// else the body, a blank line and one line per signature.
func joinNote(body []byte, sigs []string) []byte {
	if len(sigs) == 0 {
		return body
	}
	return []byte(string(body) + "\n" + strings.Join(sigs, "\n") + "\n")
}

// wellFormedSignature reports whether line has the form of a signed note's
// signature line: "— <key name> <base64(4-byte key hash ‖ signature)>", the
// name without spaces or '+', the base64 canonical. It does not check the
// signature: that needs the signer's key (Open).
func wellFormedSignature(line string) bool {
	rest, ok := strings.CutPrefix(line, "— ")
	name, sig, ok2 := strings.Cut(rest, " ")
	if !ok || !ok2 || name == "" || strings.ContainsAny(name, " +\t") {
		return false
	}
	b, err := base64.StdEncoding.DecodeString(sig)
	return err == nil && len(b) > 4 && base64.StdEncoding.EncodeToString(b) == sig
}

// Trust returns the judge of fetched checkpoints for ledger.Options.Trust:
// a note is trusted when one of keys (see ParseVerifier; each made for the
// checkpoint's origin) signed it and its body names a ledger commit
// (BodyAt). Other notes, signed by other keys or without the commit line,
// are not trusted.
func Trust(keys []string) ledger.CheckpointTrust {
	return func(text []byte) (ledger.TrustedCheckpoint, bool) {
		for _, k := range keys {
			o, err := Open(text, []string{k})
			if err != nil || o.Commit.IsZero() {
				continue
			}
			name, _, _ := strings.Cut(o.SignedBy[0], "+")
			return ledger.TrustedCheckpoint{Origin: o.Origin, Size: o.Size, Root: o.Root, Commit: o.Commit, Key: name}, true
		}
		return ledger.TrustedCheckpoint{}, false
	}
}
