package zen

import (
	"maps"
	"net/http"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers/openaicompat"
	"lemo/providers/retry"
)

// Conventional names and defaults.
const (
	// EnvAPIKey is the conventional variable cmd/lemo reads the key from.
	EnvAPIKey      = "OPENCODE_API_KEY"
	DefaultName    = "zen"
	DefaultBaseURL = "https://opencode.ai/zen/v1"
)

// KnownModels is the static capability table: Zen's /models exposes no
// window or capability. Source: models.dev (limit.context, tool_call,
// reasoning of the opencode provider) and the Zen docs model table, as
// recorded on 2026-02-27. A model missing here reports Window 0
// (unknown) and tools (every chat/completions model on Zen is an agentic
// coding model). Config.Known adds or overrides entries.
var KnownModels = map[string]openaicompat.KnownModel{
	"glm-5":             {Window: 202800, Tools: true, Reasoning: true},
	"glm-5.1":           {Window: 202800, Tools: true, Reasoning: true},
	"glm-4.7":           {Window: 204800, Tools: true, Reasoning: true},
	"kimi-k2.5":         {Window: 262144, Tools: true, Reasoning: true},
	"minimax-m2.5":      {Window: 204800, Tools: true, Reasoning: true},
	"minimax-m2.5-free": {Window: 204800, Tools: true, Reasoning: true},
	"big-pickle":        {Window: 200000, Tools: true, Reasoning: true},
	"qwen3-coder":       {Window: 262144, Tools: true},
}

// Config configures the OpenCode Zen provider.
type Config struct {
	// Name is the registry name (default "zen").
	Name string
	// BaseURL is the API root (default DefaultBaseURL).
	BaseURL string
	// APIKey is optional: without it only the free models (*-free,
	// big-pickle) answer. Never logged nor put in errors.
	APIKey string
	// Timeout bounds connecting and waiting for response headers (0 means
	// openaicompat.DefaultTimeout).
	Timeout time.Duration
	// IdleTimeout bounds the gap between two reads of a stream (0 means
	// providers.DefaultIdleTimeout); a stalled stream fails as transient.
	IdleTimeout time.Duration
	// Models, when not empty, is the allow-list of model ids.
	Models []string
	// CacheTTL is how long discovery results are kept (0: 5 minutes,
	// negative: no cache).
	CacheTTL time.Duration
	// Known adds to or overrides KnownModels.
	Known map[string]openaicompat.KnownModel
	// Retry is the retry policy.
	Retry retry.Policy
	// HTTPClient replaces the client built from Timeout (tests).
	HTTPClient *http.Client
	// Log receives retries (warn); the zero Logger logs nothing.
	Log zerolog.Logger
}

// Provider is the OpenCode Zen provider (chat/completions models only).
type Provider struct {
	*openaicompat.Provider
}

// New validates cfg and returns the provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	known := maps.Clone(KnownModels)
	maps.Copy(known, cfg.Known)
	opts := openaicompat.Options{
		Name: cfg.Name, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Timeout: cfg.Timeout, IdleTimeout: cfg.IdleTimeout, Models: cfg.Models,
		CacheTTL: cfg.CacheTTL, Retry: cfg.Retry, Known: known, HTTPClient: cfg.HTTPClient, Log: cfg.Log,
		Hooks: openaicompat.Hooks{Usable: Usable, UnknownTools: true},
	}
	p, err := openaicompat.New(opts)
	if err != nil {
		return nil, err
	}
	return &Provider{p}, nil
}

// Usable reports whether Zen serves a model over /chat/completions: the
// Claude, GPT and Gemini families use the Anthropic Messages, OpenAI
// Responses and Google protocols instead (Zen docs, notes §4.1).
func Usable(name string) (bool, string) {
	for _, p := range []string{"claude-", "gpt-", "gemini-"} {
		if strings.HasPrefix(name, p) {
			return false, "Zen serves it over another protocol than chat/completions, which this provider does not speak"
		}
	}
	return true, ""
}
