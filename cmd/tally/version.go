package main

import (
	"fmt"
	"io"

	"github.com/spf13/cobra"
	"github.com/tally-dev/tally/internal/cliopt"
)

func (a *app) versionCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "print tally's version and the commit it was built from",
		Example: `  tally version
  tally --version
  tally version --json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			v := cliopt.ReadBuildVersion()
			return a.emit(v, func(w io.Writer) { fmt.Fprintf(w, "tally %s (%s)\n", v, v.Go) })
		},
	}
}
