//go:build windows

package gitstore

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/windows"
)

// The file locks of lockfile.go on Windows: LockFileEx on the whole file,
// which Windows drops when the handle closes or its process ends. Who may
// open a lock file is the file's ACL, which tally leaves as Windows makes
// it (narrowLockFile does nothing).

// lockRange is the byte range every lock covers: the whole file, as far as
// it could ever grow.
const lockRange = ^uint32(0)

// lockFileEx locks f exclusively, failing at once with
// ERROR_LOCK_VIOLATION when another holds it and wait is false.
func lockFileEx(f *os.File, wait bool) error {
	flags := uint32(windows.LOCKFILE_EXCLUSIVE_LOCK)
	if !wait {
		flags |= windows.LOCKFILE_FAIL_IMMEDIATELY
	}
	return windows.LockFileEx(windows.Handle(f.Fd()), flags, 0, lockRange, lockRange, new(windows.Overlapped))
}

// lockNow takes an exclusive lock on f if nobody holds it; busy says
// somebody does (err is nil then).
func lockNow(f *os.File) (busy bool, err error) {
	err = lockFileEx(f, false)
	if errors.Is(err, windows.ERROR_LOCK_VIOLATION) {
		return true, nil
	}
	return false, err
}

// lockWait takes an exclusive lock on f, waiting as long as it is held.
func lockWait(f *os.File) error { return lockFileEx(f, true) }

// lockWithin takes an exclusive lock on f, held by another, waiting at
// most timeout (errLockTimeout). A blocked LockFileEx cannot be given up
// on without closing the handle, so it retries, sleeping up to 10 ms
// between tries.
func lockWithin(f *os.File, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	pause := time.Millisecond
	for {
		busy, err := lockNow(f)
		if err != nil || !busy {
			return err
		}
		if time.Now().After(deadline) {
			return errLockTimeout
		}
		time.Sleep(pause)
		pause = min(2*pause, 10*time.Millisecond)
	}
}

// unlock drops the lock held on f.
func unlock(f *os.File) {
	windows.UnlockFileEx(windows.Handle(f.Fd()), 0, lockRange, lockRange, new(windows.Overlapped))
}

// narrowLockFile does nothing on Windows: see above.
func narrowLockFile(*os.File) error { return nil }
