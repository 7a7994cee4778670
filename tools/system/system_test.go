package system

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"lemo/tools"
)

type fakeServices struct {
	list func(owner string) []Service
	exec func(ctx context.Context, r Request) (json.RawMessage, error)
}

func (f fakeServices) List(owner string) []Service { return f.list(owner) }
func (f fakeServices) Execute(ctx context.Context, r Request) (json.RawMessage, error) {
	return f.exec(ctx, r)
}

func TestSystemTool(t *testing.T) {
	var got Request
	svcs := fakeServices{
		list: func(owner string) []Service {
			if owner != "alice" {
				return nil
			}
			return []Service{{Name: "kv", Operations: []Operation{{Name: "get", InputSchema: json.RawMessage(`{"type":"object"}`)}}}}
		},
		exec: func(ctx context.Context, r Request) (json.RawMessage, error) {
			got = r
			if r.Service == "gone" {
				return nil, errors.New("the program went away")
			}
			return json.RawMessage(`{"v":1}`), nil
		},
	}
	tool := New(svcs)
	reg := tools.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatal(err)
	}
	rt, _ := reg.Get("system")
	if !tool.Untrusted() || tool.View() != "system" {
		t.Fatal("the system tool must be untrusted and name its View")
	}
	call := func(owner, input string) (json.RawMessage, error) {
		if err := rt.ValidateInput(json.RawMessage(input)); err != nil {
			return nil, err
		}
		out, err := tool.Execute(context.Background(), tools.Call{TaskID: "T", CallID: "c1", Owner: owner, Input: json.RawMessage(input)}, nil)
		if err == nil {
			if verr := rt.ValidateOutput(out); verr != nil {
				t.Fatalf("output %s breaks the result schema: %v", out, verr)
			}
		}
		return out, err
	}
	out, err := call("alice", `{"action":"list"}`)
	if err != nil || !strings.Contains(string(out), `"name":"kv"`) {
		t.Fatalf("list = %s, %v", out, err)
	}
	if out, _ := call("bob", `{"action":"list"}`); string(out) != `{"services":[]}` {
		t.Errorf("bob's list = %s", out)
	}
	out, err = call("alice", `{"action":"execute","service":"kv","operation":"get","input":{"k":"a"}}`)
	if err != nil || string(out) != `{"operation":"get","output":{"v":1},"service":"kv"}` {
		t.Fatalf("execute = %s, %v", out, err)
	}
	if got.Owner != "alice" || got.TaskID != "T" || got.CallID != "c1" || string(got.Input) != `{"k":"a"}` {
		t.Errorf("the registry was asked %+v", got)
	}
	if _, err := call("alice", `{"action":"execute","service":"kv","operation":"get"}`); err != nil || string(got.Input) != `{}` {
		t.Errorf("execute without input: %v, input %s", err, got.Input)
	}
	for _, bad := range []string{`{"action":"execute","service":"kv"}`, `{"action":"execute","service":"gone","operation":"x"}`, `{"action":"delete"}`, `{}`} {
		if _, err := call("alice", bad); err == nil {
			t.Errorf("%s was accepted", bad)
		}
	}
	if _, err := New(nil).Execute(context.Background(), tools.Call{Input: json.RawMessage(`{"action":"list"}`)}, nil); !errors.Is(err, ErrNoServices) {
		t.Errorf("without a registry: %v", err)
	}
}

// Listing only reads; an operation may act, so it never runs before its
// start is durable.
func TestReadOnly(t *testing.T) {
	for in, want := range map[string]bool{
		`{"action":"list"}`: true,
		`{"action":"execute","service":"kv","operation":"get"}`: false,
		`{"action":"LIST"}`: false,
		`not json`:          false,
	} {
		if got := New(nil).ReadOnly(json.RawMessage(in)); got != want {
			t.Errorf("ReadOnly(%s) = %v, want %v", in, got, want)
		}
	}
}
