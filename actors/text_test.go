package actors_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lemo/api"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
)

// garbledTool fails with a message that is not UTF-8 (as an error quoting
// a file name from disk can be).
type garbledTool struct{ baseTool }

func (garbledTool) Name() string                  { return "test.garbled" }
func (garbledTool) Description() string           { return "fails with bytes that are not UTF-8" }
func (garbledTool) InputSchema() json.RawMessage  { return json.RawMessage(`{"type":"object"}`) }
func (garbledTool) ResultSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (garbledTool) Retain(out, in json.RawMessage) json.RawMessage {
	return out
}
func (garbledTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	return nil, errors.New("open caf\xe9.txt: no such file")
}

// A tool error that is not UTF-8 is recorded (made valid) and the Task goes
// on; protobuf cannot encode the raw bytes into its history.
func TestToolErrorThatIsNotUTF8IsRecorded(t *testing.T) {
	plan := func(n int, req *providers.Request) fake.Turn {
		if last := req.Messages[len(req.Messages)-1]; last.Role == providers.RoleTool {
			return fake.Turn{Text: "seen: " + last.Content}
		}
		return fake.Turn{ToolCalls: []providers.ToolCall{{ID: "c1", Name: "test_garbled", Arguments: json.RawMessage(`{}`)}}}
	}
	h := newHarness(t, plan, garbledTool{})
	id := h.create("go")
	evs := h.waitStatus(id, api.TaskStatus_TASK_STATUS_FINISHED)
	if s := dump(evs); !strings.Contains(s, "open caf\uFFFD.txt: no such file") {
		t.Fatalf("history:\n%s", s)
	}
}
