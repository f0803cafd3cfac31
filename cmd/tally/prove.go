package main

import (
	"github.com/tally-dev/tally"
	"io"
	"strconv"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/anchor"
	"github.com/tally-dev/tally/errs"
)

func (a *app) proveCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "prove",
		Short: "print a Merkle inclusion or consistency proof that tally verify-proof checks offline",
		Args:  args(cobra.NoArgs),
	}
	emit := func(p *anchor.Proof, err error) error {
		if err != nil {
			return err
		}
		text := p.Text()
		return a.emit(struct {
			*anchor.Proof
			Text string `json:"proof"`
		}{p, string(text)}, func(w io.Writer) { w.Write(text) })
	}
	var size uint64
	inclusion := &cobra.Command{
		Use:   "inclusion SEQ [--size N]",
		Short: "prove that entry SEQ is in the ledger (or in its first N entries)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			seq, err := uintArg(argv[0])
			if err != nil {
				return err
			}
			return a.withClient(false, func(c *tally.Client) error {
				return emit(c.ProveInclusion(seq, size))
			})
		},
	}
	inclusion.Flags().Uint64Var(&size, "size", 0, "prove against the log of the first `N` entries (default: all)")
	consistency := &cobra.Command{
		Use:   "consistency OLD [NEW]",
		Short: "prove that the first OLD entries are a prefix of the first NEW (default: all)",
		Args:  args(cobra.RangeArgs(1, 2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			sizes := make([]uint64, 2)
			for i, s := range argv {
				n, err := uintArg(s)
				if err != nil {
					return err
				}
				sizes[i] = n
			}
			if len(argv) == 2 && sizes[1] == 0 {
				return usageErr("NEW must be at least 1")
			}
			return a.withClient(false, func(c *tally.Client) error {
				return emit(c.ProveConsistency(sizes[0], sizes[1]))
			})
		},
	}
	cmd.AddCommand(inclusion, consistency)
	return cmd
}

func uintArg(s string) (uint64, error) {
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errs.New(errs.Usage, "%q is not a non-negative integer", s)
	}
	return n, nil
}
