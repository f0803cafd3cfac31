package main

import (
	"fmt"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
)

func (a *app) verifyProofCmd() *cobra.Command {
	var checkpoint string
	var keys []string
	cmd := &cobra.Command{
		Use:   "verify-proof FILE [--checkpoint FILE [--checkpoint-key KEY]...]",
		Short: "check a proof from tally prove, offline (no repository needed)",
		Long: `verify-proof checks an inclusion or consistency proof (FILE, or - for stdin)
with nothing but the proof: it needs no repository. With --checkpoint it also
checks that the proof is about the checkpoint's log (its size and root, or for
a consistency proof those of either end), and with --checkpoint-key that the
checkpoint is signed by each key. Exit 3 with PROOF-INVALID or
CHECKPOINT-INVALID when a check fails.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			proof, err := readArg(argv[0])
			if err != nil {
				return err
			}
			var cp []byte
			if checkpoint != "" {
				if cp, err = readArg(checkpoint); err != nil {
					return err
				}
			}
			res, err := tally.VerifyProof(proof, cp, keys)
			if err != nil {
				return err
			}
			return a.emit(res, func(w io.Writer) {
				p := res.Proof
				if p.Index != nil {
					fmt.Fprintf(w, "ok: entry %s is #%d of %q at %d entries, root %s\n", p.Entry, *p.Index, p.Origin, p.Size, p.Root)
				} else {
					fmt.Fprintf(w, "ok: %q at %d entries (root %s) is a prefix of it at %d (root %s)\n", p.Origin, *p.OldSize, p.OldRoot, p.Size, p.Root)
				}
				if res.Checkpoint != nil {
					fmt.Fprintf(w, "checkpoint: %d entries, signed by %d of the given keys\n", res.Checkpoint.Size, len(res.Checkpoint.SignedBy))
				}
			})
		},
	}
	cmd.Flags().StringVar(&checkpoint, "checkpoint", "", "checkpoint note `FILE` the proof must be about")
	cmd.Flags().StringArrayVar(&keys, "checkpoint-key", nil, "require the checkpoint to be signed by `KEY` (note verifier key, ssh-ed25519 public key, or a file holding one); repeatable")
	return cmd
}

// readArg reads a file argument; "-" is stdin.
func readArg(path string) ([]byte, error) {
	var b []byte
	var err error
	if path == "-" {
		b, err = io.ReadAll(os.Stdin)
	} else {
		b, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, errs.New(errs.Usage, "%v", err)
	}
	return b, nil
}
