package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/ledger"
)

func (a *app) verifyCmd() *cobra.Command {
	var full bool
	var checkpoints, keys []string
	var trailersRev string
	cmd := &cobra.Command{
		Use:   "verify [--full] [--checkpoint FILE]... [--checkpoint-key KEY]...",
		Short: "re-derive the ledger from the repository and check every new entry",
		Long: `verify replays the ledger: canonical entry bytes and hashes, prev links and
contiguous seqs, non-decreasing timestamps, linear commits with matching
trailers, every entry legal under the lease rules, and each commit's state tree
equal to the replayed state. It records the last verified tip in this clone, so
the next run checks only new entries; --full checks everything again.
Each --checkpoint (a note from tally checkpoint) is then checked against the
verified ledger: it must be of the same origin, no larger, and its root must be
the root of the ledger's first size entries; with --checkpoint-key it must
also be signed by each key (a note verifier key, an ssh-ed25519 public key,
or a file holding one).
With --trailers REV, every Tally-Checkpoint trailer (added to code commits by
the commit-msg hook) in the history of REV is checked the same way.
Exit 3 on any failure, naming the first bad seq and a reason code:
CHECKPOINT-INVALID, ROLLBACK-DETECTED or FORK-DETECTED for a checkpoint.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if len(keys) > 0 && len(checkpoints) == 0 {
				return usageErr("--checkpoint-key needs --checkpoint")
			}
			notes := make([][]byte, len(checkpoints))
			for i, f := range checkpoints {
				var err error
				if notes[i], err = readArg(f); err != nil {
					return err
				}
			}
			return a.withClient(false, func(c *tally.Client) error {
				rep, err := c.Verify(full)
				if err != nil {
					return err
				}
				checked, err := c.CheckCheckpoints(rep.Commit, notes, keys)
				if err != nil {
					e := errs.From(err)
					if i, ok := e.Details["checkpoint"].(int); ok {
						e = e.With("checkpoint", checkpoints[i])
					}
					return e
				}
				var trailers []tally.TrailerCheck
				if trailersRev != "" {
					if trailers, err = c.CheckTrailers(rep.Commit, trailersRev); err != nil {
						return err
					}
				}
				res := struct {
					*ledger.Report
					Checkpoints []tally.CheckpointCheck `json:"checkpoints,omitempty"`
					Trailers    []tally.TrailerCheck    `json:"trailers,omitempty"`
				}{rep, checked, trailers}
				return a.emit(res, func(w io.Writer) {
					paint(w, green, "ok")
					fmt.Fprintf(w, ": %d entries (%d checked now), head #%d %s, root %s\n",
						rep.Entries, rep.Checked, rep.Head.Seq, rep.Head.Hash, rep.Root)
					if rep.From != nil {
						fromCheckpoint(w, rep.From)
					}
					for i, cc := range checked {
						fmt.Fprintf(w, "checkpoint %s: %d entries, consistent, signed by %d keys\n",
							checkpoints[i], cc.Checkpoint.Size, len(cc.SignedBy))
					}
				})
			})
		},
	}
	cmd.Flags().BoolVar(&full, "full", false, "verify from genesis, ignoring the record of the last verified tip")
	cmd.Flags().StringVar(&trailersRev, "trailers", "", "also check the Tally-Checkpoint trailers in the history of `REV` (e.g. HEAD)")
	cmd.Flags().StringArrayVar(&checkpoints, "checkpoint", nil, "check the ledger against the checkpoint note in `FILE` (repeatable)")
	cmd.Flags().StringArrayVar(&keys, "checkpoint-key", nil, "require every checkpoint to be signed by `KEY` (repeatable)")
	return cmd
}
