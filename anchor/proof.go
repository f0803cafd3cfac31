package anchor

import (
	"encoding/base64"
	"fmt"
	"strings"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
)

// Proof types.
const (
	TypeInclusion   = "inclusion"
	TypeConsistency = "consistency"
)

// proofHeader is the first line of a proof's text.
const proofHeader = "tally-proof v1"

// Proof is a self-contained Merkle proof about a ledger: everything a
// verifier needs is in it, and Verify checks it without the repository.
//
// An inclusion proof shows that Entry (an entry hash; its leaf hash is
// chain.LeafHash of it) is entry *Index of the log of Size entries and root
// Root. A consistency proof shows that the log of *OldSize entries and root
// *OldRoot is a prefix of the log of Size entries and root Root. Path is the
// RFC 9162 §2.1.3 audit path or §2.1.4 consistency proof.
//
// A proof binds its root to the size it states only as far as the path's
// shape depends on the size: trees of sizes whose paths have the same shape
// verify alike. What a root is the root of is vouched for by a checkpoint;
// Matches checks a proof against one.
type Proof struct {
	Type    string       `json:"type"`
	Origin  string       `json:"origin"`
	Size    uint64       `json:"size"`
	Root    chain.Hash   `json:"root"`
	Index   *uint64      `json:"index,omitempty"`    // inclusion
	Entry   *chain.Hash  `json:"entry,omitempty"`    // inclusion
	OldSize *uint64      `json:"old_size,omitempty"` // consistency
	OldRoot *chain.Hash  `json:"old_root,omitempty"` // consistency
	Path    []chain.Hash `json:"path"`
}

// ProveInclusion proves that entry seq is in the first size entries (0: all
// of them) of the ledger that m describes and whose tiles kv holds.
func ProveInclusion(kv chain.KV, m *chain.Meta, seq, size uint64) (*Proof, error) {
	if size == 0 {
		size = m.Size
	}
	if size > m.Size || seq >= size {
		return nil, errs.New(errs.Usage, "cannot prove entry %d in the first %d entries of a ledger of %d", seq, size, m.Size)
	}
	r := chain.TileNodeReader(kv, m.Size)
	entry, _, err := chain.EntryRecord(kv, m.Size, seq)
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "Merkle tiles")
	}
	p := &Proof{Type: TypeInclusion, Origin: m.Origin, Size: size, Index: &seq, Entry: &entry}
	if p.Root, err = chain.RootFromReader(r, size); err == nil {
		p.Path, err = chain.InclusionProof(r, seq, size)
	}
	return p.selfCheck(m, err)
}

// ProveConsistency proves that the first oldSize entries of the ledger that
// m describes are a prefix of its first newSize entries (0: all of them).
func ProveConsistency(kv chain.KV, m *chain.Meta, oldSize, newSize uint64) (*Proof, error) {
	if newSize == 0 {
		newSize = m.Size
	}
	if newSize > m.Size || oldSize > newSize {
		return nil, errs.New(errs.Usage, "cannot prove consistency from %d to %d entries in a ledger of %d", oldSize, newSize, m.Size)
	}
	r := chain.TileNodeReader(kv, m.Size)
	p := &Proof{Type: TypeConsistency, Origin: m.Origin, Size: newSize, OldSize: &oldSize, OldRoot: new(chain.Hash)}
	var err error
	if *p.OldRoot, err = chain.RootFromReader(r, oldSize); err == nil {
		if p.Root, err = chain.RootFromReader(r, newSize); err == nil {
			p.Path, err = chain.ConsistencyProof(r, oldSize, newSize)
		}
	}
	return p.selfCheck(m, err)
}

// selfCheck finishes a proof read from the tiles: it must verify, and a
// proof about the whole ledger must lead to the root the chain meta records.
func (p *Proof) selfCheck(m *chain.Meta, err error) (*Proof, error) {
	if err == nil {
		err = p.Verify()
	}
	if err == nil && p.Size == m.Size && p.Root != m.Root {
		err = fmt.Errorf("root %s, chain meta records %s", p.Root, m.Root)
	}
	if err != nil {
		return nil, errs.Wrap(errs.Corrupt, err, "Merkle tiles")
	}
	return p, nil
}

// Verify checks the proof (RFC 9162 §2.1.3.2 or §2.1.4.2 with tally's
// BLAKE3 hasher). A proof that does not verify is PROOF-INVALID.
func (p *Proof) Verify() error {
	var err error
	switch {
	case p.Type == TypeInclusion && p.Index != nil && p.Entry != nil:
		err = chain.VerifyInclusion(chain.LeafHash(*p.Entry), *p.Index, p.Size, p.Path, p.Root)
	case p.Type == TypeConsistency && p.OldSize != nil && p.OldRoot != nil:
		err = chain.VerifyConsistency(*p.OldSize, p.Size, *p.OldRoot, p.Root, p.Path)
	default:
		err = fmt.Errorf("incomplete %s proof", p.Type)
	}
	if err != nil {
		return errs.Wrap(errs.ProofInvalid, err, "%s proof", p.Type)
	}
	return nil
}

// Matches checks that the proof is about the log a checkpoint commits to: the
// same origin, and the checkpoint's size and root are the proof's (for a
// consistency proof, those of either end). Otherwise it is PROOF-INVALID.
func (p *Proof) Matches(c Checkpoint) error {
	switch {
	case c.Origin != p.Origin:
		return errs.New(errs.ProofInvalid, "proof is about log %q, the checkpoint about %q", p.Origin, c.Origin)
	case c.Size == p.Size && c.Root == p.Root:
	case p.Type == TypeConsistency && p.OldSize != nil && c.Size == *p.OldSize && c.Root == *p.OldRoot:
	default:
		return errs.New(errs.ProofInvalid, "proof is not about the checkpoint's log of %d entries and root %s", c.Size, c.Root)
	}
	return nil
}

func b64(h chain.Hash) string { return base64.StdEncoding.EncodeToString(h[:]) }

// Text returns the proof in its text form (docs/FORMAT.md §11): the line
// "tally-proof v1", then one "name value" line per field in a fixed order,
// then the path, one standard base64 hash per line.
//
//	tally-proof v1              tally-proof v1
//	type inclusion              type consistency
//	origin <origin>             origin <origin>
//	size <n>                    old-size <m>
//	root <base64>               old-root <base64>
//	index <seq>                 new-size <n>
//	entry <hex entry hash>      new-root <base64>
//	<base64>...                 <base64>...
func (p *Proof) Text() []byte {
	var b strings.Builder
	fmt.Fprintf(&b, "%s\ntype %s\norigin %s\n", proofHeader, p.Type, p.Origin)
	if p.Type == TypeConsistency {
		fmt.Fprintf(&b, "old-size %d\nold-root %s\nnew-size %d\nnew-root %s\n", *p.OldSize, b64(*p.OldRoot), p.Size, b64(p.Root))
	} else {
		fmt.Fprintf(&b, "size %d\nroot %s\nindex %d\nentry %s\n", p.Size, b64(p.Root), *p.Index, p.Entry)
	}
	for _, h := range p.Path {
		fmt.Fprintf(&b, "%s\n", b64(h))
	}
	return []byte(b.String())
}

// maxPath bounds the path length a proof may claim (a consistency proof of
// a log of 2^64 entries has at most 65 hashes).
const maxPath = 66

// ParseProof parses the text form of a proof, strictly: any deviation from
// the form Text writes is PROOF-INVALID.
func ParseProof(text []byte) (*Proof, error) {
	s := string(text)
	if !strings.HasSuffix(s, "\n") {
		return nil, errs.New(errs.ProofInvalid, "malformed proof: no final newline")
	}
	r := &proofReader{lines: strings.Split(strings.TrimSuffix(s, "\n"), "\n")}
	if r.next() != proofHeader {
		return nil, errs.New(errs.ProofInvalid, "malformed proof: first line is not %q", proofHeader)
	}
	p := &Proof{Type: r.field("type"), Origin: r.field("origin")}
	switch p.Type {
	case TypeInclusion:
		size, root, index := r.num("size"), r.hash(r.field("root")), r.num("index")
		entry, err := chain.ParseHash(r.field("entry"))
		if err != nil && r.err == nil {
			r.err = err
		}
		p.Size, p.Root, p.Index, p.Entry = size, root, &index, &entry
	case TypeConsistency:
		oldSize, oldRoot := r.num("old-size"), r.hash(r.field("old-root"))
		p.Size, p.Root, p.OldSize, p.OldRoot = r.num("new-size"), r.hash(r.field("new-root")), &oldSize, &oldRoot
	default:
		return nil, errs.New(errs.ProofInvalid, "malformed proof: type %q is neither %s nor %s", p.Type, TypeInclusion, TypeConsistency)
	}
	if len(r.lines) > maxPath {
		return nil, errs.New(errs.ProofInvalid, "malformed proof: path of %d hashes", len(r.lines))
	}
	p.Path = make([]chain.Hash, 0, len(r.lines))
	for len(r.lines) > 0 {
		p.Path = append(p.Path, r.hash(r.next()))
	}
	if r.err != nil {
		return nil, errs.New(errs.ProofInvalid, "malformed proof: %v", r.err)
	}
	return p, nil
}

// proofReader reads the lines of a proof, keeping the first error.
type proofReader struct {
	lines []string
	err   error
}

func (r *proofReader) fail(format string, args ...any) {
	if r.err == nil {
		r.err = fmt.Errorf(format, args...)
	}
}

func (r *proofReader) next() string {
	if len(r.lines) == 0 {
		r.fail("proof ends early")
		return ""
	}
	l := r.lines[0]
	r.lines = r.lines[1:]
	return l
}

// field reads the line "<name> <value>" and returns the non-empty value.
func (r *proofReader) field(name string) string {
	v, ok := strings.CutPrefix(r.next(), name+" ")
	if !ok || v == "" {
		r.fail("want a line %q", name+" <value>")
	}
	return v
}

func (r *proofReader) num(name string) uint64 {
	v := r.field(name)
	n, ok := parseDecimal(v)
	if !ok {
		r.fail("%s %q is not a decimal number", name, v)
	}
	return n
}

func (r *proofReader) hash(v string) chain.Hash {
	h, ok := parseHash64(v)
	if !ok {
		r.fail("%q is not a base64 32-byte hash", v)
	}
	return h
}

// VerifyProof parses a proof's text and verifies it. It needs no
// repository: the proof carries the hashes it is about.
func VerifyProof(text []byte) (*Proof, error) {
	p, err := ParseProof(text)
	if err != nil {
		return nil, err
	}
	return p, p.Verify()
}
