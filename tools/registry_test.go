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
