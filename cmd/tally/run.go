package main

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/receipt"
)

func (a *app) runCmd() *cobra.Command {
	var epoch int64
	cmd := &cobra.Command{
		Use:   "run WAVE/CELL [--epoch N] -- CMD [ARGS...]",
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
exactly one JSON object and nothing is lost.`,
		Example: `  tally run w1/api --epoch 3 -- go test ./api/...
  tally --json run w1/api -- make check`,
		Args: args(cobra.MinimumNArgs(2)),
		RunE: func(cmd *cobra.Command, argv []string) error {
			w, cell, err := cellArg(argv[0])
			if err != nil {
				return err
			}
			if cmd.ArgsLenAtDash() != 1 {
				return usageErr("put the command after --: tally run W/C -- CMD ARGS...")
			}
			if !cmd.Flags().Changed("epoch") {
				epoch = 0
			}
			c, err := a.client(true)
			if err != nil {
				return err
			}
			defer c.Close()
			ls, err := c.LiveLease(w, cell, epoch)
			if err != nil {
				return err
			}
			out, errOut := receipt.NewStreamDigest(), receipt.NewStreamDigest()
			child := exec.Command(argv[1], argv[2:]...)
			child.Dir = a.dir // -C PATH: run as if started in PATH, the command too
			child.Stdin = os.Stdin
			stdout, stderr := a.stdout, a.stderr
			if a.jsonOut {
				stdout = a.stderr // stdout carries exactly one JSON object
			}
			child.Stdout, child.Stderr = io.MultiWriter(stdout, out), io.MultiWriter(stderr, errOut)
			start := c.L.Now()
			t0 := time.Now()
			code := 0
			if err := child.Run(); err != nil {
				var ee *exec.ExitError
				if !errors.As(err, &ee) {
					return errs.New("USAGE", "run %s: %v", argv[1], err)
				}
				code = ee.ExitCode()
			}
			ev := lease.Evidence{Argv: argv[1:], ExitCode: code, StartedAt: chain.FormatTime(start),
				DurationMS: time.Since(t0).Milliseconds(), Stdout: out.Digest(), Stderr: errOut.Digest(), Epoch: ls.Epoch}
			if err := c.RecordEvidence(w, cell, ev); err != nil {
				return err
			}
			if code != 0 {
				return errs.New("COMMAND-FAILED", "%s exited %d; its evidence is recorded for %s/%s epoch %d", argv[1], code, w, cell, ls.Epoch).
					With("exit_code", code).With("evidence", ev)
			}
			return a.emit(map[string]any{"evidence": ev}, func(io.Writer) {
				// The command owns stdout; tally's own report goes to stderr.
				fmt.Fprintf(a.stderr, "tally: recorded evidence for %s/%s epoch %d: exit 0 in %d ms\n", w, cell, ls.Epoch, ev.DurationMS)
			})
		},
	}
	cmd.Flags().Int64Var(&epoch, "epoch", 0, "the epoch of your lease (checked if given)")
	return cmd
}
