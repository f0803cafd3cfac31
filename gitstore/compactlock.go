package gitstore

import "os"

// CompactionLock serializes the compactions of one repository. It is a
// file lock (lockfile.go) on a side file, so it is released when its holder
// exits or dies, however it ends, and a lock can be handed to a child
// process by passing the open file (the lock belongs to the open file, not
// to the process). Like the writer lock, only a user who can write the
// repository can take it (openLockFile).
type CompactionLock struct{ f *os.File }

// LockCompaction takes the compaction lock at path. With wait false it returns
// (nil, nil) at once when another holder has it; with wait true it blocks
// until the holder is done.
func LockCompaction(path string, wait bool) (*CompactionLock, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, err
	}
	busy, err := lockNow(f)
	if busy && wait {
		err = lockWait(f)
	} else if busy {
		f.Close()
		return nil, nil
	}
	if err != nil {
		f.Close()
		return nil, err
	}
	return &CompactionLock{f: f}, nil
}

// File is the locked file, for handing the lock to a child process
// (exec.Cmd.ExtraFiles): the child holds it until it exits.
func (c *CompactionLock) File() *os.File { return c.f }

// Close releases this process's hold. If a child was handed the file, the
// lock stays held until the child ends too.
func (c *CompactionLock) Close() error { return c.f.Close() }

// LockFile takes the same kind of lock on any side file at path, waiting
// for another holder to finish: an flock the kernel releases however its
// holder ends.
func LockFile(path string) (*CompactionLock, error) { return LockCompaction(path, true) }
