package gitstore

import (
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"strconv"
)

// ObjectID is the SHA-1 name of a git object. SHA-256 repositories are not supported.
type ObjectID [20]byte

// String returns id as 40 lowercase hex digits.
func (id ObjectID) String() string { return hex.EncodeToString(id[:]) }

// IsZero reports whether id is the all-zero ID, which git uses to mean "no object".
func (id ObjectID) IsZero() bool { return id == ObjectID{} }

// ParseObjectID parses 40 hex digits.
func ParseObjectID(s string) (ObjectID, error) {
	var id ObjectID
	if len(s) != 2*len(id) {
		return id, fmt.Errorf("gitstore: malformed object id %q", s)
	}
	if _, err := hex.Decode(id[:], []byte(s)); err != nil {
		return id, fmt.Errorf("gitstore: malformed object id %q", s)
	}
	return id, nil
}

// ObjectType is a git object type. The values are git's pack type numbers.
type ObjectType int8

// Object types.
const (
	CommitObject ObjectType = 1
	TreeObject   ObjectType = 2
	BlobObject   ObjectType = 3
	TagObject    ObjectType = 4
)

var odbTypeNames = [...]string{CommitObject: "commit", TreeObject: "tree", BlobObject: "blob", TagObject: "tag"}

// String returns the name git uses in object headers ("commit", "tree", "blob", "tag").
func (t ObjectType) String() string {
	if t >= CommitObject && t <= TagObject {
		return odbTypeNames[t]
	}
	return "ObjectType(" + strconv.Itoa(int(t)) + ")"
}

// looseParseType is the inverse of ObjectType.String; it returns 0 for unknown names.
func looseParseType(name []byte) ObjectType {
	for t := CommitObject; t <= TagObject; t++ {
		if string(name) == odbTypeNames[t] {
			return t
		}
	}
	return 0
}

// appendLooseHeader appends the "<type> <len>\x00" prefix that is hashed
// and, for loose objects, stored ahead of the data.
func appendLooseHeader(b []byte, t ObjectType, n int) []byte {
	b = append(append(b, t.String()...), ' ')
	return append(strconv.AppendInt(b, int64(n), 10), 0)
}

// HashObject returns the ID git assigns to an object of type t holding data.
func HashObject(t ObjectType, data []byte) ObjectID {
	var hdr [32]byte // room for any header on the stack: a verify hashes about ten objects an entry
	h := sha1.New()
	h.Write(appendLooseHeader(hdr[:0], t, len(data)))
	h.Write(data)
	var id ObjectID
	h.Sum(id[:0])
	return id
}
