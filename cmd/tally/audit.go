package main

import (
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/report"
)

func (a *app) auditCmd() *cobra.Command {
	var opt report.AuditOptions
	var since, until string
	cmd := &cobra.Command{
		Use:   "audit [--ref REF] [OLD..NEW]",
		Short: "audit a range of commits against the verified ledger, for CI and people",
		Long: `audit verifies the ledger from genesis, then lists for the commits in
OLD..NEW (default: everything REF reaches):
  - commits without a receipt (merges that change nothing of their own are
    judged by their parents, as the push hooks judge them);
  - receipts of those commits whose evidence records a non-zero exit code;
and for the period, from OLD's committer time (without OLD: the range's
earliest) to the range's latest committer time, or --since/--until:
  - takeovers and preemptions;
  - leases that expired while held;
  - entries whose commit is unsigned, when the policy requires signatures.
REF (default: the checked-out branch) is the ref whose policy applies.
Exit 2 (AUDIT-FAILED) when policy required something the range lacks:
receipts enforced on REF and a commit without one, or signatures required
and an unsigned entry in the period. Exit 0 otherwise, findings listed.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			var err error
			if opt.Since, err = timeFlag("since", since); err != nil {
				return err
			}
			if opt.Until, err = timeFlag("until", until); err != nil {
				return err
			}
			return a.withClient(false, func(c *tally.Client) error {
				if opt.Ref == "" {
					out, err := c.L.Repo.Git("symbolic-ref", "-q", "HEAD")
					if err != nil {
						return usageErr("HEAD is not on a branch: name the ref with --ref")
					}
					opt.Ref = strings.TrimSpace(string(out))
				}
				opt.New = opt.Ref
				if len(argv) == 1 {
					old, nw, ok := strings.Cut(argv[0], "..")
					if !ok {
						old, nw = "", argv[0]
					}
					if nw == "" || strings.HasPrefix(nw, ".") {
						return usageErr("expected OLD..NEW, got %q", argv[0])
					}
					opt.Old, opt.New = old, nw
				}
				res, err := report.Audit(c, opt)
				if err != nil {
					return err
				}
				if len(res.Missing) > 0 {
					if !a.jsonOut {
						printAudit(a.stdout, res)
					}
					return errs.New(errs.AuditFailed, "policy requires what %s lacks: %s", res.Range, strings.Join(res.Missing, "; ")).
						With("audit", res)
				}
				return a.emit(res, func(w io.Writer) { printAudit(w, res) })
			})
		},
	}
	cmd.Flags().StringVar(&opt.Ref, "ref", "", "the full ref name whose policy applies, and NEW by default (default: the checked-out branch)")
	cmd.Flags().StringVar(&since, "since", "", "start the period at `T` (RFC 3339) instead of OLD's committer time")
	cmd.Flags().StringVar(&until, "until", "", "end the period at `T` (RFC 3339) instead of the range's latest committer time")
	return cmd
}

func printAudit(w io.Writer, r *report.AuditResult) {
	fmt.Fprintf(w, "audit of %s (%d commits) for %s, period %s .. %s; ledger verified through seq %d, root %s\n",
		r.Range, r.Commits, r.Ref, r.Period.Since, r.Period.Until, r.VerifiedSeq, r.Root)
	fmt.Fprintf(w, "commits without a receipt: %d\n", len(r.Unreceipted))
	for _, c := range r.Unreceipted {
		fmt.Fprintf(w, "  %s %s\n", c.Commit, c.Subject)
	}
	fmt.Fprintf(w, "receipts with a failed command: %d\n", len(r.FailedEvidence))
	for _, f := range r.FailedEvidence {
		fmt.Fprintf(w, "  %.12s receipt #%d %s epoch %d: `%s` exited %d\n", f.Commit, f.Seq, f.Cell, f.Epoch, f.Argv, f.ExitCode)
	}
	fmt.Fprintf(w, "takeovers and preemptions: %d\n", len(r.Takeovers))
	for _, t := range r.Takeovers {
		fmt.Fprintf(w, "  #%d %s %s: %s by %s from %s epoch %d\n", t.Seq, t.TS, t.Lane, t.Kind, t.Actor, t.Prior, t.PriorEpoch)
	}
	fmt.Fprintf(w, "leases expired while held: %d\n", len(r.Expired))
	for _, e := range r.Expired {
		fmt.Fprintf(w, "  %s epoch %d held by %s expired at %s\n", e.Lane, e.Epoch, e.Actor, e.ExpiredAt)
	}
	fmt.Fprintf(w, "unsigned entries (signatures required): %d\n", len(r.Unsigned))
	for _, u := range r.Unsigned {
		fmt.Fprintf(w, "  #%d %s %s %s\n", u.Seq, u.TS, u.Actor, u.Kind)
	}
	for _, m := range r.Missing {
		fmt.Fprintf(w, "MISSING: %s\n", m)
	}
}
