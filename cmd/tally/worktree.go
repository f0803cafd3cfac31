package main

import (
	"fmt"
	"io"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

func (a *app) worktreeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "worktree",
		Short: "the cells' worktrees (claim --worktree): list them, prune those whose work is over",
		Args:  args(cobra.NoArgs),
		RunE: func(*cobra.Command, []string) error {
			return usageErr("worktree needs a subcommand: list or prune")
		},
	}
	cmd.AddCommand(a.worktreeListCmd(), a.worktreePruneCmd())
	return cmd
}

func (a *app) worktreeListCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "list",
		Short: "each cell's worktree with its cell, holder, epoch, state and disk used",
		Long: `list maps every cell's worktree (a linked worktree claim --worktree made
and bound to its lease) to its cell, branch, target branch, the epoch it
was made at, the cell's holder and lease epoch now, and its state:
live (its lease is held at its epoch), expired (its lease expired and
nobody has taken the cell over), done (the cell is done), stale (the lease
ended otherwise: released, failed, taken over at a newer epoch) or unknown
(the ledger has no such cell). bytes is the disk its files use.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				list, err := c.Worktrees()
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"worktrees": list}, func(w io.Writer) { printWorktrees(w, list) })
			})
		},
	}
}

// printWorktrees is the table of list and status.
func printWorktrees(w io.Writer, list []tally.WorktreeInfo) {
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	for _, wt := range list {
		path := wt.Path
		if wt.Missing {
			path += " (missing)"
		}
		fmt.Fprintf(tw, "  %s/%s\t%s\tepoch %d\t%s\t%s\t%s\t%s\n", wt.Wave, wt.Cell, wt.State, wt.Epoch, inert(wt.Holder), wt.Branch, sizeText(wt.Bytes), path)
	}
	tw.Flush()
}

// printWorktreesTotal is status's section on the cells' worktrees.
func printWorktreesTotal(w io.Writer, list []tally.WorktreeInfo) {
	if len(list) == 0 {
		return
	}
	var total int64
	for _, wt := range list {
		total += wt.Bytes
	}
	paint(w, bold, "worktrees")
	fmt.Fprintf(w, ": %d, %s on disk (tally worktree prune removes those whose work is over)\n", len(list), sizeText(total))
	printWorktrees(w, list)
}

// sizeText is n bytes for a person.
func sizeText(n int64) string {
	const unit = 1024
	if n < unit {
		return fmt.Sprintf("%d B", n)
	}
	div, exp := int64(unit), 0
	for m := n / unit; m >= unit; m /= unit {
		div *= unit
		exp++
	}
	return fmt.Sprintf("%.1f %ciB", float64(n)/float64(div), "KMGTPE"[exp])
}

func (a *app) worktreePruneCmd() *cobra.Command {
	var force bool
	cmd := &cobra.Command{
		Use:   "prune [--force]",
		Short: "remove the worktrees and branches of cells whose work is over, keeping what would be lost",
		Long: `prune removes the worktree and branch of every cell that is done or whose
lease ended otherwise (released, failed, or expired and taken over) when nothing
would be lost: the worktree has no uncommitted changes or untracked files
(ignored files go with it) and its branch is merged into its target
branch. Others are kept and reported, with the files and the reason. With
--force their work is first saved to refs/tally/stash/WAVE/CELL/EPOCH (a
commit of everything in the worktree on top of its HEAD), then they are
removed. Worktrees of live leases are never touched, nor those of expired
leases nobody took over (their holder may claim the cell again). It also removes what a
claim --worktree killed before binding its worktree left behind. tally gc
runs it too.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				res, err := c.PruneWorktrees(force)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) { a.printPruned(w, res) })
			})
		},
	}
	cmd.Flags().BoolVar(&force, "force", false, "also remove worktrees with uncommitted or unmerged work, after saving it to refs/tally/stash/WAVE/CELL/EPOCH")
	return cmd
}

// printPruned reports what prune did: removals on w, what it kept (and
// why) on stderr.
func (a *app) printPruned(w io.Writer, res *tally.PruneResult) {
	for _, p := range res.Worktrees {
		switch p.Action {
		case tally.PruneKept:
			fmt.Fprintf(a.stderr, "tally: kept %s/%s in %s: %s %v\n", p.Wave, p.Cell, p.Path, p.Reason, p.Files)
		case tally.PruneStashed:
			fmt.Fprintf(w, "removed %s/%s (%s) after saving its work to %s\n", p.Wave, p.Cell, p.Path, p.Stash)
		default:
			fmt.Fprintf(w, "removed %s/%s (%s) and branch %s\n", p.Wave, p.Cell, p.Path, p.Branch)
		}
	}
	if res.Abandoned > 0 {
		fmt.Fprintf(w, "removed %d worktree(s) left by killed claims\n", res.Abandoned)
	}
}
