package main

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
)

func (a *app) remoteCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "remote",
		Short: "choose the git remote that holds the shared ledger",
		Long: `In remote mode the remote's ledger is the point of truth: every command that
appends fetches it, verifies what is new, builds the entry on the remote tip
with the same rules and pushes it with a compare-and-swap, retrying when
another agent won the race. Views read the remote's ledger.`,
		Args: args(cobra.NoArgs),
	}
	set := &cobra.Command{
		Use:   "set NAME",
		Short: "use git remote NAME for every command (git config tally.remote)",
		Args:  args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				if _, err := c.L.Repo.RemoteURL(argv[0]); err != nil {
					return errs.New(errs.Usage, "%v", err)
				}
				if err := gitConfig(a.dir, "tally.remote", argv[0]); err != nil {
					return err
				}
				return a.emit(map[string]any{"remote": argv[0]}, func(w io.Writer) { fmt.Fprintf(w, "remote: %s\n", argv[0]) })
			})
		},
	}
	unset := &cobra.Command{
		Use:   "unset",
		Short: "work locally again",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			var ge *gitstore.GitError
			if err := gitConfig(a.dir, "--unset-all", "tally.remote"); err != nil && !(errors.As(err, &ge) && ge.Code == 5) { // 5: was not set
				return err
			}
			return a.emit(map[string]any{"remote": ""}, func(w io.Writer) { fmt.Fprintln(w, "remote: none (local)") })
		},
	}
	show := &cobra.Command{
		Use:   "show",
		Short: "print the remote in use",
		Args:  args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			return a.withClient(false, func(c *tally.Client) error {
				return a.emit(map[string]any{"remote": c.Remote(), "claims": c.ClaimPath()}, func(w io.Writer) {
					if c.Remote() == "" {
						fmt.Fprintln(w, "remote: none (local)")
					} else {
						fmt.Fprintf(w, "remote: %s\n", c.Remote())
						claimPathLine(w, c)
					}
				})
			})
		},
	}
	cmd.AddCommand(set, unset, show)
	return cmd
}

// claimPathLine prints how claim --next reaches the remote's ledger, and
// why, and which commands go to the sequencer (tally status and tally
// remote show).
func claimPathLine(w io.Writer, c *tally.Client) {
	p := c.ClaimPath()
	fmt.Fprintf(w, "claims: %s (%s)\n", p.Path, p.Why)
	if len(p.Ops) > 0 {
		fmt.Fprintf(w, "sequenced: %s\n", strings.Join(p.Ops, " "))
	}
}

// gitConfig runs git config in the repository (not on any hot path).
func gitConfig(dir string, argv ...string) error {
	_, err := gitstore.RunGit(dir, append([]string{"config"}, argv...)...)
	return err
}
