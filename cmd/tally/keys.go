package main

import (
	"fmt"
	"io"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/identity"
)

func (a *app) keysCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "keys",
		Short: "generate keys and register actors' SSH ed25519 keys in the ledger",
		Args:  args(cobra.NoArgs),
	}
	var out, comment string
	gen := &cobra.Command{
		Use:   "generate --out FILE",
		Short: "make an ed25519 key pair: FILE (private, OpenSSH) and FILE.pub",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if out == "" {
				return usageErr("--out is required")
			}
			priv, pub, err := identity.Generate(comment)
			if err != nil {
				return err
			}
			if err := os.WriteFile(out, priv, 0o600); err != nil {
				return errs.New(errs.Usage, "%v", err)
			}
			if err := os.WriteFile(out+".pub", []byte(pub+"\n"), 0o644); err != nil {
				return errs.New(errs.Usage, "%v", err)
			}
			return a.emit(map[string]any{"private": out, "public": pub}, func(w io.Writer) { fmt.Fprintln(w, pub) })
		},
	}
	gen.Flags().StringVar(&out, "out", "", "private key `FILE` (the public key goes to FILE.pub)")
	gen.Flags().StringVar(&comment, "comment", "", "comment for the public key")
	keyOp := func(use, short string, op func(c *tally.Client, actor, key string) (*tally.Appended, error)) *cobra.Command {
		return &cobra.Command{
			Use:   use + " ACTOR PUBKEY",
			Short: short + " (PUBKEY: a key line, or @FILE)",
			Args:  args(cobra.ExactArgs(2)),
			RunE: func(cmd *cobra.Command, argv []string) error {
				key, err := keyArg(argv[1])
				if err != nil {
					return err
				}
				return a.withClient(true, func(c *tally.Client) error {
					return a.emitAppended(op(c, argv[0], key))
				})
			},
		}
	}
	add := keyOp("add", "register a key for an actor", (*tally.Client).AddKey)
	revoke := keyOp("revoke", "revoke an actor's key", (*tally.Client).RevokeKey)
	rotate := &cobra.Command{
		Use:   "rotate ACTOR OLDKEY NEWKEY",
		Short: "register NEWKEY and revoke OLDKEY atomically",
		Args:  args(cobra.ExactArgs(3)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			oldKey, err := keyArg(argv[1])
			if err != nil {
				return err
			}
			newKey, err := keyArg(argv[2])
			if err != nil {
				return err
			}
			return a.withClient(true, func(c *tally.Client) error {
				aps, err := c.RotateKey(argv[0], oldKey, newKey)
				if err != nil {
					return err
				}
				return a.emit(map[string]any{"entries": aps}, func(w io.Writer) {
					for i := range aps {
						printAppended(w, &aps[i])
					}
				})
			})
		},
	}
	show := &cobra.Command{
		Use:   "show ACTOR",
		Short: "list an actor's keys",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				k, err := c.Keys(argv[0])
				if err != nil {
					return err
				}
				return a.emit(k, func(w io.Writer) {
					for _, key := range k.Keys {
						state := "active"
						if key.Revoked != nil {
							state = fmt.Sprintf("revoked at #%d", *key.Revoked)
						}
						fmt.Fprintf(w, "%s  %s  added at #%d, %s\n", key.Fingerprint, key.Key, key.Added, state)
					}
				})
			})
		},
	}
	cmd.AddCommand(gen, add, revoke, rotate, show)
	return cmd
}

// keyArg reads a public key given inline or as @FILE.
func keyArg(s string) (string, error) {
	if path, ok := strings.CutPrefix(s, "@"); ok {
		b, err := os.ReadFile(path)
		if err != nil {
			return "", errs.New(errs.Usage, "%v", err)
		}
		s = strings.TrimSpace(string(b))
	}
	return s, nil
}
