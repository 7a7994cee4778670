package nvidia

import (
	"errors"
	"maps"
	"net/http"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers"
	"lemo/providers/openaicompat"
	"lemo/providers/retry"
)

// Conventional names and defaults.
const (
	// EnvAPIKey is the conventional variable cmd/lemo reads the key from.
	EnvAPIKey      = "NVIDIA_API_KEY"
	DefaultName    = "nvidia"
	DefaultBaseURL = "https://integrate.api.nvidia.com/v1"
)

// KnownModels is the static capability table: NVIDIA's /models exposes no
// window or capability. Source: the model cards on build.nvidia.com and
// the vendors' published context lengths, as recorded on 2026-02-27; a
// model missing here reports Window 0 (unknown) and no tools. Config.Known
// adds or overrides entries.
var KnownModels = map[string]openaicompat.KnownModel{
	"meta/llama-3.1-8b-instruct":                    {Window: 131072, Tools: true},
	"meta/llama-3.1-70b-instruct":                   {Window: 131072, Tools: true},
	"meta/llama-3.1-405b-instruct":                  {Window: 131072, Tools: true},
	"meta/llama-3.3-70b-instruct":                   {Window: 131072, Tools: true},
	"deepseek-ai/deepseek-v3.1":                     {Window: 131072, Tools: true, Reasoning: true},
	"deepseek-ai/deepseek-r1":                       {Window: 131072, Reasoning: true},
	"nvidia/llama-3.3-nemotron-super-49b-v1.5":      {Window: 131072, Tools: true, Reasoning: true},
	"nvidia/nvidia-nemotron-nano-9b-v2":             {Window: 131072, Tools: true, Reasoning: true},
	"qwen/qwen3-coder-480b-a35b-instruct":           {Window: 262144, Tools: true},
	"moonshotai/kimi-k2-instruct":                   {Window: 131072, Tools: true},
	"openai/gpt-oss-120b":                           {Window: 131072, Tools: true, Reasoning: true},
	"openai/gpt-oss-20b":                            {Window: 131072, Tools: true, Reasoning: true},
	"mistralai/mistral-small-3.1-24b-instruct-2503": {Window: 131072, Tools: true},
}

// Config configures the NVIDIA NIM provider.
type Config struct {
	// Name is the registry name (default "nvidia").
	Name string
	// BaseURL is the API root (default DefaultBaseURL).
	BaseURL string
	// APIKey (nvapi-...) is required; never logged nor put in errors.
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

// Provider is the NVIDIA NIM provider.
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
		Hooks: openaicompat.Hooks{Body: body, ThinkTags: true},
	}
	var errs []error
	if cfg.APIKey == "" {
		errs = append(errs, errors.New("nvidia: Config.APIKey: required (cmd/lemo reads it from "+EnvAPIKey+")"))
	}
	if err := opts.Validate("nvidia: Config."); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	p, err := openaicompat.New(opts)
	if err != nil {
		return nil, err
	}
	return &Provider{p}, nil
}

// body asks for the usage chunk and, for reasoning models asked to think,
// enables thinking in the chat template (DeepSeek v3.1 style).
func body(b *openaicompat.ChatRequest, req *providers.Request, info providers.ModelInfo) {
	b.StreamOptions = &openaicompat.StreamOptions{IncludeUsage: true}
	if req.Think && info.Reasoning {
		b.ChatTemplateKwargs = map[string]any{"thinking": true}
	}
}
