//go:build unix && !portable

package gitstore

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// PacksMapped: pack files are mapped, so what a long read of them holds
// is page cache that dropResident hands back, not heap.
const PacksMapped = true

// packMmap maps a whole file read-only. Git never rewrites pack files in place
// (it renames new files over old names), so the contents cannot change under us.
func packMmap(path string) ([]byte, error) {
	fd, err := openFD(path, unix.O_RDONLY, 0) // no *os.File: only the mapping outlives this call
	if err != nil {
		return nil, err
	}
	defer unix.Close(fd)
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		return nil, &os.PathError{Op: "fstat", Path: path, Err: err}
	}
	if st.Size <= 0 || int64(int(st.Size)) != st.Size {
		return nil, fmt.Errorf("gitstore: %s: cannot map %d bytes", path, st.Size)
	}
	b, err := unix.Mmap(fd, 0, int(st.Size), unix.PROT_READ, unix.MAP_PRIVATE)
	if err != nil {
		return nil, &os.PathError{Op: "mmap", Path: path, Err: err}
	}
	return b, nil
}

// unmapFile ends a mapping packMmap made.
func unmapFile(b []byte) { unix.Munmap(b) }

// dropResident takes the pages of b, part of a read-only mapping, out of
// this process's resident set (madvise MADV_DONTNEED; Linux drops them,
// macOS and FreeBSD take it as a hint). They stay in the page cache and a
// later read faults them back in, so nothing read changes.
func dropResident(b []byte) { unix.Madvise(b, unix.MADV_DONTNEED) }
