package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"

	"github.com/spf13/cobra"
)

func (a *app) initCmd() *cobra.Command {
	var origin string
	var newLedger bool
	cmd := &cobra.Command{
		Use:   "init",
		Short: "create the ledger (its genesis entry)",
		Long: `init writes the genesis entry of a new ledger. A clone of a repository
that has a ledger does not have it (git clone does not fetch refs/tally/*):
init first asks every remote of the clone and refuses with LEDGER-ON-REMOTE
while one holds a ledger, since a second genesis can never be synced with
it. --new-ledger starts a separate ledger anyway, without asking.

The genesis records the chunked receipts index (receipt_index: chunked in
tally policy show), so that a done costs the same however many receipts its
commit already has. A ledger made before tally did so keeps its layout
until tally policy set --receipt-index chunked.`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(true, func(c *tally.Client) error {
				res, err := c.Init(origin, newLedger)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) { fmt.Fprintf(w, "initialized %s (origin %s)\n", res.Ref, res.Origin) })
			})
		},
	}
	cmd.Flags().StringVar(&origin, "origin", "", "the log's origin name, used in checkpoints (default tally/<repo>/<random>)")
	cmd.Flags().BoolVar(&newLedger, "new-ledger", false, "start a new ledger even if a remote of the clone has one (do not ask the remotes)")
	return cmd
}
