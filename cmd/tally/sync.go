package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/errs"
)

func (a *app) syncCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "sync [NAME]",
		Short: "reconcile the local ledger with the remote's",
		Long: `sync fetches and verifies the remote ledger, fast-forwards the local one,
pushes local-only entries, and when both moved, rebuilds the local-only
entries on the remote tip in order, each only where the rules still allow
it. Every entry that no longer applies is reported with the rule that
refuses it; none is dropped silently.`,
		Args: args(cobra.MaximumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				remote := c.Remote()
				if len(argv) == 1 {
					remote = argv[0]
				}
				if remote == "" {
					return errs.New(errs.Usage, "no remote: give NAME, --remote, or tally remote set NAME")
				}
				rep, err := c.Sync(remote)
				if err != nil {
					return err
				}
				return a.emit(rep, func(w io.Writer) {
					fmt.Fprintf(w, "%s: %s, %d entries, tip %.12s\n", rep.Remote, rep.Action, rep.Entries, rep.Tip)
					for _, r := range rep.Rebuilt {
						fmt.Fprintf(w, "  rebuilt #%d %s (%s) as #%d\n", r.OldSeq, r.Kind, r.Actor, r.NewSeq)
					}
					for _, d := range rep.Dropped {
						fmt.Fprintf(w, "  NOT APPLIED #%d %s (%s): %s: %s\n", d.OldSeq, d.Kind, d.Actor, d.Code, d.Message)
					}
					printNotesPush(w, a.stderr, rep.NotesPush)
				})
			})
		},
	}
}
