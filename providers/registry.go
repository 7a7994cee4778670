package providers

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
)

// ErrUnknownProvider is wrapped when a model id names no registered provider.
var ErrUnknownProvider = errors.New("providers: unknown provider")

// Registry holds the configured providers. It is safe for concurrent use.
type Registry struct {
	mu        sync.RWMutex
	providers map[string]Provider
	order     []string
}

// NewRegistry returns an empty registry.
func NewRegistry() *Registry {
	return &Registry{providers: make(map[string]Provider)}
}

// Register adds p. Names must be unique and contain no "/".
func (r *Registry) Register(p Provider) error {
	name := p.Name()
	if name == "" || strings.Contains(name, "/") {
		return fmt.Errorf("providers: invalid provider name %q: want a non-empty name without '/'", name)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, dup := r.providers[name]; dup {
		return fmt.Errorf("providers: provider %q registered twice", name)
	}
	r.providers[name] = p
	r.order = append(r.order, name)
	return nil
}

// Names returns the registered provider names in registration order.
func (r *Registry) Names() []string {
	r.mu.RLock()
	defer r.mu.RUnlock()
	return append([]string(nil), r.order...)
}

// Provider returns the provider called name.
func (r *Registry) Provider(name string) (Provider, bool) {
	r.mu.RLock()
	defer r.mu.RUnlock()
	p, ok := r.providers[name]
	return p, ok
}

// SplitModelID splits "provider/name" into its parts. The name may contain
// further slashes ("openrouter/meta-llama/llama-3.3-70b-instruct:free").
func SplitModelID(id string) (provider, name string, err error) {
	provider, name, ok := strings.Cut(id, "/")
	if !ok || provider == "" || name == "" {
		return "", "", fmt.Errorf("providers: invalid model id %q: want provider/model, for example ollama/qwen3:8b", id)
	}
	return provider, name, nil
}

// ValidateModelID checks the form of a model id without resolving it.
func ValidateModelID(id string) error {
	_, _, err := SplitModelID(id)
	return err
}

// Model resolves a model id.
func (r *Registry) Model(ctx context.Context, id string) (Model, error) {
	prov, name, err := SplitModelID(id)
	if err != nil {
		return nil, err
	}
	p, ok := r.Provider(prov)
	if !ok {
		return nil, fmt.Errorf("%w %q in model id %q; configured providers: %s; %s", ErrUnknownProvider, prov, id, r.describe(), ConfigHint(prov))
	}
	m, err := p.Model(ctx, name)
	if err != nil {
		switch ClassOf(err) {
		case ClassTransient, ClassAuth:
			// The provider is unreachable or refuses its credentials: say
			// how it is configured, keeping the class for callers.
			return nil, &hinted{err: err, hint: ConfigHint(prov)}
		}
		return nil, err
	}
	return m, nil
}

// hinted is a provider error with advice on how to configure the provider.
type hinted struct {
	err  error
	hint string
}

func (h *hinted) Error() string { return h.err.Error() + "; " + h.hint }
func (h *hinted) Unwrap() error { return h.err }

// configHints names, per provider, what configures it: its lemo.yaml
// section, the variable that holds its key (or address), and a sentence
// with the conventional variable, the LEMO_* variable and the key (config/
// is the source of truth; its key table is in the README).
var configHints = []struct{ name, section, variable, hint string }{
	{"ollama", "providers.ollama", "OLLAMA_HOST (its address)", "Ollama is used at OLLAMA_HOST (or LEMO_OLLAMA_BASE_URL, providers.ollama.base_url; default http://127.0.0.1:11434): start it there or point the setting at it"},
	{"ollama-cloud", "providers.ollama_cloud", "OLLAMA_API_KEY", "Ollama Cloud needs OLLAMA_API_KEY (or providers.ollama_cloud.api_key)"},
	{"openrouter", "providers.openrouter", "OPENROUTER_API_KEY", "OpenRouter needs OPENROUTER_API_KEY (or providers.openrouter.api_key; LEMO_OPENROUTER_BASE_URL changes its address)"},
	{"nvidia", "providers.nvidia", "NVIDIA_API_KEY", "NVIDIA NIM needs NVIDIA_API_KEY (or providers.nvidia.api_key; LEMO_NVIDIA_BASE_URL changes its address)"},
	{"zen", "providers.zen", "OPENCODE_API_KEY", "OpenCode Zen needs OPENCODE_API_KEY (or providers.zen.api_key; LEMO_ZEN_BASE_URL changes its address)"},
	{"openai", "providers.openai", "LEMO_OPENAI_API_KEY", "an OpenAI-compatible server needs LEMO_OPENAI_BASE_URL (or providers.openai.base_url) and, if it asks for one, LEMO_OPENAI_API_KEY"},
}

// ConfigSection returns the lemo.yaml section that configures the provider
// called name ("providers.openrouter") and the environment variable that
// holds its key (or, for a local Ollama, its address); "" for a name Lemo
// does not know.
func ConfigSection(name string) (section, variable string) {
	for _, h := range configHints {
		if h.name == name {
			return h.section, h.variable
		}
	}
	return "", ""
}

// afterConfig ends every hint: configuration is read when the daemon starts.
const afterConfig = "then restart lemo serve; lemo doctor checks every configured provider"

// ConfigHint says how the provider called name is configured and how to
// check it; for a name Lemo does not know, how to configure any provider.
func ConfigHint(name string) string {
	for _, h := range configHints {
		if h.name == name {
			return "to configure " + name + ": " + h.hint + "; " + afterConfig
		}
	}
	return SetupHint()
}

// SetupHint says, on one line, how to configure each provider Lemo knows,
// for when none is usable.
func SetupHint() string {
	return "to configure a provider: " + strings.Join(SetupHints(), "; ") + "; " + afterConfig
}

// SetupHints is SetupHint as one line per provider, without its ending.
func SetupHints() []string {
	out := make([]string, len(configHints))
	for i, h := range configHints {
		out[i] = h.hint
	}
	return out
}
func (r *Registry) describe() string {
	names := r.Names()
	if len(names) == 0 {
		return "none"
	}
	return strings.Join(names, ", ")
}

// ProviderFailure is one provider that could not list its models.
type ProviderFailure struct {
	Provider string
	Err      error
}

// Listing is the result of asking every provider for its models.
type Listing struct {
	Models   []ModelInfo
	Failures []ProviderFailure
}

// Models asks every provider concurrently and returns the models found,
// sorted by id, and the providers that failed. It never hides a failure
// behind an empty list.
func (r *Registry) Models(ctx context.Context) Listing {
	names := r.Names()
	type result struct {
		name   string
		models []ModelInfo
		err    error
	}
	results := make([]result, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		p, _ := r.Provider(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					results[i] = result{name: n, err: fmt.Errorf("%s: panic while listing models: %v", n, v)}
				}
			}()
			ms, err := p.Models(ctx)
			results[i] = result{name: n, models: ms, err: err}
		}()
	}
	wg.Wait()
	var l Listing
	for _, res := range results {
		if res.err != nil {
			l.Failures = append(l.Failures, ProviderFailure{Provider: res.name, Err: res.err})
			continue
		}
		l.Models = append(l.Models, res.models...)
	}
	sort.Slice(l.Models, func(i, j int) bool { return l.Models[i].ID < l.Models[j].ID })
	return l
}
