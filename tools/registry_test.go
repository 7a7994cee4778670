package tools

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
)

type stub struct {
	name   string
	input  string
	result string
}

func (s stub) Name() string                 { return s.name }
func (s stub) Description() string          { return "stub" }
func (s stub) InputSchema() json.RawMessage { return json.RawMessage(s.input) }
func (s stub) StateSchema() json.RawMessage { return nil }
func (s stub) ResultSchema() json.RawMessage {
	if s.result == "" {
		return json.RawMessage(`{"type":"object"}`)
	}
	return json.RawMessage(s.result)
}
func (s stub) Execute(context.Context, Call, Emit) (json.RawMessage, error) { return nil, nil }
func (s stub) Retain(out, in json.RawMessage) json.RawMessage               { return nil }
func (s stub) View() string                                                 { return "" }

const obj = `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer","minimum":1}},"required":["path"],"additionalProperties":false}`

func TestRegister(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(stub{name: "files.read", input: obj}); err != nil {
		t.Fatal(err)
	}
	cases := []struct {
		tool stub
		want string
	}{
		{stub{name: "files_read", input: obj}, "collides"},
		{stub{name: "files.read", input: obj}, "twice"},
		{stub{name: "Files", input: obj}, "only a-z"},
		{stub{name: strings.Repeat("a", 65), input: obj}, "1 to 64"},
		{stub{name: "bad", input: `{"type":"string"}`}, `"type": "object"`},
		{stub{name: "bad", input: `{not json`}, "not JSON"},
		{stub{name: "bad", input: `{"$ref":"http://example.com/x.json"}`}, "only references inside"},
		{stub{name: "bad", input: obj, result: `{"type":12}`}, "result"},
	}
	for _, c := range cases {
		err := r.Register(c.tool)
		if err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("Register(%q) err = %v, want it to mention %q", c.tool.name, err, c.want)
		}
	}
	reg, ok := r.ByModelName("files_read")
	if !ok || reg.Tool.Name() != "files.read" || reg.Spec().Name != "files_read" {
		t.Fatalf("ByModelName = %v, %v", reg, ok)
	}
}

func TestValidation(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(stub{name: "t", input: obj, result: `{"type":"object","required":["ok"]}`}); err != nil {
		t.Fatal(err)
	}
	reg, _ := r.Get("t")
	cases := map[string]string{
		`{"path":"a"}`:       "",
		`{"path":"a","n":0}`: "at /n: minimum",
		`{}`:                 `missing property 'path'`,
		`{"path":1,"x":2}`:   "/path",
		`[`:                  "not valid JSON",
		``:                   "empty",
	}
	for in, want := range cases {
		err := reg.ValidateInput(json.RawMessage(in))
		if want == "" {
			if err != nil {
				t.Errorf("ValidateInput(%s) = %v", in, err)
			}
			continue
		}
		var ve *ValidationError
		if !errors.As(err, &ve) || ve.What != "input" || !strings.Contains(err.Error(), want) {
			t.Errorf("ValidateInput(%s) = %v, want a ValidationError mentioning %q", in, err, want)
		}
	}
	if err := reg.ValidateOutput(json.RawMessage(`{}`)); err == nil || !strings.Contains(err.Error(), "invalid output") {
		t.Errorf("ValidateOutput = %v", err)
	}
	if err := reg.ValidateState(json.RawMessage(`{}`)); err == nil {
		t.Error("a tool without a state schema accepted a state")
	}
	if err := reg.ValidateSteer(json.RawMessage(`{}`)); err == nil || reg.Steerable() {
		t.Error("a tool without a steer schema accepted steering")
	}
}

func TestSelect(t *testing.T) {
	r := NewRegistry()
	for _, n := range []string{"b", "a", "c"} {
		if err := r.Register(stub{name: n, input: obj}); err != nil {
			t.Fatal(err)
		}
	}
	all, _ := r.Select(nil, false)
	if len(all) != 3 || all[0].Tool.Name() != "a" {
		t.Fatalf("Select(all) = %v", all)
	}
	some, err := r.Select([]string{"c", "a", "c"}, true)
	if err != nil || len(some) != 2 || some[0].Tool.Name() != "a" {
		t.Fatalf("Select(c,a) = %v, %v", some, err)
	}
	none, err := r.Select(nil, true)
	if err != nil || len(none) != 0 {
		t.Fatalf("Select(restricted, none) = %v, %v", none, err)
	}
	if _, err := r.Select([]string{"a", "zz"}, true); !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), "zz") {
		t.Fatalf("Select(unknown) err = %v", err)
	}
}

// A tool of a source that has not listed its tools yet (an MCP server that
// is not up) is refused with the source's state, so that a person sees why.
func TestSelectNamesPendingSources(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(stub{name: "a", input: obj}); err != nil {
		t.Fatal(err)
	}
	r.SetPending(func() []Pending {
		return []Pending{{Source: "mcp server late", Prefix: "mcp.late.", State: "listing failed: connection refused; retrying in 8s"}}
	})
	_, err := r.Select([]string{"a", "mcp.late.echo"}, true)
	if !errors.Is(err, ErrUnknownTool) || !strings.Contains(err.Error(), "mcp.late.echo is not offered yet: the mcp server late has not listed its tools (listing failed: connection refused; retrying in 8s)") {
		t.Fatalf("Select(pending) err = %v", err)
	}
	if _, err := r.Select([]string{"mcp.other.echo"}, true); err == nil || strings.Contains(err.Error(), "not offered yet") {
		t.Fatalf("Select(unknown, no pending source) err = %v", err)
	}
	if p, ok := r.PendingFor("mcp.late.x"); !ok || p.Source != "mcp server late" {
		t.Fatalf("PendingFor(mcp.late.x) = %v, %v", p, ok)
	}
	if _, ok := r.PendingFor("mcp.latest.x"); ok {
		t.Fatal("PendingFor(mcp.latest.x) found mcp.late.'s source")
	}
}

// Every tool offers the model the request_approval property, after its own
// properties and in their order; a tool may not define it itself.
func TestSpecOffersRequestApproval(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(stub{name: "files.read", input: obj}); err != nil {
		t.Fatal(err)
	}
	if err := r.Register(stub{name: "bare", input: `{"type":"object"}`}); err != nil {
		t.Fatal(err)
	}
	reg, _ := r.Get("files.read")
	got := string(reg.Spec().Parameters)
	want := `{"type":"object","properties":{"path":{"type":"string"},"n":{"type":"integer","minimum":1},"request_approval":{"type":"string","description":"Set only when a person should approve this call before it runs; say why."}},"required":["path"],"additionalProperties":false}`
	if got != want {
		t.Fatalf("Spec().Parameters =\n%s\nwant\n%s", got, want)
	}
	if string(reg.Tool.InputSchema()) != obj {
		t.Fatalf("the tool's own schema changed: %s", reg.Tool.InputSchema())
	}
	bare, _ := r.Get("bare")
	if got := string(bare.Spec().Parameters); !strings.Contains(got, `"properties":{"request_approval":`) {
		t.Fatalf("schema without properties: %s", got)
	}
	err := r.Register(stub{name: "own", input: `{"type":"object","properties":{"request_approval":{"type":"boolean"}}}`})
	if err == nil || !strings.Contains(err.Error(), "request_approval") || !strings.Contains(err.Error(), "reserves") {
		t.Fatalf("Register(tool defining request_approval) err = %v", err)
	}
	if _, ok := r.Get("own"); ok {
		t.Fatal("the refused tool was registered")
	}
}

func TestSplitApprovalRequest(t *testing.T) {
	cases := []struct {
		args, input, reason, err string
	}{
		{`{"path":"a"}`, `{"path":"a"}`, "", ""},
		{`{"path":"a","request_approval":"it deletes\n\tthings"}`, `{"path":"a"}`, "it deletes things", ""},
		{`{"request_approval":"why","z":1,"a":2}`, `{"z":1,"a":2}`, "why", ""},
		{`{"path":"a","request_approval":null}`, `{"path":"a"}`, "", ""},
		{`{"path":"a","request_approval":"  \u0007 "}`, `{"path":"a"}`, "", ""},
		{`{"path":"a","request_approval":true}`, "", "", "want a string"},
		{`[1]`, `[1]`, "", ""},
		{`{bad`, `{bad`, "", ""},
	}
	for _, c := range cases {
		in, reason, err := SplitApprovalRequest(json.RawMessage(c.args))
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) {
				t.Errorf("SplitApprovalRequest(%s) err = %v, want %q", c.args, err, c.err)
			}
			continue
		}
		if err != nil || string(in) != c.input || reason != c.reason {
			t.Errorf("SplitApprovalRequest(%s) = %s, %q, %v; want %s, %q", c.args, in, reason, err, c.input, c.reason)
		}
	}
	long, _ := json.Marshal(map[string]string{"request_approval": strings.Repeat("é", 2*MaxApprovalRequest)})
	_, reason, _ := SplitApprovalRequest(long)
	if n := len([]rune(reason)); n != MaxApprovalRequest+1 || !strings.HasSuffix(reason, "…") {
		t.Fatalf("long reason: %d characters, %q...", n, reason[:10])
	}
}

func TestMatchPattern(t *testing.T) {
	cases := []struct {
		pattern, name string
		want          bool
	}{
		{"shell.run", "shell.run", true},
		{"shell.run", "shell.runner", false},
		{"*", "anything.at_all", true},
		{"files.*", "files.write", true},
		{"files.*", "files", false},
		{"*.write", "files.write", true},
		{"*.write", "files.read", false},
		{"f*s.*e", "files.write", true},
		{"a*a", "a", false},
		{"a*a", "aa", true},
	}
	for _, c := range cases {
		if got := MatchPattern(c.pattern, c.name); got != c.want {
			t.Errorf("MatchPattern(%q, %q) = %v, want %v", c.pattern, c.name, got, c.want)
		}
	}
	for _, bad := range []string{"", "Shell", "shell run", "a/b", strings.Repeat("a", 65)} {
		if err := CheckPattern(bad); err == nil {
			t.Errorf("CheckPattern(%q) accepted it", bad)
		}
	}
	for _, ok := range []string{"shell.run", "*", "files.*", "memory_record"} {
		if err := CheckPattern(ok); err != nil {
			t.Errorf("CheckPattern(%q) = %v", ok, err)
		}
	}
}
