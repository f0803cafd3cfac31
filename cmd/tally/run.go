package main

import (
	"fmt"
	"github.com/tally-dev/tally"
	"io"
	"os"
	"os/exec"

	"github.com/spf13/cobra"
)

func (a *app) runCmd() *cobra.Command {
	var epoch int64
	cmd := &cobra.Command{
		Use:   "run [WAVE/CELL] [--epoch N] -- CMD [ARGS...]",
		Short: "run a command and record its evidence for your live lease",
		Long: `run executes CMD with its output streaming through, and records evidence for
your live lease on the cell: argv, exit code, start time, duration, and the
size, BLAKE3 and SHA-256 of stdout and stderr. The evidence waits in the
clone's local tally directory until tally done puts it in a receipt.

tally exits 0 when the command exited 0. When it exited otherwise, the
evidence is still recorded and tally reports COMMAND-FAILED (exit 2) with
the command's exit code as exit_code, so the command's failure never reads
as one of tally's own classes (a command's exit 3 is not an integrity
failure). With --json the command's stdout goes to stderr, so stdout stays
exactly one JSON object and nothing is lost.

In a cell's worktree (claim --worktree) WAVE/CELL and the epoch default to
its lease's.`,
		Example: `  tally run w1/api --epoch 3 -- go test ./api/...
  tally --json run w1/api -- make check`,
		Args: args(cobra.MinimumNArgs(1)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			at := cmd.ArgsLenAtDash()
			if at != 0 && at != 1 || len(argv) == at {
				return usageErr("put the command after --: tally run [W/C] -- CMD ARGS...")
			}
			if !cmd.Flags().Changed("epoch") {
				epoch = 0
			}
			return a.withClient(true, func(c *tally.Client) error {
				w, cell, wt, err := worktreeCellArg(c, argv[:at])
				if err != nil {
					return err
				}
				if wt != nil && epoch == 0 {
					epoch = wt.Epoch
				}
				argv = argv[at:]
				child := exec.Command(argv[0], argv[1:]...)
				child.Dir = a.dir // -C PATH: run as if started in PATH, the command too
				child.Stdin = os.Stdin
				child.Stdout, child.Stderr = a.stdout, a.stderr
				if a.jsonOut {
					child.Stdout = a.stderr // stdout carries exactly one JSON object
				}
				res, err := c.Run(w, cell, epoch, child, nil)
				if err != nil {
					return err
				}
				ev := res.Evidence
				return a.emit(res, func(io.Writer) {
					// The command owns stdout; tally's own report goes to stderr.
					fmt.Fprintf(a.stderr, "tally: recorded evidence for %s/%s epoch %d: exit 0 in %d ms\n", w, cell, ev.Epoch, ev.DurationMS)
				})
			})
		},
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch of your lease (checked if given)")
	return cmd
}
