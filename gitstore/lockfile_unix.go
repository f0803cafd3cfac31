//go:build unix

package gitstore

import (
	"errors"
	"os"
	"time"

	"golang.org/x/sys/unix"
)

// The file locks of lockfile.go on unix: flock(2), which belongs to the
// open file (a child handed the descriptor holds it too) and which the
// kernel drops when the last descriptor of it closes, however its process
// ends. flock does not care how the file was opened, so who can take a
// lock is decided by who can open its file (narrowLockFile).

// lockNow takes an exclusive lock on f if nobody holds it; busy says
// somebody does (err is nil then).
func lockNow(f *os.File) (busy bool, err error) {
	for {
		err = unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB)
		if !errors.Is(err, unix.EINTR) {
			break
		}
	}
	if errors.Is(err, unix.EWOULDBLOCK) {
		return true, nil
	}
	return false, err
}

// lockWait takes an exclusive lock on f, waiting as long as it is held.
func lockWait(f *os.File) error { return flockWait(int(f.Fd())) }

// flockWait takes an exclusive flock through the descriptor fd, blocking
// in the kernel until its holder lets go.
func flockWait(fd int) error {
	for {
		if err := unix.Flock(fd, unix.LOCK_EX); !errors.Is(err, unix.EINTR) {
			return err
		}
	}
}

// lockWithin takes an exclusive lock on f, held by another, waiting at
// most timeout (errLockTimeout). It blocks in the kernel, so a released
// lock passes straight to a waiter (polling would leave it idle while
// waiters sleep, and writers queue behind it under contention). On timeout
// the blocked call is left to finish in its goroutine, which then drops
// the lock at once.
func lockWithin(f *os.File, timeout time.Duration) error {
	fd, err := unix.Dup(int(f.Fd())) // the same open file: a lock taken through fd is f's
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() { done <- flockWait(fd) }()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		unix.Close(fd)
		return err
	case <-timer.C:
		go func() { // the call still blocks: when it returns, drop what it took
			if err := <-done; err == nil {
				unix.Flock(fd, unix.LOCK_UN)
			}
			unix.Close(fd)
		}()
		return errLockTimeout
	}
}

// unlock drops the lock held on f.
func unlock(f *os.File) { unix.Flock(int(f.Fd()), unix.LOCK_UN) }

// narrowLockFile takes read access to the lock file f away from every class
// of users (owner, group, others) that may not write it, when this process
// owns it: flock through a read-only descriptor works, so a user who could
// only read the file could hold the lock and stop every writer. A lock file
// is created with lockFileMode, so this changes only one an older version
// made (mode 0644), the first time its owner takes it; a file of another
// user is left as it is, for its owner to narrow.
func narrowLockFile(f *os.File) error {
	var st unix.Stat_t
	if err := unix.Fstat(int(f.Fd()), &st); err != nil {
		return err
	}
	perm := uint32(st.Mode) & 0o777
	narrow := perm & (0o333 | (perm&0o222)<<1) // read only where write
	if narrow == perm || int(st.Uid) != os.Geteuid() {
		return nil
	}
	return unix.Fchmod(int(f.Fd()), narrow)
}
