package gitstore

import (
	"errors"
	"fmt"
	"strings"
	"time"
)

// Git notes: a notes ref points at a commit whose tree maps an object's name
// (flat, or under one or two levels of two-hex-digit fan-out directories) to
// a blob, the note of that object. tally's notes are line lists: a note is
// one line per receipt, and merging two notes is the union of their lines
// (git notes merge -s cat_sort_uniq keeps the same set of lines).

// NotePaths are where git may keep the note of the object named obj.
func NotePaths(obj string) []string {
	return []string{obj, obj[:2] + "/" + obj[2:], obj[:2] + "/" + obj[2:4] + "/" + obj[4:]}
}

// FindNote returns the path and text of obj's note in the notes tree t ("",
// "" if it has none).
func FindNote(t *Tree, obj string) (path string, text string, err error) {
	for _, p := range NotePaths(obj) {
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

// noteLines splits a note into its lines, without empty ones.
func noteLines(text string) []string {
	var out []string
	for _, l := range strings.Split(text, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

// UnionNotes returns the notes tree theirs with, appended to the end of each
// object's note, the lines of ours' note of it that theirs' lacks and keep
// allows (keep nil: all), in ours' order, and the objects whose notes gained
// lines. Keeping theirs' text as it is, only lengthened, makes the result a
// note-by-note extension of theirs (what a server that takes notes only by
// appending accepts), where cat_sort_uniq would reorder the lines. Each note
// stays at theirs' path for it (else ours'), so an object keeps one note
// path. The cost is proportional to the notes that differ.
func UnionNotes(db *ObjectDB, theirs, ours ObjectID, keep func(obj, line string) bool) (*Tree, []string, error) {
	changed, err := DiffTrees(db, theirs, ours)
	if err != nil {
		return nil, nil, err
	}
	out, mine := NewTree(db, theirs), NewTree(db, ours)
	var gained []string
	seen := map[string]bool{}
	for _, p := range changed {
		obj := strings.ReplaceAll(p, "/", "")
		if seen[obj] || len(obj) < 4 {
			continue
		}
		seen[obj] = true
		_, ourText, err := FindNote(mine, obj)
		if err != nil {
			return nil, nil, err
		}
		path, text, err := FindNote(out, obj)
		if err != nil {
			return nil, nil, err
		}
		have := map[string]bool{}
		for _, l := range noteLines(text) {
			have[l] = true
		}
		var add []string
		for _, l := range noteLines(ourText) {
			if !have[l] && (keep == nil || keep(obj, l)) {
				have[l] = true
				add = append(add, l)
			}
		}
		if len(add) == 0 {
			continue
		}
		if path == "" {
			if path, _, err = FindNote(mine, obj); err != nil {
				return nil, nil, err
			}
		}
		if text != "" && !strings.HasSuffix(text, "\n") {
			text += "\n"
		}
		if err := out.Set(path, []byte(text+strings.Join(add, "\n")+"\n")); err != nil {
			return nil, nil, err
		}
		gained = append(gained, obj)
	}
	return out, gained, nil
}

// MergeNotes makes the notes ref hold every line of the notes commit theirs
// besides its own, under the writer lock at lockPath: it takes theirs when
// that adds nothing of the ref's own (the ref is absent, behind, or its lines
// are all in theirs), keeps the ref when theirs adds nothing, and otherwise
// writes a merge commit (parents theirs, then the ref's tip) whose tree is
// UnionNotes of both. The merge is decided by content, so no walk of the
// commit graph is needed.
func (r *Repo) MergeNotes(lockPath, ref string, theirs ObjectID, who Ident) error {
	if theirs.IsZero() {
		return nil
	}
	wl, err := r.LockWriter(lockPath, 30*time.Second)
	if err != nil {
		return err
	}
	defer wl.Release()
	db, err := r.Objects()
	if err != nil {
		return err
	}
	treeOf := func(id ObjectID) (ObjectID, error) {
		c, err := db.ReadCommit(id)
		if err != nil {
			return ObjectID{}, err
		}
		return c.Tree, nil
	}
	theirTree, err := treeOf(theirs)
	if err != nil {
		return err
	}
	for attempt := 0; attempt < 10; attempt++ {
		tip, err := r.ReadRef(ref)
		if err != nil && !errors.Is(err, ErrNoRef) {
			return err
		}
		if tip == theirs {
			return nil
		}
		var ourTree ObjectID
		if !tip.IsZero() {
			if ourTree, err = treeOf(tip); err != nil {
				return err
			}
		}
		t, gained, err := UnionNotes(db, theirTree, ourTree, nil)
		if err != nil {
			return err
		}
		var pw *PackWriter
		next := theirs
		if len(gained) > 0 {
			pw = NewPackWriter()
			tree, err := t.Hash(pw)
			if err != nil {
				return err
			}
			if tree == ourTree {
				return nil // theirs adds nothing
			}
			c := &Commit{Tree: tree, Parents: []ObjectID{theirs, tip}, Author: who, Committer: who, Message: "Notes merged by tally\n"}
			next = pw.Add(CommitObject, c.Encode())
		}
		_, err = r.UpdateRefWithPack(wl, ref, tip, next, pw)
		if err == nil || !errors.Is(err, ErrRefChanged) {
			return err
		}
	}
	return fmt.Errorf("%s kept changing", ref)
}
