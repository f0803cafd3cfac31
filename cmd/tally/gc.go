package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"
)

func (a *app) gcCmd() *cobra.Command {
	var releaseLock string
	cmd := &cobra.Command{
		Use:   "gc",
		Short: "merge the small packs appends leave behind now (appends also start this in the background)",
		Long: `gc merges small packs log-structured: packs are grouped by size in levels
(a factor of four apart) and a level with four packs is merged upward, so a
repository keeps a bounded number of packs however long the ledger. Objects
are copied unchanged; the repository's large packs are left to git gc.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if releaseLock != "" {
				defer os.Remove(releaseLock)
			}
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			rep, err := c.L.Compact()
			if err != nil {
				return err
			}
			return a.emit(rep, func(w io.Writer) {
				fmt.Fprintf(w, "merged %d packs into %d (%d objects); %d packs now\n", rep.Merged, rep.Written, rep.Objects, rep.Packs)
			})
		},
	}
	cmd.Flags().StringVar(&releaseLock, "release-lock", "", "remove this compaction lock when done (for background runs)")
	cmd.Flags().MarkHidden("release-lock")
	return cmd
}
