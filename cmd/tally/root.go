package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"

	"github.com/spf13/cobra"
	"github.com/spf13/pflag"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/internal/cliopt"
	"github.com/tally-dev/tally/ledger"
)

// app carries the global flags and the output streams of one invocation.
type app struct {
	dir       string
	jsonOut   bool
	actorFlag string
	namespace string
	signKey   string
	remote    string
	local     bool
	quiet     bool
	stdout    io.Writer
	stderr    io.Writer

	// The progress bar being shown, if any (term.go).
	bar *progressBar
}

// run executes tally with args and returns the exit code (the error's class).
func run(args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr}
	root := a.commandTree(args)
	// --json must shape the output even when flag parsing fails before cobra
	// sets it (after commandTree, which resets the flag's variable).
	for _, arg := range args {
		if arg == "--" {
			break
		}
		a.jsonOut = a.jsonOut || arg == "--json" || arg == "--json=true"
	}
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	// cobra reports an unknown command as a plain error (INTERNAL, exit 3 by
	// the default class): find it first and call it what it is.
	if _, _, err := root.Find(args); err != nil {
		msg := strings.TrimSpace(err.Error()) // one line: the suggestions after a semicolon
		if m, suggested, ok := strings.Cut(msg, "\n\nDid you mean this?\n\t"); ok {
			msg = m + "; did you mean " + strings.ReplaceAll(suggested, "\n\t", " or ") + "?"
		}
		return a.fail(errs.New(errs.Usage, "%s (run 'tally --help' for the commands)", msg))
	}
	err := root.Execute()
	a.endProgress()
	if err == nil {
		return 0
	}
	var ex exitCode
	if errors.As(err, &ex) {
		return int(ex)
	}
	return a.fail(err)
}

// exitCode lets a command (tally run) exit with a code that is not an error class.
type exitCode int

func (e exitCode) Error() string { return fmt.Sprintf("exit %d", int(e)) }

// newRoot is the tally command with its global flags and no subcommands.
func (a *app) newRoot() *cobra.Command {
	root := &cobra.Command{
		Use:           "tally",
		Short:         "git-native lease ledger and receipts for agents sharing a repository",
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	a.globals().AddFlags(root.PersistentFlags())
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return errs.New(errs.Usage, "%v", err) })
	return root
}

// topCommand is a top-level command: its name, and how to build it.
type topCommand struct {
	name  string
	build func() *cobra.Command
}

// topCommands lists tally's top-level commands in the order they are added.
// Building one costs its flags and subcommands, so a run builds only the one
// it executes (commandTree); rootCommand checks each name against the
// command it builds.
func (a *app) topCommands() []topCommand {
	return []topCommand{
		{"init", a.initCmd}, {"note", a.noteCmd}, {"log", a.logCmd}, {"verify", a.verifyCmd},
		{"plan", a.planCmd}, {"claim", a.claimCmd}, {"renew", a.renewCmd}, {"release", a.releaseCmd},
		{"fail", a.failCmd}, {"requeue", a.requeueCmd}, {"done", a.doneCmd},
		{"status", a.statusCmd}, {"show", a.showCmd}, {"next", a.nextCmd}, {"run", a.runCmd}, {"worktree", a.worktreeCmd},
		{"demo", a.demoCmd}, {"gc", a.gcCmd}, {"receipt", a.receiptCmd},
		{"lock", a.lockCmd}, {"unlock", a.unlockCmd}, {"locks", a.locksCmd}, {"deadlocks", a.deadlocksCmd},
		{"checkpoint", a.checkpointCmd}, {"prove", a.proveCmd}, {"verify-proof", a.verifyProofCmd},
		{"anchor", a.anchorCmd}, {"policy", a.policyCmd}, {"keys", a.keysCmd}, {"remote", a.remoteCmd},
		{"sync", a.syncCmd}, {"hooks", a.hooksCmd}, {"hook", a.hookCmd},
		{"report", a.reportCmd}, {"audit", a.auditCmd},
		{"mcp", a.mcpCmd}, {"version", a.versionCmd}, {"check", a.checkCmd}, {"guard", a.guardCmd},
	}
}

// rootCommand is the whole command tree, as help, completion and the
// suggestions for an unknown command need it.
func (a *app) rootCommand() *cobra.Command {
	root := a.newRoot()
	root.Version = cliopt.ReadBuildVersion().String()
	root.SetVersionTemplate("tally {{.Version}}\n")
	for _, tc := range a.topCommands() {
		c := tc.build()
		if c.Name() != tc.name {
			panic(fmt.Sprintf("top-level command %q is listed as %q", c.Name(), tc.name))
		}
		root.AddCommand(c)
	}
	organizeHelp(root)
	refuseUnknownSubcommands(root)
	return root
}

// commandTree is the tree args run in: the root with only the top-level
// command args name, or, when args name none (help, completion, --version,
// an unknown command, a global flag combined or misspelled), the whole tree.
// The executed command, its flags, help and errors are the same either way;
// only the listing of all commands and the suggestions need them all.
func (a *app) commandTree(args []string) *cobra.Command {
	root := a.newRoot()
	name := commandName(root, args)
	for _, tc := range a.topCommands() {
		if tc.name != name {
			continue
		}
		c := tc.build()
		root.AddCommand(c)
		setExamples(c, name)
		refuseUnknownSubcommands(root)
		root.CompletionOptions.DisableDefaultCmd = true
		return root
	}
	return a.rootCommand()
}

// commandName returns the first argument that is not a global flag or its
// value, "" if there is none or a flag root does not know comes first (cobra
// then reports it, or it is --help or --version).
func commandName(root *cobra.Command, args []string) string {
	flags := root.PersistentFlags()
	for i := 0; i < len(args); i++ {
		arg := args[i]
		var f *pflag.Flag
		switch {
		case !strings.HasPrefix(arg, "-"):
			return arg
		case strings.HasPrefix(arg, "--") && len(arg) > 2:
			name, _, hasValue := strings.Cut(arg[2:], "=")
			if f = flags.Lookup(name); f != nil && hasValue {
				continue
			}
		case len(arg) == 2:
			f = flags.ShorthandLookup(arg[1:])
		}
		if f == nil {
			return ""
		}
		if f.NoOptDefVal == "" {
			i++ // the flag's value
		}
	}
	return ""
}

// refuseUnknownSubcommands makes every command that only groups subcommands
// (tally policy, tally keys, ...) refuse an unknown one as USAGE with
// cobra's suggestions, where cobra would print help and exit 0. Without
// arguments it still prints its help.
func refuseUnknownSubcommands(c *cobra.Command) {
	for _, sub := range c.Commands() {
		refuseUnknownSubcommands(sub)
	}
	if !c.HasSubCommands() || c.Runnable() || !c.HasParent() {
		return
	}
	c.Args = cobra.ArbitraryArgs
	c.RunE = func(cmd *cobra.Command, argv []string) error {
		if len(argv) == 0 {
			return cmd.Help()
		}
		msg := fmt.Sprintf("unknown command %q for %q", argv[0], cmd.CommandPath())
		cmd.SuggestionsMinimumDistance = 2
		if s := cmd.SuggestionsFor(argv[0]); len(s) > 0 {
			msg += "; did you mean " + strings.Join(s, " or ") + "?"
		}
		return errs.New(errs.Usage, "%s (run '%s --help' for its commands)", msg, cmd.CommandPath())
	}
}

// args wraps cobra's positional-argument checks so their errors are USAGE.
func args(check cobra.PositionalArgs) cobra.PositionalArgs {
	return func(cmd *cobra.Command, a []string) error {
		if err := check(cmd, a); err != nil {
			return errs.New(errs.Usage, "%v", err)
		}
		return nil
	}
}

// globals binds the global flags to a's fields.
func (a *app) globals() cliopt.Globals {
	return cliopt.Globals{Dir: &a.dir, Actor: &a.actorFlag, Namespace: &a.namespace, SignKey: &a.signKey,
		Remote: &a.remote, Local: &a.local, JSON: &a.jsonOut, Quiet: &a.quiet}
}

// client opens the repository as the global flags say (cliopt.Open);
// commands that append pass acting and are refused early when no actor can
// be found. Compaction runs in a detached `tally gc`, so that it outlives
// the command.
func (a *app) client(acting bool) (*tally.Client, error) {
	c, err := a.globals().Open(acting, detachedGC)
	if err != nil {
		return nil, err
	}
	c.L.Progress = a.progress()
	if c.L.Progress != nil {
		c.L.PushProgress = gitProgressOut{a.stderr}
	}
	return c, nil
}

// withClient runs f with a client opened by client(acting): every command
// that works on a repository goes through it.
func (a *app) withClient(acting bool, f func(c *tally.Client) error) error {
	c, err := a.client(acting)
	if err != nil {
		return err
	}
	// Not closed: the process exits after its command, and the kernel drops
	// the pack mappings at exit in one go, where unmapping each (a TLB
	// shootdown on every CPU the process ran on) was 1% of a note's CPU.
	return f(c)
}

// emit prints a successful result: with --json exactly one object with
// "ok":true merged into the result's fields, else the text rendering.
func (a *app) emit(result any, text func(w io.Writer)) error {
	if !a.jsonOut {
		if text != nil {
			text(newHumanOut(a.stdout))
		}
		return nil
	}
	obj, err := tally.ResultObject(result)
	if err != nil {
		return err
	}
	return writeJSON(a.stdout, obj)
}

// emitView is emit for a view: with --json the result also carries
// "verified" ({"through": seq, "head": hash}), the verified state it was read
// from (a view on a ledger that does not verify fails instead, exit 3).
//
// A view read from a state verified from a trusted checkpoint rather than
// from genesis says so: "verified" carries "from", and human output a line
// on stderr (fromCheckpoint).
func (a *app) emitView(c *tally.Client, result any, text func(w io.Writer)) error {
	if !a.jsonOut {
		if v := c.Verified(); v != nil && v.From != nil {
			fromCheckpoint(a.stderr, v.From)
		}
		return a.emit(nil, text)
	}
	obj, err := tally.ResultObject(result)
	if err != nil {
		return err
	}
	// "verified" takes the round trip through JSON that sorts the keys of
	// everything tally writes on its own, not with a second one of the
	// whole result (emit's): for the status of a 20k-cell plan, 1.2 MB, that
	// was 12% of the command's instructions.
	b, err := json.Marshal(c.Verified())
	if err != nil {
		return err
	}
	var verified any
	if err := json.Unmarshal(b, &verified); err != nil {
		return err
	}
	obj["verified"] = verified
	return writeJSON(a.stdout, obj)
}

// fromCheckpoint says what a verification that began at a trusted
// checkpoint did not check.
func fromCheckpoint(w io.Writer, from *ledger.CheckpointStart) {
	fmt.Fprintf(w, "verified from the checkpoint of %d entries signed by %s (commit %s); the %d entries before it were not fetched nor checked here (tally verify --full does)\n",
		from.Size, from.Key, from.Commit, from.Size)
}

// fail reports err and returns its exit class.
func (a *app) fail(err error) int {
	e := errs.From(err)
	if a.jsonOut {
		writeJSON(a.stdout, tally.ErrorObject(e))
	} else {
		w := newHumanOut(a.stderr)
		fmt.Fprint(w, "tally: ")
		paint(w, red, "%s", e.Code)
		fmt.Fprintf(w, ": %s\n", e.Message)
		keys := make([]string, 0, len(e.Details))
		for k := range e.Details {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			fmt.Fprintf(w, "  %s: %s\n", k, detailText(e.Details[k]))
		}
	}
	return int(e.Class())
}

// detailText renders an error detail for a terminal: strings, numbers and
// booleans as they are, anything structured (evidence, lists) as its JSON,
// which is what --json shows for it too.
func detailText(v any) string {
	switch v.(type) {
	case string, bool, int, int64, uint64, float64:
		return fmt.Sprint(v)
	}
	if b, err := json.Marshal(v); err == nil {
		return string(b)
	}
	return fmt.Sprint(v)
}

func writeJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// withLeaseCell serves the commands that act on the caller's own lease
// (renew, release, fail, done): it parses the WAVE/CELL argument (argv, at
// most one), requires --epoch, and runs f with a client that has an actor
// (withClient). In a cell's worktree (claim --worktree) the cell and epoch
// default to its lease's, and f gets the worktree (else nil).
func (a *app) withLeaseCell(cmd *cobra.Command, argv []string, epoch *int64, f func(c *tally.Client, wave, cell string, wt *tally.Worktree) error) error {
	var wave, cell string
	if len(argv) == 1 {
		var err error
		if wave, cell, err = cellArg(argv[0]); err != nil {
			return err
		}
	}
	return a.withClient(true, func(c *tally.Client) error {
		wt, err := c.WorktreeCell()
		if err != nil {
			return err
		}
		if wt != nil && (len(argv) == 0 || wt.Wave == wave && wt.Cell == cell) {
			wave, cell = wt.Wave, wt.Cell
			if !cmd.Flags().Changed("epoch") {
				*epoch = wt.Epoch
			}
			return f(c, wave, cell, wt)
		}
		if len(argv) == 0 {
			return usageErr("give WAVE/CELL, or run it in a cell's worktree (claim --worktree)")
		}
		if err := requireFlag(cmd, "epoch"); err != nil {
			return err
		}
		return f(c, wave, cell, nil)
	})
}

// worktreeCellArg is the cell a command that takes an optional WAVE/CELL
// names: the argument, else the cell of the worktree the client is in.
func worktreeCellArg(c *tally.Client, argv []string) (wave, cell string, wt *tally.Worktree, err error) {
	if len(argv) > 0 {
		wave, cell, err = cellArg(argv[0])
		return wave, cell, nil, err
	}
	if wt, err = c.WorktreeCell(); err != nil {
		return "", "", nil, err
	}
	if wt == nil {
		return "", "", nil, usageErr("give WAVE/CELL, or run it in a cell's worktree (claim --worktree)")
	}
	return wt.Wave, wt.Cell, wt, nil
}

// cellArg parses "WAVE/CELL".
func cellArg(s string) (string, string, error) {
	w, c, ok := strings.Cut(s, "/")
	if !ok || w == "" || c == "" {
		return "", "", errs.New(errs.Usage, "expected WAVE/CELL, got %q", s)
	}
	return w, c, nil
}

func usageErr(format string, args ...any) error { return errs.New(errs.Usage, format, args...) }
