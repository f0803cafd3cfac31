package receipt

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/ledger"
)

// NotesRef holds tally's git notes: for each receipted commit, one line per
// receipt pointing at the ledger entry, so `git log --notes=tally` shows them.
const NotesRef = ledger.NotesRef

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
	_, text, err := gitstore.FindNote(gitstore.NewTree(db, c.Tree), commit.String())
	return text, err
}

// NoteAdd is a line to add to the tally note of a commit.
type NoteAdd struct {
	Commit gitstore.ObjectID `json:"commit"`
	Line   string            `json:"line"`
}

// AddNotes appends each line of adds to the tally note of its commit,
// keeping whatever the note already says (other receipts, or text added
// with git notes), in one notes commit with the given message, and moves
// NotesRef with the same compare-and-swap as the ledger, under the writer
// lock at lockPath. It returns the lines it added: those the notes did not
// hold yet, in order (none: no commit is made). It is idempotent.
func AddNotes(repo *gitstore.Repo, lockPath string, adds []NoteAdd, who gitstore.Ident, message string) ([]NoteAdd, error) {
	wl, err := repo.LockWriter(lockPath, 30*time.Second)
	if err != nil {
		return nil, err
	}
	defer wl.Release()
	for attempt := 0; attempt < 10; attempt++ {
		pw := gitstore.NewPackWriter()
		move, added, err := notesMove(repo, adds, who, message, pw)
		if err != nil || move == nil {
			return nil, err
		}
		_, err = repo.UpdateRefWithPack(wl, NotesRef, move.Old, move.New, pw)
		if err == nil {
			return added, nil
		}
		if !errors.Is(err, gitstore.ErrRefChanged) {
			return nil, err
		}
	}
	return nil, fmt.Errorf("%s kept changing", NotesRef)
}

// notesMove builds, on the notes tip as it is now, the notes commit that
// adds the lines of adds the notes lack (each at the end of its commit's
// note), writing its objects to pw, and returns the move of NotesRef to it
// and the lines added (none: no move, nil).
func notesMove(repo *gitstore.Repo, adds []NoteAdd, who gitstore.Ident, message string, pw *gitstore.PackWriter) (*gitstore.RefMove, []NoteAdd, error) {
	tip, t, err := notesTip(repo)
	if err != nil {
		return nil, nil, err
	}
	var added []NoteAdd
	for _, a := range adds {
		if ok, err := addLine(t, a); err != nil {
			return nil, nil, err
		} else if ok {
			added = append(added, a)
		}
	}
	if len(added) == 0 {
		return nil, nil, nil
	}
	id, err := notesCommit(t, tip, who, message, pw)
	if err != nil {
		return nil, nil, err
	}
	return &gitstore.RefMove{Ref: NotesRef, Old: tip, New: id}, added, nil
}

// notesTip reads NotesRef as it is now: its commit (zero when there are
// no notes) and a tree of its notes to change.
func notesTip(repo *gitstore.Repo) (gitstore.ObjectID, *gitstore.Tree, error) {
	db, err := repo.Objects()
	if err != nil {
		return gitstore.ObjectID{}, nil, err
	}
	tip, err := repo.ReadRef(NotesRef)
	if err != nil && !errors.Is(err, gitstore.ErrNoRef) {
		return tip, nil, err
	}
	var base gitstore.ObjectID
	if !tip.IsZero() {
		c, err := db.ReadCommit(tip)
		if err != nil {
			return tip, nil, err
		}
		base = c.Tree
	}
	return tip, gitstore.NewTree(db, base), nil
}

// addLine adds a's line at the end of its commit's note in the notes tree
// t, unless the note holds it already (added false).
func addLine(t *gitstore.Tree, a NoteAdd) (added bool, err error) {
	path, text, err := gitstore.FindNote(t, a.Commit.String())
	if err != nil || slices.Contains(strings.Split(text, "\n"), a.Line) {
		return false, err
	}
	if path == "" {
		path = a.Commit.String()
	}
	if text != "" && !strings.HasSuffix(text, "\n") {
		text += "\n"
	}
	return true, t.Set(path, []byte(text+a.Line+"\n"))
}

// notesCommit writes to pw the notes commit of the notes tree t, with
// parent (zero: none), by who, and returns its id.
func notesCommit(t *gitstore.Tree, parent gitstore.ObjectID, who gitstore.Ident, message string, pw *gitstore.PackWriter) (gitstore.ObjectID, error) {
	tree, err := t.Hash(pw)
	if err != nil {
		return tree, err
	}
	nc := &gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: message}
	if !parent.IsZero() {
		nc.Parents = []gitstore.ObjectID{parent}
	}
	return pw.Add(gitstore.CommitObject, nc.Encode()), nil
}

// DoneNote is the note line a done entry ap adds to its receipted commit's
// note, and who writes it: the entry's actor at the entry's time.
func DoneNote(ap *ledger.Appended) (NoteAdd, gitstore.Ident, error) {
	ref, ok := ap.Result.Effect.(*lease.ReceiptRef)
	if !ok {
		return NoteAdd{}, gitstore.Ident{}, fmt.Errorf("entry %d is not a receipt", ap.Entry.Seq)
	}
	commit, err := gitstore.ParseObjectID(ref.Commit)
	if err != nil {
		return NoteAdd{}, gitstore.Ident{}, err
	}
	ts, err := chain.ParseTime(ap.Entry.TS)
	if err != nil {
		return NoteAdd{}, gitstore.Ident{}, err
	}
	who := gitstore.Ident{Name: ap.Entry.Actor, Email: ap.Entry.Actor, When: ts.Unix(), TZ: "+0000"}
	return NoteAdd{commit, NoteLine(ap.Meta.Origin, ap.Entry.Seq, ap.Hash.String(), ref.Wave+"/"+ref.Cell, ref.Epoch)}, who, nil
}

// doneNotesMessage is the message of the notes commit a done writes.
const doneNotesMessage = "Notes added by 'tally done'\n"

// AddDoneNote writes the note of the done entry ap (DoneNote) with
// AddNotes, for a done whose note did not go with its append, and returns
// who wrote it (for a push of the notes that follows).
func AddDoneNote(repo *gitstore.Repo, lockPath string, ap *ledger.Appended) (gitstore.Ident, error) {
	add, who, err := DoneNote(ap)
	if err != nil {
		return who, err
	}
	_, err = AddNotes(repo, lockPath, []NoteAdd{add}, who, doneNotesMessage)
	return who, err
}

// BesideNote is the ledger.Draft.Beside of a local done entry: its note
// goes into the entry's pack and NotesRef moves right after the ledger's
// ref, under the same writer lock, so a done is one append (FORMAT.md §9,
// "A done and its note"). The ledger's ref moves first: the notes never
// name a receipt the ledger lacks. An append of several dones (a writer
// lock's holder appending others' intents) writes one notes commit for
// each, in ledger order, each the parent of the next: the commits those
// dones appended one by one would have written.
func BesideNote(repo *gitstore.Repo) *ledger.Beside {
	return &ledger.Beside{Ref: NotesRef, Move: func(aps []*ledger.Appended, pw *gitstore.PackWriter) (*gitstore.RefMove, error) {
		tip, t, err := notesTip(repo)
		if err != nil {
			return nil, err
		}
		head := tip
		for _, ap := range aps {
			add, who, err := DoneNote(ap)
			if err != nil {
				return nil, err
			}
			if ok, err := addLine(t, add); err != nil {
				return nil, err
			} else if !ok {
				continue
			}
			if head, err = notesCommit(t, head, who, doneNotesMessage, pw); err != nil {
				return nil, err
			}
		}
		if head == tip {
			return nil, nil
		}
		return &gitstore.RefMove{Ref: NotesRef, Old: tip, New: head}, nil
	}}
}

// MissingNotes returns the note line of every receipt s holds that the
// local notes lack, in ledger order per commit (commits in the order of the
// receipts index). It reads every done entry: O(receipts). It lists the
// receipts/<xx>/ directories: a head's chunk directory there
// (lease.IsChunkDir) is read with its head, not taken for a commit.
func MissingNotes(l *ledger.Ledger, s *ledger.Snapshot) ([]NoteAdd, error) {
	fanout, err := s.Tree.List("receipts")
	if err != nil {
		return nil, err
	}
	var missing []NoteAdd
	for _, dir := range fanout {
		names, err := s.Tree.List("receipts/" + strings.TrimSuffix(dir, "/"))
		if err != nil {
			return nil, err
		}
		for _, name := range names {
			if lease.IsChunkDir(name) {
				continue // the receipts beyond a head's, which ReadReceipts reads with it
			}
			commit, err := gitstore.ParseObjectID(name)
			if err != nil {
				return nil, errs.Wrap(errs.Corrupt, err, "receipts index entry %q", name)
			}
			ix, err := lease.ReadReceipts(s, lease.ReceiptKey(name))
			if err != nil {
				return nil, err
			}
			note, err := ReadNote(l.Repo, commit)
			if err != nil {
				return nil, err
			}
			have := strings.Split(note, "\n")
			for _, ref := range ix.Receipts {
				r, err := readReceipt(s, ref.Seq)
				if err != nil {
					return nil, err
				}
				line := NoteLine(s.Meta.Origin, r.Seq, r.Hash.String(), r.Wave+"/"+r.Cell, r.Epoch)
				if !slices.Contains(have, line) {
					missing = append(missing, NoteAdd{commit, line})
				}
			}
		}
	}
	return missing, nil
}

// NoteLine is the line a receipt adds to its commit's note.
func NoteLine(origin string, seq uint64, entryHash, cell string, epoch int64) string {
	return fmt.Sprintf("tally-receipt origin=%s seq=%d entry=%s cell=%s epoch=%d", origin, seq, entryHash, cell, epoch)
}

// CheckNotesPush judges a push that moves NotesRef from the notes commit old
// (zero when the push creates it) to new, against s, the ledger as it will be
// after the push. Notes are append-only pointers into the ledger, so that
// `git log --notes=tally` shows only receipts the ledger holds:
//
//   - the new tree holds notes only: each path is a note path of a 40-hex
//     object name (flat, or one or two levels of fan-out), one path per name;
//   - a note that changes keeps its old text and only gains lines;
//   - every line it gains is the NoteLine of a receipt in s of that commit,
//     or of a commit with the same tree (what receipt verify accepts).
//
// A violation is RECEIPT-INVALID naming the commit and the line. The cost is
// proportional to the notes the push changes. Whether new descends from old
// is the caller's to check (it needs the commit graph).
func CheckNotesPush(db *gitstore.ObjectDB, s *ledger.Snapshot, old, new gitstore.ObjectID) error {
	treeOf := func(id gitstore.ObjectID) (gitstore.ObjectID, error) {
		if id.IsZero() {
			return id, nil
		}
		c, err := db.ReadCommit(id)
		if err != nil {
			return id, errs.Wrap(errs.ReceiptInvalid, err, "%s must point at a notes commit", NotesRef)
		}
		return c.Tree, nil
	}
	oldTree, err := treeOf(old)
	if err != nil {
		return err
	}
	newTree, err := treeOf(new)
	if err != nil {
		return err
	}
	changed, err := gitstore.DiffTrees(db, oldTree, newTree)
	if err != nil {
		return errs.Wrap(errs.ReceiptInvalid, err, "%s tree", NotesRef)
	}
	before, after := gitstore.NewTree(db, oldTree), gitstore.NewTree(db, newTree)
	seen := map[string]bool{}
	for _, path := range changed {
		name := strings.ReplaceAll(path, "/", "")
		id, err := gitstore.ParseObjectID(name)
		if err != nil || !slices.Contains(gitstore.NotePaths(name), path) || id.String() != name {
			return errs.New(errs.ReceiptInvalid, "%s may hold only notes; %q is not a note path", NotesRef, path).With("note", path)
		}
		if seen[name] {
			continue
		}
		seen[name] = true
		if err := checkNoteChange(db, s, before, after, id); err != nil {
			return err
		}
	}
	return nil
}

// checkNoteChange checks the note of one commit across a notes push.
func checkNoteChange(db *gitstore.ObjectDB, s *ledger.Snapshot, before, after *gitstore.Tree, commit gitstore.ObjectID) error {
	name := commit.String()
	bad := func(format string, args ...any) *errs.Error {
		return errs.New(errs.ReceiptInvalid, format, args...).With("check", "note").With("commit", name)
	}
	copies := 0
	for _, p := range gitstore.NotePaths(name) {
		if _, ok, err := after.Get(p); err != nil {
			return err
		} else if ok {
			copies++
		}
	}
	if copies > 1 {
		return bad("%s holds %d notes for %s: one note path per commit", NotesRef, copies, name)
	}
	_, oldText, err := gitstore.FindNote(before, name)
	if err != nil {
		return err
	}
	_, newText, err := gitstore.FindNote(after, name)
	if err != nil {
		return err
	}
	added, ok := strings.CutPrefix(newText, oldText)
	if ok && added != "" && oldText != "" && !strings.HasSuffix(oldText, "\n") {
		added, ok = strings.CutPrefix(added, "\n") // AddNotes ends the last line first
	}
	if !ok {
		return bad("%s notes are append-only: the push changes or removes what the note of %s said", NotesRef, name)
	}
	if added == "" {
		return nil
	}
	c, err := db.ReadCommit(commit)
	if err != nil {
		return bad("a %s note on %s, which is not a commit here: %v", NotesRef, name, err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(added, "\n"), "\n") {
		if ok, err := validNoteLine(s, commit, c.Tree, line); err != nil {
			return err
		} else if !ok {
			return bad("the %s note line %q on %s names no receipt of that commit (or its tree) in the ledger", NotesRef, line, name).With("note", line)
		}
	}
	return nil
}

// validNoteLine reports whether line is the note line (§5) of a receipt s
// holds for commit, or for another commit of its tree (a rebase may copy
// notes); never without a ledger (s nil). The line names its entry's seq,
// so only that entry is read: a done entry whose commit or tree is these
// (the done rule indexes every receipt under both) and whose own note line
// is exactly line. It is the one definition of a valid note line: the
// notes push rule (CheckNotesPush), sync's choice of lines to push and
// receipt verify (checkNotes) all ask it.
func validNoteLine(s *ledger.Snapshot, commit, tree gitstore.ObjectID, line string) (bool, error) {
	if s == nil {
		return false, nil
	}
	origin := s.Meta.Origin
	rest, ok := strings.CutPrefix(line, "tally-receipt origin="+origin+" seq=")
	if !ok {
		return false, nil
	}
	digits, _, _ := strings.Cut(rest, " ")
	seq, err := strconv.ParseUint(digits, 10, 64)
	if err != nil || seq >= s.Meta.Size {
		return false, nil
	}
	r, err := readReceipt(s, seq)
	if errs.CodeOf(err) == errs.ReceiptInvalid {
		return false, nil // not a done entry: it names no receipt
	} else if err != nil {
		return false, err
	}
	return (r.DoneBody.Commit == commit.String() || r.DoneBody.Tree == tree.String()) && r.noteLine(origin) == line, nil
}
