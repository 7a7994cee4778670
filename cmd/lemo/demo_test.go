package main

import (
	"encoding/json"
	"testing"

	"lemo/providers"
)

func TestLoadFirst(t *testing.T) {
	plan := loadFirst(toolThenAnswer("files_read", func(string) any { return map[string]string{"path": "a"} }))
	user := providers.Message{Role: providers.RoleUser, Content: "read a"}
	spec := func(names ...string) []providers.ToolSpec {
		var out []providers.ToolSpec
		for _, n := range names {
			out = append(out, providers.ToolSpec{Name: n})
		}
		return out
	}
	load := providers.Message{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: "load1", Name: "tools_load", Arguments: json.RawMessage(`{"names":["files_read"]}`)}}}
	loaded := providers.Message{Role: providers.RoleTool, ToolCallID: "load1", ToolName: "tools_load", Content: `{"loaded":["files.read"]}`}
	call := providers.Message{Role: providers.RoleAssistant, ToolCalls: []providers.ToolCall{{ID: "c1", Name: "files_read", Arguments: json.RawMessage(`{"path":"a"}`)}}}
	result := providers.Message{Role: providers.RoleTool, ToolCallID: "c1", ToolName: "files_read", Content: "A"}
	tests := []struct {
		name     string
		tools    []providers.ToolSpec
		msgs     []providers.Message
		wantCall string // the one call wanted; "" for a text answer
		wantText string
	}{
		{"offered: called at once", spec("files_read", "tools_load"), []providers.Message{user}, "files_read", ""},
		{"not offered: loaded first", spec("tools_load"), []providers.Message{user}, "tools_load", ""},
		{"loaded: called", spec("files_read", "tools_load"), []providers.Message{user, load, loaded}, "files_read", ""},
		{"still not offered after its load: called anyway", spec("tools_load"), []providers.Message{user, load, loaded}, "files_read", ""},
		{"no tools_load (a fixed set): called anyway", spec("shell_run"), []providers.Message{user}, "files_read", ""},
		{"the plan sees its own result, not the load's", spec("files_read", "tools_load"), []providers.Message{user, load, loaded, call, result}, "", "result: A"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			turn := plan(0, &providers.Request{Tools: tt.tools, Messages: tt.msgs})
			if tt.wantCall == "" {
				if len(turn.ToolCalls) != 0 || turn.Text != tt.wantText {
					t.Fatalf("turn = %+v, want the text %q", turn, tt.wantText)
				}
				return
			}
			if len(turn.ToolCalls) != 1 || turn.ToolCalls[0].Name != tt.wantCall {
				t.Fatalf("turn = %+v, want one call of %s", turn, tt.wantCall)
			}
			if tt.wantCall == "tools_load" {
				var in struct{ Names []string }
				if err := json.Unmarshal(turn.ToolCalls[0].Arguments, &in); err != nil || len(in.Names) != 1 || in.Names[0] != "files_read" {
					t.Fatalf("tools_load arguments = %s, want names [files_read]", turn.ToolCalls[0].Arguments)
				}
			}
		})
	}
}
