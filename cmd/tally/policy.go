package main

import (
	"fmt"
	"io"
	"strconv"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/lease"
)

func (a *app) policyCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "policy",
		Short: "show or change the ledger's policy (signatures, push checks, roles)",
		Args:  args(cobra.NoArgs),
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "print the policy in force",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			c, err := a.client(false)
			if err != nil {
				return err
			}
			defer c.Close()
			p, err := c.Policy()
			if err != nil {
				return err
			}
			return a.emit(map[string]any{"policy": p}, func(w io.Writer) {
				fmt.Fprintf(w, "require_signatures: %v\nskew_seconds: %d\nreceipts: %s\npath_leases: %s\nprotected: %v\nroles: %v\nactor_roles: %v\nadmins: %v\n",
					p.RequireSignatures, p.SkewSeconds, p.Receipts, p.PathLeases, p.Protected, p.Roles, p.ActorRoles, p.Admins)
			})
		},
	}
	var (
		requireSigs    bool
		skew           int
		receipts, path string
		protected      []string
		admins         []string
	)
	set := &cobra.Command{
		Use:   "set [--require-signatures] [--skew S] [--receipts MODE] [--path-leases MODE] [--protected REF,...] [--admins A,...]",
		Short: "change policy fields (MODE: off, warn or enforce)",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var p lease.PolicySet
			f := cmd.Flags()
			if f.Changed("require-signatures") {
				p.RequireSignatures = &requireSigs
			}
			if f.Changed("skew") {
				p.SkewSeconds = &skew
			}
			if f.Changed("receipts") {
				p.Receipts = &receipts
			}
			if f.Changed("path-leases") {
				p.PathLeases = &path
			}
			if f.Changed("protected") {
				p.Protected = &protected
			}
			if f.Changed("admins") {
				p.Admins = &admins
			}
			return a.setPolicy(p)
		},
	}
	set.Flags().BoolVar(&requireSigs, "require-signatures", false, "refuse entries not signed by a key registered for their actor")
	set.Flags().IntVar(&skew, "skew", lease.DefaultSkewSeconds, "how far (`SECONDS`) pushed entry times may be ahead of the server clock")
	set.Flags().StringVar(&receipts, "receipts", "", "pushes to protected branches without receipts: off, warn or enforce")
	set.Flags().StringVar(&path, "path-leases", "", "pushes changing paths under another actor's lease: off, warn or enforce")
	set.Flags().StringSliceVar(&protected, "protected", nil, "protected branches (full ref names)")
	set.Flags().StringSliceVar(&admins, "admins", nil, "actors allowed to change the policy and anyone's keys")
	roles := &cobra.Command{
		Use:   "set-roles ROLE=PRIORITY...",
		Short: "define roles and their priorities (higher preempts lower)",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			m := map[string]int{}
			for _, kv := range argv {
				k, v, ok := strings.Cut(kv, "=")
				n, err := strconv.Atoi(v)
				if !ok || err != nil {
					return usageErr("expected ROLE=PRIORITY, got %q", kv)
				}
				m[k] = n
			}
			return a.setPolicy(lease.PolicySet{Roles: &m})
		},
	}
	actors := &cobra.Command{
		Use:   "set-actors ACTOR=ROLE...",
		Short: "assign actors to roles",
		Args:  args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			m := map[string]string{}
			for _, kv := range argv {
				k, v, ok := strings.Cut(kv, "=")
				if !ok {
					return usageErr("expected ACTOR=ROLE, got %q", kv)
				}
				m[k] = v
			}
			return a.setPolicy(lease.PolicySet{ActorRoles: &m})
		},
	}
	cmd.AddCommand(show, set, roles, actors)
	return cmd
}

func (a *app) setPolicy(p lease.PolicySet) error {
	c, err := a.client(true)
	if err != nil {
		return err
	}
	defer c.Close()
	return a.emitAppended(c.SetPolicy(p))
}
