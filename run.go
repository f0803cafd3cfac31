package tally

import (
	"errors"
	"io"
	"os/exec"
	"time"

	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/lease"
	"github.com/tally-dev/tally/receipt"
)

// RunResult is the outcome of Run.
type RunResult struct {
	Evidence lease.Evidence `json:"evidence"`
}

// Run runs cmd (prepared, not started; its Args are the argv recorded) under
// the actor's live lease on wave/cell at epoch (0: the cell's current one)
// and records its evidence until a receipt takes it: argv, exit code, start
// time, duration, and the size and digests of stdout and stderr, which are
// digested on their way to cmd's own Stdout and Stderr. It is `tally run` for
// the command line and the MCP server alike.
//
// The lease is checked before the command starts (LiveLease), so nothing
// runs under a lease run could not record for. A command that exits non-zero
// still has its evidence recorded, and Run answers COMMAND-FAILED (refused)
// with exit_code and evidence, so that the command's own exit status is never
// read as one of tally's classes.
//
// The client is used only before and after the command runs, each time
// inside lend, which calls its argument and returns its error: a caller that
// shares the client between goroutines (the MCP server) lends it under its
// own lock, so a long command does not hold that lock. lend nil uses it
// directly.
func (c *Client) Run(wave, cell string, epoch int64, cmd *exec.Cmd, lend func(func() error) error) (*RunResult, error) {
	if lend == nil {
		lend = func(f func() error) error { return f() }
	}
	var ls *lease.Lease
	var start time.Time
	if err := lend(func() (err error) {
		ls, err = c.LiveLease(wave, cell, epoch)
		start = c.L.Now()
		return err
	}); err != nil {
		return nil, err
	}
	out, errOut := receipt.NewStreamDigest(), receipt.NewStreamDigest()
	cmd.Stdout, cmd.Stderr = teeTo(cmd.Stdout, out), teeTo(cmd.Stderr, errOut)
	t0 := time.Now()
	code := 0
	if err := cmd.Run(); err != nil {
		var ee *exec.ExitError
		if !errors.As(err, &ee) {
			return nil, errs.New(errs.Usage, "run %s: %v", cmd.Args[0], err)
		}
		code = ee.ExitCode()
	}
	ev := lease.Evidence{Argv: cmd.Args, ExitCode: code, StartedAt: chain.FormatTime(start),
		DurationMS: time.Since(t0).Milliseconds(), Stdout: out.Digest(), Stderr: errOut.Digest(), Epoch: ls.Epoch}
	if err := lend(func() error { return c.RecordEvidence(wave, cell, ev) }); err != nil {
		return nil, err
	}
	if code != 0 {
		return nil, errs.New(errs.CommandFailed, "%s exited %d; its evidence is recorded for %s/%s epoch %d", cmd.Args[0], code, wave, cell, ls.Epoch).
			With("exit_code", code).With("evidence", ev)
	}
	return &RunResult{Evidence: ev}, nil
}

// teeTo is w with d also written, or d alone when w is nil.
func teeTo(w io.Writer, d io.Writer) io.Writer {
	if w == nil {
		return d
	}
	return io.MultiWriter(w, d)
}
