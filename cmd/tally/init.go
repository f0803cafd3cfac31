package main

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/chain"
)

func (a *app) initCmd() *cobra.Command {
	var origin string
	cmd := &cobra.Command{
		Use:   "init",
		Short: "create the ledger (its genesis entry)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			actor, err := a.actor()
			if err != nil {
				return err
			}
			l, err := a.open()
			if err != nil {
				return err
			}
			defer l.Close()
			if origin == "" {
				var b [4]byte
				rand.Read(b[:])
				name := filepath.Base(l.Repo.WorkTree)
				if l.Repo.WorkTree == "" {
					name = filepath.Base(l.Repo.CommonDir)
				}
				origin = "tally/" + name + "/" + hex.EncodeToString(b[:])
			}
			ap, err := l.Append(actor, staticDraft(chain.KindGenesis, chain.GenesisBody{Origin: origin}))
			if err != nil {
				return err
			}
			res := struct {
				appendedResult
				Ref    string `json:"ref"`
				Origin string `json:"origin"`
			}{appended(ap), l.Ref, origin}
			return a.emit(res, func(w io.Writer) {
				fmt.Fprintf(w, "initialized %s (origin %s)\n", l.Ref, origin)
			})
		},
	}
	cmd.Flags().StringVar(&origin, "origin", "", "the log's origin name, used in checkpoints (default tally/<repo>/<random>)")
	return cmd
}
