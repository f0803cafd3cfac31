package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/hooks"
)

func (a *app) checkCmd() *cobra.Command {
	var ref string
	cmd := &cobra.Command{
		Use:   "check --ref REF OLD..NEW",
		Short: "run the server hook's checks on a ref update that already happened (hosted remotes, CI)",
		Long: `check judges the update of REF from OLD to NEW exactly as the pre-receive hook
would have judged the push (FORMAT.md §9a): for the ledger ref, the entries it
adds; for any other ref, the commits entering it (receipts, path leases, merges
by their own changes), against the ledger as this clone holds it. OLD may be
all zeros (the ref was created). Hosted servers (GitHub, GitLab.com,
Bitbucket Cloud) run no custom hooks: run check in CI on what was pushed. It
detects after the fact; it cannot prevent (docs/HOSTING.md).

Exit 0 when the hook would have accepted the update (warnings printed),
2 when a policy refused it, 3 when an integrity check failed. The findings
are the hook's lines, and with --json an array "findings".`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			if ref == "" {
				return usageErr("--ref is required (the full ref name that was updated, e.g. refs/heads/main)")
			}
			oldRev, newRev, ok := strings.Cut(argv[0], "..")
			if !ok || oldRev == "" || newRev == "" {
				return usageErr("expected OLD..NEW, got %q", argv[0])
			}
			return a.withClient(false, func(c *tally.Client) error {
				var err error
				resolve := func(rev string) (gitstore.ObjectID, error) {
					if id, err := gitstore.ParseObjectID(rev); err == nil && id.IsZero() {
						return id, nil // a created ref
					}
					id, err := c.L.Repo.ResolveCommit(rev)
					if err != nil {
						return id, errs.Wrap(errs.CommitMissing, err, "%s", rev).With("rev", rev)
					}
					return id, nil
				}
				u := hooks.Update{Ref: ref}
				if u.Old, err = resolve(oldRev); err != nil {
					return err
				}
				if u.New, err = resolve(newRev); err != nil {
					return err
				}
				// The server's view: the refs as they stand mark what is already
				// in, and entry times are bounded by this clock.
				chk := &hooks.Checker{L: c.L, Now: c.L.Now(), Server: true, AfterTheFact: true}
				findings, err := chk.Check([]hooks.Update{u})
				if err != nil {
					return err
				}
				// The worst finding decides: an integrity code exits 3, a rule
				// or policy refusal 2 (the codes the hook uses are of those
				// classes; anything else counts as a policy refusal).
				var worst *hooks.Finding
				for i, f := range findings {
					fmt.Fprintln(a.stderr, f)
					if !f.Warning && (worst == nil || errs.ClassOfCode(f.Code) > errs.ClassOfCode(worst.Code)) {
						worst = &findings[i]
					}
				}
				if worst != nil {
					code := worst.Code
					if errs.ClassOfCode(code) != errs.Integrity && errs.ClassOfCode(code) != errs.Refused {
						code = errs.Policy
					}
					return errs.New(code, "the hook would have refused %s %.12s..%.12s: %s", ref, u.Old, u.New, worst.Message).
						With("findings", findings)
				}
				return a.emit(map[string]any{"ref": ref, "old": u.Old.String(), "new": u.New.String(), "findings": findings},
					func(w io.Writer) {
						fmt.Fprintf(w, "ok: the hook would have accepted %s %.12s..%.12s\n", ref, u.Old, u.New)
					})
			})
		},
	}
	cmd.Flags().StringVar(&ref, "ref", "", "the full ref name that was updated (refs/heads/main, refs/tally/ledger)")
	return cmd
}
