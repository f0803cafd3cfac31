package gitstore

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
)

// Spares are empty files an append makes before it takes the writer lock,
// for the files it would otherwise create under it: the pack, its index and
// the ref locks of UpdateRefsWithPack. Creating a file is the costliest
// step of an append on ext4 without a journal (allocating the inode scans
// past every inode freed in the last 30 s: a third of a drain's CPU,
// PERFORMANCE.md at b45f87f "The drain, fifth pass"), and everything under the writer
// lock is serialized across the clone's writers, while a spare is made
// beside the other writers' appends.
//
// A spare is objects/pack/tally-tmp-spare-<n>, mode 0644, held open with an
// flock from its creation until it is used or removed, so RemoveStaleTemps
// removes those of a killed process (and only those). Used as the pack or
// its index it is the temporary that publish renames into place; used as a
// ref lock it is hard-linked as "<ref>.lock", which fails if that exists
// exactly as O_EXCL does, and its spare name is then removed (a name only:
// the inode lives on as the lock). A Spares is used by one goroutine.
type Spares struct {
	dir   string
	files []*os.File
}

// spareMode is a spare's mode: a ref lock's, as git creates them (a pack
// and its index are made read-only when written).
const spareMode = 0o644

// MakeSpares creates n spares in the object directory's pack directory. It
// makes as many as it can: an error (a read-only repository, no pack
// directory yet) leaves the rest to be created under the lock as before.
func (r *Repo) MakeSpares(n int) *Spares {
	s := &Spares{dir: filepath.Join(r.ObjectDir, "pack")}
	for range n {
		f, err := createTempMode(s.dir, packTempPrefix+"spare-", spareMode)
		if err != nil {
			break
		}
		if err := lockFreeNow(f); err != nil {
			f.Close()
			os.Remove(f.Name())
			break
		}
		s.files = append(s.files, f)
	}
	return s
}

// Len is the number of spares left.
func (s *Spares) Len() int {
	if s == nil {
		return 0
	}
	return len(s.files)
}

// take returns a spare, which is the caller's from then on, or nil.
func (s *Spares) take() *os.File {
	if s.Len() == 0 {
		return nil
	}
	f := s.files[len(s.files)-1]
	s.files = s.files[:len(s.files)-1]
	return f
}

// Remove removes the spares not used.
func (s *Spares) Remove() {
	for f := s.take(); f != nil; f = s.take() {
		os.Remove(f.Name())
		f.Close()
	}
}

// createLock creates the lockfile path exclusively (fs.ErrExist if it
// exists, the spare kept for the next try): from a spare when s holds one,
// else with O_EXCL. A spare that cannot be linked there (a filesystem
// without hard links, the object directory on another filesystem) is
// removed, and the lock created.
func (s *Spares) createLock(path string) (*os.File, error) {
	if f := s.take(); f != nil {
		err := link(f.Name(), path)
		if err == nil {
			syscall.Unlink(f.Name()) // a failure leaves a second name, which RemoveStaleTemps removes
			return f, nil
		}
		if errors.Is(err, fs.ErrExist) {
			s.files = append(s.files, f)
			return nil, err
		}
		os.Remove(f.Name())
		f.Close()
	}
	return openFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, spareMode)
}
