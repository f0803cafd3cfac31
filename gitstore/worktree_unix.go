//go:build unix

package gitstore

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"os"
	"path/filepath"
	"syscall"
)

// WorkTreeClean reports whether git's index proves the work tree free of
// uncommitted edits to tracked files: true only when `git status
// --porcelain --untracked-files=no` would print nothing, and false whenever
// it cannot tell cheaply (ask git then). It reads the index and lstats the
// tracked files, as git does, but never hashes a file's content: where git
// would (a changed stat, a racily clean entry) it answers false.
//
// Proven clean means: the index is a version 2 or 3 file whose checksum
// holds, with no extension git requires readers to understand; its cache
// tree's root is valid and is HEAD's tree (so the index stages nothing);
// every entry is at stage 0, without assume-valid, skip-worktree or
// intent-to-add, a regular file or symlink (no submodule); and each file's
// lstat matches what the index recorded (ctime, mtime to the nanosecond,
// device, inode, owner, size, type and executable bit) with an mtime before
// the index's own (not racily clean).
func (r *Repo) WorkTreeClean() bool {
	if r.WorkTree == "" || os.Getenv("GIT_INDEX_FILE") != "" {
		return false
	}
	path := filepath.Join(r.GitDir, "index")
	b, err := os.ReadFile(path)
	if err != nil {
		return false
	}
	var ist syscall.Stat_t
	if syscall.Stat(path, &ist) != nil {
		return false
	}
	head, err := r.Head()
	if err != nil {
		return false
	}
	db, err := r.Objects()
	if err != nil {
		return false
	}
	c, err := db.ReadCommit(head)
	if err != nil {
		return false
	}
	return indexClean(b, c.Tree, statMtime(&ist), func(p string, st *syscall.Stat_t) bool {
		return syscall.Lstat(filepath.Join(r.WorkTree, p), st) == nil
	})
}

// indexClean is WorkTreeClean on the index bytes b, HEAD's tree, the index
// file's mtime and lstat of a tracked path.
func indexClean(b []byte, tree ObjectID, indexMtime syscall.Timespec, lstat func(string, *syscall.Stat_t) bool) bool {
	const hdr, sum = 12, sha1.Size
	if len(b) < hdr+sum || string(b[:4]) != "DIRC" {
		return false
	}
	body := b[:len(b)-sum]
	if s := sha1.Sum(body); !bytes.Equal(s[:], b[len(body):]) {
		return false // damaged, or written with index.skipHash
	}
	version := binary.BigEndian.Uint32(b[4:])
	if version != 2 && version != 3 {
		return false // v4 compresses paths; git reads it, we leave it to git
	}
	n := binary.BigEndian.Uint32(b[8:])
	off := hdr
	var st syscall.Stat_t
	for range n {
		const fixed = 62 // stat data, mode, ids, size, object id, flags
		if off+fixed > len(body) {
			return false
		}
		e := body[off:]
		u32 := func(i int) uint32 { return binary.BigEndian.Uint32(e[4*i:]) }
		flags := binary.BigEndian.Uint16(e[60:])
		if flags&0xF000 != 0 { // assume-valid, extended (skip-worktree, intent-to-add), a stage
			return false
		}
		name := e[fixed:]
		end := bytes.IndexByte(name, 0)
		if end < 0 {
			return false
		}
		size := (fixed + end + 8) &^ 7 // NUL-padded to a multiple of 8
		if off+size > len(body) || !lstat(string(name[:end]), &st) {
			return false
		}
		mode := u32(6)
		var typeOK bool
		switch mode {
		case 0o100644, 0o100755:
			typeOK = st.Mode&syscall.S_IFMT == syscall.S_IFREG && (st.Mode&0o111 != 0) == (mode == 0o100755)
		case 0o120000:
			typeOK = st.Mode&syscall.S_IFMT == syscall.S_IFLNK
		}
		ctime, mtime := statCtime(&st), statMtime(&st)
		if !typeOK || u32(0) != uint32(ctime.Sec) || u32(1) != uint32(ctime.Nsec) ||
			u32(2) != uint32(mtime.Sec) || u32(3) != uint32(mtime.Nsec) || u32(4) != uint32(st.Dev) ||
			u32(5) != uint32(st.Ino) || u32(7) != st.Uid || u32(8) != st.Gid || u32(9) != uint32(st.Size) {
			return false
		}
		if mtime.Sec >= indexMtime.Sec { // racily clean: git would read the file
			return false
		}
		off += size
	}
	return cacheTreeIs(body[off:], tree)
}
