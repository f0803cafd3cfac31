package main

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tally-dev/tally"
	"github.com/tally-dev/tally/chain"
	"github.com/tally-dev/tally/errs"
	"github.com/tally-dev/tally/gitstore"
	"github.com/tally-dev/tally/hooks"
	"github.com/tally-dev/tally/lease"
)

// guardCmd is what the agent harnesses' hooks run (FORMAT.md §9c).
func (a *app) guardCmd() *cobra.Command {
	var agent, event string
	cmd := &cobra.Command{
		Use:   "guard --agent HARNESS [--event pre-edit|session-start|session-end]",
		Short: "judge an agent's edit by the leases (called by the hooks tally hooks install --agent writes)",
		Long: `guard reads an agent harness's hook payload on stdin and answers in that
harness's own form: an edit of a path another actor holds is refused with a
reason naming the holder; at session start the agent is told its leases and
the ready cells. Every failure refuses the edit (FORMAT.md §9c).`,
		Example: `  tally guard --agent claude < payload.json   # {"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"file_path":"/repo/src/a.go"},"cwd":"/repo"}
  tally guard --agent codex --event session-start < payload.json`,
		Args: args(cobra.NoArgs),
		RunE: func(cmd *cobra.Command, _ []string) error {
			if !cmd.Flags().Changed("repo") {
				a.dir = "" // the payload names the repositories
			}
			// A path is judged by the repository it lies in, not by one
			// the harness's environment names.
			for _, v := range gitLocationEnv {
				os.Unsetenv(v)
			}
			return a.guard(cmd.InOrStdin(), agent, event)
		},
	}
	cmd.Flags().StringVar(&agent, "agent", "", "the harness: "+strings.Join(hooks.Agents, ", "))
	cmd.Flags().StringVar(&event, "event", "", "the event when the payload names none: pre-edit, session-start or session-end")
	return cmd
}

// gitLocationEnv are the variables that point git (and tally) at a
// repository other than the one a directory lies in.
var gitLocationEnv = []string{"GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY",
	"GIT_ALTERNATE_OBJECT_DIRECTORIES", "GIT_INDEX_FILE"}

// maxPayload bounds what the guard reads, and so its memory: a model's
// whole output in one tool call (tens of thousands of tokens) fits many
// times over. A larger payload is refused unread.
const maxPayload = 8 << 20

// guard answers one hook call. It never returns an error the harness could
// read as "allow": every failure of a pre-edit call is a refusal in the
// harness's form, a panic included.
func (a *app) guard(in io.Reader, agent, event string) (err error) {
	ans := guardAnswer{agent: agent, out: a.stdout, errw: a.stderr}
	defer func() {
		if r := recover(); r != nil {
			err = ans.deny(fmt.Sprintf("tally guard failed (%s: %v), so the edit is refused", errs.Internal, r))
		}
	}()
	if !slices.Contains(hooks.Agents, agent) {
		return ans.deny(fmt.Sprintf("tally guard: --agent must be one of %s, not %q; the edit is refused", strings.Join(hooks.Agents, ", "), agent))
	}
	raw, err := readPayload(in)
	var call *hooks.AgentCall
	if err == nil {
		call, err = hooks.ParseAgentPayload(agent, raw, event)
	}
	if err != nil {
		return ans.deny(failed(err))
	}
	switch call.Event {
	case hooks.EventSessionStart:
		return ans.context(a.sessionContext(call))
	case hooks.EventSessionEnd:
		return ans.ended(a.sessionEnd(call))
	}
	if !call.Writes {
		return ans.allow("")
	}
	base, err := editBase(call)
	if err != nil {
		return ans.deny(failed(err))
	}
	deny, warn, err := a.judgeEdit(call, base)
	switch {
	case err != nil:
		return ans.deny(failed(err))
	case deny != "":
		return ans.deny(deny)
	}
	return ans.allow(warn)
}

// readPayload reads the one JSON value a harness writes on stdin, and
// nothing after it: a harness that writes its payload and keeps stdin open
// would otherwise hold the guard until the harness's own timeout, which it
// reads as "allow". A value over maxPayload bytes is LIMIT-EXCEEDED; one
// that does not parse, or text other than white space read after it, USAGE.
func readPayload(in io.Reader) (json.RawMessage, error) {
	limited := &io.LimitedReader{R: in, N: maxPayload + 1}
	dec := json.NewDecoder(limited)
	var raw json.RawMessage
	err := dec.Decode(&raw)
	switch {
	case err != nil && limited.N <= 0:
		return nil, errs.New(errs.LimitExceeded, "the hook payload is larger than %d bytes", maxPayload)
	case err != nil:
		return nil, errs.New(errs.Usage, "the hook payload is not a JSON object: %v", err)
	}
	if rest, _ := io.ReadAll(dec.Buffered()); len(bytes.TrimSpace(rest)) > 0 {
		return nil, errs.New(errs.Usage, "the hook payload has text after its JSON value")
	}
	return raw, nil
}

// judgeEdit judges each path the call writes by the ledger of the
// repository it lies in, grouped by repository: the refusal (empty when
// allowed) and the warning. The home repository — -C's, else the one the
// payload's cwd lies in, the project the hooks were installed for — must
// have a ledger; another repository without one is not tally's to judge.
func (a *app) judgeEdit(call *hooks.AgentCall, base string) (deny, warn string, err error) {
	home, homeDir := "", base
	if a.dir != "" {
		homeDir = a.dir
	}
	if _, cd, ok := gitstore.WorkTreeOf(hooks.RealPath(homeDir)); ok {
		home = hooks.RealPath(cd)
	}
	type repoPaths struct {
		workTree string
		rels     []string
	}
	targets, err := hooks.ResolveEditPaths(call.Paths, base)
	if err != nil {
		return "", "", err
	}
	var order []string
	repos := map[string]*repoPaths{}
	for _, t := range targets {
		for _, tp := range t.Trees {
			g := repos[tp.CommonDir]
			if g == nil {
				g = &repoPaths{workTree: tp.WorkTree}
				repos[tp.CommonDir] = g
				order = append(order, tp.CommonDir)
			}
			if !slices.Contains(g.rels, tp.Rel) {
				g.rels = append(g.rels, tp.Rel)
			}
		}
	}
	var denials, warnings []string
	for _, cd := range order {
		g := repos[cd]
		a.dir = g.workTree
		c, err := a.client(true)
		var d *lease.EditDecision
		if err == nil {
			d, err = c.EditCheck(g.rels)
		}
		if errs.CodeOf(err) == errs.NotInitialized && cd != home {
			continue // a repository that keeps no ledger
		}
		if err != nil {
			return "", "", err
		}
		if d.Refused() {
			denials = append(denials, refusal(c.Actor, call.SessionID, d, c.L.Now()))
			continue
		}
		// The edit is allowed on live leases whatever a renewal does: a
		// failed renewal only leaves a lease to expire sooner.
		c.RenewAging(d.Aging)
		if w := d.Warned(); len(w) > 0 {
			warnings = append(warnings, unleasedWarning(w))
		}
	}
	return strings.Join(denials, "\n"), strings.Join(warnings, "\n"), nil
}

// editBase is the directory a call's relative paths are taken against: the
// payload's cwd, else Cursor's first workspace root, else the guard's own
// working directory. One that is not an existing absolute directory is an
// error: where the harness would write is then unknown.
func editBase(call *hooks.AgentCall) (string, error) {
	base := call.Cwd
	if base == "" && len(call.Roots) > 0 {
		base = call.Roots[0]
	}
	if base == "" {
		return os.Getwd()
	}
	if fi, err := os.Stat(base); err != nil || !fi.IsDir() || !filepath.IsAbs(base) {
		return "", errs.New(errs.Usage, "the payload's working directory %q is not an existing absolute directory", base)
	}
	return base, nil
}

// unleasedWarning is the warning for paths nobody holds under edit_leases
// warn.
func unleasedWarning(paths []string) string {
	return fmt.Sprintf("tally: %s leased to nobody; this ledger's policy asks for a lease before an edit (edit_leases warn): tally lock %s",
		strings.Join(paths, ", "), strings.Join(paths, " "))
}

// openAt makes the client open the repository at dir, the payload's
// working directory, unless -C named one (else the process's own).
func (a *app) openAt(dir string) {
	switch {
	case a.dir != "":
	case dir != "":
		a.dir = dir
	default:
		a.dir = "."
	}
}

// failed is the refusal of a guard that could not decide.
func failed(err error) string {
	e := errs.From(err)
	return fmt.Sprintf("tally guard could not check this edit against the leases, so it is refused: %s: %s", e.Code, e.Message)
}

// refusal says why d refuses, path by path: each holder, its pattern or
// cell, epoch and time left, and what to do instead.
func refusal(actor, session string, d *lease.EditDecision, now time.Time) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tally refused this change for %s", actor)
	if session != "" {
		fmt.Fprintf(&b, " (session %s)", session)
	}
	b.WriteString(":")
	for _, p := range d.Paths {
		for _, h := range p.Others {
			left := "expiry unknown"
			if exp, err := chain.ParseTime(h.ExpiresAt); err == nil {
				left = exp.Sub(now).Round(time.Second).String() + " left"
			}
			if _, isCell := h.Cell(); isCell {
				fmt.Fprintf(&b, "\n- %s is held by %s through %s (its paths %s, epoch %d, %s, until %s). Work on another cell: tally next.",
					p.Path, h.Actor, h.Source, h.Pattern, h.Epoch, left, h.ExpiresAt)
			} else {
				fmt.Fprintf(&b, "\n- %s is held by %s: lock on %s (epoch %d, %s, until %s). Wait for it with tally lock --wait 10m %s, or work elsewhere (tally locks lists the holds).",
					p.Path, h.Actor, h.Pattern, h.Epoch, left, h.ExpiresAt, h.Pattern)
			}
		}
		if p.Unheld() && d.Unleased == lease.Enforce {
			fmt.Fprintf(&b, "\n- %s is leased to nobody, and this ledger's policy says edits need a lease (edit_leases enforce). Take one: tally lock %s, or claim a cell whose paths cover it (tally next).",
				p.Path, p.Path)
		}
	}
	return b.String()
}

// sessionContext is what the agent is told at session start; a failure is
// told too (the next edit is refused for it).
func (a *app) sessionContext(call *hooks.AgentCall) string {
	a.openAt(call.Cwd)
	c, err := a.client(true)
	var v *tally.SessionView
	if err == nil {
		v, err = c.SessionStart()
	}
	if err != nil {
		return fmt.Sprintf("tally: the lease ledger could not be read (%s: %s); edits will be refused until it can.",
			errs.From(err).Code, errs.From(err).Message)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "tally: this repository's edits are checked against its lease ledger; you act as %s. ", v.Actor)
	b.WriteString("An edit of a path another actor holds is refused; take a lease before you edit (tally lock PATH, or tally claim --next).\n")
	if len(v.Holds) == 0 {
		b.WriteString("Your live leases: none.\n")
	} else {
		b.WriteString("Your live leases:\n")
		for _, h := range v.Holds {
			fmt.Fprintf(&b, "- %s (%s, epoch %d, until %s)\n", h.Pattern, h.Source, h.Epoch, h.ExpiresAt)
		}
	}
	if len(v.Ready) == 0 {
		b.WriteString("Ready cells: none.")
		return b.String()
	}
	b.WriteString("Ready cells (tally claim --next takes the first):")
	for _, r := range v.Ready {
		fmt.Fprintf(&b, "\n- %s/%s", r.Wave, r.Cell)
		if r.Expired {
			b.WriteString(" (its holder's lease expired)")
		}
	}
	if v.More {
		b.WriteString("\n- … more: tally next")
	}
	return b.String()
}

// sessionEnd ends the session as the policy says; what it released is
// reported on stderr.
func (a *app) sessionEnd(call *hooks.AgentCall) string {
	a.openAt(call.Cwd)
	c, err := a.client(true)
	var released []lease.PathHold
	if err == nil {
		released, err = c.SessionEnd()
	}
	if err != nil {
		return fmt.Sprintf("tally: session end: %s: %s (the leases end with their TTL)", errs.From(err).Code, errs.From(err).Message)
	}
	if len(released) == 0 {
		return ""
	}
	var names []string
	for _, h := range released {
		names = append(names, h.Pattern+" ("+h.Source+")")
	}
	return "tally: released " + strings.Join(names, ", ")
}

// guardAnswer writes the guard's answers in one harness's form (FORMAT.md
// §9c, "Answers").
type guardAnswer struct {
	agent     string
	out, errw io.Writer
}

func (g guardAnswer) json(v any) {
	b, _ := json.Marshal(v) // maps of strings: cannot fail
	fmt.Fprintf(g.out, "%s\n", b)
}

// allow lets the edit through, with warning (if any) shown.
func (g guardAnswer) allow(warning string) error {
	switch g.agent {
	case hooks.AgentCursor:
		m := map[string]string{"permission": "allow"}
		if warning != "" {
			m["agent_message"], m["user_message"] = warning, warning
		}
		g.json(m)
	case hooks.AgentOpencode:
		m := map[string]string{"decision": "allow"}
		if warning != "" {
			m["warning"] = warning
		}
		g.json(m)
	default:
		m := map[string]string{}
		if warning != "" {
			m["systemMessage"] = warning
		}
		g.json(m)
	}
	return nil
}

// deny refuses the edit. Exit 2 with the reason on stderr is a refusal to
// Claude Code, Codex and Gemini CLI even where stdout is not read; Cursor
// and the opencode plugin read the JSON.
func (g guardAnswer) deny(reason string) error {
	switch g.agent {
	case hooks.AgentCursor:
		g.json(map[string]string{"permission": "deny", "agent_message": reason, "user_message": reason})
		return nil
	case hooks.AgentOpencode:
		g.json(map[string]string{"decision": "deny", "reason": reason})
	default:
		fmt.Fprintln(g.errw, reason)
	}
	return exitCode(2)
}

// context answers a session start with text for the agent.
func (g guardAnswer) context(text string) error {
	switch g.agent {
	case hooks.AgentCursor:
		g.json(map[string]string{"additional_context": text})
	case hooks.AgentOpencode:
		g.json(map[string]string{"decision": "allow", "context": text})
	default:
		g.json(map[string]any{"hookSpecificOutput": map[string]string{"hookEventName": "SessionStart", "additionalContext": text}})
	}
	return nil
}

// ended answers a session end; note goes to stderr.
func (g guardAnswer) ended(note string) error {
	if note != "" {
		fmt.Fprintln(g.errw, note)
	}
	g.json(map[string]string{})
	return nil
}
