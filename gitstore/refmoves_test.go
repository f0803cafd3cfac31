package gitstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// refMovesRepo is a git repository with two commits, a and b, and the
// refs first and second both at a.
func refMovesRepo(t *testing.T) (r *Repo, a, b ObjectID) {
	t.Helper()
	g := odbNewRepo(t)
	rev := func() ObjectID {
		id, _ := ParseObjectID(strings.TrimSpace(string(g.git(nil, "rev-parse", "HEAD"))))
		return id
	}
	g.git(nil, "commit", "-q", "--allow-empty", "-m", "a")
	a = rev()
	g.git(nil, "commit", "-q", "--allow-empty", "-m", "b")
	b = rev()
	g.git(nil, "update-ref", "refs/tally/first", a.String())
	g.git(nil, "update-ref", "refs/notes/second", a.String())
	r, err := Open(g.dir)
	if err != nil {
		t.Fatal(err)
	}
	return r, a, b
}

// killedMid leaves what a holder of the writer lock at lockPath killed in
// UpdateRefsWithPack of refs/tally/first and refs/notes/second (a to b)
// leaves: its record, naming both moves, the second conditional on the
// first; the second's lock, whole; and, if firstRenamed, the first ref
// moved (its lock renamed), else the first's lock, whole.
func killedMid(t *testing.T, r *Repo, lockPath string, b ObjectID, firstRenamed bool) {
	t.Helper()
	w, err := AcquireWriterLock(lockPath, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	rec := "refs/tally/first " + b.String() + "\nif refs/tally/first " + b.String() + "\nrefs/notes/second " + b.String() + "\n"
	if err := w.record(rec); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"refs/tally/first", "refs/notes/second"} {
		if err := os.WriteFile(r.refPath(ref)+".lock", []byte(b.String()+"\n"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if firstRenamed {
		if err := os.Rename(r.refPath("refs/tally/first")+".lock", r.refPath("refs/tally/first")); err != nil {
			t.Fatal(err)
		}
	}
	w.Release() // the kernel drops a killed holder's flock the same way
}

// The next holder of the writer lock (LockWriter) finishes the moves of a
// holder killed between its renames: the second ref's lock is renamed over
// it when the first ref holds the recorded value. Killed before the first
// rename, both locks are removed and neither ref moves. A lock whose
// content is not the recorded value is git's, and stays.
func TestLockWriterFinishesMoves(t *testing.T) {
	t.Run("first landed", func(t *testing.T) {
		r, a, b := refMovesRepo(t)
		lockPath := filepath.Join(t.TempDir(), "writer.lock")
		killedMid(t, r, lockPath, b, true)
		w, err := r.LockWriter(lockPath, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		for _, ref := range []string{"refs/tally/first", "refs/notes/second"} {
			if got, _ := r.ReadRef(ref); got != b {
				t.Errorf("%s is %s, want %s (was %s)", ref, got, b, a)
			}
			if _, err := os.Stat(r.refPath(ref) + ".lock"); err == nil {
				t.Errorf("%s.lock is left", ref)
			}
		}
		if w.stale != "" {
			t.Errorf("record after the recovery: %q", w.stale)
		}
	})
	t.Run("first not landed", func(t *testing.T) {
		r, a, b := refMovesRepo(t)
		lockPath := filepath.Join(t.TempDir(), "writer.lock")
		killedMid(t, r, lockPath, b, false)
		w, err := r.LockWriter(lockPath, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		for _, ref := range []string{"refs/tally/first", "refs/notes/second"} {
			if got, _ := r.ReadRef(ref); got != a {
				t.Errorf("%s is %s, want %s", ref, got, a)
			}
			if _, err := os.Stat(r.refPath(ref) + ".lock"); err == nil {
				t.Errorf("%s.lock is left", ref)
			}
		}
	})
	t.Run("git's lock", func(t *testing.T) {
		r, a, b := refMovesRepo(t)
		lockPath := filepath.Join(t.TempDir(), "writer.lock")
		killedMid(t, r, lockPath, b, true)
		theirs := r.refPath("refs/notes/second") + ".lock"
		if err := os.WriteFile(theirs, []byte(a.String()+"\n"), 0o644); err != nil { // git took it since
			t.Fatal(err)
		}
		w, err := r.LockWriter(lockPath, time.Second)
		if err != nil {
			t.Fatal(err)
		}
		defer w.Release()
		if got, _ := r.ReadRef("refs/notes/second"); got != a {
			t.Errorf("refs/notes/second is %s, want %s: git's lock was renamed", got, a)
		}
		if b, err := os.ReadFile(theirs); err != nil || string(b) != a.String()+"\n" {
			t.Errorf("git's lock is %q, %v", b, err)
		}
	})
}

// A move after the first that cannot be made (its ref changed since it
// was read) fails the whole update before anything is written: no ref
// moves, no pack is left, and the error says which move failed and that
// none landed.
func TestUpdateRefsWithPackRefusesAsOne(t *testing.T) {
	r, a, b := refMovesRepo(t)
	w, err := r.LockWriter(filepath.Join(t.TempDir(), "writer.lock"), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Release()
	pw := NewPackWriter()
	pw.Add(BlobObject, []byte("only in this pack\n"))
	packs, _ := filepath.Glob(filepath.Join(r.ObjectDir, "pack", "*"))
	_, err = r.UpdateRefsWithPack(w, []RefMove{{Ref: "refs/tally/first", Old: a, New: b}, {Ref: "refs/notes/second", Old: b, New: a}}, pw)
	var me *RefMoveError
	if !errors.As(err, &me) || me.Index != 1 || me.Landed != 0 || me.Ref != "refs/notes/second" || !errors.Is(err, ErrRefChanged) {
		t.Fatalf("update: %v (%+v), want move 1 refused with ErrRefChanged, none landed", err, me)
	}
	if got, _ := r.ReadRef("refs/tally/first"); got != a {
		t.Errorf("refs/tally/first moved to %s", got)
	}
	if after, _ := filepath.Glob(filepath.Join(r.ObjectDir, "pack", "*")); len(after) != len(packs) {
		t.Errorf("pack directory %v, was %v", after, packs)
	}
	if _, err := r.UpdateRefsWithPack(w, []RefMove{{Ref: "refs/tally/first", Old: a, New: b}, {Ref: "refs/notes/second", Old: a, New: b}}, pw); err != nil {
		t.Fatal(err)
	}
	for _, ref := range []string{"refs/tally/first", "refs/notes/second"} {
		if got, _ := r.ReadRef(ref); got != b {
			t.Errorf("%s is %s, want %s", ref, got, b)
		}
	}
}

// A writer queued behind another holder (WriterLock.queued) syncs its
// pack, its index and its ref locks together, one goroutine each, and a
// holder alone in turn; either way every file is synced before
// UpdateRefsWithPack renames anything, and a file that fails to sync fails
// the move it belongs to (the pack's, the first), whichever goroutine
// synced it.
func TestSyncWrittenQueuedAndAlone(t *testing.T) {
	dir := t.TempDir()
	open := func(name string) *os.File {
		f, err := os.Create(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		return f
	}
	for _, queued := range []bool{false, true} {
		st := &stagedPack{files: [2]*os.File{open("pack"), open("idx")}}
		locks := []*os.File{open("first.lock"), open("second.lock")}
		if i, err := syncWritten(st, locks, queued); err != nil {
			t.Fatalf("queued %v: move %d: %v", queued, i, err)
		}
		locks[1].Close()
		if i, err := syncWritten(st, locks, queued); err == nil || i != 1 {
			t.Errorf("queued %v: a closed second lock failed move %d (%v), want move 1", queued, i, err)
		}
		st.files[1].Close()
		if i, err := syncWritten(st, locks[:1], queued); err == nil || i != 0 {
			t.Errorf("queued %v: a closed index failed move %d (%v), want move 0", queued, i, err)
		}
		if _, err := syncWritten(nil, locks[:1], queued); err != nil {
			t.Errorf("queued %v: one lock, no pack: %v", queued, err)
		}
	}
}

// A writer that found the writer lock held is queued; one that took it at
// once is not.
func TestWriterLockQueued(t *testing.T) {
	path := filepath.Join(t.TempDir(), "writer.lock")
	first, err := AcquireWriterLock(path, time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if first.queued {
		t.Error("the first holder is queued")
	}
	got := make(chan *WriterLock)
	go func() {
		w, err := AcquireWriterLock(path, 10*time.Second)
		if err != nil {
			t.Error(err)
		}
		got <- w
	}()
	// The second asks while the first holds: it blocks until the release.
	for waiting := false; !waiting; {
		select {
		case w := <-got:
			t.Fatalf("the second holder took the lock while the first held it (%v)", w)
		default:
		}
		waiting = lockWaiters(t, path) > 0
	}
	first.Release()
	second := <-got
	defer second.Release()
	if !second.queued {
		t.Error("the holder that waited is not queued")
	}
}
