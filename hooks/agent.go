package hooks

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"unicode"

	"github.com/tally-dev/tally/errs"
)

// The agent harnesses whose hooks call `tally guard` (FORMAT.md §9c).
const (
	AgentClaude   = "claude"
	AgentCodex    = "codex"
	AgentGemini   = "gemini"
	AgentOpencode = "opencode"
	AgentCursor   = "cursor"
)

// Agents lists the harnesses the guard answers.
var Agents = []string{AgentClaude, AgentCodex, AgentGemini, AgentOpencode, AgentCursor}

// Guard events, whatever each harness calls them.
const (
	EventPreEdit      = "pre-edit"
	EventSessionStart = "session-start"
	EventSessionEnd   = "session-end"
)

// AgentCall is what the guard reads from one hook payload.
type AgentCall struct {
	Agent     string
	Event     string
	Tool      string
	SessionID string
	// Cwd is the payload's working directory ("" if it gave none); Roots
	// are Cursor's workspace_roots.
	Cwd   string
	Roots []string
	// Writes: the tool writes files, at Paths (as the payload gives them:
	// absolute, or relative to Cwd).
	Writes bool
	Paths  []string
}

// agentPayload is the union of the harnesses' payload fields the guard
// reads.
type agentPayload struct {
	Event          string          `json:"hook_event_name"`
	ToolName       string          `json:"tool_name"`
	Tool           string          `json:"tool"` // the opencode plugin's
	ToolInput      json.RawMessage `json:"tool_input"`
	SessionID      string          `json:"session_id"`
	ConversationID string          `json:"conversation_id"` // Cursor's session
	Cwd            string          `json:"cwd"`
	WorkspaceRoots []string        `json:"workspace_roots"`
}

// toolInput is the union of the path-bearing fields of the writing tools.
type toolInput struct {
	FilePath     string `json:"file_path"`
	NotebookPath string `json:"notebook_path"`
	Path         string `json:"path"`
	TargetFile   string `json:"target_file"`
	FilePathJS   string `json:"filePath"`
	Command      any    `json:"command"` // Codex apply_patch: the patch (a string, or an argv)
	Patch        string `json:"patch"`
	PatchText    string `json:"patchText"`
	Input        string `json:"input"` // Codex's custom apply_patch tool
}

// harness is what the guard knows of one harness: its hook_event_name
// values and the guard's event for each; its writing tools; and the tools
// known not to write, which the guard allows. Anything else that reaches
// the guard is refused: a harness is configured to send the writers only.
type harness struct {
	events           map[string]string
	writers, readers []string
}

// harnessOf returns what the guard knows of agent's harness, built when
// asked: a package-level table would be built by the package's
// initializer, which every tally process runs (cmd/tally's
// TestStartInitializers).
func harnessOf(agent string) (harness, bool) {
	h, ok := map[string]harness{
		AgentClaude: {
			events:  map[string]string{"PreToolUse": EventPreEdit, "SessionStart": EventSessionStart, "SessionEnd": EventSessionEnd},
			writers: []string{"Edit", "Write", "MultiEdit", "NotebookEdit"},
			readers: []string{"Read", "Grep", "Glob", "LS", "Bash", "BashOutput", "KillShell", "Task", "TodoWrite",
				"WebFetch", "WebSearch", "ExitPlanMode", "NotebookRead"},
		},
		AgentCodex: {
			events:  map[string]string{"PreToolUse": EventPreEdit, "SessionStart": EventSessionStart},
			writers: []string{"apply_patch", "Edit", "Write"},
			readers: []string{"shell", "local_shell", "exec_command", "Bash", "update_plan", "view_image", "web_search", "Read"},
		},
		AgentGemini: {
			events:  map[string]string{"BeforeTool": EventPreEdit, "SessionStart": EventSessionStart, "SessionEnd": EventSessionEnd},
			writers: []string{"write_file", "replace"},
			readers: []string{"read_file", "read_many_files", "list_directory", "glob", "search_file_content", "grep",
				"run_shell_command", "web_fetch", "google_web_search", "save_memory", "write_todos"},
		},
		AgentOpencode: {
			events:  map[string]string{"tool.execute.before": EventPreEdit},
			writers: []string{"edit", "write", "multiedit", "apply_patch", "patch"},
			readers: []string{"read", "grep", "glob", "list", "bash", "task", "todowrite", "todoread", "webfetch", "websearch"},
		},
		AgentCursor: {
			events:  map[string]string{"preToolUse": EventPreEdit, "sessionStart": EventSessionStart, "sessionEnd": EventSessionEnd},
			writers: []string{"Write", "Edit", "StrReplace", "MultiEdit", "Delete", "EditNotebook", "TabWrite"},
			readers: []string{"Read", "Grep", "Glob", "LS", "Shell", "Task", "SemanticSearch", "WebSearch", "WebFetch", "TodoWrite"},
		},
	}[agent]
	return h, ok
}

// ParseAgentPayload reads one hook payload of agent. The event is the
// payload's hook_event_name where it has one, else event (the --event
// flag). A payload that is not a JSON object, an event the harness does not
// send, a tool the guard does not know, or a writing tool without a path is
// an error (the guard refuses it).
func ParseAgentPayload(agent string, raw []byte, event string) (*AgentCall, error) {
	h, ok := harnessOf(agent)
	if !ok {
		return nil, errs.New(errs.Usage, "unknown agent %q (one of %s)", agent, strings.Join(Agents, ", "))
	}
	var p agentPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, errs.New(errs.Usage, "the %s hook payload is not a JSON object: %v", agent, err)
	}
	if err := unambiguous(raw); err != nil {
		return nil, errs.New(errs.Usage, "the %s hook payload is refused: %v", agent, err)
	}
	call := &AgentCall{Agent: agent, Event: event, Tool: p.ToolName, SessionID: p.SessionID, Cwd: p.Cwd, Roots: p.WorkspaceRoots}
	if call.Tool == "" {
		call.Tool = p.Tool
	}
	if call.SessionID == "" {
		call.SessionID = p.ConversationID
	}
	if p.Event != "" {
		if call.Event, ok = h.events[p.Event]; !ok {
			return nil, errs.New(errs.Usage, "%s hook event %q is not one tally guards", agent, p.Event)
		}
	}
	switch call.Event {
	case EventSessionStart, EventSessionEnd:
		return call, nil
	case EventPreEdit:
	case "":
		return nil, errs.New(errs.Usage, "the %s hook payload names no hook_event_name and no --event was given", agent)
	default:
		return nil, errs.New(errs.Usage, "unknown event %q (pre-edit, session-start or session-end)", call.Event)
	}
	if call.Tool == "" {
		return nil, errs.New(errs.Usage, "the %s hook payload names no tool", agent)
	}
	if !slices.Contains(h.writers, call.Tool) {
		if slices.Contains(h.readers, call.Tool) {
			return call, nil
		}
		return nil, errs.New(errs.Usage, "%s tool %q is not one tally knows: it may write files, so it is refused (configure the hook to match only the writing tools)", agent, call.Tool)
	}
	call.Writes = true
	var in toolInput
	if len(p.ToolInput) == 0 || json.Unmarshal(p.ToolInput, &in) != nil {
		return nil, errs.New(errs.Usage, "%s tool %s: tool_input is not a JSON object", agent, call.Tool)
	}
	// Every path-bearing field is read, whichever the tool uses: a field
	// the harness ignores can only add a refusal, never hide a path.
	for _, f := range []string{in.FilePath, in.NotebookPath, in.Path, in.TargetFile, in.FilePathJS} {
		if f != "" && !slices.Contains(call.Paths, f) {
			call.Paths = append(call.Paths, f)
		}
	}
	for _, text := range patchTexts(in) {
		for _, f := range PatchPaths(text) {
			if !slices.Contains(call.Paths, f) {
				call.Paths = append(call.Paths, f)
			}
		}
	}
	if len(call.Paths) == 0 {
		return nil, errs.New(errs.Usage, "%s tool %s names no file path (a patch without a *** Add File:, Update File:, Delete File: or Move to: line names none)", agent, call.Tool)
	}
	return call, nil
}

// patchTexts returns every patch text of a tool's input: patchText, patch,
// input, and command as a string or each string of an argv
// (["apply_patch", PATCH]).
func patchTexts(in toolInput) []string {
	texts := []string{in.PatchText, in.Patch, in.Input}
	switch x := in.Command.(type) {
	case string:
		texts = append(texts, x)
	case []any:
		for _, e := range x {
			if s, ok := e.(string); ok {
				texts = append(texts, s)
			}
		}
	}
	return texts
}

// patchHeaders are the lines of a Codex patch that name a file it writes.
var patchHeaders = []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "}

// PatchPaths returns the files a Codex apply_patch patch writes, in order
// and without repeats: the paths of its Add, Update and Delete File lines,
// and Move to targets. It reads more lines as headers than Codex does (which
// trims a hunk's first line of white space, and finds a Move to line only
// right after its Update File line): any line that is one once trimmed, the
// marker in any case, with a CR line end (Codex's Rust lines() drops it),
// inside a heredoc or not. The path is what follows the marker, as Codex
// takes it.
func PatchPaths(patch string) []string {
	var out []string
	for line := range strings.SplitSeq(patch, "\n") {
		line = strings.TrimSpace(line)
		for _, h := range patchHeaders {
			if len(line) > len(h) && strings.EqualFold(line[:len(h)], h) {
				if p := line[len(h):]; !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		}
	}
	return out
}

// unambiguous checks that raw, a JSON text, has no object with two members
// whose names encoding/json would take for one: the same name, or names
// equal under its case folding ("file_path" and "FILE_PATH"). The guard
// would read the last of them, and a harness may use another, so the guard
// and the harness could disagree about the path.
func unambiguous(raw []byte) error {
	type frame struct {
		names     map[string]bool // folded member names; nil in an array
		valueNext bool            // in an object: a name was read, its value comes next
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	var open []*frame
	for {
		tok, err := dec.Token()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			return err
		}
		var top *frame
		if len(open) > 0 {
			top = open[len(open)-1]
		}
		if name, ok := tok.(string); ok && top != nil && top.names != nil && !top.valueNext {
			folded := foldName(name)
			if top.names[folded] {
				return fmt.Errorf("the member %q is named twice in one object (names compared as encoding/json does, case folded)", name)
			}
			top.names[folded], top.valueNext = true, true
			continue
		}
		switch tok {
		case json.Delim('{'):
			open = append(open, &frame{names: map[string]bool{}})
			continue
		case json.Delim('['):
			open = append(open, &frame{})
			continue
		case json.Delim('}'), json.Delim(']'):
			open = open[:len(open)-1]
			if len(open) > 0 {
				open[len(open)-1].valueNext = false
			}
			continue
		}
		if top != nil {
			top.valueNext = false // a scalar value read
		}
	}
}

// foldName folds a member name as encoding/json matches names to fields:
// each rune to the least of its simple case folding orbit, so "K", "k"
// and the Kelvin sign fold alike.
func foldName(name string) string {
	return strings.Map(func(r rune) rune {
		for {
			next := unicode.SimpleFold(r)
			if next <= r {
				return next
			}
			r = next
		}
	}, name)
}
