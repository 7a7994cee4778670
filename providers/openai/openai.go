package openai

import (
	"errors"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers"
	"lemo/providers/openaicompat"
	"lemo/providers/retry"
)

// DefaultName is the default registry name.
const DefaultName = "openai"

// Config configures a plain OpenAI-compatible provider (vLLM, llama.cpp
// server, LM Studio, a fake in tests).
type Config struct {
	// Name is the registry name (default "openai").
	Name string
	// BaseURL is the API root, for example http://127.0.0.1:8000/v1
	// (required).
	BaseURL string
	// APIKey is optional; sent as a Bearer token. Never logged nor put in
	// errors.
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
	// Known describes models whose window or capabilities the server does
	// not report. Unknown models have tools and no reasoning; the window
	// comes from max_model_len/context_length when the server sends it.
	Known map[string]openaicompat.KnownModel
	// NoStreamUsage stops sending stream_options.include_usage, for
	// servers that reject it.
	NoStreamUsage bool
	// ThinkTags moves a <think>...</think> block at the start of the
	// answer into reasoning (servers without a reasoning parser).
	ThinkTags bool
	// Retry is the retry policy.
	Retry retry.Policy
	// HTTPClient replaces the client built from Timeout (tests).
	HTTPClient *http.Client
	// Log receives retries (warn); the zero Logger logs nothing.
	Log zerolog.Logger
}

// Provider is a plain OpenAI-compatible provider.
type Provider struct {
	*openaicompat.Provider
}

// New validates cfg and returns the provider.
func New(cfg Config) (*Provider, error) {
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.BaseURL == "" {
		return nil, errors.New("openai: Config.BaseURL: required: want the API root, for example http://127.0.0.1:8000/v1")
	}
	hooks := openaicompat.Hooks{UnknownTools: true, ThinkTags: cfg.ThinkTags}
	if !cfg.NoStreamUsage {
		hooks.Body = func(b *openaicompat.ChatRequest, _ *providers.Request, _ providers.ModelInfo) {
			b.StreamOptions = &openaicompat.StreamOptions{IncludeUsage: true}
		}
	}
	p, err := openaicompat.New(openaicompat.Options{
		Name: cfg.Name, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Timeout: cfg.Timeout, IdleTimeout: cfg.IdleTimeout, Models: cfg.Models,
		CacheTTL: cfg.CacheTTL, Retry: cfg.Retry, Known: cfg.Known, HTTPClient: cfg.HTTPClient, Log: cfg.Log, Hooks: hooks,
	})
	if err != nil {
		return nil, err
	}
	return &Provider{p}, nil
}
