//go:build windows || portable

package gitstore

import (
	"errors"
	"io/fs"
	"os"
	"syscall"
	"time"
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

// renameFile replaces to with from (on Windows os.Rename is MoveFileEx
// with MOVEFILE_REPLACE_EXISTING). Where the system refuses to replace a
// file another process has open (Windows: renameBusy), it tries again for
// up to renameWait, as Git for Windows does: readers hold a ref or record
// open only while they read it.
func renameFile(from, to string) error {
	deadline := time.Now().Add(renameWait)
	for pause := time.Millisecond; ; pause = min(2*pause, 50*time.Millisecond) {
		err := os.Rename(from, to)
		if err == nil || !renameBusy(err) || time.Now().After(deadline) {
			return err
		}
		renameRetried()
		time.Sleep(pause)
	}
}

// renameWait bounds how long renameFile waits for readers of the file it
// replaces, as git's core.filesRefLockTimeout bounds a wait for a ref lock.
const renameWait = time.Second

// renameRetried is called before each new try of a rename (a test's seam).
var renameRetried = func() {}

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
