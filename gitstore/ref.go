package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"time"
)

// Reference updates follow git's lockfile protocol so that tally, the git CLI,
// receive-pack and `git pack-refs`/`git gc` exclude each other: the writer creates
// "<ref>.lock" with O_EXCL, re-reads the current value (loose ref, else
// packed-refs) while holding it, compares, writes and fsyncs the new value into
// the lock, renames it over the ref and fsyncs the directory. Nothing here goes
// through go-git's reference storage, which neither takes "<ref>.lock" nor fsyncs.

// ErrRefChanged is returned by UpdateRef when the ref no longer has the expected value.
var ErrRefChanged = errors.New("reference changed concurrently")

// ErrRefLocked is returned when another process holds the ref's lockfile for too long.
var ErrRefLocked = errors.New("reference is locked by another process")

// ErrNoRef is returned when a reference does not exist.
var ErrNoRef = errors.New("reference does not exist")

// refLockTimeout bounds how long UpdateRef waits for a foreign "<ref>.lock";
// git's own core.filesRefLockTimeout defaults to 100 ms, we are more patient.
const refLockTimeout = 2 * time.Second

func (r *Repo) refPath(name string) string {
	return filepath.Join(r.CommonDir, filepath.FromSlash(name))
}

// ReadRef returns the value of a full ref name, or ErrNoRef.
func (r *Repo) ReadRef(name string) (ObjectID, error) {
	id, err := r.readLooseRef(name, 0)
	if !errors.Is(err, ErrNoRef) {
		return id, err
	}
	return r.readPackedRef(name)
}

func (r *Repo) readLooseRef(name string, depth int) (ObjectID, error) {
	b, err := readFile(r.refPath(name))
	if err != nil {
		if errors.Is(err, os.ErrNotExist) || errors.Is(err, syscall.EISDIR) || errors.Is(err, syscall.ENOTDIR) {
			return ObjectID{}, ErrNoRef
		}
		return ObjectID{}, err
	}
	s := strings.TrimSpace(string(b))
	if target, ok := strings.CutPrefix(s, "ref: "); ok {
		if depth > 5 {
			return ObjectID{}, fmt.Errorf("symbolic ref loop at %s", name)
		}
		id, err := r.readLooseRef(target, depth+1)
		if errors.Is(err, ErrNoRef) {
			return r.readPackedRef(target)
		}
		return id, err
	}
	id, err := ParseObjectID(s)
	if err != nil {
		return ObjectID{}, fmt.Errorf("ref %s is corrupt (%q): %w", name, s, err)
	}
	return id, nil
}

func (r *Repo) readPackedRef(name string) (ObjectID, error) {
	path := filepath.Join(r.CommonDir, "packed-refs")
	data, err := packMmap(path)
	if err != nil {
		if errors.Is(err, os.ErrNotExist) {
			return ObjectID{}, ErrNoRef
		}
		if fi, serr := os.Stat(path); serr == nil && fi.Size() == 0 {
			return ObjectID{}, ErrNoRef
		}
		return ObjectID{}, err
	}
	defer syscall.Munmap(data)
	line, ok := packedRefLine(data, name)
	if !ok {
		return ObjectID{}, ErrNoRef
	}
	return ParseObjectID(string(line[:40]))
}

// packedRefLine finds the line "<40-hex> <name>" in packed-refs content. Git
// writes the file sorted by ref name (its header then says "sorted"), so a
// repository with many refs costs a binary search over the mapped file, not
// a scan; an unsorted file is scanned.
func packedRefLine(data []byte, name string) ([]byte, bool) {
	// lineAt returns the line starting at start and the start of the next one.
	lineAt := func(start int) ([]byte, int) {
		end := bytes.IndexByte(data[start:], '\n')
		if end < 0 {
			return data[start:], len(data)
		}
		return data[start : start+end], start + end + 1
	}
	isRef := func(line []byte) bool { return len(line) >= 42 && line[40] == ' ' && line[0] != '#' && line[0] != '^' }
	header, _ := lineAt(0)
	sorted := bytes.HasPrefix(header, []byte("# pack-refs with:")) && bytes.Contains(header, []byte(" sorted"))
	if !sorted {
		for i := 0; i < len(data); {
			line, next := lineAt(i)
			if isRef(line) && string(line[41:]) == name {
				return line, true
			}
			i = next
		}
		return nil, false
	}
	// Invariant: lo and hi are line starts, and the wanted line, if present,
	// starts in [lo, hi).
	lo, hi := 0, len(data)
	for lo < hi {
		mid := lo + (hi-lo)/2
		start := lo + bytes.LastIndexByte(data[lo:mid], '\n') + 1
		line, next := lineAt(start)
		if !isRef(line) {
			// The header, or a peeled "^" line, whose tag line precedes it.
			if start == lo {
				lo = next
				continue
			}
			start = lo + bytes.LastIndexByte(data[lo:start-1], '\n') + 1
			if line, next = lineAt(start); !isRef(line) {
				lo = next
				continue
			}
		}
		switch c := bytes.Compare(line[41:], []byte(name)); {
		case c == 0:
			return line, true
		case c < 0:
			lo = next
		default:
			hi = start
		}
	}
	return nil, false
}

// Head returns the commit HEAD of this worktree points at.
func (r *Repo) Head() (ObjectID, error) {
	b, err := readFile(filepath.Join(r.GitDir, "HEAD"))
	if err != nil {
		return ObjectID{}, err
	}
	s := strings.TrimSpace(string(b))
	if target, ok := strings.CutPrefix(s, "ref: "); ok {
		return r.ReadRef(target)
	}
	return ParseObjectID(s)
}

// WriterLock serializes tally's writers of a set of refs (the ledger's, the
// notes', the checkpoints') with an flock on a side file, which the kernel
// releases when a process dies. While holding it, a tally process also
// records in that file which ref it is about to write through "<ref>.lock"
// and with which value, one line "<ref> <value>\n" per lock it may leave; the
// next holder uses the record to recognize and remove a "<ref>.lock" left by
// a killed tally process, for whichever ref of the set it named, while a
// lockfile held by git (whose content cannot match the record) is waited for
// instead.
type WriterLock struct {
	f     *os.File
	stale string // the record left by a previous holder that did not finish
	size  int    // the file's length, -1 if not known
}

// AcquireWriterLock takes the writer lock at path, waiting at most timeout.
func AcquireWriterLock(path string, timeout time.Duration) (*WriterLock, error) {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, err
	}
	f, err := openFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, err
	}
	if err := flockWithin(f, timeout); err != nil {
		f.Close()
		return nil, err
	}
	rec, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
		f.Close()
		return nil, err
	}
	size := len(rec)
	if size == 4096 {
		size = -1 // longer, perhaps
	}
	return &WriterLock{f: f, stale: string(rec), size: size}, nil
}

// flockWithin takes an exclusive flock on f, waiting at most timeout. It
// blocks in the kernel, so a released lock passes straight to a waiter
// (polling would leave it idle while waiters sleep, and writers queue behind
// it under contention). On timeout the blocked call is left to finish in its
// goroutine, which then drops the lock at once.
func flockWithin(f *os.File, timeout time.Duration) error {
	var err error = syscall.EINTR
	for errors.Is(err, syscall.EINTR) {
		err = syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	}
	if !errors.Is(err, syscall.EWOULDBLOCK) {
		return err
	}
	fd, err := syscall.Dup(int(f.Fd())) // the same open file: a lock taken through fd is f's
	if err != nil {
		return err
	}
	done := make(chan error, 1)
	go func() {
		var err error
		for {
			if err = syscall.Flock(fd, syscall.LOCK_EX); !errors.Is(err, syscall.EINTR) {
				break
			}
		}
		done <- err
	}()
	timer := time.NewTimer(timeout)
	defer timer.Stop()
	select {
	case err := <-done:
		syscall.Close(fd)
		return err
	case <-timer.C:
		go func() { // the call still blocks: when it returns, drop what it took
			if err := <-done; err == nil {
				syscall.Flock(fd, syscall.LOCK_UN)
			}
			syscall.Close(fd)
		}()
		return ErrRefLocked
	}
}

// Release drops the lock.
func (w *WriterLock) Release() {
	syscall.Flock(int(w.f.Fd()), syscall.LOCK_UN)
	w.f.Close()
}

// record replaces the record with s in one write. A shorter record is
// padded with spaces to the file's length rather than the file cut: the
// spaces are a line naming no ref, which the next holder ignores, and
// truncating frees the file's block, an ftruncate that cost a note more
// CPU than any other system call but fsync and open (PERFORMANCE.md,
// "Append, fourth pass"). A writer killed during the write leaves the new
// record or a mix of the old and the new one (both naming every lock it may
// have left), never an empty one. Only a file longer than was read (size
// unknown) is cut, after the write.
func (w *WriterLock) record(s string) error {
	b := []byte(s)
	if len(b) < w.size {
		b = append(b, strings.Repeat(" ", w.size-len(b))...)
	}
	if _, err := w.f.WriteAt(b, 0); err != nil {
		w.size = -1
		return err
	}
	if w.size < 0 {
		if err := w.f.Truncate(int64(len(b))); err != nil {
			return err
		}
	}
	w.size = len(b)
	return nil
}

// UpdateRef moves ref name from old to new (old zero: the ref must not exist).
// It returns ErrRefChanged if the ref holds another value, ErrRefLocked if a
// foreign lockfile persists. The caller must hold w. On return, whatever the
// outcome, no lockfile of this process remains; on success the new value and
// its directory entry are on disk.
func (r *Repo) UpdateRef(w *WriterLock, name string, old, new ObjectID) error {
	_, err := r.UpdateRefWithPack(w, name, old, new, nil)
	return err
}

// UpdateRefWithPack is UpdateRef that first makes the objects in pw (which
// new needs) durable and visible as one pack, and returns the pack's name.
// The ref is compared before anything is written, so a lost race leaves no
// pack behind. The fsyncs, in order: the .pack, the .idx and the lockfile
// (none needs to be durable before another, only all before the renames);
// the pack directory, once the .idx is renamed into place (the ref must
// never name objects whose pack could be lost); the ref's directory, once
// the lock is renamed over the ref. On success the new value and the pack
// are durable when this returns.
func (r *Repo) UpdateRefWithPack(w *WriterLock, name string, old, new ObjectID, pw *PackWriter) (string, error) {
	path := r.refPath(name)
	lockPath := path + ".lock"
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return "", err
	}
	content := new.String() + "\n"
	lock, err := r.createRefLock(w, name, content)
	if err != nil {
		w.record(w.stale)
		return "", err
	}
	var st *stagedPack
	renamed := false
	defer func() {
		if !renamed {
			lock.Close()
			os.Remove(lockPath)
		}
		if st != nil {
			st.abort() // after the rename: drops the .keep once the ref reaches the pack
		}
		w.record(w.stale)
	}()
	cur, err := r.ReadRef(name)
	if errors.Is(err, ErrNoRef) {
		cur, err = ObjectID{}, nil
	}
	if err != nil {
		return "", err
	}
	if cur != old {
		return "", fmt.Errorf("%w: %s is %s, expected %s", ErrRefChanged, name, cur, old)
	}
	if _, err := lock.WriteString(content); err != nil {
		return "", err
	}
	packName := ""
	if pw != nil {
		if st, err = pw.stage(r.ObjectDir, true); err != nil {
			return "", err
		}
		packName = st.name
		if err = st.sync(); err == nil {
			err = lock.Sync()
		}
		if err == nil {
			err = st.publish(true)
		}
	} else {
		err = lock.Sync()
	}
	if err != nil {
		return "", err
	}
	if err := lock.Close(); err != nil {
		return "", err
	}
	if err := renameFile(lockPath, path); err != nil {
		return "", err
	}
	renamed = true
	if packName != "" {
		// This process's reads see the new objects without rescanning.
		if db, err := r.Objects(); err == nil && st.size > 0 {
			db.addPack(filepath.Join(db.dirs[0], "pack", packName), time.Now(), st.size)
		} else if err == nil {
			db.AddPack(packName) // complete already: another writer's files
		}
	}
	return packName, syncDir(filepath.Dir(path))
}

// createRefLock creates "<ref>.lock" of ref name exclusively, first
// recording the content it will hold so that a successor can tell a lock
// orphaned by this process from one held by git.
func (r *Repo) createRefLock(w *WriterLock, name, content string) (*os.File, error) {
	lockPath := r.refPath(name) + ".lock"
	deadline := time.Now().Add(refLockTimeout)
	pause := 100 * time.Microsecond
	for {
		// Remove recognized orphans before touching the record, and keep
		// naming an orphan not yet recognized (an empty lock still young) in
		// the record: a process killed at any point leaves a record that
		// recognizes every lockfile it is responsible for.
		if err := r.removeOrphans(w); err != nil {
			return nil, err
		}
		if err := w.record(w.stale + name + " " + content); err != nil {
			return nil, err
		}
		f, err := openFile(lockPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err == nil {
			// no other lockfile of this ref exists now, so none is orphaned
			w.stale = staleLinesExcept(w.stale, name)
			return f, nil
		}
		if !errors.Is(err, os.ErrExist) {
			return nil, err
		}
		if time.Now().After(deadline) {
			return nil, fmt.Errorf("%w: %s (remove it if no git process is running)", ErrRefLocked, lockPath)
		}
		time.Sleep(pause)
		pause = min(pause*2, 20*time.Millisecond)
	}
}

// removeOrphans removes every "<ref>.lock" the record of a dead holder
// (w.stale) names that it left, and keeps in w.stale only the lines naming a
// lock not yet told from git's: an empty one, still young. Lines naming a
// lock that is gone or holds another value (git's), and a line cut short by
// a kill while the record was written (its lock was never created), are
// dropped. Only lines naming a ref under refs/ count.
func (r *Repo) removeOrphans(w *WriterLock) error {
	var keep strings.Builder
	for _, line := range strings.SplitAfter(w.stale, "\n") {
		ref, value, ok := strings.Cut(strings.TrimSuffix(line, "\n"), " ")
		if !ok || !strings.HasSuffix(line, "\n") || !strings.HasPrefix(ref, "refs/") || strings.Contains(ref, "..") {
			continue
		}
		lockPath := r.refPath(ref) + ".lock"
		switch orphanedLock(lockPath, value+"\n") {
		case lockOrphaned:
			if err := os.Remove(lockPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		case lockUndecided:
			keep.WriteString(line)
		}
	}
	w.stale = keep.String()
	return nil
}

// staleLinesExcept returns the record lines that do not name ref.
func staleLinesExcept(stale, ref string) string {
	var keep strings.Builder
	for _, line := range strings.SplitAfter(stale, "\n") {
		if !strings.HasPrefix(line, ref+" ") {
			keep.WriteString(line)
		}
	}
	return keep.String()
}

// What orphanedLock finds at a lockfile a dead tally writer may have left.
const (
	lockNotOrphaned = iota // none, or git's
	lockOrphaned           // the dead writer's
	lockUndecided          // empty and young: git's or the dead writer's
)

// orphanedLock tells whether the lockfile was left by a dead tally writer
// whose record says it was to write value there. Only a tally process
// holding the writer lock writes a lock whose content is a prefix of a
// recorded value, and that process is gone. An empty lock could also be one
// git has just created, so it counts as orphaned only once it is older than
// any live git process keeps a lock empty.
func orphanedLock(lockPath, value string) int {
	fi, err := os.Stat(lockPath)
	if err != nil {
		return lockNotOrphaned
	}
	if fi.Size() == 0 {
		if time.Since(fi.ModTime()) > time.Second {
			return lockOrphaned
		}
		return lockUndecided
	}
	b, err := readFile(lockPath)
	if err != nil || len(b) == 0 || !strings.HasPrefix(value, string(b)) {
		return lockNotOrphaned
	}
	return lockOrphaned
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
