//go:build windows || portable

package gitstore

import "fmt"

// PacksMapped: pack files are read into the heap, which holds them while
// they are open (a full verify holds every pack of the ledger).
const PacksMapped = false

// packMmap reads a whole file into memory. Windows gets no mapping: git
// renames over and deletes pack files that another process may have mapped,
// which Windows refuses while the mapping lives. The portable build (Linux
// with -tags portable) takes this path too, so the Linux suite runs it.
// Git never rewrites pack files in place, so what was read stays true.
func packMmap(path string) ([]byte, error) {
	b, err := readFile(path)
	if err != nil {
		return nil, err
	}
	if len(b) == 0 {
		return nil, fmt.Errorf("gitstore: %s: cannot map 0 bytes", path)
	}
	return b, nil
}

// unmapFile lets go of what packMmap read; the garbage collector frees it.
func unmapFile([]byte) {}

// dropResident does nothing: memory read into the heap cannot be handed
// back while it is referenced, so a long scan here holds the packs it read.
func dropResident([]byte) {}
