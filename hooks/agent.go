package hooks

import (
	"encoding/json"
	"slices"
	"strings"

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

// agentEvents maps each harness's hook_event_name to the guard's event.
var agentEvents = map[string]map[string]string{
	AgentClaude:   {"PreToolUse": EventPreEdit, "SessionStart": EventSessionStart, "SessionEnd": EventSessionEnd},
	AgentCodex:    {"PreToolUse": EventPreEdit, "SessionStart": EventSessionStart},
	AgentGemini:   {"BeforeTool": EventPreEdit, "SessionStart": EventSessionStart, "SessionEnd": EventSessionEnd},
	AgentCursor:   {"preToolUse": EventPreEdit, "sessionStart": EventSessionStart, "sessionEnd": EventSessionEnd},
	AgentOpencode: {"tool.execute.before": EventPreEdit},
}

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

// How a writing tool names its paths.
const (
	pathFields = iota // file_path and its kin
	patchField        // a Codex patch
)

// writers maps each harness's writing tools to how their paths are read;
// readers lists the tools known not to write, which the guard allows.
// Anything else that reaches the guard is refused: a harness is configured
// to send the writers only.
var (
	writers = map[string]map[string]int{
		AgentClaude: {"Edit": pathFields, "Write": pathFields, "MultiEdit": pathFields, "NotebookEdit": pathFields},
		AgentCodex:  {"apply_patch": patchField, "Edit": pathFields, "Write": pathFields},
		AgentGemini: {"write_file": pathFields, "replace": pathFields},
		AgentOpencode: {"edit": pathFields, "write": pathFields, "multiedit": pathFields,
			"apply_patch": patchField, "patch": patchField},
		AgentCursor: {"Write": pathFields, "Edit": pathFields, "StrReplace": pathFields, "MultiEdit": pathFields,
			"Delete": pathFields, "EditNotebook": pathFields, "TabWrite": pathFields},
	}
	readers = map[string][]string{
		AgentClaude: {"Read", "Grep", "Glob", "LS", "Bash", "BashOutput", "KillShell", "Task", "TodoWrite",
			"WebFetch", "WebSearch", "ExitPlanMode", "NotebookRead"},
		AgentCodex: {"shell", "local_shell", "exec_command", "Bash", "update_plan", "view_image", "web_search", "Read"},
		AgentGemini: {"read_file", "read_many_files", "list_directory", "glob", "search_file_content", "grep",
			"run_shell_command", "web_fetch", "google_web_search", "save_memory", "write_todos"},
		AgentOpencode: {"read", "grep", "glob", "list", "bash", "task", "todowrite", "todoread", "webfetch", "websearch"},
		AgentCursor:   {"Read", "Grep", "Glob", "LS", "Shell", "Task", "SemanticSearch", "WebSearch", "WebFetch", "TodoWrite"},
	}
)

// ParseAgentPayload reads one hook payload of agent. The event is the
// payload's hook_event_name where it has one, else event (the --event
// flag). A payload that is not a JSON object, an event the harness does not
// send, a tool the guard does not know, or a writing tool without a path is
// an error (the guard refuses it).
func ParseAgentPayload(agent string, raw []byte, event string) (*AgentCall, error) {
	events, ok := agentEvents[agent]
	if !ok {
		return nil, errs.New(errs.Usage, "unknown agent %q (one of %s)", agent, strings.Join(Agents, ", "))
	}
	var p agentPayload
	if err := json.Unmarshal(raw, &p); err != nil {
		return nil, errs.New(errs.Usage, "the %s hook payload is not a JSON object: %v", agent, err)
	}
	call := &AgentCall{Agent: agent, Event: event, Tool: p.ToolName, SessionID: p.SessionID, Cwd: p.Cwd, Roots: p.WorkspaceRoots}
	if call.Tool == "" {
		call.Tool = p.Tool
	}
	if call.SessionID == "" {
		call.SessionID = p.ConversationID
	}
	if p.Event != "" {
		if call.Event, ok = events[p.Event]; !ok {
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
	how, writes := writers[agent][call.Tool]
	if !writes {
		if slices.Contains(readers[agent], call.Tool) {
			return call, nil
		}
		return nil, errs.New(errs.Usage, "%s tool %q is not one tally knows: it may write files, so it is refused (configure the hook to match only the writing tools)", agent, call.Tool)
	}
	call.Writes = true
	var in toolInput
	if len(p.ToolInput) == 0 || json.Unmarshal(p.ToolInput, &in) != nil {
		return nil, errs.New(errs.Usage, "%s tool %s: tool_input is not a JSON object", agent, call.Tool)
	}
	if how == patchField {
		text := in.PatchText
		for _, t := range []any{in.Patch, in.Input, in.Command} {
			text = orPatch(text, t)
		}
		paths, err := PatchPaths(text)
		if err != nil {
			return nil, err
		}
		call.Paths = paths
		return call, nil
	}
	for _, f := range []string{in.FilePath, in.NotebookPath, in.Path, in.TargetFile, in.FilePathJS} {
		if f != "" && !slices.Contains(call.Paths, f) {
			call.Paths = append(call.Paths, f)
		}
	}
	if len(call.Paths) == 0 && agent == AgentCodex {
		// Codex sends apply_patch under the aliases Edit and Write too.
		if text := orPatch(orPatch("", in.Patch), in.Command); text != "" {
			paths, err := PatchPaths(text)
			if err != nil {
				return nil, err
			}
			call.Paths = paths
		}
	}
	if len(call.Paths) == 0 {
		return nil, errs.New(errs.Usage, "%s tool %s names no file path", agent, call.Tool)
	}
	return call, nil
}

// orPatch returns text if set, else the patch text v holds: a string, or the
// last element of an argv (["apply_patch", PATCH]) that looks like a patch.
func orPatch(text string, v any) string {
	if text != "" {
		return text
	}
	switch x := v.(type) {
	case string:
		return x
	case []any:
		for i := len(x) - 1; i >= 0; i-- {
			if s, ok := x[i].(string); ok && strings.Contains(s, "*** Begin Patch") {
				return s
			}
		}
	}
	return ""
}

// patchHeaders are the lines of a Codex patch that name a file it writes.
var patchHeaders = []string{"*** Add File: ", "*** Update File: ", "*** Delete File: ", "*** Move to: "}

// PatchPaths returns the files a Codex apply_patch patch writes, in order
// and without repeats: the paths of its Add, Update and Delete File lines,
// and Move to targets. A patch that names none is an error: the guard
// cannot tell what it writes.
func PatchPaths(patch string) ([]string, error) {
	var out []string
	for line := range strings.SplitSeq(patch, "\n") {
		line = strings.TrimRight(line, "\r")
		for _, h := range patchHeaders {
			if p, ok := strings.CutPrefix(line, h); ok {
				if p = strings.TrimSpace(p); p != "" && !slices.Contains(out, p) {
					out = append(out, p)
				}
			}
		}
	}
	if len(out) == 0 {
		return nil, errs.New(errs.Usage, "the patch names no file (no *** Add File:, Update File:, Delete File: or Move to: line)")
	}
	return out, nil
}
