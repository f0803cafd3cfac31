package main

import (
	"fmt"
	"io"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/gitstore"

	"github.com/spf13/cobra"
)

func (a *app) gcCmd() *cobra.Command {
	var holdingLock bool
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "merge the small packs appends leave behind now (appends also merge them, larger merges in the background)",
		Long: `gc merges small packs log-structured: packs are grouped by size in levels
(a factor of four apart) and a level with four packs is merged upward, so a
repository keeps a bounded number of packs however long the ledger. Objects
are copied unchanged; the repository's large packs are left to git gc. If a
background compaction is running, gc waits for it first. Then it prunes the
cells' worktrees, as tally worktree prune does (reported as "worktrees").`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				compact := c.L.CompactNow
				if holdingLock {
					compact = c.L.Compact // the append that started us handed us the lock
				}
				rep, err := compact()
				if err != nil {
					return err
				}
				merged := func(w io.Writer) {
					fmt.Fprintf(w, "merged %d packs into %d (%d objects); %d packs now\n", rep.Merged, rep.Written, rep.Objects, rep.Packs)
				}
				if holdingLock {
					return a.emit(rep, merged) // an append's background compaction: worktrees are the user's business
				}
				pruned, err := c.PruneWorktrees(false)
				if err != nil {
					return err
				}
				return a.emit(struct {
					*gitstore.CompactReport
					Worktrees *tally.PruneResult `json:"worktrees"`
				}{rep, pruned}, func(w io.Writer) {
					merged(w)
					a.printPruned(w, pruned)
				})
			})
		},
	}
	cmd.Flags().BoolVar(&holdingLock, "holding-lock", false, "the compaction lock is already held for this process (background runs)")
	cmd.Flags().MarkHidden("holding-lock")
	return cmd
}
