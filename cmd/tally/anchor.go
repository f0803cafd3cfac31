package main

import (
	"fmt"
	"io"
	"sort"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

func (a *app) anchorCmd() *cobra.Command {
	var o tally.AnchorOptions
	cmd := &cobra.Command{
		Use:   "anchor [--ref REF]... [--sign KEY]... [--name NAME]",
		Short: "record what code refs point at in the ledger, with a checkpoint",
		Long: `anchor verifies the ledger, then appends an anchor entry recording the
object each REF points at (default: the branch HEAD is on; a short name is
tried under refs/heads/ then refs/tags/) and the checkpoint of the ledger
before the entry. It then stores the (signed) checkpoint of the ledger ending
with the anchor under refs/tally/checkpoints/<size>; push it with
git push origin refs/tally/ledger '+refs/tally/checkpoints/*' (git needs
the + to move a ref that points at a blob; the server hook lets a stored
checkpoint only gain signatures).`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(true, func(c *tally.Client) error {
				res, err := c.Anchor(o)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) {
					printAppended(w, &res.Appended)
					refs := make([]string, 0, len(res.Refs))
					for r := range res.Refs {
						refs = append(refs, r)
					}
					sort.Strings(refs)
					for _, r := range refs {
						fmt.Fprintf(w, "  %s %s\n", res.Refs[r], r)
					}
					fmt.Fprintf(w, "checkpoint %d stored at %s\n", res.Checkpoint.Size, res.Checkpoint.Ref)
				})
			})
		},
	}
	cmd.Flags().StringArrayVar(&o.Refs, "ref", nil, "anchor `REF` (repeatable; default: the current branch)")
	checkpointFlags(cmd, &o.Checkpoint)
	return cmd
}
