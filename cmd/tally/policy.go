package main

import (
	"fmt"
	"github.com/tally-dev/tally"
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
			return a.withClient(false, func(c *tally.Client) error {
				p, layout, err := c.Policy()
				if err != nil {
					return err
				}
				// The state omits pushers, pusher_var and authors when empty
				// (lease.Policy); the view always shows them, shadowing the
				// embedded fields. receipt_index is the layout blob's, named
				// "single" when the ledger never switched.
				view := struct {
					*lease.Policy
					Pushers      map[string][]string `json:"pushers"`
					PusherVar    string              `json:"pusher_var"`
					Authors      map[string][]string `json:"authors"`
					ReceiptIndex string              `json:"receipt_index"`
					EditLeases   string              `json:"edit_leases"`
					SessionEnd   string              `json:"session_end"`
				}{p, p.Pushers, p.PusherVar, p.Authors, layout.IndexName(), lease.Off, lease.SessionExpire}
				if p.EditLeases != "" {
					view.EditLeases = p.EditLeases
				}
				if p.ReleasesAtSessionEnd() {
					view.SessionEnd = lease.SessionRelease
				}
				if view.Pushers == nil {
					view.Pushers = map[string][]string{}
				}
				if view.Authors == nil {
					view.Authors = map[string][]string{}
				}
				return a.emit(map[string]any{"policy": view}, func(w io.Writer) {
					fmt.Fprintf(w, "require_signatures: %v\nskew_seconds: %d\nreceipts: %s\npath_leases: %s\nprotected: %v\nroles: %v\nactor_roles: %v\nadmins: %v\npushers: %v\npusher_var: %s\nauthors: %v\nreceipt_index: %s\nedit_leases: %s\nsession_end: %s\n",
						p.RequireSignatures, p.SkewSeconds, p.Receipts, p.PathLeases, p.Protected, p.Roles, p.ActorRoles, p.Admins, view.Pushers, p.PusherVar, view.Authors, view.ReceiptIndex, view.EditLeases, view.SessionEnd)
				})
			})
		},
	}
	var (
		requireSigs    bool
		skew           int
		receipts, path string
		protected      []string
		admins         []string
		pusherVar      string
		receiptIndex   string
		editLeases     string
		sessionEnd     string
	)
	set := &cobra.Command{
		Use:   "set [--require-signatures] [--skew S] [--receipts MODE] [--path-leases MODE] [--protected REF,...] [--admins A,...] [--pusher-var NAME] [--receipt-index chunked] [--edit-leases MODE] [--session-end expire|release]",
		Short: "change policy fields (MODE: off, warn or enforce)",
		Long: `set changes the policy fields given, in one policy entry.

--receipt-index chunked switches a ledger made before tally init did so
(policy show says receipt_index: single) to the chunked receipts index:
from this entry on, a done costs the same however many receipts its commit
already has. Receipts already recorded stay where they are. The switch is
one way: switching it off, or again, is refused (USAGE).`,
		Example: `  tally policy set --receipts enforce --protected refs/heads/main
  tally policy set --receipt-index chunked`,
		Args: args(cobra.NoArgs),
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
			if f.Changed("pusher-var") {
				p.PusherVar = &pusherVar
			}
			if f.Changed("receipt-index") {
				p.ReceiptIndex = &receiptIndex
			}
			if f.Changed("edit-leases") {
				p.EditLeases = &editLeases
			}
			if f.Changed("session-end") {
				p.SessionEnd = &sessionEnd
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
	set.Flags().StringVar(&pusherVar, "pusher-var", "", "environment variable (`NAME`) the server hook reads the pusher from first (\"\" removes it)")
	set.Flags().StringVar(&receiptIndex, "receipt-index", "", "switch the receipts index to `chunked` (one way: a done's cost then stays flat however many receipts its commit has)")
	set.Flags().StringVar(&editLeases, "edit-leases", "", "edits and commits of paths nobody holds (the edit guard, pre-commit): off, warn or enforce (\"edits need a lease\")")
	set.Flags().StringVar(&sessionEnd, "session-end", "", "an agent's leases when its session ends: expire (left to their TTL) or release")
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
	var clearPushers bool
	pushers := &cobra.Command{
		Use:   "set-pushers PUSHER=ACTOR[,ACTOR...]... | --clear",
		Short: "bind the pushers a server authenticates to the actors they may push for (ACTOR may use *); replaces the whole binding",
		Args: args(func(cmd *cobra.Command, argv []string) error {
			if clearPushers && len(argv) > 0 {
				return fmt.Errorf("--clear takes no PUSHER=ACTOR arguments")
			}
			if clearPushers {
				return nil
			}
			return cobra.MinimumNArgs(1)(cmd, argv)
		}),
		RunE: func(cmd *cobra.Command, argv []string) error {
			m, err := nameToPatterns(argv, "PUSHER=ACTOR[,ACTOR...]", "pusher")
			if err != nil {
				return err
			}
			return a.setPolicy(lease.PolicySet{Pushers: &m})
		},
	}
	pushers.Flags().BoolVar(&clearPushers, "clear", false, "unbind all pushers")
	var clearAuthors bool
	authors := &cobra.Command{
		Use:   "set-authors ACTOR=EMAIL[,EMAIL...]... | --clear",
		Short: "map actors to the commit author emails that count as their own for path leases (EMAIL may use *); replaces the whole map",
		Example: `  tally policy set-authors agent-1='agent-1@ci.example.com' alice='alice@*'
  tally policy set-authors --clear`,
		Args: args(func(cmd *cobra.Command, argv []string) error {
			if clearAuthors && len(argv) > 0 {
				return fmt.Errorf("--clear takes no ACTOR=EMAIL arguments")
			}
			if clearAuthors {
				return nil
			}
			return cobra.MinimumNArgs(1)(cmd, argv)
		}),
		RunE: func(cmd *cobra.Command, argv []string) error {
			m, err := nameToPatterns(argv, "ACTOR=EMAIL[,EMAIL...]", "actor")
			if err != nil {
				return err
			}
			return a.setPolicy(lease.PolicySet{Authors: &m})
		},
	}
	authors.Flags().BoolVar(&clearAuthors, "clear", false, "remove every mapping (an actor is then only the author whose email is its name)")
	cmd.AddCommand(show, set, roles, actors, pushers, authors)
	return cmd
}

// nameToPatterns parses NAME=PATTERN[,PATTERN...] arguments (set-pushers,
// set-authors); none gives the empty map, which clears the field.
func nameToPatterns(argv []string, form, name string) (map[string][]string, error) {
	m := map[string][]string{}
	for _, kv := range argv {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || v == "" {
			return nil, usageErr("expected %s, got %q", form, kv)
		}
		if _, dup := m[k]; dup {
			return nil, usageErr("%s %q given twice", name, k)
		}
		m[k] = strings.Split(v, ",")
	}
	return m, nil
}

func (a *app) setPolicy(p lease.PolicySet) error {
	return a.withClient(true, func(c *tally.Client) error {
		return a.emitAppended(c.SetPolicy(p))
	})
}
