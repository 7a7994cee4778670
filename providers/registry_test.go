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

// downProvider is a provider whose service cannot be reached.
type downProvider struct{ name string }

func (p downProvider) Name() string { return p.name }
func (p downProvider) Models(context.Context) ([]ModelInfo, error) {
	return nil, &Error{Provider: p.name, Class: ClassTransient, Message: "connection refused"}
}
func (p downProvider) Model(ctx context.Context, name string) (Model, error) {
	_, err := p.Models(ctx)
	return nil, err
}

func TestModelErrorsSayHowToConfigure(t *testing.T) {
	r := NewRegistry()
	if err := r.Register(downProvider{name: "ollama"}); err != nil {
		t.Fatal(err)
	}
	_, err := r.Model(context.Background(), "ollama/qwen3:8b")
	var pe *Error
	if !errors.As(err, &pe) || ClassOf(err) != ClassTransient {
		t.Fatalf("Model(unreachable) = %v, want the provider's transient error kept", err)
	}
	for _, want := range []string{"connection refused", "OLLAMA_HOST", "LEMO_OLLAMA_BASE_URL", "providers.ollama.base_url", "lemo doctor"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Model(unreachable) = %q, want it to mention %q", err, want)
		}
	}
	_, err = r.Model(context.Background(), "openrouter/x/y")
	for _, want := range []string{"configured providers: ollama", "OPENROUTER_API_KEY", "providers.openrouter.api_key", "lemo doctor"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Model(unconfigured openrouter) = %q, want it to mention %q", err, want)
		}
	}
	_, err = NewRegistry().Model(context.Background(), "acme/x")
	for _, want := range []string{"configured providers: none", "OLLAMA_HOST", "OPENROUTER_API_KEY", "NVIDIA_API_KEY", "OPENCODE_API_KEY", "OLLAMA_API_KEY", "LEMO_OPENAI_BASE_URL", "lemo doctor"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Model(no providers) = %q, want it to mention %q", err, want)
		}
	}
	// A model that is simply not offered needs no configuration advice.
	r2 := NewRegistry()
	_ = r2.Register(&stubProvider{name: "good"})
	if _, err := r2.Model(context.Background(), "good/x"); strings.Contains(err.Error(), "configure") {
		t.Errorf("Model(not offered) = %q, want no configuration hint", err)
	}
}
