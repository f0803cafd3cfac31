package main

import (
	"io"
	"strings"
	"testing"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally/internal/testrepo"
)

// TestHelpGroupsAndExamples: `tally --help` lists every command under one of
// the groups (none left over as "Additional Commands"), and every visible
// command, subcommands included, has an example whose lines all run tally.
func TestHelpGroupsAndExamples(t *testing.T) {
	root := (&app{stdout: io.Discard, stderr: io.Discard}).rootCommand()
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			if sub.Hidden {
				continue
			}
			if c == root && sub.GroupID == "" {
				t.Errorf("%s: in no help group", sub.CommandPath())
			}
			if sub.Example == "" {
				t.Errorf("%s: no example", sub.CommandPath())
			}
			for _, line := range strings.Split(sub.Example, "\n") {
				if !strings.Contains(line, "tally ") {
					t.Errorf("%s: example line %q does not run tally", sub.CommandPath(), line)
				}
			}
			walk(sub)
		}
	}
	walk(root)
	res := testrepo.Run(t, t.TempDir(), "", nil, "--help")
	if res.Code != 0 {
		t.Fatalf("tally --help: exit %d %s", res.Code, res.Stderr)
	}
	for _, title := range []string{"Leases on cells:", "Path locks:", "Receipts, checkpoints and proofs:", "Audit:", "Remote and hooks:", "Setup:"} {
		if !strings.Contains(res.Stdout, "\n"+title+"\n") {
			t.Errorf("tally --help has no group %q:\n%s", title, res.Stdout)
		}
	}
	if strings.Contains(res.Stdout, "Additional Commands") {
		t.Errorf("tally --help lists commands outside the groups:\n%s", res.Stdout)
	}
}
