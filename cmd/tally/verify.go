package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) verifyCmd() *cobra.Command {
	var full bool
	cmd := &cobra.Command{
		Use:   "verify",
		Short: "re-derive the ledger from the repository and check every new entry",
		Long: `verify replays the ledger: canonical entry bytes and hashes, prev links and
contiguous seqs, non-decreasing timestamps, linear commits with matching
trailers, every entry legal under the lease rules, and each commit's state tree
equal to the replayed state. It records the last verified tip in this clone, so
the next run checks only new entries; --full checks everything again.
Exit 3 on any failure, naming the first bad seq and a reason code.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			rep, err := c.Verify(full)
			if err != nil {
				return err
			}
			return a.emit(rep, func(w io.Writer) {
				fmt.Fprintf(w, "ok: %d entries (%d checked now), head #%d %s, root %s\n",
					rep.Entries, rep.Checked, rep.Head.Seq, rep.Head.Hash, rep.Root)
			})
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "verify from genesis, ignoring the record of the last verified tip")
	return cmd
}
