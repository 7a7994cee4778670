package services

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"

	"lemo/api"
	"lemo/internal/testwait"
	"lemo/tools/system"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// program answers calls with answer (nil: never).
type program struct {
	mu     sync.Mutex
	calls  []*api.ServiceCall
	answer func(c *api.ServiceCall) *api.ServiceResult
	reg    *Registry
	id     string
}

func (p *program) Deliver(c *api.ServiceCall) {
	p.mu.Lock()
	p.calls = append(p.calls, c)
	p.mu.Unlock()
	if p.answer != nil {
		if res := p.answer(c); res != nil {
			res.Call = c.GetCall()
			go p.reg.Complete(p.id, res)
		}
	}
}

func spec(name string) *api.ServiceSpec {
	return &api.ServiceSpec{Name: name, Description: "test", Operations: []*api.ServiceOperation{{
		Name: "get", InputSchema: []byte(`{"type":"object","properties":{"k":{"type":"string"}},"required":["k"]}`),
		ResultSchema: []byte(`{"type":"object"}`),
	}}}
}

func req(owner, svc string, input string) system.Request {
	return system.Request{Owner: owner, TaskID: "T", CallID: "c", Service: svc, Operation: "get", Input: json.RawMessage(input)}
}

func TestExecute(t *testing.T) {
	r := New(Options{MaxResultBytes: 200})
	p := &program{reg: r, id: "s1", answer: func(c *api.ServiceCall) *api.ServiceResult {
		var in struct{ K string }
		_ = json.Unmarshal(c.GetInput(), &in)
		switch in.K {
		case "big":
			return &api.ServiceResult{Output: []byte(`{"v":"` + strings.Repeat("x", 1000) + `"}`)}
		case "fail":
			return &api.ServiceResult{Error: "no such key"}
		case "notjson":
			return &api.ServiceResult{Output: []byte(`{`)}
		case "array":
			return &api.ServiceResult{Output: []byte(`[1]`)}
		case "silent":
			return nil
		}
		return &api.ServiceResult{Output: []byte(`{"v":"` + in.K + `"}`)}
	}}
	if err := r.Register("alice", false, "s1", spec("kv"), p); err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	out, err := r.Execute(ctx, req("alice", "kv", `{"k":"a"}`))
	if err != nil || string(out) != `{"v":"a"}` {
		t.Fatalf("Execute = %s, %v", out, err)
	}
	if c := p.calls[0]; c.GetTaskId() != "T" || c.GetCallId() != "c" || c.GetOwner() != "alice" || c.GetDeadline().AsTime().Before(time.Now()) {
		t.Errorf("the program was asked %v", c)
	}
	out, err = r.Execute(ctx, req("alice", "kv", `{"k":"big"}`))
	if err != nil || len(out) > 400 || !strings.Contains(string(out), "exceeded 200 bytes") || !json.Valid(out) {
		t.Errorf("a big result: %s, %v", out, err)
	}
	for k, want := range map[string]error{"fail": nil, "notjson": ErrInvalid, "array": ErrInvalid} {
		_, err := r.Execute(ctx, req("alice", "kv", `{"k":"`+k+`"}`))
		if err == nil || (want != nil && !errors.Is(err, want)) {
			t.Errorf("%s: %v, want %v", k, err, want)
		}
	}
	if _, err := r.Execute(ctx, req("alice", "kv", `{}`)); !errors.Is(err, ErrInvalid) {
		t.Errorf("input against the schema: %v", err)
	}
	if _, err := r.Execute(ctx, system.Request{Owner: "alice", Service: "kv", Operation: "put"}); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "its operations: get") {
		t.Errorf("unknown operation: %v", err)
	}
	if _, err := r.Execute(ctx, req("bob", "kv", `{"k":"a"}`)); !errors.Is(err, ErrNotFound) || !strings.Contains(err.Error(), "available services: none") {
		t.Errorf("bob calls alice's service: %v", err)
	}
	tctx, cancel := context.WithTimeout(ctx, 30*time.Millisecond)
	defer cancel()
	if _, err := r.Execute(tctx, req("alice", "kv", `{"k":"silent"}`)); !errors.Is(err, ErrTimeout) {
		t.Errorf("no answer: %v", err)
	}
	if len(r.pending) != 0 {
		t.Errorf("%d calls still pending", len(r.pending))
	}
	if err := r.Complete("s1", &api.ServiceResult{Call: 999, Output: []byte(`{}`)}); !errors.Is(err, ErrNotFound) {
		t.Errorf("a late answer: %v", err)
	}
}

func TestVisibilityAndReplacement(t *testing.T) {
	r := New(Options{})
	a, b, op := &program{reg: r, id: "a"}, &program{reg: r, id: "b"}, &program{reg: r, id: "op"}
	if err := r.Register("alice", false, "a", spec("kv"), a); err != nil {
		t.Fatal(err)
	}
	if err := r.Register("bob", false, "b", spec("kv"), b); !errors.Is(err, ErrConflict) {
		t.Errorf("bob takes alice's name: %v", err)
	}
	if err := r.Register("root", true, "op", spec("clock"), op); err != nil {
		t.Fatal(err)
	}
	names := func(owner string) string {
		var ns []string
		for _, s := range r.List(owner) {
			ns = append(ns, s.Name)
		}
		return strings.Join(ns, ",")
	}
	if got := names("alice"); got != "clock,kv" {
		t.Errorf("alice sees %q", got)
	}
	if got := names("bob"); got != "clock" {
		t.Errorf("bob sees %q", got)
	}
	// A restarted program of the same owner replaces the registration;
	// the old one's unanswered call fails.
	errc := make(chan error, 1)
	go func() {
		_, err := r.Execute(context.Background(), req("alice", "kv", `{"k":"x"}`))
		errc <- err
	}()
	waitFor(t, func() bool { a.mu.Lock(); defer a.mu.Unlock(); return len(a.calls) == 1 })
	a2 := &program{reg: r, id: "a2"}
	if err := r.Register("alice", false, "a2", spec("kv"), a2); err != nil {
		t.Fatal(err)
	}
	if err := <-errc; !errors.Is(err, ErrGone) {
		t.Fatalf("the replaced program's call: %v", err)
	}
	if err := r.Unregister("a", "kv"); !errors.Is(err, ErrNotFound) {
		t.Errorf("the old program unregisters the new one's service: %v", err)
	}
	r.UnregisterProvider("a2")
	if got := names("alice"); got != "clock" {
		t.Errorf("after the program left alice sees %q", got)
	}
	if err := r.Register("alice", false, "a3", &api.ServiceSpec{Name: "bad", Operations: []*api.ServiceOperation{{Name: "o", InputSchema: []byte(`{"type":12}`)}}}, a); !errors.Is(err, ErrInvalid) {
		t.Errorf("an uncompilable schema: %v", err)
	}
}

func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	testwait.UntilTrue(t, 5*time.Second, "the condition", cond)
}
