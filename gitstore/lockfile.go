package gitstore

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
)

// File locks (the writer lock, the compaction lock): exclusive locks on a
// side file that the system drops when their holder ends, however it ends.
// lockfile_<platform>.go takes them; this file opens their files and says
// who holds one.

// lockFileMode is the mode a lock file is created with: only its owner can
// open it, so only a user who may write the repository can hold its locks
// (narrowLockFile).
const lockFileMode = 0o600

// errLockTimeout is lockWithin's: the lock stayed held.
var errLockTimeout = errors.New("lock held too long")

// openLockFile opens the lock file at path for reading and writing,
// creating it (and its directory) if it does not exist, and narrows its
// mode (narrowLockFile).
func openLockFile(path string) (*os.File, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := openFile(path, os.O_RDWR|os.O_CREATE, lockFileMode)
	if err != nil {
		return nil, err
	}
	if err := narrowLockFile(f); err != nil {
		f.Close()
		return nil, err
	}
	return f, nil
}

// LockHeldError is the error of a lock that another process held past a
// taker's timeout. It is ErrRefLocked (errors.Is), and says who held the
// lock when the system tells (lockHolder).
type LockHeldError struct {
	Path string
	PID  int // 0: not known
	UID  int // -1: not known
}

func (e *LockHeldError) Error() string {
	switch {
	case e.PID == 0:
		return fmt.Sprintf("%s is held by another process (this system does not say which)", e.Path)
	case e.UID < 0:
		return fmt.Sprintf("%s is held by process %d", e.Path, e.PID)
	}
	return fmt.Sprintf("%s is held by process %d of uid %d", e.Path, e.PID, e.UID)
}

func (e *LockHeldError) Unwrap() error { return ErrRefLocked }

// heldError is the LockHeldError of the lock file f at path, held past a
// timeout.
func heldError(f *os.File, path string) error {
	e := &LockHeldError{Path: path, UID: -1}
	e.PID, e.UID = lockHolder(f)
	return e
}
