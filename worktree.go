package tally

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/receipt"
)

// A cell's worktree (FORMAT.md §8, "Cell worktrees") is a linked git
// worktree on a branch of its own, made by claim --worktree, bound to the
// lease by a file in the worktree's own git directory, merged back by done
// --merge and removed by PruneWorktrees. The binding is a local fact: the
// ledger records the lease and the receipt, never a path on one machine.

// Worktree binds a linked worktree to the lease it was made for.
type Worktree struct {
	lease.CellRef
	Epoch int64  `json:"epoch"`
	Actor string `json:"actor"`
	// Path is the worktree's directory.
	Path string `json:"path"`
	// Branch is the worktree's branch, Target the branch its work merges
	// into (the one checked out where it was claimed), both short names
	// under refs/heads/; Base is Target's tip the branch started at.
	Branch string `json:"branch"`
	Target string `json:"target"`
	Base   string `json:"base"`
	// Landing is what done --merge put on Target, recorded before Target
	// moves: a done killed after the move finds it when run again.
	Landing *Landing `json:"landing,omitempty"`
}

// Landing is a cell's work landed on its target branch: Commit, on top of
// Onto (the target's tip before). The receipt binds Commit with Onto as its
// base, so its changed paths are the cell's own.
type Landing struct {
	Commit string `json:"commit"`
	Onto   string `json:"onto"`
}

// Merge strategies of done --merge (git config tally.worktree.merge).
const (
	MergeFastForward = "ff"     // the branch must contain the target
	MergeRebase      = "rebase" // replay the branch on the target, in its worktree
	MergeCommit      = "merge"  // a merge commit, or a fast-forward when one does
	MergeNone        = "none"   // leave the branch where it is
)

// Git configuration of cells' worktrees.
const (
	WorktreeBranchConfig = "tally.worktree.branch" // template, default DefaultWorktreeBranch
	WorktreeRootConfig   = "tally.worktree.root"   // directory, default <repo>.tally beside the repository
	WorktreeMergeConfig  = "tally.worktree.merge"  // strategy done uses in a cell's worktree when given none
	// DefaultWorktreeBranch names a cell's branch: {wave} and {cell} are
	// replaced by the cell's ids.
	DefaultWorktreeBranch = "tally/{wave}/{cell}"
)

// DefaultMerge is the strategy done uses in a cell's worktree when given
// none: git config tally.worktree.merge, "" when unset (no merge).
func (c *Client) DefaultMerge() string {
	v, _ := c.L.Repo.ConfigValue(WorktreeMergeConfig)
	return v
}

// bindingFile is the binding's name in the worktree's own git directory
// (.git/worktrees/<name>/): git ignores it and removes it with the worktree.
const bindingFile = "tally-cell"

// WorktreeCell is the cell whose worktree the client was opened in, or nil
// when it was opened elsewhere: commands run there need no cell or epoch.
func (c *Client) WorktreeCell() (*Worktree, error) {
	return readBinding(c.L.Repo.GitDir)
}

// CellWorktree is the worktree bound to the cell's lease at epoch in this
// repository (the one the client is in first), nil if there is none.
func (c *Client) CellWorktree(ref lease.CellRef, epoch int64) (*Worktree, error) {
	if w, err := c.WorktreeCell(); err != nil || w != nil && w.CellRef == ref && w.Epoch == epoch {
		return w, err
	}
	bound, err := c.boundWorktrees()
	if err != nil {
		return nil, err
	}
	for _, w := range bound {
		if w.CellRef == ref && w.Epoch == epoch {
			return w, nil
		}
	}
	return nil, nil
}

func readBinding(gitDir string) (*Worktree, error) {
	b, err := os.ReadFile(filepath.Join(gitDir, bindingFile))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "cell worktree binding")
	}
	var w Worktree
	if err := json.Unmarshal(b, &w); err != nil || w.Wave == "" || w.Cell == "" || w.Branch == "" || w.Target == "" {
		return nil, errs.New(errs.Corrupt, "%s: not a cell worktree binding", filepath.Join(gitDir, bindingFile))
	}
	return &w, nil
}

// writeBinding replaces the binding in one rename, so a reader (or a done
// run again after a kill) sees the old one or the new one.
func writeBinding(gitDir string, w *Worktree) error {
	b, err := json.Marshal(w)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cell worktree binding")
	}
	if err := writeFileAtomic(filepath.Join(gitDir, bindingFile), b); err != nil {
		return errs.Wrap(errs.IOError, err, "cell worktree binding")
	}
	return nil
}

func writeFileAtomic(path string, b []byte) error {
	tmp := fmt.Sprintf("%s.tmp%d", path, os.Getpid())
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// worktreeGitDir is the git directory of the linked worktree at path, as
// its .git file names it.
func worktreeGitDir(path string) (string, error) {
	b, err := os.ReadFile(filepath.Join(path, ".git"))
	if err != nil {
		return "", err
	}
	dir, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "gitdir: ")
	if !ok {
		return "", fmt.Errorf("%s/.git is not a linked worktree's", path)
	}
	if !filepath.IsAbs(dir) {
		dir = filepath.Join(path, dir)
	}
	return dir, nil
}

// WorktreeClaim is the outcome of ClaimWorktree: the lease and its worktree.
type WorktreeClaim struct {
	*LeaseResult
	Worktree *Worktree `json:"worktree,omitempty"`
}

// worktreeIntent is what claim --worktree records before it makes the
// worktree (LocalPaths.WorktreeIntents): a claim killed before it bound the
// worktree to its lease leaves it, and prune removes what it names once its
// process is gone. Dir did not exist and Branch was not a branch before.
type worktreeIntent struct {
	PID   int    `json:"pid"`
	Start uint64 `json:"start"` // the process's start time, so a reused pid is not it
	Dir   string `json:"dir"`
	lease.CellRef
	Branch string `json:"branch"`
	Base   string `json:"base"`
}

// ClaimWorktree claims a cell as ClaimWait does and makes its worktree: a
// linked worktree at dir ("" for the default place, worktreeDir) on a new
// branch (git config tally.worktree.branch) from the tip of the branch
// checked out here, which must contain the receipted commits of the cell's
// dependencies (else WORKTREE-BASE). The claim and the worktree stand or
// fall together: a refused claim makes nothing, and a worktree that cannot
// be made gives the lease back. A claim killed between the two leaves a
// lease that expires and a record that PruneWorktrees acts on.
func (c *Client) ClaimWorktree(ctx context.Context, o ClaimOptions, wait time.Duration, onWait func(error), dir string) (*WorktreeClaim, error) {
	p, err := c.PlanWorktree(dir)
	if err != nil {
		return nil, err
	}
	res, err := c.ClaimWait(ctx, o, wait, onWait)
	if err != nil {
		return nil, err
	}
	return c.MakeWorktree(p, res)
}

// WorktreePlan is what a cell's worktree needs that can be checked before
// the claim it is for (PlanWorktree): refusing then makes nothing.
type WorktreePlan struct {
	target, dir, branch string
}

// PlanWorktree checks what a worktree for a claim to come needs: the
// target branch, the directory dir ("" for the default place) and the
// branch template.
func (c *Client) PlanWorktree(dir string) (*WorktreePlan, error) {
	target, err := c.worktreeTarget()
	if err != nil {
		return nil, err
	}
	if dir != "" {
		if dir, err = filepath.Abs(dir); err != nil {
			return nil, errs.Wrap(errs.Usage, err, "worktree directory")
		}
		if _, err := os.Lstat(dir); err == nil {
			return nil, errs.New(errs.Usage, "worktree directory %s exists: name a new one", dir).With("path", dir)
		}
	}
	tmpl := DefaultWorktreeBranch
	if v, ok := c.L.Repo.ConfigValue(WorktreeBranchConfig); ok {
		tmpl = v
	}
	if !strings.Contains(tmpl, "{cell}") {
		return nil, errs.New(errs.Usage, "git config %s=%q must contain {cell}: every cell needs a branch of its own", WorktreeBranchConfig, tmpl)
	}
	return &WorktreePlan{target: target, dir: dir, branch: tmpl}, nil
}

// MakeWorktree makes the worktree p planned for the lease res granted, or
// gives the lease back and says why not.
func (c *Client) MakeWorktree(p *WorktreePlan, res *LeaseResult) (*WorktreeClaim, error) {
	w := &Worktree{CellRef: res.CellRef, Epoch: res.Lease.Epoch, Actor: c.Actor, Target: p.target, Path: p.dir,
		Branch: strings.NewReplacer("{wave}", res.Wave, "{cell}", res.Cell).Replace(p.branch)}
	if err := c.makeWorktree(w, res.Commit); err != nil {
		if _, rerr := c.Release(w.Wave, w.Cell, w.Epoch); rerr != nil {
			return nil, errs.From(err).With("release", rerr.Error())
		}
		return nil, err
	}
	return &WorktreeClaim{res, w}, nil
}

// NextWorktree makes the worktree p planned for the cell res claimed after
// its done (DoneNext), and reports it in res.Next as ClaimWorktree's result;
// a worktree that cannot be made gives that lease back and is res's next
// error instead (the done stands).
func (c *Client) NextWorktree(res *DoneNextResult, p *WorktreePlan) {
	if res.Claim == nil {
		return
	}
	wc, err := c.MakeWorktree(p, res.Claim)
	if err == nil {
		if res.Next, err = ResultObject(wc); err == nil {
			res.NextWorktree = wc.Worktree
			return
		}
	}
	res.Claim, res.NextErr, res.Next = nil, err, ErrorObject(err)
}

// worktreeTarget is the branch a cell claimed here merges into: a cell's
// worktree's own target, else the branch checked out here.
func (c *Client) worktreeTarget() (string, error) {
	if w, err := c.WorktreeCell(); err != nil || w != nil {
		if w != nil {
			return w.Target, nil
		}
		return "", err
	}
	b, err := os.ReadFile(filepath.Join(c.L.Repo.GitDir, "HEAD"))
	if err != nil {
		return "", errs.Wrap(errs.IOError, err, "HEAD")
	}
	branch, ok := strings.CutPrefix(strings.TrimSpace(string(b)), "ref: refs/heads/")
	if !ok {
		return "", errs.New(errs.Usage, "HEAD is not on a branch: check out the branch the cells' work merges into")
	}
	if _, err := c.L.Repo.ReadRef("refs/heads/" + branch); err != nil {
		return "", errs.New(errs.Usage, "branch %s has no commit yet: a cell's worktree starts from it", branch)
	}
	return branch, nil
}

// makeWorktree makes w's worktree for its fresh lease, claimed at ledger
// commit claimed: base on the target's tip (read after the claim, so that
// every dependency done by then has landed), branch and directory (with
// -<epoch> when a kept one has the name), and the binding.
func (c *Client) makeWorktree(w *Worktree, claimed string) error {
	base, err := c.L.Repo.ReadRef("refs/heads/" + w.Target)
	if err != nil {
		return errs.Wrap(errs.IOError, err, "target branch %s", w.Target)
	}
	w.Base = base.String()
	if err := c.checkDepsIn(w, claimed); err != nil {
		return err
	}
	explicit := w.Path != ""
	if !explicit {
		w.Path = c.worktreeDir(w.Wave, w.Cell)
	}
	_, branchTaken := c.L.Repo.ReadRef("refs/heads/" + w.Branch)
	_, dirTaken := os.Lstat(w.Path)
	if branchTaken == nil || (!explicit && dirTaken == nil) {
		suffix := fmt.Sprintf("-%d", w.Epoch)
		w.Branch += suffix
		if !explicit {
			w.Path += suffix
		}
	}
	intent, err := c.recordIntent(w)
	if err != nil {
		return err
	}
	if err := os.MkdirAll(filepath.Dir(w.Path), 0o755); err != nil {
		return errs.Wrap(errs.IOError, err, "worktree directory")
	}
	// git worktree add reads every other worktree's git directory, and
	// fails on one another git worktree add is making (git 2.39: "failed
	// to read .git/worktrees/<name>/commondir"): tally's take turns.
	lock, err := gitstore.LockFile(c.L.Files.LandLock())
	if err != nil {
		return errs.Wrap(errs.IOError, err, "land lock")
	}
	defer lock.Close()
	if _, err := gitstore.RunGit(c.repoDir(), "worktree", "add", "-q", "-b", w.Branch, w.Path, w.Base); err != nil {
		c.abandonIntent(intent) // a partial worktree or branch is prune's, which knows neither was ours before
		return errs.Wrap(errs.IOError, err, "git worktree add")
	}
	gitDir, err := worktreeGitDir(w.Path)
	if err == nil {
		err = writeBinding(gitDir, w)
	}
	if err != nil {
		c.abandonIntent(intent)
		return errs.Wrap(errs.IOError, err, "binding worktree %s", w.Path)
	}
	os.Remove(intent)
	return nil
}

// abandonIntent undoes a worktree a failed claim --worktree made, as prune
// would after a kill (the process is this one, so prune would not yet).
// The caller holds the land lock.
func (c *Client) abandonIntent(path string) {
	if in, err := readIntent(path); err == nil {
		c.removeAbandoned(in)
	}
	os.Remove(path)
}

// checkDepsIn refuses a base that lacks the receipted commit of one of the
// cell's dependencies, as the state the claim left (at ledger commit
// claimed) records them: their work must be in the worktree it starts.
func (c *Client) checkDepsIn(w *Worktree, claimed string) error {
	at, err := gitstore.ParseObjectID(claimed)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "claim commit")
	}
	s, err := c.L.SnapshotAt(at)
	if err != nil {
		return err
	}
	cl, err := lease.ReadCell(s, w.Wave, w.Cell)
	if err != nil {
		return err
	}
	for _, dep := range cl.Deps {
		wave, id, ok := strings.Cut(dep, "/")
		if !ok {
			wave, id = w.Wave, dep
		}
		d, err := lease.ReadCell(s, wave, id)
		if err != nil {
			return err
		}
		if d.Receipt == nil {
			continue // the rules let the claim through: nothing to contain
		}
		in, err := isAncestor(c.repoDir(), d.Receipt.Commit, w.Base)
		if err != nil {
			return err
		}
		if !in {
			return errs.New(errs.WorktreeBase, "branch %s (%.12s) lacks commit %.12s, the receipt of dependency %s/%s: merge it into %s first",
				w.Target, w.Base, d.Receipt.Commit, wave, id, w.Target).
				With("target", w.Target).With("base", w.Base).With("dep", wave+"/"+id).With("commit", d.Receipt.Commit)
		}
	}
	return nil
}

// worktreeDir is where a cell's worktree goes by default: <root>/<wave>/<cell>
// with root git config tally.worktree.root (relative to the main worktree),
// else <repository>.tally beside the repository: outside its work tree,
// where neither the repository's own tools nor its status see it.
func (c *Client) worktreeDir(wave, cell string) string {
	main := filepath.Dir(c.L.Repo.CommonDir) // the main worktree of <main>/.git
	if filepath.Base(c.L.Repo.CommonDir) != ".git" {
		main = c.L.Repo.CommonDir // bare
	}
	root := filepath.Join(filepath.Dir(main), filepath.Base(main)+".tally")
	if v, ok := c.L.Repo.ConfigValue(WorktreeRootConfig); ok && v != "" {
		root = v
		if !filepath.IsAbs(root) {
			root = filepath.Join(main, root)
		}
	}
	return filepath.Join(root, wave, cell)
}

func (c *Client) recordIntent(w *Worktree) (string, error) {
	dir := c.L.Files.WorktreeIntents()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return "", errs.Wrap(errs.IOError, err, "worktree intent")
	}
	nonce := make([]byte, 6)
	rand.Read(nonce)
	in := worktreeIntent{PID: os.Getpid(), Start: processStart(os.Getpid()), Dir: w.Path, CellRef: w.CellRef, Branch: w.Branch, Base: w.Base}
	b, _ := json.Marshal(in)
	path := filepath.Join(dir, fmt.Sprintf("%d-%s.json", in.PID, hex.EncodeToString(nonce)))
	if err := writeFileAtomic(path, b); err != nil {
		return "", errs.Wrap(errs.IOError, err, "worktree intent")
	}
	return path, nil
}

func readIntent(path string) (*worktreeIntent, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var in worktreeIntent
	if err := json.Unmarshal(b, &in); err != nil || in.Dir == "" || in.Branch == "" {
		return nil, fmt.Errorf("%s: not a worktree intent", path)
	}
	return &in, nil
}

// removeAbandoned removes what a claim --worktree that never bound it made:
// the worktree (nobody was told of it, so nobody worked in it) and the
// branch while it is still at the base it was made at.
func (c *Client) removeAbandoned(in *worktreeIntent) {
	if _, err := gitstore.RunGit(c.repoDir(), "worktree", "remove", "--force", "--force", in.Dir); err != nil {
		os.RemoveAll(in.Dir) // never registered: the directory did not exist before the intent
	}
	gitstore.RunGit(c.repoDir(), "update-ref", "-d", "refs/heads/"+in.Branch, in.Base)
}

// isAncestor reports whether commit a is an ancestor of (or is) b.
func isAncestor(dir, a, b string) (bool, error) {
	_, err := gitstore.RunGit(dir, "merge-base", "--is-ancestor", a, b)
	var ge *gitstore.GitError
	if errors.As(err, &ge) && ge.Code == 1 {
		return false, nil
	}
	if err != nil {
		return false, errs.Wrap(errs.IOError, err, "merge-base %.12s %.12s", a, b)
	}
	return true, nil
}

// uncommitted lists what `git status` shows in the worktree at path: changes
// to tracked files and untracked files (not ignored ones). A missing
// directory has none.
func uncommitted(path string) ([]string, error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	out, err := gitstore.RunGit(path, "--no-optional-locks", "status", "--porcelain=v1", "-z", "--untracked-files=normal")
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "git status in %s", path)
	}
	var files []string
	recs := strings.Split(string(out), "\x00")
	for i := 0; i < len(recs); i++ {
		if len(recs[i]) < 4 {
			continue
		}
		if recs[i][0] == 'R' || recs[i][0] == 'C' {
			i++ // the next record is the source path
		}
		files = append(files, recs[i][3:])
	}
	return files, nil
}

// refuseDirty is WORKTREE-DIRTY when the cell's worktree holds uncommitted
// work: a receipt binds commits, and prune must find nothing to lose.
func refuseDirty(w *Worktree) error {
	files, err := uncommitted(w.Path)
	if err != nil || len(files) == 0 {
		return err
	}
	return errs.New(errs.WorktreeDirty, "%s has uncommitted changes (%s): commit them (or remove them) and run done again",
		w.Path, strings.Join(files, ", ")).With("path", w.Path).With("files", files)
}

// WorktreeRequest fills req for a done in the cell's worktree w: the cell,
// the epoch (unless given), and the commit and base. With strategy "" or
// MergeNone the receipt binds the branch's tip from the worktree's base;
// otherwise the branch first lands on its target (Land) and the receipt
// binds the landed commit from the target's tip it landed on. Uncommitted
// work in the worktree refuses it (WORKTREE-DIRTY).
func (c *Client) WorktreeRequest(w *Worktree, req *receipt.Request, strategy string) (*Landing, error) {
	if req.Wave == "" {
		req.CellRef = w.CellRef
	}
	if req.CellRef != w.CellRef {
		return nil, errs.New(errs.Usage, "worktree %s is %s/%s's, not %s/%s's", w.Path, w.Wave, w.Cell, req.Wave, req.Cell)
	}
	if req.Epoch == 0 {
		req.Epoch = w.Epoch
	}
	if strategy != "" && strategy != MergeNone && (req.Commit != "" || req.Base != "") {
		return nil, errs.New(errs.Usage, "a merge decides the receipt's commit and base: give neither")
	}
	if strategy == "" || strategy == MergeNone {
		if err := refuseDirty(w); err != nil {
			return nil, err
		}
		if req.Commit == "" {
			req.Commit = "refs/heads/" + w.Branch
		}
		if req.Base == "" {
			req.Base = w.Base
		}
		return nil, nil
	}
	landed, err := c.Land(w, strategy)
	if err != nil {
		return nil, err
	}
	req.Commit, req.Base = landed.Commit, landed.Onto
	return landed, nil
}

// BranchPush is the push of a receipt's commit to the remote as its cell's
// branch; Error says why it did not land (the receipt stands all the same).
type BranchPush struct {
	Remote string `json:"remote"`
	Ref    string `json:"ref"`
	Commit string `json:"commit"`
	Error  string `json:"error,omitempty"`
}

// FinishWorktree completes res, a done in the cell's worktree w: it records
// what landed, and in remote mode pushes the receipt's commit to the remote
// as w's branch, so the commit the receipt binds is where the ledger is (a
// landed target branch is the user's to push). A push that fails is
// reported in res and as a warning: the receipt is the record.
func (c *Client) FinishWorktree(res *DoneResult, w *Worktree, landed *Landing) {
	res.Landed = landed
	remote := c.Remote()
	if remote == "" {
		return
	}
	bp := &BranchPush{Remote: remote, Ref: "refs/heads/" + w.Branch, Commit: res.Receipt.Commit}
	res.BranchPush = bp
	commit, err := gitstore.ParseObjectID(bp.Commit)
	var old gitstore.ObjectID
	if err == nil {
		old, err = c.L.Repo.ListRemoteRef(remote, bp.Ref)
	}
	if err == nil && old != commit {
		err = c.L.Repo.PushRef(remote, bp.Ref, old, commit)
	}
	if err != nil {
		bp.Error = err.Error()
		res.Warnings = append(res.Warnings, fmt.Sprintf("the receipt's commit was not pushed to %s as %s: %v", remote, bp.Ref, err))
	}
}

// Land integrates the branch of the cell's worktree w into its target
// branch with strategy (MergeFastForward, MergeRebase or MergeCommit) and
// returns the commit that landed. The lease must be live and the worktree
// clean; a conflict (or, for MergeFastForward, a target the branch does not
// contain) is MERGE-CONFLICT, with the worktree, its branch and the lease
// as they were. A target checked out in a worktree moves there by git
// merge --ff-only, which keeps that worktree's own edits or refuses
// (WORKTREE-DIRTY); one checked out nowhere moves by compare-and-swap.
// Landings and prunes of one repository take turns (LocalPaths.LandLock).
func (c *Client) Land(w *Worktree, strategy string) (*Landing, error) {
	if strategy != MergeFastForward && strategy != MergeRebase && strategy != MergeCommit {
		return nil, errs.New(errs.Usage, "merge strategy %q: use %s, %s or %s", strategy, MergeFastForward, MergeRebase, MergeCommit)
	}
	if err := refuseDirty(w); err != nil {
		return nil, err
	}
	if _, err := c.LiveLease(w.Wave, w.Cell, w.Epoch); err != nil {
		return nil, err // landing work whose receipt the rules would refuse would leave it unreceipted
	}
	lock, err := gitstore.LockFile(c.L.Files.LandLock())
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "land lock")
	}
	defer lock.Close()
	gitDir, err := worktreeGitDir(w.Path)
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "worktree %s", w.Path)
	}
	if w, err = readBinding(gitDir); err != nil || w == nil { // a killed landing recorded it there
		return nil, errs.New(errs.IOError, "worktree binding in %s is gone", gitDir)
	}
	onto, err := c.L.Repo.ReadRef("refs/heads/" + w.Target)
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "target branch %s", w.Target)
	}
	target := onto.String()
	if w.Landing != nil {
		if in, err := isAncestor(w.Path, w.Landing.Commit, target); err != nil || in {
			return w.Landing, err // landed before a kill: the receipt binds that
		}
	}
	tipID, err := c.L.Repo.ReadRef("refs/heads/" + w.Branch)
	if err != nil {
		return nil, errs.Wrap(errs.IOError, err, "branch %s", w.Branch)
	}
	tip := tipID.String()
	if in, err := isAncestor(w.Path, tip, target); err != nil || in {
		return &Landing{Commit: tip, Onto: w.Base}, err // nothing to land: the target has it
	}
	landed, err := c.integrate(w, strategy, tip, target)
	if err != nil {
		return nil, err
	}
	w.Landing = &Landing{Commit: landed, Onto: target}
	if err := writeBinding(gitDir, w); err != nil {
		return nil, err
	}
	if err := c.moveTarget(w, target, landed); err != nil {
		return nil, err
	}
	return w.Landing, nil
}

// integrate makes the commit that lands w's branch (at tip) on its target
// (at target), leaving the target where it is.
func (c *Client) integrate(w *Worktree, strategy, tip, target string) (string, error) {
	ff, err := isAncestor(w.Path, target, tip)
	if err != nil || ff {
		return tip, err
	}
	conflict := func(files []string, how string) error {
		return errs.New(errs.MergeConflict, "%s/%s: %s cannot land on %s (%.12s) by %s: merge or rebase %s into your branch in %s, resolve, commit, and run done again",
			w.Wave, w.Cell, w.Branch, w.Target, target, how, w.Target, w.Path).
			With("branch", w.Branch).With("target", w.Target).With("strategy", strategy).With("files", files)
	}
	switch strategy {
	case MergeFastForward:
		return "", conflict([]string{}, "fast-forward: it does not contain the target")
	case MergeRebase:
		if _, err := gitstore.RunGit(w.Path, "rebase", "-q", target); err != nil {
			files, _ := gitstore.RunGit(w.Path, "diff", "--name-only", "--diff-filter=U")
			gitstore.RunGit(w.Path, "rebase", "--abort")
			return "", conflict(lines(string(files)), "rebase")
		}
		out, err := gitstore.RunGit(w.Path, "rev-parse", "HEAD")
		if err != nil {
			return "", errs.Wrap(errs.IOError, err, "rebased branch")
		}
		return strings.TrimSpace(string(out)), nil
	}
	out, err := gitstore.RunGit(w.Path, "merge-tree", "--write-tree", "--name-only", "--no-messages", target, tip)
	var ge *gitstore.GitError
	if errors.As(err, &ge) && ge.Code == 1 {
		conflicted := lines(string(out))
		if len(conflicted) > 0 {
			conflicted = conflicted[1:] // the first line is the tree
		}
		return "", conflict(conflicted, "merge")
	}
	if err != nil {
		return "", errs.Wrap(errs.IOError, err, "git merge-tree")
	}
	tree := strings.TrimSpace(strings.SplitN(string(out), "\n", 2)[0])
	msg := fmt.Sprintf("Merge branch '%s' (tally %s/%s epoch %d)", w.Branch, w.Wave, w.Cell, w.Epoch)
	out, err = gitstore.RunGit(w.Path, "commit-tree", tree, "-p", target, "-p", tip, "-m", msg)
	if err != nil {
		return "", errs.Wrap(errs.IOError, err, "git commit-tree")
	}
	return strings.TrimSpace(string(out)), nil
}

// lines are the non-empty lines of s.
func lines(s string) []string {
	out := []string{}
	for _, l := range strings.Split(s, "\n") {
		if l = strings.TrimSpace(l); l != "" {
			out = append(out, l)
		}
	}
	return out
}

// moveTarget moves w's target branch from old to landed. Where the branch
// is checked out, git merge --ff-only there updates that worktree's files
// with it (a ref moved under a checked-out work tree would show the landed
// work as reverted edits), keeping its own edits or refusing.
func (c *Client) moveTarget(w *Worktree, old, landed string) error {
	at, err := checkedOutAt(c.repoDir(), w.Target)
	if err != nil {
		return err
	}
	if at == "" {
		if _, err := gitstore.RunGit(c.repoDir(), "update-ref", "-m", fmt.Sprintf("tally: land %s/%s", w.Wave, w.Cell),
			"refs/heads/"+w.Target, landed, old); err != nil {
			return errs.Wrap(errs.Conflict, err, "branch %s moved while %s/%s landed: run done again", w.Target, w.Wave, w.Cell)
		}
		return nil
	}
	_, err = gitstore.RunGit(at, "merge", "--ff-only", "-q", landed)
	if err == nil {
		return nil
	}
	now, rerr := c.L.Repo.ReadRef("refs/heads/" + w.Target)
	var ge *gitstore.GitError
	switch {
	case rerr != nil || now.String() != old:
		return errs.Wrap(errs.Conflict, err, "branch %s moved while %s/%s landed: run done again", w.Target, w.Wave, w.Cell)
	case errors.As(err, &ge) && strings.Contains(ge.Stderr, "index.lock"):
		return errs.Wrap(errs.Busy, err, "the worktree %s, where %s is checked out, is busy: run done again", at, w.Target)
	}
	return errs.New(errs.WorktreeDirty, "%s is checked out in %s, whose uncommitted changes the landing of %s/%s would overwrite: commit or stash them there, and run done again (%v)",
		w.Target, at, w.Wave, w.Cell, err).With("path", at)
}

// checkedOutAt is the worktree where branch is checked out, "" if none.
func checkedOutAt(dir, branch string) (string, error) {
	out, err := gitstore.RunGit(dir, "worktree", "list", "--porcelain")
	if err != nil {
		return "", errs.Wrap(errs.IOError, err, "git worktree list")
	}
	path := ""
	for _, l := range strings.Split(string(out), "\n") {
		if p, ok := strings.CutPrefix(l, "worktree "); ok {
			path = p
		} else if l == "branch refs/heads/"+branch {
			return path, nil
		}
	}
	return "", nil
}
