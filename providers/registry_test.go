package providers

import (
	"context"
	"errors"
	"strings"
	"testing"
)

type stubProvider struct {
	name   string
	models []ModelInfo
	err    error
}

func (p *stubProvider) Name() string { return p.name }
func (p *stubProvider) Models(context.Context) ([]ModelInfo, error) {
	return p.models, p.err
}
func (p *stubProvider) Model(ctx context.Context, name string) (Model, error) {
	return nil, &Error{Provider: p.name, Class: ClassModelNotFound, Message: name}
}

func TestSplitModelID(t *testing.T) {
	cases := []struct {
		id, provider, name string
		ok                 bool
	}{
		{"ollama/qwen3:8b", "ollama", "qwen3:8b", true},
		{"openrouter/meta-llama/llama-3.3-70b-instruct:free", "openrouter", "meta-llama/llama-3.3-70b-instruct:free", true},
		{"qwen3", "", "", false},
		{"/x", "", "", false},
		{"x/", "", "", false},
	}
	for _, c := range cases {
		p, n, err := SplitModelID(c.id)
		if (err == nil) != c.ok || p != c.provider || n != c.name {
			t.Errorf("SplitModelID(%q) = %q, %q, %v", c.id, p, n, err)
		}
	}
}

func TestRegistry(t *testing.T) {
	r := NewRegistry()
	good := &stubProvider{name: "good", models: []ModelInfo{{ID: "good/b"}, {ID: "good/a"}}}
	bad := &stubProvider{name: "bad", err: errors.New("bad: connection refused")}
	for _, p := range []Provider{good, bad} {
		if err := r.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	if err := r.Register(&stubProvider{name: "good"}); err == nil {
		t.Fatal("registered a provider name twice")
	}
	if err := r.Register(&stubProvider{name: "a/b"}); err == nil {
		t.Fatal("registered a name with a slash")
	}
	l := r.Models(context.Background())
	if len(l.Models) != 2 || l.Models[0].ID != "good/a" {
		t.Fatalf("models = %v", l.Models)
	}
	if len(l.Failures) != 1 || l.Failures[0].Provider != "bad" {
		t.Fatalf("failures = %v: a failing provider must be reported, not hidden", l.Failures)
	}
	if _, err := r.Model(context.Background(), "nope/x"); !errors.Is(err, ErrUnknownProvider) || !strings.Contains(err.Error(), "good, bad") {
		t.Fatalf("Model(unknown provider) err = %v", err)
	}
	if _, err := r.Model(context.Background(), "good/x"); ClassOf(err) != ClassModelNotFound {
		t.Fatalf("Model(unknown model) err = %v", err)
	}
}

func TestErrorClasses(t *testing.T) {
	if ClassOf(context.Canceled) != ClassCancelled || ClassOf(errors.New("x")) != ClassTransient {
		t.Fatal("ClassOf of plain errors")
	}
	e := &Error{Provider: "p", Class: ClassRateLimit, Status: 429, Message: "slow down"}
	if got := e.Error(); got != "p: rate_limit (HTTP 429): slow down" {
		t.Fatalf("Error() = %q", got)
	}
	if !ClassRateLimit.Retryable() || ClassAuth.Retryable() {
		t.Fatal("Retryable")
	}
}
