package receipt

import (
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/tally-dev/tally/gitstore"
)

// NotesRef holds tally's git notes: for each receipted commit, one line per
// receipt pointing at the ledger entry, so `git log --notes=tally` shows them.
const NotesRef = "refs/notes/tally"

// notePaths are where git may keep the note of an object: flat, or under one
// or two levels of two-hex-digit fan-out directories.
func notePaths(commit string) []string {
	return []string{commit, commit[:2] + "/" + commit[2:], commit[:2] + "/" + commit[2:4] + "/" + commit[4:]}
}

func findNote(t *gitstore.Tree, commit string) (path string, text string, err error) {
	for _, p := range notePaths(commit) {
		b, ok, err := t.Get(p)
		if err != nil {
			return "", "", err
		}
		if ok {
			return p, string(b), nil
		}
	}
	return "", "", nil
}

// ReadNote returns the tally note of a commit ("" if none).
func ReadNote(repo *gitstore.Repo, commit gitstore.ObjectID) (string, error) {
	tip, err := repo.ReadRef(NotesRef)
	if errors.Is(err, gitstore.ErrNoRef) {
		return "", nil
	}
	if err != nil {
		return "", err
	}
	db, err := repo.Objects()
	if err != nil {
		return "", err
	}
	c, err := db.ReadCommit(tip)
	if err != nil {
		return "", err
	}
	_, text, err := findNote(gitstore.NewTree(db, c.Tree), commit.String())
	return text, err
}

// AddNote appends line to the tally note of commit, keeping whatever the note
// already says (other receipts, or text added with git notes), and moves
// NotesRef with the same compare-and-swap as the ledger. It is idempotent.
func AddNote(repo *gitstore.Repo, lockPath string, commit gitstore.ObjectID, line string, who gitstore.Ident) error {
	wl, err := gitstore.AcquireWriterLock(lockPath, 30*time.Second)
	if err != nil {
		return err
	}
	defer wl.Release()
	db, err := repo.Objects()
	if err != nil {
		return err
	}
	for attempt := 0; attempt < 10; attempt++ {
		tip, err := repo.ReadRef(NotesRef)
		if err != nil && !errors.Is(err, gitstore.ErrNoRef) {
			return err
		}
		var base gitstore.ObjectID
		if !tip.IsZero() {
			c, err := db.ReadCommit(tip)
			if err != nil {
				return err
			}
			base = c.Tree
		}
		t := gitstore.NewTree(db, base)
		path, text, err := findNote(t, commit.String())
		if err != nil {
			return err
		}
		for _, l := range strings.Split(text, "\n") {
			if l == line {
				return nil
			}
		}
		if path == "" {
			path = commit.String()
		}
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if err := t.Set(path, []byte(text+line+"\n")); err != nil {
			return err
		}
		pw := gitstore.NewPackWriter()
		tree, err := t.Hash(pw)
		if err != nil {
			return err
		}
		nc := &gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: "Notes added by 'tally done'\n"}
		if !tip.IsZero() {
			nc.Parents = []gitstore.ObjectID{tip}
		}
		id := pw.Add(gitstore.CommitObject, nc.Encode())
		_, err = repo.UpdateRefWithPack(wl, NotesRef, tip, id, pw)
		if err == nil {
			return nil
		}
		if !errors.Is(err, gitstore.ErrRefChanged) {
			return err
		}
	}
	return fmt.Errorf("%s kept changing", NotesRef)
}

// NoteLine is the line a receipt adds to its commit's note.
func NoteLine(origin string, seq uint64, entryHash, cell string, epoch int64) string {
	return fmt.Sprintf("tally-receipt origin=%s seq=%d entry=%s cell=%s epoch=%d", origin, seq, entryHash, cell, epoch)
}
