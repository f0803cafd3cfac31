package hooks

import (
	"slices"
	"testing"

	"github.com/tally-dev/tally/errs"
)

func TestParseAgentPayload(t *testing.T) {
	patch := `*** Begin Patch\n*** Add File: new/a.go\n+x\n*** Update File: src/b.go\n*** Move to: src/c.go\n@@\n-a\n+b\n*** Delete File: old.txt\n*** Update File: src/b.go\n*** End Patch\n`
	for _, tc := range []struct {
		agent, payload, event string
		want                  *AgentCall
		code                  errs.Code
	}{
		{"claude", `{"hook_event_name":"PreToolUse","tool_name":"NotebookEdit","tool_input":{"notebook_path":"/r/n.ipynb"},"cwd":"/r","session_id":"s"}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "NotebookEdit", SessionID: "s", Cwd: "/r", Writes: true, Paths: []string{"/r/n.ipynb"}}, ""},
		{"claude", `{"hook_event_name":"PreToolUse","tool_name":"MultiEdit","tool_input":{"file_path":"/r/a","edits":[]}}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "MultiEdit", Writes: true, Paths: []string{"/r/a"}}, ""},
		{"claude", `{"hook_event_name":"PreToolUse","tool_name":"Bash","tool_input":{"command":"rm -rf src"}}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "Bash"}, ""},
		{"codex", `{"hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":{"command":"` + patch + `"},"cwd":"/r"}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "apply_patch", Cwd: "/r", Writes: true, Paths: []string{"new/a.go", "src/b.go", "src/c.go", "old.txt"}}, ""},
		{"codex", `{"hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":{"command":["apply_patch","` + patch + `"]}}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "apply_patch", Writes: true, Paths: []string{"new/a.go", "src/b.go", "src/c.go", "old.txt"}}, ""},
		{"codex", `{"hook_event_name":"PreToolUse","tool_name":"apply_patch","tool_input":{"command":"*** Begin Patch\n*** End Patch"}}`, "", nil, errs.Usage},
		{"opencode", `{"hook_event_name":"tool.execute.before","tool":"apply_patch","session_id":"o","cwd":"/r","tool_input":{"patchText":"` + patch + `"}}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "apply_patch", SessionID: "o", Cwd: "/r", Writes: true, Paths: []string{"new/a.go", "src/b.go", "src/c.go", "old.txt"}}, ""},
		{"gemini", `{"hook_event_name":"BeforeTool","tool_name":"write_file","tool_input":{"file_path":"a.txt","content":""}}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "write_file", Writes: true, Paths: []string{"a.txt"}}, ""},
		{"cursor", `{"hook_event_name":"preToolUse","conversation_id":"c","tool_name":"Delete","tool_input":{"target_file":"x"},"workspace_roots":["/w"]}`, "",
			&AgentCall{Event: EventPreEdit, Tool: "Delete", SessionID: "c", Roots: []string{"/w"}, Writes: true, Paths: []string{"x"}}, ""},
		{"cursor", `{"hook_event_name":"sessionEnd","conversation_id":"c"}`, "", &AgentCall{Event: EventSessionEnd, SessionID: "c"}, ""},
		{"codex", `{"hook_event_name":"SessionEnd"}`, "", nil, errs.Usage}, // Codex sends none
		{"claude", `{"tool_name":"Write","tool_input":{"file_path":"/a"}}`, EventPreEdit,
			&AgentCall{Event: EventPreEdit, Tool: "Write", Writes: true, Paths: []string{"/a"}}, ""},
		{"claude", `{"tool_name":"Write","tool_input":{"file_path":"/a"}}`, "", nil, errs.Usage}, // no event at all
		{"claude", `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{"content":"x"}}`, "", nil, errs.Usage},
		{"claude", `{"hook_event_name":"PreToolUse","tool_name":"Write","tool_input":"/a"}`, "", nil, errs.Usage},
		{"claude", `[]`, "", nil, errs.Usage},
		{"gemini", `{"hook_event_name":"BeforeTool","tool_name":"mcp_fs_write"}`, "", nil, errs.Usage},
	} {
		got, err := ParseAgentPayload(tc.agent, []byte(tc.payload), tc.event)
		if tc.want != nil {
			tc.want.Agent = tc.agent
		}
		if errs.CodeOf(err) != tc.code && !(tc.code == "" && err == nil) || tc.want != nil && (got == nil || !sameCall(*got, *tc.want)) {
			t.Errorf("%s %s: %+v %v, want %+v %s", tc.agent, tc.payload, got, err, tc.want, tc.code)
		}
	}
}

func sameCall(a, b AgentCall) bool {
	return a.Agent == b.Agent && a.Event == b.Event && a.Tool == b.Tool && a.SessionID == b.SessionID && a.Cwd == b.Cwd &&
		slices.Equal(a.Roots, b.Roots) && a.Writes == b.Writes && slices.Equal(a.Paths, b.Paths)
}
