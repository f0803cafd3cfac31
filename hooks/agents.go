package hooks

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"github.com/tally-dev/tally/errs"
)

// Agent hooks: each agent harness runs a project hook before a tool edits a
// file, and refuses the edit when the hook says so. InstallAgent writes that
// hook into the harness's project configuration in the work tree, merged
// into what the user has there; the hook runs `tally guard --agent NAME`
// with the harness's payload on stdin (DESIGN.md "Agent harness hooks").
//
// The harnesses fail open: Claude Code, Codex and Gemini CLI read a missing
// program, a crash or any exit but 2 as "allow". So the hook command names
// tally by absolute path, like the git shims, and exits 2 with a reason when
// that program is gone; opencode's plugin throws unless tally answers an
// explicit allow; Cursor's entry sets failClosed.

// agentEvent is one hook a harness runs: its event name and the tools it
// matches ("" for every occasion of the event).
type agentEvent struct{ Event, Matcher string }

// agentSpec is where and how a harness reads its project hooks.
type agentSpec struct {
	File   string       // relative to the work tree
	Events []agentEvent // for a JSON configuration: the hooks under its "hooks" object
	// Flat: entries are Cursor's {command, matcher, failClosed}; otherwise
	// the Claude shape {matcher, hooks: [{type: "command", command}]} that
	// Codex and Gemini CLI share.
	Flat bool
	// Plugin: the file is a module tally owns whole (opencode).
	Plugin bool
}

// specOf is where agent reads its project hooks (a zero File for a name
// tally does not know). A function, not a map: every tally process runs
// the package's initializers, and a map literal is built there.
func specOf(agent string) agentSpec {
	switch agent {
	case AgentClaude:
		return agentSpec{File: ".claude/settings.json", Events: []agentEvent{
			{"PreToolUse", "Edit|Write|MultiEdit|NotebookEdit"}, {"SessionStart", ""}, {"SessionEnd", ""}}}
	case AgentCodex: // Codex names its edit tool apply_patch, and has no end event.
		return agentSpec{File: ".codex/hooks.json", Events: []agentEvent{
			{"PreToolUse", "apply_patch"}, {"SessionStart", ""}}}
	case AgentGemini:
		return agentSpec{File: ".gemini/settings.json", Events: []agentEvent{
			{"BeforeTool", "write_file|replace"}, {"SessionStart", ""}, {"SessionEnd", ""}}}
	case AgentOpencode:
		return agentSpec{File: ".opencode/plugins/tally-guard.js", Plugin: true}
	case AgentCursor: // its editing tools; the guard refuses a writing tool it does not know
		return agentSpec{File: ".cursor/hooks.json", Flat: true, Events: []agentEvent{
			{"preToolUse", "Write|StrReplace|Edit|MultiEdit|Delete|EditNotebook|TabWrite"}, {"sessionStart", ""}, {"sessionEnd", ""}}}
	}
	return agentSpec{}
}

// ParseAgents reads --agent values: names, comma lists, or "all".
func ParseAgents(values []string) ([]string, error) {
	var out []string
	for _, v := range values {
		for _, name := range strings.Split(v, ",") {
			name = strings.TrimSpace(name)
			switch {
			case name == "all":
				for _, a := range Agents {
					if !slices.Contains(out, a) {
						out = append(out, a)
					}
				}
			case specOf(name).File == "":
				return nil, errs.New(errs.Usage, "--agent %q: not a harness tally knows (%s, or all)", name, strings.Join(Agents, ", "))
			case !slices.Contains(out, name):
				out = append(out, name)
			}
		}
	}
	return out, nil
}

// agentMarker is in every command tally's agent hooks run and in the
// opencode plugin: it is how install, uninstall and status know tally's own
// entries among the user's, whatever binary path they name.
const agentMarker = `"$tally_bin" guard --agent `

// agentCommand is the hook command for agent: the tally binary by absolute
// path, and a refusal in the form every shell-hook harness reads as deny
// (exit 2, the reason on stderr) when that binary is gone.
func agentCommand(agent, tallyPath string) string {
	return fmt.Sprintf(`tally_bin=%s; [ -x "$tally_bin" ] || { echo "tally: the tally binary $tally_bin is missing or not executable, so the edit guard refuses (tally hooks install --agent %s)" >&2; exit 2; }; exec %s%s`,
		shellQuote(tallyPath), agent, agentMarker, agent)
}

// commandBinary is the tally binary an agent hook command names ("" if the
// command is not tally's).
func commandBinary(cmd string) string {
	if !strings.Contains(cmd, agentMarker) {
		return ""
	}
	v, ok := strings.CutPrefix(cmd, binLine)
	if !ok {
		return ""
	}
	v, _, _ = strings.Cut(v, "; ")
	return shimBinary(binLine + v)
}

// opencodeTools are opencode's tools that write files; the plugin asks
// tally about these alone, as the other harnesses' matchers do.
var opencodeTools = []string{"edit", "write", "apply_patch", "patch", "multiedit"}

// opencodePlugin is the plugin module: before each writing tool it runs
// tally guard with the payload on stdin and lets the tool run only on an
// explicit allow with exit 0. Anything else (tally gone, a crash, an answer
// it cannot read) throws, and opencode gives the thrown message to the model
// as the tool's result.
func opencodePlugin(tallyPath string) string {
	bin, _ := marshal(tallyPath)
	tools, _ := marshal(opencodeTools)
	return `// Written by ` + "`tally hooks install --agent opencode`" + `; remove with ` + "`tally hooks uninstall --agent opencode`" + `.
// Every edit asks the tally ledger first: ` + agentMarker + `opencode
import { spawnSync } from "node:child_process";

const tallyBin = ` + string(bin) + `;
const writingTools = new Set(` + string(tools) + `);

export const TallyGuard = async ({ directory }) => ({
  "tool.execute.before": async (input, output) => {
    if (!writingTools.has(input.tool)) return;
    const payload = JSON.stringify({
      hook_event_name: "tool.execute.before",
      tool: input.tool,
      session_id: input.sessionID,
      cwd: directory,
      tool_input: output.args,
    });
    const run = spawnSync(tallyBin, ["guard", "--agent", "opencode"], { input: payload, encoding: "utf8", cwd: directory });
    if (run.error) {
      throw new Error("tally: the tally binary " + tallyBin + " is missing or not executable (" + run.error.message + "), so the edit guard refuses (tally hooks install --agent opencode)");
    }
    let answer;
    try {
      answer = JSON.parse(run.stdout);
    } catch {
      answer = undefined;
    }
    if (run.status === 0 && answer && answer.decision === "allow") return;
    const reason = (answer && answer.reason) || run.stderr.trim() || "tally guard exited " + run.status + " without an answer";
    throw new Error(reason);
  },
});
`
}

// AgentChange is what InstallAgent or UninstallAgent did to one harness's file.
type AgentChange struct {
	Agent string `json:"agent"`
	File  string `json:"file"`
	// Action: "created", "updated", "unchanged" (install); "removed",
	// "deleted" (the file went with the entries), "absent" (uninstall).
	Action string `json:"action"`
}

// InstallAgent writes agent's hooks, calling the tally binary at tallyPath
// (absolute), into the harness's project configuration under workTree. A
// JSON file is merged: the user's keys keep their order and their values
// their bytes (only whitespace is rewritten, to two-space indentation);
// tally's entries go last under each event, replacing tally entries that
// name another binary. When every entry is already there the file is not
// written at all, so running install again changes nothing. A file that is
// not a JSON object, or an opencode plugin of that name that is not tally's,
// is refused, never overwritten.
func InstallAgent(workTree, agent, tallyPath string) (AgentChange, error) {
	spec := specOf(agent)
	path := filepath.Join(workTree, spec.File)
	ch := AgentChange{Agent: agent, File: path}
	old, err := os.ReadFile(path)
	exists := err == nil
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return ch, err
	}
	var want []byte
	if spec.Plugin {
		if exists && !bytes.Contains(old, []byte(agentMarker)) {
			return ch, errs.New(errs.Usage, "%s exists and is not tally's: move it aside, then install again", path)
		}
		want = []byte(opencodePlugin(tallyPath))
	} else {
		doc := &jsonObject{}
		if exists {
			if doc, err = parseObject(old); err != nil {
				return ch, errs.New(errs.Usage, "%s: %v: fix it by hand, then install again", path, err)
			}
		} else if spec.Flat {
			doc.set("version", json.RawMessage("1"))
		}
		if want, err = installEntries(doc, spec, agentCommand(agent, tallyPath)); err != nil {
			return ch, errs.New(errs.Usage, "%s: %v: fix it by hand, then install again", path, err)
		}
		if want == nil {
			want = old
		}
	}
	switch {
	case exists && bytes.Equal(old, want):
		ch.Action = "unchanged"
		return ch, nil
	case exists:
		ch.Action = "updated"
	default:
		ch.Action = "created"
	}
	return ch, writeFileAtomic(path, want)
}

// installEntries returns doc with tally's entries for spec, rendered, or
// nil when they are all there already.
func installEntries(doc *jsonObject, spec agentSpec, command string) ([]byte, error) {
	eventsRaw, _ := doc.get("hooks")
	events := &jsonObject{}
	if eventsRaw != nil {
		var err error
		if events, err = parseObject(eventsRaw); err != nil {
			return nil, fmt.Errorf("hooks: %v", err)
		}
	}
	complete := true
	for _, ev := range spec.Events {
		items, err := eventItems(events, ev.Event)
		if err != nil {
			return nil, err
		}
		if !slices.ContainsFunc(items, func(it json.RawMessage) bool { return isEntry(it, spec, ev, command) }) {
			complete = false
		}
	}
	if complete && eventsRaw != nil {
		return nil, nil
	}
	removeEntries(events, spec)
	for _, ev := range spec.Events {
		items, _ := eventItems(events, ev.Event)
		entry, err := newEntry(spec, ev, command)
		if err != nil {
			return nil, err
		}
		raw, err := marshal(append(items, entry))
		if err != nil {
			return nil, err
		}
		events.set(ev.Event, raw)
	}
	raw, err := events.MarshalJSON()
	if err != nil {
		return nil, err
	}
	doc.set("hooks", raw)
	return doc.render()
}

// eventItems reads the array under event (nil if absent).
func eventItems(events *jsonObject, event string) ([]json.RawMessage, error) {
	raw, ok := events.get(event)
	if !ok {
		return nil, nil
	}
	var items []json.RawMessage
	if err := json.Unmarshal(raw, &items); err != nil {
		return nil, fmt.Errorf("hooks.%s is not an array", event)
	}
	return items, nil
}

// commandHook is one hook of the Claude shape, and Cursor's entry.
type commandHook struct {
	Type       string `json:"type,omitempty"`
	Command    string `json:"command"`
	Matcher    string `json:"matcher,omitempty"`
	FailClosed bool   `json:"failClosed,omitempty"`
}

// hookGroup is an entry of the Claude shape.
type hookGroup struct {
	Matcher string        `json:"matcher,omitempty"`
	Hooks   []commandHook `json:"hooks"`
}

func newEntry(spec agentSpec, ev agentEvent, command string) (json.RawMessage, error) {
	if spec.Flat { // failClosed on the edit event: a session hook refuses nothing
		return marshal(commandHook{Command: command, Matcher: ev.Matcher, FailClosed: ev.Matcher != ""})
	}
	return marshal(hookGroup{Matcher: ev.Matcher, Hooks: []commandHook{{Type: "command", Command: command}}})
}

// isEntry reports whether item is exactly the entry install writes for ev.
func isEntry(item json.RawMessage, spec agentSpec, ev agentEvent, command string) bool {
	want, err := newEntry(spec, ev, command)
	if err != nil {
		return false
	}
	var a, b any
	return json.Unmarshal(item, &a) == nil && json.Unmarshal(want, &b) == nil && jsonEqual(a, b)
}

func jsonEqual(a, b any) bool {
	x, _ := marshal(a) // maps are written with sorted keys: a canonical form
	y, _ := marshal(b)
	return bytes.Equal(x, y)
}

// removeEntries takes tally's hooks out of every event of spec in events:
// Cursor entries whose command is tally's; in the Claude shape, tally's
// commands from each group, and a group left with no hooks. An event whose
// array tally's removal empties is removed. It reports whether it removed
// anything. Items it cannot read are the user's and stay.
func removeEntries(events *jsonObject, spec agentSpec) bool {
	removed := false
	for _, ev := range spec.Events {
		items, err := eventItems(events, ev.Event)
		if err != nil || items == nil {
			continue
		}
		var kept []json.RawMessage
		changed := false
		for _, item := range items {
			next, ch := withoutTally(item, spec.Flat)
			changed = changed || ch
			if next != nil {
				kept = append(kept, next)
			}
		}
		removed = removed || changed
		switch {
		case !changed:
		case len(kept) == 0:
			events.del(ev.Event)
		default:
			raw, _ := marshal(kept)
			events.set(ev.Event, raw)
		}
	}
	return removed
}

// withoutTally returns item without tally's hook (nil when nothing of it is
// left) and whether it changed.
func withoutTally(item json.RawMessage, flat bool) (json.RawMessage, bool) {
	obj, err := parseObject(item)
	if err != nil {
		return item, false
	}
	if flat {
		var cmd string
		if raw, ok := obj.get("command"); ok && json.Unmarshal(raw, &cmd) == nil && commandBinary(cmd) != "" {
			return nil, true
		}
		return item, false
	}
	raw, ok := obj.get("hooks")
	var hooks []json.RawMessage
	if !ok || json.Unmarshal(raw, &hooks) != nil {
		return item, false
	}
	var kept []json.RawMessage
	for _, h := range hooks {
		var c commandHook
		if json.Unmarshal(h, &c) == nil && commandBinary(c.Command) != "" {
			continue
		}
		kept = append(kept, h)
	}
	if len(kept) == len(hooks) {
		return item, false
	}
	if len(kept) == 0 {
		return nil, true
	}
	raw, _ = marshal(kept)
	obj.set("hooks", raw)
	out, _ := obj.MarshalJSON()
	return out, true
}

// UninstallAgent removes what InstallAgent wrote for agent under workTree,
// leaving everything of the user's. A configuration file left with nothing
// but what install adds to a new one ({} or Cursor's version) is deleted,
// and so is a directory that leaves empty; the opencode plugin is deleted
// if it is tally's.
func UninstallAgent(workTree, agent string) (AgentChange, error) {
	spec := specOf(agent)
	path := filepath.Join(workTree, spec.File)
	ch := AgentChange{Agent: agent, File: path, Action: "absent"}
	old, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return ch, nil
	}
	if err != nil {
		return ch, err
	}
	if spec.Plugin {
		if !bytes.Contains(old, []byte(agentMarker)) {
			return ch, nil
		}
		ch.Action = "deleted"
		return ch, removeWithDirs(workTree, path)
	}
	doc, err := parseObject(old)
	if err != nil {
		return ch, nil // not JSON tally could have written into
	}
	eventsRaw, ok := doc.get("hooks")
	if !ok {
		return ch, nil
	}
	events, err := parseObject(eventsRaw)
	if err != nil || !removeEntries(events, spec) {
		return ch, nil
	}
	if len(events.keys) == 0 {
		doc.del("hooks")
	} else {
		raw, _ := events.MarshalJSON()
		doc.set("hooks", raw)
	}
	if emptyConfig(doc, spec) {
		ch.Action = "deleted"
		return ch, removeWithDirs(workTree, path)
	}
	out, err := doc.render()
	if err != nil {
		return ch, err
	}
	ch.Action = "removed"
	return ch, writeFileAtomic(path, out)
}

// emptyConfig reports whether doc holds only what install puts in a new file.
func emptyConfig(doc *jsonObject, spec agentSpec) bool {
	if spec.Flat && len(doc.keys) == 1 {
		v, _ := doc.get("version")
		return string(v) == "1"
	}
	return len(doc.keys) == 0
}

// removeWithDirs removes path and then its directories up to workTree that
// are left empty (install makes .claude/ and the like when they are not
// there).
func removeWithDirs(workTree, path string) error {
	if err := os.Remove(path); err != nil {
		return err
	}
	for dir := filepath.Dir(path); dir != workTree && strings.HasPrefix(dir, workTree+string(filepath.Separator)); dir = filepath.Dir(dir) {
		if os.Remove(dir) != nil { // not empty: the user's
			break
		}
	}
	return nil
}

func writeFileAtomic(path string, data []byte) error {
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return err
	}
	mode := os.FileMode(0o644)
	if st, err := os.Stat(path); err == nil {
		mode = st.Mode().Perm()
	}
	tmp := path + ".tally-tmp"
	if err := os.WriteFile(tmp, data, mode); err != nil {
		return err
	}
	if err := os.Rename(tmp, path); err != nil {
		os.Remove(tmp)
		return err
	}
	return nil
}

// jsonObject is a JSON object that keeps its keys in order and its values
// as they were read, so that a merge rewrites nothing of the user's but
// whitespace.
type jsonObject struct {
	keys []string
	vals map[string]json.RawMessage
}

func parseObject(raw []byte) (*jsonObject, error) {
	dec := json.NewDecoder(bytes.NewReader(raw))
	if tok, err := dec.Token(); err != nil || tok != json.Delim('{') {
		return nil, errors.New("not a JSON object")
	}
	o := &jsonObject{}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			return nil, err
		}
		var v json.RawMessage
		if err := dec.Decode(&v); err != nil {
			return nil, err
		}
		o.set(tok.(string), v)
	}
	if _, err := dec.Token(); err != nil {
		return nil, err
	}
	if _, err := dec.Token(); err == nil {
		return nil, errors.New("more than one JSON value")
	}
	return o, nil
}

func (o *jsonObject) get(k string) (json.RawMessage, bool) {
	v, ok := o.vals[k]
	return v, ok
}

// set replaces k's value where k is, or adds k last.
func (o *jsonObject) set(k string, v json.RawMessage) {
	if o.vals == nil {
		o.vals = map[string]json.RawMessage{}
	}
	if _, ok := o.vals[k]; !ok {
		o.keys = append(o.keys, k)
	}
	o.vals[k] = v
}

func (o *jsonObject) del(k string) {
	delete(o.vals, k)
	o.keys = slices.DeleteFunc(o.keys, func(s string) bool { return s == k })
}

func (o *jsonObject) MarshalJSON() ([]byte, error) {
	var b bytes.Buffer
	b.WriteByte('{')
	for i, k := range o.keys {
		if i > 0 {
			b.WriteByte(',')
		}
		key, _ := marshal(k)
		b.Write(key)
		b.WriteByte(':')
		b.Write(o.vals[k])
	}
	b.WriteByte('}')
	return b.Bytes(), nil
}

// render is the file's text: two-space indentation (json.Indent changes
// only whitespace, so strings keep their escapes) and a final newline.
func (o *jsonObject) render() ([]byte, error) {
	raw, _ := o.MarshalJSON()
	var b bytes.Buffer
	if err := json.Indent(&b, raw, "", "  "); err != nil {
		return nil, err
	}
	b.WriteByte('\n')
	return b.Bytes(), nil
}

// marshal is json.Marshal without HTML escaping, which would turn the
// hook's ">&2" and the user's own "<", ">" and "&" into \u escapes.
func marshal(v any) (json.RawMessage, error) {
	var b bytes.Buffer
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return bytes.TrimSuffix(b.Bytes(), []byte("\n")), nil
}

// AgentStatus is what `tally hooks status` says about one harness's hooks.
// Installed: tally's hook is there for every event install writes. Active:
// installed, naming a tally binary that exists, with no problem found.
// Needs: what the harness itself still wants before it runs project hooks,
// which tally can check only in part (Codex's hook trust it cannot see).
type AgentStatus struct {
	Agent        string   `json:"agent"`
	File         string   `json:"file"`
	Installed    bool     `json:"installed"`
	Binary       string   `json:"binary,omitempty"`
	BinaryExists bool     `json:"binary_exists"`
	Active       bool     `json:"active"`
	Missing      []string `json:"missing_events,omitempty"` // events without tally's hook
	Problems     []string `json:"problems,omitempty"`
	Needs        []string `json:"needs,omitempty"`
}

// AgentTrust is where the harnesses record what the user trusts: Codex's
// config.toml and Gemini CLI's trustedFolders.json.
type AgentTrust struct {
	CodexConfig   string // $CODEX_HOME/config.toml, else ~/.codex/config.toml
	GeminiTrusted string // ~/.gemini/trustedFolders.json
	// GeminiEnvTrust: GEMINI_CLI_TRUST_WORKSPACE=true in this environment.
	GeminiEnvTrust bool
}

// DefaultAgentTrust finds those files from the environment.
func DefaultAgentTrust(getenv func(string) string) AgentTrust {
	home, _ := os.UserHomeDir()
	codex := getenv("CODEX_HOME")
	if codex == "" {
		codex = filepath.Join(home, ".codex")
	}
	return AgentTrust{
		CodexConfig:    filepath.Join(codex, "config.toml"),
		GeminiTrusted:  filepath.Join(home, ".gemini", "trustedFolders.json"),
		GeminiEnvTrust: getenv("GEMINI_CLI_TRUST_WORKSPACE") == "true",
	}
}

// StatusAgents reports every harness's hooks under workTree.
func StatusAgents(workTree string, trust AgentTrust) []AgentStatus {
	var out []AgentStatus
	for _, agent := range Agents {
		out = append(out, statusAgent(workTree, agent, trust))
	}
	return out
}

func statusAgent(workTree, agent string, trust AgentTrust) AgentStatus {
	spec := specOf(agent)
	s := AgentStatus{Agent: agent, File: filepath.Join(workTree, spec.File)}
	b, err := os.ReadFile(s.File)
	if err != nil {
		return s
	}
	if spec.Plugin {
		if !bytes.Contains(b, []byte(agentMarker)) {
			s.Problems = append(s.Problems, s.File+" is not tally's plugin")
			return s
		}
		s.Installed = true
		s.Binary = pluginBinary(string(b))
	} else {
		s.Binary, s.Missing = installedEvents(b, spec)
		s.Installed = s.Binary != "" && len(s.Missing) == 0
		if s.Binary == "" {
			return s
		}
		if len(s.Missing) > 0 {
			s.Problems = append(s.Problems, "no tally hook for "+strings.Join(s.Missing, ", ")+": run tally hooks install --agent "+agent)
		}
	}
	s.BinaryExists = filepath.IsAbs(s.Binary) && executable(s.Binary)
	if !s.BinaryExists {
		s.Problems = append(s.Problems, "the tally binary "+s.Binary+" is missing or not executable: every edit is refused (reinstall with --tally PATH)")
	}
	s.Needs = trust.needs(agent, workTree)
	s.Active = s.Installed && len(s.Problems) == 0
	return s
}

// installedEvents returns the binary tally's hooks name in a configuration
// file and the events of spec that have no tally hook.
func installedEvents(b []byte, spec agentSpec) (string, []string) {
	doc, err := parseObject(b)
	if err != nil {
		return "", nil
	}
	raw, _ := doc.get("hooks")
	events, err := parseObject(raw)
	if err != nil {
		return "", nil
	}
	binary := ""
	var missing []string
	for _, ev := range spec.Events {
		items, _ := eventItems(events, ev.Event)
		found := ""
		for _, item := range items {
			if found = itemBinary(item, spec.Flat); found != "" {
				break
			}
		}
		if found == "" {
			missing = append(missing, ev.Event)
		} else if binary == "" {
			binary = found
		}
	}
	return binary, missing
}

// itemBinary is the tally binary an event's entry runs ("" if none).
func itemBinary(item json.RawMessage, flat bool) string {
	if flat {
		var c commandHook
		if json.Unmarshal(item, &c) == nil {
			return commandBinary(c.Command)
		}
		return ""
	}
	var g hookGroup
	if json.Unmarshal(item, &g) != nil {
		return ""
	}
	for _, h := range g.Hooks {
		if bin := commandBinary(h.Command); bin != "" {
			return bin
		}
	}
	return ""
}

// pluginBinary reads the tallyBin constant of the opencode plugin.
func pluginBinary(text string) string {
	for _, l := range strings.Split(text, "\n") {
		if v, ok := strings.CutPrefix(l, "const tallyBin = "); ok {
			var bin string
			if json.Unmarshal([]byte(strings.TrimSuffix(v, ";")), &bin) == nil {
				return bin
			}
		}
	}
	return ""
}

// needs lists what agent's harness still wants before it runs the hooks in
// workTree. Codex skips hooks it has not been told to trust, and the whole
// .codex/ of a project that is not trusted, without a word; Gemini CLI runs
// project hooks only in a trusted workspace.
func (t AgentTrust) needs(agent, workTree string) []string {
	switch agent {
	case AgentCodex:
		out := []string{"Codex runs only hooks the user trusted: review them with /hooks in codex (or run codex with --dangerously-bypass-hook-trust)"}
		if !codexTrusts(t.CodexConfig, workTree) {
			out = append(out, "Codex ignores .codex/ of a project that is not trusted: add [projects."+tomlQuote(workTree)+"] trust_level = \"trusted\" to "+t.CodexConfig+" (codex asks on first run)")
		}
		return out
	case AgentGemini:
		if !t.GeminiEnvTrust && !geminiTrusts(t.GeminiTrusted, workTree) {
			return []string{"Gemini CLI runs project hooks only in a trusted workspace: trust " + workTree + " (/permissions in gemini, or " + t.GeminiTrusted + "), or set GEMINI_CLI_TRUST_WORKSPACE=true"}
		}
	}
	return nil
}

// codexTrusts reports whether Codex's config.toml trusts the project at
// dir: a [projects."<dir or a parent>"] table with trust_level = "trusted".
// It reads only those lines, which Codex writes in that one form.
func codexTrusts(config, dir string) bool {
	b, err := os.ReadFile(config)
	if err != nil {
		return false
	}
	table := ""
	for _, l := range strings.Split(string(b), "\n") {
		l = strings.TrimSpace(l)
		if strings.HasPrefix(l, "[") {
			table = l
			continue
		}
		k, v, ok := strings.Cut(l, "=")
		if !ok || strings.TrimSpace(k) != "trust_level" || strings.TrimSpace(v) != `"trusted"` {
			continue
		}
		for d := dir; ; d = filepath.Dir(d) {
			if table == "[projects."+tomlQuote(d)+"]" {
				return true
			}
			if d == filepath.Dir(d) {
				break
			}
		}
	}
	return false
}

func tomlQuote(s string) string {
	q, _ := marshal(s)
	return string(q)
}

// geminiTrusts reports whether trustedFolders.json trusts dir: the folder
// itself (TRUST_FOLDER), or a folder whose parent it is (TRUST_PARENT).
func geminiTrusts(file, dir string) bool {
	b, err := os.ReadFile(file)
	if err != nil {
		return false
	}
	var folders map[string]string
	if json.Unmarshal(b, &folders) != nil {
		return false
	}
	for path, level := range folders {
		switch level {
		case "TRUST_FOLDER":
			if dir == path || strings.HasPrefix(dir, path+string(filepath.Separator)) {
				return true
			}
		case "TRUST_PARENT":
			if parent := filepath.Dir(path); dir == parent || strings.HasPrefix(dir, parent+string(filepath.Separator)) {
				return true
			}
		}
	}
	return false
}
