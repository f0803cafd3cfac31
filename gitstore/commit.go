package gitstore

import (
	"bytes"
	"encoding/hex"
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Ident is a git author or committer identity.
type Ident struct {
	Name  string
	Email string
	When  int64 // unix seconds
	TZ    string
}

func (i Ident) String() string { return string(i.appendTo(nil)) }

func (i Ident) appendTo(b []byte) []byte {
	b = append(b, i.Name...)
	b = append(b, " <"...)
	b = append(b, i.Email...)
	b = append(b, "> "...)
	b = strconv.AppendInt(b, i.When, 10)
	b = append(b, ' ')
	return append(b, i.TZ...)
}

// Commit is a git commit object.
type Commit struct {
	Tree      ObjectID
	Parents   []ObjectID
	Author    Ident
	Committer Ident
	Signature string // the gpgsig header value (an armored SSH or PGP signature), if any
	Message   string

	raw []byte // the parsed object, when c came from ParseCommit
}

// sigHeaders are the commit signature headers: git leaves every one of them,
// with its continuation lines, out of what a commit signature signs (the
// SHA-1 and the SHA-256 object format each have their own).
var sigHeaders = []string{"gpgsig ", "gpgsig-sha256 "}

func isSigHeader(line string) bool {
	for _, h := range sigHeaders {
		if strings.HasPrefix(line, h) {
			return true
		}
	}
	return false
}

// Payload is the commit without its signature headers: the bytes a commit
// signature signs, cut as git cuts them. For a parsed commit it is cut from
// the original bytes, so headers tally does not model are kept.
func (c *Commit) Payload() []byte {
	if c.raw == nil {
		return c.encode("")
	}
	header, msg, _ := bytes.Cut(c.raw, []byte("\n\n"))
	var b bytes.Buffer
	inSig := false
	for _, line := range strings.Split(string(header), "\n") {
		if isSigHeader(line) || (inSig && strings.HasPrefix(line, " ")) {
			inSig = true
			continue
		}
		inSig = false
		b.WriteString(line)
		b.WriteByte('\n')
	}
	b.WriteByte('\n')
	b.Write(msg)
	return b.Bytes()
}

// Raw is the object c was parsed from (nil for a commit built in memory).
// Comparing it with Encode of the commit a reader expects checks every byte,
// signature headers included, which Payload leaves out.
func (c *Commit) Raw() []byte { return c.raw }

// Encode returns the commit object content.
func (c *Commit) Encode() []byte { return c.encode(c.Signature) }

// AppendEncode appends Encode's bytes to b, for a caller that encodes
// commits in a loop into one buffer.
func (c *Commit) AppendEncode(b []byte) []byte { return c.appendEncode(b, c.Signature) }

func (c *Commit) encode(sig string) []byte {
	return c.appendEncode(make([]byte, 0, 256+len(c.Message)+len(sig)), sig)
}

func (c *Commit) appendEncode(b []byte, sig string) []byte {
	b = append(b, "tree "...)
	b = hex.AppendEncode(b, c.Tree[:])
	for _, p := range c.Parents {
		b = append(b, "\nparent "...)
		b = hex.AppendEncode(b, p[:])
	}
	b = append(b, "\nauthor "...)
	b = c.Author.appendTo(b)
	b = append(b, "\ncommitter "...)
	b = c.Committer.appendTo(b)
	b = append(b, '\n')
	if sig != "" {
		b = append(b, "gpgsig "...)
		b = append(b, strings.ReplaceAll(strings.TrimSuffix(sig, "\n"), "\n", "\n ")...)
		b = append(b, '\n')
	}
	b = append(b, '\n')
	return append(b, c.Message...)
}

// ParseCommit parses a commit object. Headers tally does not model (encoding,
// mergetag, ...) are skipped but stay in Raw and Payload. The message and
// every header string are cut from one copy of data (a verify parses every
// ledger commit; a copy for the header, one for the message and a slice of
// its lines cost three allocations).
func ParseCommit(data []byte) (*Commit, error) {
	c := &Commit{raw: data}
	sep := bytes.Index(data, []byte("\n\n"))
	if sep < 0 {
		return nil, errors.New("commit has no message separator")
	}
	s := string(data)
	c.Message = s[sep+2:]
	// Each header is a line and the continuation lines after it, which
	// begin with a space.
	rest, more := s[:sep], true
	for more {
		var line string
		line, rest, more = strings.Cut(rest, "\n")
		key, val, _ := strings.Cut(line, " ")
		var cont []string
		for more && strings.HasPrefix(rest, " ") {
			line, rest, more = strings.Cut(rest, "\n")
			cont = append(cont, line[1:])
		}
		var err error
		switch key {
		case "tree":
			c.Tree, err = ParseObjectID(val)
		case "parent":
			var p ObjectID
			p, err = ParseObjectID(val)
			c.Parents = append(c.Parents, p)
		case "author":
			c.Author, err = parseIdent(val)
		case "committer":
			c.Committer, err = parseIdent(val)
		case "gpgsig":
			c.Signature = strings.Join(append([]string{val}, cont...), "\n") + "\n"
		}
		if err != nil {
			return nil, fmt.Errorf("commit header %s: %w", key, err)
		}
	}
	if c.Tree.IsZero() {
		return nil, errors.New("commit has no tree")
	}
	return c, nil
}

func parseIdent(s string) (Ident, error) {
	lt, gt := strings.Index(s, " <"), strings.LastIndex(s, "> ")
	if lt < 0 || gt < lt {
		return Ident{}, fmt.Errorf("malformed identity %q", s)
	}
	id := Ident{Name: s[:lt], Email: s[lt+2 : gt]}
	when, tz, ok := strings.Cut(s[gt+2:], " ")
	if !ok {
		return Ident{}, fmt.Errorf("malformed identity date %q", s)
	}
	t, err := strconv.ParseInt(when, 10, 64)
	if err != nil {
		return Ident{}, fmt.Errorf("malformed identity date %q", s)
	}
	id.When, id.TZ = t, tz
	return id, nil
}

// ReadCommit reads and parses a commit.
func (db *ObjectDB) ReadCommit(id ObjectID) (*Commit, error) {
	typ, data, err := db.Read(id)
	return parseCommitObject(id, typ, data, err)
}

// ReadCommitAtMost is ReadCommit for a commit that must be at most max
// bytes (ReadAtMost: a larger one is refused by its header,
// ErrObjectTooLarge).
func (db *ObjectDB) ReadCommitAtMost(id ObjectID, max uint64) (*Commit, error) {
	typ, data, err := db.ReadAtMost(id, max)
	return parseCommitObject(id, typ, data, err)
}

// ReadCommit is ObjectDB.ReadCommit.
func (c *Cursor) ReadCommit(id ObjectID) (*Commit, error) {
	typ, data, err := c.Read(id)
	return parseCommitObject(id, typ, data, err)
}

// ReadCommitWith reads and parses commit id through read, a reader that
// serves some objects from elsewhere before the store (a sent range's).
func ReadCommitWith(read func(ObjectID) (ObjectType, []byte, error), id ObjectID) (*Commit, error) {
	typ, data, err := read(id)
	return parseCommitObject(id, typ, data, err)
}

// parseCommitObject parses what reading object id gave, which must be a commit.
func parseCommitObject(id ObjectID, typ ObjectType, data []byte, err error) (*Commit, error) {
	if err != nil {
		return nil, err
	}
	if typ != CommitObject {
		return nil, fmt.Errorf("object %s is a %s, not a commit", id, typ)
	}
	return ParseCommit(data)
}

// Trailers returns the "Key: value" lines of the last paragraph of a message.
func Trailers(msg string) map[string]string {
	out := map[string]string{}
	if !eachTrailer(msg, func(k, v string) { out[k] = v }) {
		return map[string]string{}
	}
	return out
}

// Trailer is Trailers(msg)[key], and whether it is there, without building
// the map (the verifier reads one trailer of every commit).
func Trailer(msg, key string) (value string, ok bool) {
	all := eachTrailer(msg, func(k, v string) {
		if k == key {
			value, ok = v, true
		}
	})
	if !all {
		return "", false
	}
	return value, ok
}

// eachTrailer calls f with each "Key: value" line of the last paragraph of
// msg, in order, and reports whether every line of that paragraph is one;
// if not, msg has no trailers and the calls made are void. The paragraph
// is what follows the last "\n\n" found scanning left to right (as
// strings.Split finds them) once trailing newlines are trimmed.
func eachTrailer(msg string, f func(k, v string)) bool {
	para := strings.TrimRight(msg, "\n")
	for {
		i := strings.Index(para, "\n\n")
		if i < 0 {
			break
		}
		para = para[i+2:]
	}
	for {
		line, rest, more := strings.Cut(para, "\n")
		k, v, ok := strings.Cut(line, ": ")
		if !ok || strings.ContainsAny(k, " \t") {
			return false
		}
		f(k, v)
		if !more {
			return true
		}
		para = rest
	}
}
