package main

import (
	"github.com/tally-dev/tally"
	"io"
	"os"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
)

func (a *app) planCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "plan FILE",
		Short: "add a wave of cells from a JSON or YAML file (- for stdin)",
		Long: `plan adds one wave:

  {"wave":"w1","cells":[{"id":"a","title":"...","deps":["b"],"paths":["src/a/**"],"role":"dev"}]}

A dep names a cell of the same wave, or "wave/cell" for a cell of an earlier
wave. Refused, with nothing written: WAVE-EXISTS, DEP-MISSING, DEP-CYCLE
(naming the cycle), USAGE for bad ids or shape, LIMIT-EXCEEDED (naming the
limit) past 256 paths per cell, 8,192 per wave or 1,024 bytes per path.`,
		Args: args(cobra.ExactArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			body, err := readPlan(argv[0])
			if err != nil {
				return err
			}
			return a.withClient(true, func(c *tally.Client) error {
				res, err := c.Plan(body)
				if err != nil {
					return err
				}
				return a.emit(res, func(w io.Writer) { printAppended(w, &res.Appended) })
			})
		},
	}
}

// readPlan reads and parses a plan file (parsePlan): "-" is stdin.
func readPlan(path string) (*lease.PlanBody, error) {
	var data []byte
	var err error
	if path == "-" {
		data, err = io.ReadAll(os.Stdin)
	} else {
		data, err = os.ReadFile(path)
	}
	if err != nil {
		return nil, errs.New(errs.Usage, "read plan: %v", err)
	}
	return parsePlan(path, data)
}
