package main

import (
	"fmt"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/hooks"
)

// preCommit is the pre-commit hook: the edit guard's rule (FORMAT.md §9c)
// on the staged paths, for what no agent hook saw being written. It exits 1
// (git refuses the commit) with the same reason the guard would give.
func (a *app) preCommit(c *tally.Client) error {
	paths, err := hooks.StagedPaths(c.L.Repo)
	if err != nil || len(paths) == 0 {
		return err
	}
	d, err := c.EditCheck(paths)
	if err != nil {
		return err
	}
	if d.Refused() {
		fmt.Fprintln(a.stderr, refusal(c.Actor, "", d, c.L.Now()))
		fmt.Fprintln(a.stderr, "(tally's pre-commit hook; git commit --no-verify skips it, the push hook still judges the commit)")
		return exitCode(1)
	}
	if w := d.Warned(); len(w) > 0 {
		fmt.Fprintln(a.stderr, unleasedWarning(w))
	}
	return nil
}
