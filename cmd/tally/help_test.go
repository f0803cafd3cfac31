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

// TestCommandTreeOneCommand: a run builds only the top-level command its
// arguments name (commandTree), and that command behaves as in the whole
// tree: the same help for it and each of its subcommands, global flags
// before it included, and the same refusal of an unknown subcommand.
func TestCommandTreeOneCommand(t *testing.T) {
	execute := func(root *cobra.Command, args ...string) (string, error) {
		var out strings.Builder
		root.SetArgs(args)
		root.SetOut(&out)
		root.SetErr(&out)
		err := root.Execute()
		return out.String(), err
	}
	a := &app{stdout: io.Discard, stderr: io.Discard}
	for _, tc := range a.topCommands() {
		paths := [][]string{{tc.name}}
		for _, sub := range tc.build().Commands() {
			paths = append(paths, []string{tc.name, sub.Name()})
		}
		for _, p := range paths {
			for _, args := range [][]string{append(p, "--help"), append([]string{"-C", ".", "--json", "--actor=x"}, append(p, "-h")...)} {
				tree := a.commandTree(args)
				if n := len(tree.Commands()); n != 1 {
					t.Fatalf("%v: %d top-level commands built, want 1", args, n)
				}
				got, err := execute(tree, args...)
				want, werr := execute(a.rootCommand(), args...)
				if got != want || (err == nil) != (werr == nil) {
					t.Errorf("%v: alone\n%s(%v)\nin the whole tree\n%s(%v)", args, got, err, want, werr)
				}
			}
		}
		if len(paths) > 1 {
			args := []string{tc.name, "no-such-subcommand"}
			_, err := execute(a.commandTree(args), args...)
			_, werr := execute(a.rootCommand(), args...)
			if err == nil || werr == nil || err.Error() != werr.Error() {
				t.Errorf("%v: alone %v, in the whole tree %v", args, err, werr)
			}
		}
	}
	for _, args := range [][]string{nil, {"--help"}, {"help", "note"}, {"completion", "bash"}, {"--version"}, {"nte"}, {"-qC", ".", "note"}} {
		if n := len(a.commandTree(args).Commands()); n < len(a.topCommands()) {
			t.Errorf("%v: %d top-level commands built, want the whole tree", args, n)
		}
	}
}
