//go:build unix && !portable

package gitstore

import (
	"errors"
	"os"
	"syscall"
)

// The files tally opens in a repository are regular files and directories,
// which no poller can wait on. os.Open and os.OpenFile still offer each to
// the runtime's poller on Linux: four fcntl calls and a failing epoll_ctl
// an open, and the poller's own epoll instance, eventfd and registration
// once a process. A system call costs 2–4 µs in the VMs tally is measured
// in, and a note opens about fifteen files (PERFORMANCE.md at b45f87f, "Append, fourth
// pass"). The helpers here open with open(2) and wrap the descriptor with
// os.NewFile, which leaves it out of the poller (one fcntl, to learn its
// flags); readFile reads without an *os.File at all. Reads and writes on
// such a file block the calling thread, as they do for a regular file
// either way.

// oDirectory makes an open fail unless the name is a directory.
const oDirectory = syscall.O_DIRECTORY

// openFile is os.OpenFile without the poller. Its errors are *os.PathError
// like os.OpenFile's, so errors.Is(err, fs.ErrNotExist) and the like hold.
// The descriptor is close-on-exec, as os.OpenFile's is.
func openFile(name string, flag int, perm os.FileMode) (*os.File, error) {
	fd, err := openFD(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return os.NewFile(uintptr(fd), name), nil
}

// openFD opens name with open(2), retrying when a signal interrupts it.
func openFD(name string, flag int, perm os.FileMode) (int, error) {
	for {
		fd, err := syscall.Open(name, flag|syscall.O_CLOEXEC, uint32(perm.Perm()))
		if err == nil {
			return fd, nil
		}
		if !errors.Is(err, syscall.EINTR) {
			return -1, &os.PathError{Op: "open", Path: name, Err: err}
		}
	}
}

// readFile is os.ReadFile for the small files of a repository (refs,
// config, records) without an *os.File: open, reads until end of file,
// close.
func readFile(name string) ([]byte, error) {
	fd, err := openFD(name, syscall.O_RDONLY, 0)
	if err != nil {
		return nil, err
	}
	defer syscall.Close(fd)
	b := make([]byte, 0, 512)
	for {
		if len(b) == cap(b) {
			b = append(b, 0)[:len(b)]
		}
		n, err := syscall.Read(fd, b[len(b):cap(b)])
		switch {
		case errors.Is(err, syscall.EINTR):
			continue
		case err != nil:
			return nil, &os.PathError{Op: "read", Path: name, Err: err}
		case n == 0:
			return b, nil
		}
		b = b[:len(b)+n]
	}
}

// fsyncFD is fsync (fsync_darwin.go: F_FULLFSYNC), retried when a
// signal interrupts it.
func fsyncFD(fd int) error {
	for {
		if err := fsync(fd); !errors.Is(err, syscall.EINTR) {
			return err
		}
	}
}

// renameFile is os.Rename for a file: rename(2) alone, without the lstat
// os.Rename first makes of the new name to refuse moving a directory over
// an empty one, which no file rename here can do.
func renameFile(from, to string) error {
	for {
		err := syscall.Rename(from, to)
		if err == nil {
			return nil
		}
		if !errors.Is(err, syscall.EINTR) {
			return &os.LinkError{Op: "rename", Old: from, New: to, Err: err}
		}
	}
}

// syncDir fsyncs a directory so renames and creations in it are durable.
func syncDir(dir string) error {
	fd, err := openFD(dir, syscall.O_RDONLY, 0) // without O_DIRECTORY, which marks the listings TestAppendListsPackDirOnce counts
	if err != nil {
		return err
	}
	defer syscall.Close(fd)
	if err := fsyncFD(fd); err != nil && !errors.Is(err, syscall.EINVAL) {
		return &os.PathError{Op: "sync", Path: dir, Err: err}
	}
	return nil
}
