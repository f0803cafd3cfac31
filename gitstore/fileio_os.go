//go:build windows || portable

package gitstore

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
)

// The file helpers through package os, for Windows (whose handles are no
// unix descriptors) and the portable build; fileio_unix.go has the
// poller-free ones Linux, macOS and FreeBSD use.

// oDirectory is 0: os.OpenFile has no flag that refuses a non-directory on
// Windows, and the one caller lists the directory it opened, which fails
// on a file anyway.
const oDirectory = 0

func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	return os.OpenFile(name, flag, perm)
}

func readFile(name string) ([]byte, error) { return os.ReadFile(name) }

// renameFile replaces to with from; on Windows os.Rename is MoveFileEx
// with MOVEFILE_REPLACE_EXISTING.
func renameFile(from, to string) error { return os.Rename(from, to) }

// syncDir fsyncs a directory so renames and creations in it are durable.
// A directory that cannot be synced is left to its filesystem: some unix
// filesystems answer EINVAL, and Windows, whose NTFS journals its
// directory entries, refuses to flush a directory handle (access denied).
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	if err := d.Sync(); err != nil && !errors.Is(err, syscall.EINVAL) && !errors.Is(err, fs.ErrPermission) {
		return err
	}
	return nil
}
