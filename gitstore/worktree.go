package gitstore

import (
	"bytes"
	"encoding/binary"
)

// cacheTreeIs reports whether the index extensions ext hold no extension a
// reader must understand (a lowercase signature: split index, sparse index,
// ...) and a cache tree whose root is valid and is tree.
func cacheTreeIs(ext []byte, tree ObjectID) bool {
	found := false
	for len(ext) > 0 {
		if len(ext) < 8 {
			return false
		}
		sig, size := ext[:4], binary.BigEndian.Uint32(ext[4:])
		if uint64(len(ext)-8) < uint64(size) || sig[0] < 'A' || sig[0] > 'Z' {
			return false
		}
		data := ext[8 : 8+size]
		if string(sig) == "TREE" {
			// The root: path "" NUL, entry count, space, subtree count,
			// newline, then its id if the count is not -1 (invalidated).
			if len(data) < 1 || data[0] != 0 {
				return false
			}
			nl := bytes.IndexByte(data, '\n')
			if nl < 0 || bytes.HasPrefix(data[1:], []byte("-")) || len(data) < nl+1+len(tree) {
				return false
			}
			found = bytes.Equal(data[nl+1:nl+1+len(tree)], tree[:])
		}
		ext = ext[8+size:]
	}
	return found
}
