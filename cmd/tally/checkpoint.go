package main

import (
	"io"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
)

// checkpointFlags adds the flags that sign a checkpoint.
func checkpointFlags(cmd *cobra.Command, o *tally.CheckpointOptions) {
	cmd.Flags().StringArrayVar(&o.Sign, "sign", nil, "sign the checkpoint with `KEY`: an OpenSSH ed25519 private key file, or a note signer key (PRIVATE+KEY+...) or a file holding one; repeatable")
	cmd.Flags().StringVar(&o.Name, "name", "", "note key `NAME` of OpenSSH signing keys (default: the ledger origin)")
}

func (a *app) checkpointCmd() *cobra.Command {
	var o tally.CheckpointOptions
	cmd := &cobra.Command{
		Use:   "checkpoint [--sign KEY]... [--name NAME] [--save]",
		Short: "print a (signed) checkpoint of the verified ledger: origin, size and Merkle root",
		Long: `checkpoint verifies the ledger (incrementally), then prints its checkpoint in
the C2SP tlog-checkpoint form (origin, size, base64 Merkle root, one per line),
signed with each --sign key as a golang.org/x/mod/sumdb/note signed note, or
bare when unsigned. Keep it: 'tally verify --checkpoint FILE' later proves the
ledger still extends it (FORK-DETECTED, ROLLBACK-DETECTED otherwise). --save
also stores it under refs/tally/checkpoints/<size>, pushed with
'+refs/tally/checkpoints/*'.
With --json the note and the signers' note verifier keys are fields.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				res, err := c.Checkpoint(o)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) { io.WriteString(w, res.Note) })
			})
		},
	}
	checkpointFlags(cmd, &o)
	cmd.Flags().BoolVar(&o.Save, "save", false, "also store it under <namespace>/checkpoints/<size>")
	return cmd
}
