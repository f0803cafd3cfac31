package tally

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
)

// States of a cell's worktree (WorktreeInfo.State), judged from the ledger.
const (
	WorktreeLive    = "live"    // its lease is held at its epoch, unexpired
	WorktreeExpired = "expired" // its lease expired, and nobody has taken the cell over yet
	WorktreeDone    = "done"    // the cell is done
	WorktreeStale   = "stale"   // its lease ended otherwise: released, taken over (a newer epoch), failed
	WorktreeUnknown = "unknown" // the ledger does not know its cell (another namespace, another plan)
)

// WorktreeInfo is a cell's worktree as `tally worktree list` shows it.
type WorktreeInfo struct {
	*Worktree
	State string `json:"state"`
	// Holder and LeaseEpoch are the cell's current lease, if any.
	Holder     string `json:"holder,omitempty"`
	LeaseEpoch int64  `json:"lease_epoch,omitempty"`
	Missing    bool   `json:"missing,omitempty"` // the directory is gone
	Bytes      int64  `json:"bytes"`             // disk used by its files (not the shared objects)
}

// Worktrees lists the cells' worktrees of the repository (every linked
// worktree with a binding, in git's order of their git directories) with
// their cells' states.
func (c *Client) Worktrees() ([]WorktreeInfo, error) {
	out := []WorktreeInfo{}
	bound, err := c.boundWorktrees()
	if err != nil || len(bound) == 0 {
		return out, err // no ledger read: gc and status in a repository without cells' worktrees pay nothing
	}
	s, err := c.head()
	if err != nil {
		return nil, err
	}
	now := c.L.EntryTime(s)
	for _, w := range bound {
		info := WorktreeInfo{Worktree: w, State: WorktreeUnknown}
		if cl, err := lease.ReadCell(s, w.Wave, w.Cell); err == nil {
			info.State = WorktreeStale
			if cl.Lease != nil {
				info.Holder, info.LeaseEpoch = cl.Lease.Actor, cl.Lease.Epoch
			}
			switch {
			case cl.State == lease.Done:
				info.State = WorktreeDone
			case lease.CheckHolder(cl, lease.EpochBody{CellRef: w.CellRef, Epoch: w.Epoch}, w.Actor, true, now) == nil:
				info.State = WorktreeLive
			case cl.State == lease.Claimed && cl.Epoch == w.Epoch:
				// Its holder may still come back and claim it again;
				// a takeover makes it stale.
				info.State = WorktreeExpired
			}
		}
		info.Bytes, info.Missing = diskUsed(w.Path)
		out = append(out, info)
	}
	return out, nil
}

// boundWorktrees reads the bindings of the repository's linked worktrees;
// a worktree's path is where git records it (its binding may predate a
// git worktree move).
func (c *Client) boundWorktrees() ([]*Worktree, error) {
	admin := filepath.Join(c.L.Repo.CommonDir, "worktrees")
	entries, err := os.ReadDir(admin)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "worktrees")
	}
	var out []*Worktree
	for _, e := range entries {
		gitDir := filepath.Join(admin, e.Name())
		w, err := readBinding(gitDir)
		if err != nil {
			return nil, err
		}
		if w == nil {
			continue
		}
		if b, err := os.ReadFile(filepath.Join(gitDir, "gitdir")); err == nil {
			w.Path = filepath.Dir(strings.TrimSpace(string(b)))
		}
		out = append(out, w)
	}
	return out, nil
}

// diskUsed sums the sizes of the files under path (its .git file aside:
// the objects are the repository's), and says whether path is gone.
func diskUsed(path string) (n int64, missing bool) {
	if _, err := os.Stat(path); err != nil {
		return 0, true
	}
	filepath.WalkDir(path, func(_ string, d fs.DirEntry, err error) error {
		if err == nil && d.Type().IsRegular() {
			if info, err := d.Info(); err == nil {
				n += info.Size()
			}
		}
		return nil
	})
	return n, false
}

// Pruned is what PruneWorktrees did with one worktree.
type Pruned struct {
	WorktreeInfo
	// Action is "removed" (worktree and branch), "stashed" (removed with
	// force after its work was saved to Stash) or "kept".
	Action string   `json:"action"`
	Reason string   `json:"reason,omitempty"`
	Files  []string `json:"files,omitempty"` // the uncommitted work that kept it
	Stash  string   `json:"stash,omitempty"`
}

// PruneResult is the outcome of PruneWorktrees.
type PruneResult struct {
	Worktrees []Pruned `json:"worktrees"`
	// Abandoned counts the worktrees that claims killed before binding
	// them left behind, removed.
	Abandoned int `json:"abandoned"`
}

// Pruned actions.
const (
	PruneRemoved = "removed"
	PruneStashed = "stashed"
	PruneKept    = "kept"
)

// StashRef is where a forced prune saves a cell worktree's work before it
// removes the worktree: a commit of everything in it, on top of its HEAD.
func StashRef(w *Worktree) string {
	return fmt.Sprintf("refs/tally/stash/%s/%s/%d", w.Wave, w.Cell, w.Epoch)
}

// PruneWorktrees removes the worktrees and branches of cells that are done
// or whose lease ended (released, failed, or expired and taken over at a
// newer epoch) when nothing would be lost: the worktree has no uncommitted
// work and its branch is in its target branch. Others are kept and
// reported, unless force: then their work is first committed to StashRef.
// Live leases' worktrees are never touched, nor those of expired leases
// nobody took over. It also removes what claims killed before binding a
// worktree left behind.
func (c *Client) PruneWorktrees(force bool) (*PruneResult, error) {
	lock, err := gitstore.LockFile(c.L.Files.LandLock())
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "land lock")
	}
	defer lock.Close()
	res := &PruneResult{Worktrees: []Pruned{}}
	if res.Abandoned, err = c.pruneAbandoned(); err != nil {
		return nil, err
	}
	infos, err := c.Worktrees()
	if err != nil {
		return nil, err
	}
	for _, info := range infos {
		if info.State != WorktreeDone && info.State != WorktreeStale {
			continue
		}
		p, err := c.pruneOne(info, force)
		if err != nil {
			return nil, err
		}
		res.Worktrees = append(res.Worktrees, *p)
	}
	return res, nil
}

// pruneAbandoned acts on the intents of claims whose process is gone: a
// worktree they bound is an ordinary one (only the record goes); one they
// did not is removed with its branch.
func (c *Client) pruneAbandoned() (int, error) {
	dir := c.L.Files.WorktreeIntents()
	entries, err := os.ReadDir(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, errs.Wrap(errs.IOError, err, "worktree intents")
	}
	n := 0
	for _, e := range entries {
		path := filepath.Join(dir, e.Name())
		in, err := readIntent(path)
		if err != nil {
			// A record cut short by a kill before its rename: its name
			// starts with its writer's pid, as the record's does.
			pid, _, _ := strings.Cut(e.Name(), "-")
			if n, err := strconv.Atoi(pid); err == nil && !ProcessAlive(n) {
				os.Remove(path)
			}
			continue
		}
		if ProcessAlive(in.PID) && processStart(in.PID) == in.Start {
			continue // the claim is still making it
		}
		if gitDir, err := worktreeGitDir(in.Dir); err == nil {
			if w, _ := readBinding(gitDir); w != nil && w.Branch == in.Branch {
				os.Remove(path)
				continue
			}
		}
		c.removeAbandoned(in)
		os.Remove(path)
		n++
	}
	return n, nil
}

// pruneOne removes one worktree whose lease is over, if nothing would be
// lost or force saved it first.
func (c *Client) pruneOne(info WorktreeInfo, force bool) (*Pruned, error) {
	w := info.Worktree
	p := &Pruned{WorktreeInfo: info, Action: PruneKept}
	files, err := uncommitted(w.Path)
	if err != nil {
		return nil, err
	}
	tipID, err := c.L.Repo.ReadRef("refs/heads/" + w.Branch)
	tip, hasBranch := tipID.String(), err == nil
	merged := true
	if hasBranch {
		if merged, err = isAncestor(c.repoDir(), tip, "refs/heads/"+w.Target); err != nil {
			return nil, err
		}
	} else if !errors.Is(err, gitstore.ErrNoRef) {
		return nil, errs.Wrap(errs.IOError, err, "branch %s", w.Branch)
	}
	if len(files) > 0 || !merged {
		p.Files = files
		p.Reason = fmt.Sprintf("%d uncommitted files", len(files))
		if !merged {
			p.Reason = fmt.Sprintf("branch %s is not merged into %s", w.Branch, w.Target)
			if len(files) > 0 {
				p.Reason += fmt.Sprintf(", and %d uncommitted files", len(files))
			}
		}
		if !force {
			return p, nil
		}
		if p.Stash, err = stash(c.repoDir(), w, tip, len(files) > 0); err != nil {
			return nil, err
		}
		p.Action = PruneStashed
	}
	args := []string{"worktree", "remove", w.Path}
	if force {
		args = []string{"worktree", "remove", "--force", "--force", w.Path}
	}
	if _, err := gitstore.RunGit(c.repoDir(), args...); err != nil {
		p.Action, p.Reason = PruneKept, "git worktree remove: "+err.Error()
		return p, nil
	}
	if hasBranch {
		// With the worktree gone nobody moves the branch; the old value
		// keeps a branch moved meanwhile.
		gitstore.RunGit(c.repoDir(), "update-ref", "-d", "refs/heads/"+w.Branch, tip)
	}
	if p.Action == PruneKept {
		p.Action = PruneRemoved
	}
	if def := c.worktreeDir(w.Wave, w.Cell); filepath.Dir(def) == filepath.Dir(w.Path) {
		// The default place's wave and root directories go when empty
		// (os.Remove removes no other).
		os.Remove(filepath.Dir(def))
		os.Remove(filepath.Dir(filepath.Dir(def)))
	}
	return p, nil
}

// stash saves the worktree's work to StashRef(w): its branch's tip, or
// with dirty a commit on top of its HEAD of everything in it (untracked
// files too, not ignored ones). It returns the ref.
func stash(repoDir string, w *Worktree, tip string, dirty bool) (string, error) {
	commit := tip
	if dirty {
		head, err := gitstore.RunGit(w.Path, "rev-parse", "HEAD")
		if err != nil {
			return "", errs.Wrap(errs.IOError, err, "stash %s", w.Path)
		}
		commit = strings.TrimSpace(string(head))
		if _, err := gitstore.RunGit(w.Path, "add", "-A"); err != nil {
			return "", errs.Wrap(errs.IOError, err, "stash %s", w.Path)
		}
		tree, err := gitstore.RunGit(w.Path, "write-tree")
		if err != nil {
			return "", errs.Wrap(errs.IOError, err, "stash %s", w.Path)
		}
		out, err := gitstore.RunGit(w.Path, "commit-tree", strings.TrimSpace(string(tree)), "-p", commit,
			"-m", fmt.Sprintf("tally: uncommitted work of %s/%s epoch %d in %s", w.Wave, w.Cell, w.Epoch, w.Path))
		if err != nil {
			return "", errs.Wrap(errs.IOError, err, "stash %s", w.Path)
		}
		commit = strings.TrimSpace(string(out))
	}
	ref := StashRef(w)
	if _, err := gitstore.RunGit(repoDir, "update-ref", ref, commit); err != nil {
		return "", errs.Wrap(errs.IOError, err, "stash %s", w.Path)
	}
	return ref, nil
}
