package receipt

import (
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/ledger"
)

// Notes travel in remote mode: after a done has landed on the remote's
// ledger, its note line goes to the remote's NotesRef too, so another
// clone's receipt verify finds it. The server hook takes a NotesRef push
// only as a fast-forward that lengthens notes with lines naming receipts its
// ledger holds for that commit (CheckNotesPush), so a push is built on the
// remote's notes as fetched: their tree, each note gaining this clone's
// receipt lines it lacks (gitstore.UnionNotes), one commit whose parent is
// the remote's tip, sent with a compare-and-swap; a lost race refetches and
// rebuilds. Only lines that are note lines of receipts in the remote's
// ledger travel; hand-written notes and lines of other ledgers stay local.

// notesAttempts bounds the compare-and-swap retries of one notes push, and
// notesSingles how many commits are retried one by one after a refusal.
const (
	notesAttempts = 8
	notesSingles  = 16
)

// NotesPush says what PushNotes did: the commits whose notes the remote
// gained, and those whose receipt lines it still lacks, with why (the
// server's refusal, or the transport failure). Pending lines stay in the
// local notes; the next done or sync pushes them.
type NotesPush struct {
	Remote  string   `json:"remote"`
	Pushed  []string `json:"pushed"`
	Pending []string `json:"pending"`
	Error   string   `json:"error,omitempty"`
}

// PushNotes pushes to remote every receipt line of this clone's notes that
// the remote's notes lack, judged against s, the remote's ledger (a
// snapshot that holds the receipts), then merges the remote's notes into the
// local ones. When the server refuses the whole set (a note on a commit it
// does not have yet, say), each commit is tried alone, up to notesSingles of
// them, so one commit cannot hold back the others' notes. It fails only when
// it cannot read or write local state; a push that does not land is reported
// in the result. A clone without notes has no line the remote could lack,
// and asks it nothing.
func PushNotes(l *ledger.Ledger, s *ledger.Snapshot, remote string, who gitstore.Ident) (*NotesPush, error) {
	res := &NotesPush{Remote: remote, Pushed: []string{}, Pending: []string{}}
	if _, err := l.Repo.ReadRef(NotesRef); errors.Is(err, gitstore.ErrNoRef) {
		return res, nil
	}
	pushed, pending, why, err := pushNotesOnce(l, s, remote, who, nil)
	if err != nil {
		return nil, err
	}
	res.Pushed = append(res.Pushed, pushed...)
	if len(pending) > 1 && errors.Is(why, gitstore.ErrPushRejected) {
		singles := pending[:min(len(pending), notesSingles)]
		res.Pending = append(res.Pending, pending[len(singles):]...)
		why = nil
		for _, obj := range singles {
			p, q, w, err := pushNotesOnce(l, s, remote, who, map[string]bool{obj: true})
			if err != nil {
				return nil, err
			}
			res.Pushed, res.Pending = append(res.Pushed, p...), append(res.Pending, q...)
			if w != nil {
				why = w
			}
		}
	} else {
		res.Pending = append(res.Pending, pending...)
	}
	if why != nil {
		res.Error = why.Error()
	}
	slices.Sort(res.Pushed)
	slices.Sort(res.Pending)
	return res, nil
}

// pushNotesOnce pushes, for the commits in only (all when nil), the receipt
// lines the remote's notes lack: it returns the commits whose notes the
// remote gained, and those it still lacks with why (the push error, or that
// the commits are not known on the remote; why alone when the remote's notes
// could not be fetched). err is for local failures only.
func pushNotesOnce(l *ledger.Ledger, s *ledger.Snapshot, remote string, who gitstore.Ident, only map[string]bool) (pushed, pending []string, why, err error) {
	db, err := l.Repo.Objects()
	if err != nil {
		return nil, nil, nil, err
	}
	trees := map[string]*gitstore.ObjectID{} // commit -> its tree; nil: not a commit here
	// A note on a commit the server does not have is refused there, so only
	// notes of commits this clone knows the remote holds are sent (for a
	// remote given as a URL, which has no remote-tracking refs, all are).
	var known map[string]bool // commit -> known on the remote; nil: all are
	var unjudged []string     // commits keep met that known does not judge yet
	if _, named := l.Repo.ConfigValue("remote." + remote + ".url"); named {
		known = map[string]bool{}
	}
	keep := func(obj, line string) bool {
		if only != nil && !only[obj] {
			return false
		}
		id, err := gitstore.ParseObjectID(obj)
		if err != nil {
			return false
		}
		tree, seen := trees[obj]
		if !seen {
			if c, err := db.ReadCommit(id); err == nil {
				tree = &c.Tree
			}
			trees[obj] = tree
		}
		if tree == nil {
			return false
		}
		if ok, _ := validNoteLine(s, id, *tree, line); !ok || known == nil {
			return ok
		}
		k, judged := known[obj]
		if !judged {
			unjudged = append(unjudged, obj)
			known[obj] = false // until KnownOn judges it, after this union
		}
		return k
	}
	treeOf := func(id gitstore.ObjectID) (gitstore.ObjectID, error) {
		if id.IsZero() {
			return id, nil
		}
		c, err := db.ReadCommit(id)
		if err != nil {
			return id, err
		}
		return c.Tree, nil
	}
	tracking := ledger.TrackingRef(remote, NotesRef)
	var gained []string
	for attempt := 0; attempt < notesAttempts; attempt++ {
		theirs, err := l.Repo.FetchRef(remote, NotesRef, tracking)
		if err != nil {
			return nil, nil, err, nil // nothing is known to be missing yet
		}
		local, err := l.Repo.ReadRef(NotesRef)
		if err != nil && !errors.Is(err, gitstore.ErrNoRef) {
			return nil, nil, nil, err
		}
		theirTree, err := treeOf(theirs)
		if err != nil {
			return nil, nil, nil, err
		}
		ourTree, err := treeOf(local)
		if err != nil {
			return nil, nil, nil, err
		}
		var t *gitstore.Tree
		if t, gained, err = gitstore.UnionNotes(db, theirTree, ourTree, keep); err != nil {
			return nil, nil, nil, err
		}
		if len(unjudged) > 0 {
			k, err := l.Repo.KnownOn(remote, unjudged, ledger.TrackingRef(remote, l.Ref), tracking)
			if err != nil {
				return nil, nil, nil, err
			}
			maps.Copy(known, k)
			unjudged = nil
			if t, gained, err = gitstore.UnionNotes(db, theirTree, ourTree, keep); err != nil {
				return nil, nil, nil, err
			}
		}
		waiting := notKnown(known)
		var waitWhy error
		if len(waiting) > 0 {
			waitWhy = fmt.Errorf("the remote does not have %s yet, as far as this clone knows (refs/remotes/%s/*): push the commit, then tally sync", strings.Join(waiting, ", "), remote)
		}
		if len(gained) == 0 {
			return nil, waiting, waitWhy, l.Repo.MergeNotes(l.NotesLock(), NotesRef, theirs, who)
		}
		pw := gitstore.NewPackWriter()
		tree, err := t.Hash(pw)
		if err != nil {
			return nil, nil, nil, err
		}
		nc := &gitstore.Commit{Tree: tree, Author: who, Committer: who, Message: "Notes added by 'tally done'\n"}
		if !theirs.IsZero() {
			nc.Parents = []gitstore.ObjectID{theirs}
		}
		next := pw.Add(gitstore.CommitObject, nc.Encode())
		// No ref reaches the notes commit until the push lands and
		// MergeNotes moves the local notes to it: its pack is kept from git
		// gc until this function returns. A notes commit this clone has
		// already (the local notes tip itself, when the remote has no notes
		// yet: the same tree, parents, author and message) is not written
		// again: its pack would be byte for byte the one that holds it, and
		// removing it after a lost push would take the local notes with it.
		var pack string
		if !db.Has(next) {
			var release func()
			if pack, release, err = pw.WriteKept(l.Repo.ObjectDir); err != nil {
				return nil, nil, nil, err
			}
			defer release()
		}
		dropPack := func() {
			if pack != "" {
				gitstore.RemovePack(l.Repo.ObjectDir, pack)
			}
		}
		pushErr := l.Repo.PushRef(remote, NotesRef, theirs, next)
		var cur gitstore.ObjectID
		if pushErr == nil {
			cur = next // receive-pack reported the update applied
		} else if errors.Is(pushErr, gitstore.ErrRefChanged) {
			// Nothing was sent: another clone's notes landed first.
			dropPack()
			continue
		} else if cur, err = l.Repo.ListRemoteRef(remote, NotesRef); err != nil {
			// Landed or not, the next push finds out: it builds on what
			// the remote then has.
			if pack != "" {
				db.AddPack(pack)
			}
			return nil, append(gained, waiting...), err, nil
		}
		switch cur {
		case next:
			// Best effort, as for the ledger: a compaction may have merged
			// the pack already, and a miss rescans the packs anyway.
			if pack != "" {
				db.AddPack(pack)
			}
			return gained, waiting, waitWhy, l.Repo.MergeNotes(l.NotesLock(), NotesRef, next, who)
		case theirs: // not applied
			dropPack()
			return nil, append(gained, waiting...), pushErr, nil
		}
		dropPack() // another clone's notes landed first: rebuild on them
	}
	return nil, gained, errors.New(NotesRef + " kept changing"), nil
}

// notKnown lists the commits known judges not on the remote, sorted.
func notKnown(known map[string]bool) []string {
	var out []string
	for c, k := range known {
		if !k {
			out = append(out, c)
		}
	}
	slices.Sort(out)
	return out
}
