package gitstore

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
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
	defer unmapFile(data)
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
// notes', the checkpoints') with a file lock on a side file (lockfile.go),
// which the system releases when a process dies. While holding it, a tally process also
// records in that file which ref it is about to write through "<ref>.lock"
// and with which value, one line "<ref> <value>\n" per lock it may leave; the
// next holder uses the record to recognize and remove a "<ref>.lock" left by
// a killed tally process, for whichever ref of the set it named, while a
// lockfile held by git (whose content cannot match the record) is waited for
// instead.
type WriterLock struct {
	f      *os.File
	stale  string  // the record left by a previous holder that did not finish
	size   int     // the file's length, -1 if not known
	spares *Spares // files made before the lock, for UpdateRefsWithPack to use (UseSpares)
	queued bool    // another holder had the lock when this one asked: other writers may be waiting now
}

// UseSpares gives UpdateRefsWithPack under w the spares s (made before w
// was taken) for the files it creates: the pack, its index, the ref locks.
// What it does not use stays in s, for the caller to remove.
func (w *WriterLock) UseSpares(s *Spares) { w.spares = s }

// AcquireWriterLock takes the writer lock at path, waiting at most timeout
// (then a LockHeldError, which is ErrRefLocked).
func AcquireWriterLock(path string, timeout time.Duration) (*WriterLock, error) {
	w, _, err := acquireWriterLock(path, timeout, nil)
	return w, err
}

// acquireWriterLock is AcquireWriterLock that, when the lock is held, first
// calls held, if not nil: when it returns true, the caller's append was
// made by the holder (its hand-over, FORMAT.md §9) and the lock is not
// taken (nil, true). Otherwise it waits for the lock. A lock still held
// after timeout is a LockHeldError.
func acquireWriterLock(path string, timeout time.Duration, held func() bool) (*WriterLock, bool, error) {
	f, err := openLockFile(path)
	if err != nil {
		return nil, false, err
	}
	queued, err := lockNow(f)
	if queued && held != nil && held() {
		f.Close()
		return nil, true, nil
	}
	if queued {
		if err = lockWithin(f, timeout); errors.Is(err, errLockTimeout) {
			err = heldError(f, path)
		}
	}
	if err != nil {
		f.Close()
		return nil, false, err
	}
	w, err := readRecord(f, queued)
	return w, false, err
}

// readRecord reads the record of the writer lock f, just taken (queued: it
// was held when asked for).
func readRecord(f *os.File, queued bool) (*WriterLock, error) {
	rec, err := io.ReadAll(io.LimitReader(f, 4096))
	if err != nil {
		unlock(f)
		f.Close()
		return nil, err
	}
	size := len(rec)
	if size == 4096 {
		size = -1 // longer, perhaps
	}
	stale := string(rec)
	if strings.TrimSpace(stale) == "" {
		stale = "" // a cleared record (record pads with spaces): nothing left over
	}
	return &WriterLock{f: f, stale: stale, size: size, queued: queued}, nil
}

// Release drops the lock.
func (w *WriterLock) Release() {
	unlock(w.f)
	w.f.Close()
}

// record replaces the record with s in one write. A shorter record is
// padded with spaces to the file's length rather than the file cut: the
// spaces are a line naming no ref, which the next holder ignores, and
// truncating frees the file's block, an ftruncate that cost a note more
// CPU than any other system call but fsync and open (PERFORMANCE.md at b45f87f,
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
// new needs) durable and visible as one pack, and returns the pack's name:
// UpdateRefsWithPack with one move.
func (r *Repo) UpdateRefWithPack(w *WriterLock, name string, old, new ObjectID, pw *PackWriter) (string, error) {
	packName, err := r.UpdateRefsWithPack(w, []RefMove{{Ref: name, Old: old, New: new}}, pw)
	var me *RefMoveError
	if errors.As(err, &me) {
		err = me.Err // one move: which one failed says nothing
	}
	return packName, err
}

// RefMove is one ref's compare-and-swap: from Old (zero: the ref must not
// exist) to New.
type RefMove struct {
	Ref      string
	Old, New ObjectID
}

// RefMoveError is the failure of move Index of UpdateRefsWithPack (Ref);
// Landed moves, the first ones, were made and are durable (0: nothing
// changed, whichever move failed).
type RefMoveError struct {
	Index, Landed int
	Ref           string
	Err           error
}

func (e *RefMoveError) Error() string { return fmt.Sprintf("update %s: %v", e.Ref, e.Err) }
func (e *RefMoveError) Unwrap() error { return e.Err }

// UpdateRefsWithPack makes the objects in pw (which the new values need)
// durable and visible as one pack, then moves each ref in turn, and returns
// the pack's name. Every ref is locked ("<ref>.lock", O_EXCL) and compared
// before anything is written, so a lost race leaves no pack and moves no
// ref. The fsyncs, in order: the .pack, the .idx and every lockfile (none
// needs to be durable before another, only all before the renames); the
// pack directory, once the .idx is renamed into place (a ref must never
// name objects whose pack could be lost); then, for each move in order, its
// lock renamed over the ref and the ref's directory synced, so a move is
// durable before the next one's rename is issued. A move after the first
// is recorded as conditional on the first (the writer lock's record: its
// lines are preceded by "if <first ref> <first value>"), so that the next
// holder of w finishes the moves of a holder killed between two renames
// (FinishMoves). On success every move is durable when this returns; an
// error is a *RefMoveError once the locks are taken, saying which move
// failed and how many landed.
func (r *Repo) UpdateRefsWithPack(w *WriterLock, moves []RefMove, pw *PackWriter) (string, error) {
	var rec strings.Builder
	for i, m := range moves {
		if err := os.MkdirAll(filepath.Dir(r.refPath(m.Ref)), 0o755); err != nil {
			return "", err
		}
		if i > 0 {
			rec.WriteString("if " + moves[0].Ref + " " + moves[0].New.String() + "\n")
		}
		rec.WriteString(m.Ref + " " + m.New.String() + "\n")
	}
	locks := make([]*os.File, len(moves))
	var st *stagedPack
	landed := 0
	defer func() {
		for i := landed; i < len(moves); i++ {
			if locks[i] != nil {
				locks[i].Close()
				os.Remove(r.refPath(moves[i].Ref) + ".lock")
			}
		}
		if st != nil {
			st.abort() // after the renames: drops the .keep once the refs reach the pack
		}
		w.record(w.stale)
	}()
	failed := func(i int, err error) error {
		return &RefMoveError{Index: i, Landed: landed, Ref: moves[i].Ref, Err: err}
	}
	for i, m := range moves {
		lock, err := r.createRefLock(w, m.Ref, rec.String())
		if err != nil {
			return "", failed(i, err)
		}
		locks[i] = lock
		cur, err := r.ReadRef(m.Ref)
		if errors.Is(err, ErrNoRef) {
			cur, err = ObjectID{}, nil
		}
		if err != nil {
			return "", failed(i, err)
		}
		if cur != m.Old {
			return "", failed(i, fmt.Errorf("%w: %s is %s, expected %s", ErrRefChanged, m.Ref, cur, m.Old))
		}
		if _, err := lock.WriteString(m.New.String() + "\n"); err != nil {
			return "", failed(i, err)
		}
	}
	packName := ""
	if pw != nil {
		var err error
		if st, err = pw.stage(r.ObjectDir, true, w.spares); err != nil {
			return "", failed(0, err)
		}
		packName = st.name
	}
	if i, err := syncWritten(st, locks, w.queued); err != nil {
		return "", failed(i, err)
	}
	if st != nil {
		if err := st.publish(true); err != nil {
			return "", failed(0, err)
		}
	}
	for i, m := range moves {
		path := r.refPath(m.Ref)
		err := locks[i].Close()
		if err == nil {
			err = renameFile(path+".lock", path)
		}
		if err != nil {
			return "", failed(i, err)
		}
		locks[i] = nil
		if i == 0 && packName != "" {
			// This process's reads see the new objects without rescanning.
			if db, err := r.Objects(); err == nil && st.size > 0 {
				db.addPack(filepath.Join(db.dirs[0], "pack", packName), time.Now(), st.size)
			} else if err == nil {
				db.AddPack(packName) // complete already: another writer's files
			}
		}
		if err := syncDir(filepath.Dir(path)); err != nil {
			landed = i // renamed, perhaps not durable: not landed, and not to be undone
			return "", failed(i, err)
		}
		landed = i + 1
	}
	return packName, nil
}

// syncWritten fsyncs the staged pack's files (st may be nil) and the ref
// locks, and on failure says which move's file failed (the pack's: the
// first). None needs to be durable before another, only all before the
// renames (UpdateRefsWithPack). A holder other writers may be queued
// behind (queued) issues them at once, one goroutine each, so that the
// disk serves them together and the lock is held for one round trip to it
// instead of one after another; a holder alone syncs them in turn, in its
// own goroutine, where a short process would pay more CPU for the threads
// blocked fsyncs need than the overlap saves it (PERFORMANCE.md at b45f87f, "Fewer
// files an append"). A pack written without a ref move (PackWriter.write)
// is synced here too, in turn, before it is published.
func syncWritten(st *stagedPack, locks []*os.File, queued bool) (int, error) {
	type file struct {
		f    *os.File
		move int
	}
	var files []file
	if st != nil && st.files[1] != nil { // nothing to sync for a pack complete already
		files = append(files, file{st.files[0], 0}, file{st.files[1], 0})
	}
	for i, lock := range locks {
		files = append(files, file{lock, i})
	}
	if !queued || len(files) < 2 {
		for _, f := range files {
			if err := f.f.Sync(); err != nil {
				return f.move, err
			}
		}
		return 0, nil
	}
	failures := make([]error, len(files))
	var wg sync.WaitGroup
	for i, f := range files[1:] {
		wg.Go(func() { failures[i+1] = f.f.Sync() })
	}
	failures[0] = files[0].f.Sync()
	wg.Wait()
	for i, err := range failures {
		if err != nil {
			return files[i].move, err
		}
	}
	return 0, nil
}

// createRefLock creates "<ref>.lock" of ref name exclusively, first
// recording rec, the lines of every lock the move it belongs to may leave
// (UpdateRefsWithPack), so that a successor can tell a lock orphaned by
// this process from one held by git.
func (r *Repo) createRefLock(w *WriterLock, name, rec string) (*os.File, error) {
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
		if err := w.record(w.stale + rec); err != nil {
			return nil, err
		}
		f, err := w.spares.createLock(lockPath)
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

// LockWriter takes the writer lock at path (AcquireWriterLock), then deals
// with what its previous holder left if it was killed: the moves it was
// making are finished or undone (removeOrphans) before this holder reads a
// ref, so a move conditional on another is finished before that other ref
// moves on, and the record then names only what is still undecided. With
// nothing left over that costs nothing.
func (r *Repo) LockWriter(path string, timeout time.Duration) (*WriterLock, error) {
	w, _, err := r.LockWriterOr(path, timeout, nil)
	return w, err
}

// LockWriterOr is LockWriter for a writer that may hand its append to the
// lock's holder instead: when the lock is held, held is called first (it
// dials the holder's hand-over socket, DialHolder), and when it returns
// true the append was the holder's to make and the lock is not taken
// (nil, true, nil).
func (r *Repo) LockWriterOr(path string, timeout time.Duration, held func() bool) (*WriterLock, bool, error) {
	w, handed, err := acquireWriterLock(path, timeout, held)
	if err != nil || handed || w.stale == "" {
		return w, handed, err
	}
	if err = r.removeOrphans(w); err == nil {
		err = w.record(w.stale)
	}
	if err != nil {
		w.Release()
		return nil, false, err
	}
	return w, false, nil
}

// SyncRef makes the last move of ref name durable: it fsyncs the ref's
// directory (the ref's own content was synced before it was renamed into
// place). A writer that finds an entry a killed holder appended for it
// calls it before it counts the entry as landed.
func (r *Repo) SyncRef(name string) error { return syncDir(filepath.Dir(r.refPath(name))) }

// Serving marks w as held by a writer that serves others' intents: they
// wait for it, so its fsyncs go out together (syncWritten).
func (w *WriterLock) Serving() { w.queued = true }

// removeOrphans removes every "<ref>.lock" the record of a dead holder
// (w.stale) names that it left, and keeps in w.stale only the lines naming a
// lock not yet told from git's: an empty one, still young. Lines naming a
// lock that is gone or holds another value (git's), and a line cut short by
// a kill while the record was written (its lock was never created), are
// dropped. Only lines naming a ref under refs/ count. A line preceded by
// "if <ref> <value>" (a move after the first of UpdateRefsWithPack) whose
// lock holds exactly its value is instead renamed over its ref when that
// ref holds that value: the dead holder's first move landed, and the lock
// kept every other writer from moving this ref since it compared it.
func (r *Repo) removeOrphans(w *WriterLock) error {
	var keep strings.Builder
	cond := ""
	for _, line := range strings.SplitAfter(w.stale, "\n") {
		text := strings.TrimSuffix(line, "\n")
		if c, ok := strings.CutPrefix(text, "if "); ok && strings.HasSuffix(line, "\n") {
			cond = c
			continue
		}
		after := cond
		cond = ""
		ref, value, ok := strings.Cut(text, " ")
		if !ok || !strings.HasSuffix(line, "\n") || !validRecordRef(ref) {
			continue
		}
		lockPath := r.refPath(ref) + ".lock"
		switch orphanedLock(lockPath, value+"\n") {
		case lockOrphaned:
			if after != "" && r.holds(after) {
				if b, err := readFile(lockPath); err == nil && string(b) == value+"\n" {
					if err := renameFile(lockPath, r.refPath(ref)); err != nil {
						return err
					}
					if err := syncDir(filepath.Dir(lockPath)); err != nil {
						return err
					}
					continue
				}
			}
			if err := os.Remove(lockPath); err != nil && !errors.Is(err, os.ErrNotExist) {
				return err
			}
		case lockUndecided:
			if after != "" {
				keep.WriteString("if " + after + "\n")
			}
			keep.WriteString(line)
		}
	}
	w.stale = keep.String()
	return nil
}

// validRecordRef says whether a record line's ref is one a holder may name:
// under refs/, with no "..".
func validRecordRef(ref string) bool {
	return strings.HasPrefix(ref, "refs/") && !strings.Contains(ref, "..")
}

// holds says whether cond, "<ref> <40-hex value>" of a record's "if" line,
// is true: the ref holds the value.
func (r *Repo) holds(cond string) bool {
	ref, value, ok := strings.Cut(cond, " ")
	if !ok || !validRecordRef(ref) {
		return false
	}
	cur, err := r.ReadRef(ref)
	return err == nil && cur.String() == value
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
