package gitstore

import (
	"net/url"
	"path/filepath"
	"strconv"
	"strings"
)

// LocalPaths names every file tally keeps for one clone and never pushes
// (docs/FORMAT.md §8), so that no package spells a path of its own. They
// live under <git-common-dir>/tally/, shared by every linked worktree of the
// clone; a ledger outside the default namespace keeps its own under
// tally/ns/<namespace with "/" as "%">/ (ForNamespace), except the compaction
// lock, which is one per object directory whatever the namespace.
type LocalPaths struct {
	root string // <git-common-dir>/tally
	dir  string // root, or the namespace's directory below it
}

// LocalPathsOf returns the local paths of the default namespace of the
// repository whose common git directory is commonDir.
func LocalPathsOf(commonDir string) LocalPaths {
	root := filepath.Join(commonDir, "tally")
	return LocalPaths{root: root, dir: root}
}

// ForNamespace returns the local paths of the ledger in namespace ns (not the
// default one).
func (p LocalPaths) ForNamespace(ns string) LocalPaths {
	p.dir = filepath.Join(p.root, "ns", strings.ReplaceAll(ns, "/", "%"))
	return p
}

// Dir is the directory of the namespace's files.
func (p LocalPaths) Dir() string { return p.dir }

// WriterLock is the file lock serializing this clone's ledger writers.
func (p LocalPaths) WriterLock() string { return filepath.Join(p.dir, "writer.lock") }

// WriterSocket is the hand-over socket of the writer lock's holder
// (FORMAT.md §9, "Group commit"), bound only while a holder serves.
func (p LocalPaths) WriterSocket() string { return filepath.Join(p.dir, "writer.sock") }

// Verified is the record of the last tip `tally verify` verified.
func (p LocalPaths) Verified() string { return filepath.Join(p.dir, "verified") }

// Appended is the record of the tip this clone's writer last checked or wrote.
func (p LocalPaths) Appended() string { return filepath.Join(p.dir, "appended") }

// RemoteRecord is the verify record of a remote's ledger; the remote's name
// or URL is path-escaped into one file name.
func (p LocalPaths) RemoteRecord(remote string) string {
	return filepath.Join(p.dir, "remotes", url.PathEscape(remote)+".json")
}

// CheckpointStart records the trusted checkpoint a shallow first contact
// verified the ledger from, while the history before it is not here.
func (p LocalPaths) CheckpointStart() string { return filepath.Join(p.dir, "checkpoint-start.json") }

// Evidence is the directory of a lease's pending `tally run` evidence.
func (p LocalPaths) Evidence(wave, cell string, epoch int64) string {
	return filepath.Join(p.dir, "evidence", wave, cell, strconv.FormatInt(epoch, 10))
}

// CheckpointsLock is the lock of the checkpoint store.
func (p LocalPaths) CheckpointsLock() string { return filepath.Join(p.dir, "checkpoints.lock") }

// CompactLock is the compaction lock: <git-common-dir>/tally/compact.lock in
// every namespace, since compaction merges the packs of the one object
// directory all namespaces share.
func (p LocalPaths) CompactLock() string { return filepath.Join(p.root, "compact.lock") }

// WorktreeIntents is the directory of the records `claim --worktree` writes
// before it makes a cell's worktree and removes once the worktree is bound
// to the lease: one left behind by a killed claim names what prune removes.
func (p LocalPaths) WorktreeIntents() string { return filepath.Join(p.dir, "worktrees") }

// LandLock is the flock serializing, in the whole repository, the landing
// of cells' branches on their target branches and the making and pruning
// of cells' worktrees: <git-common-dir>/tally/land.lock in every namespace,
// since branches and worktrees belong to the repository.
func (p LocalPaths) LandLock() string { return filepath.Join(p.root, "land.lock") }
