package openrouter

import (
	"encoding/json"
	"errors"
	"math"
	"net/http"
	"slices"
	"strconv"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers"
	"lemo/providers/openaicompat"
	"lemo/providers/retry"
)

// Conventional names and defaults.
const (
	// EnvAPIKey is the conventional variable cmd/lemo reads the key from.
	EnvAPIKey      = "OPENROUTER_API_KEY"
	DefaultName    = "openrouter"
	DefaultBaseURL = "https://openrouter.ai/api/v1"
)

// Config configures the OpenRouter provider.
type Config struct {
	// Name is the registry name (default "openrouter").
	Name string
	// BaseURL is the API root (default DefaultBaseURL).
	BaseURL string
	// APIKey is required; it is never logged nor put in errors.
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
	// ReasoningEffort is sent as reasoning.effort when a request asks to
	// think ("" sends reasoning.enabled=true and lets the model choose).
	ReasoningEffort string
	// Referer and Title are OpenRouter's optional attribution headers
	// (HTTP-Referer, X-Title).
	Referer, Title string
	// Retry is the retry policy.
	Retry retry.Policy
	// HTTPClient replaces the client built from Timeout (tests).
	HTTPClient *http.Client
	// Log receives retries (warn); the zero Logger logs nothing.
	Log zerolog.Logger
}

var efforts = []string{"", "max", "xhigh", "high", "medium", "low", "minimal", "none"}

// Provider is the OpenRouter provider.
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
	var errs []error
	if cfg.APIKey == "" {
		errs = append(errs, errors.New("openrouter: Config.APIKey: required (cmd/lemo reads it from "+EnvAPIKey+")"))
	}
	if !slices.Contains(efforts, cfg.ReasoningEffort) {
		errs = append(errs, errors.New("openrouter: Config.ReasoningEffort: "+cfg.ReasoningEffort+" is not accepted: want one of max, xhigh, high, medium, low, minimal, none, or empty"))
	}
	headers := map[string]string{}
	if cfg.Referer != "" {
		headers["HTTP-Referer"] = cfg.Referer
	}
	if cfg.Title != "" {
		headers["X-Title"] = cfg.Title
	}
	opts := openaicompat.Options{
		Name: cfg.Name, BaseURL: cfg.BaseURL, APIKey: cfg.APIKey, Timeout: cfg.Timeout, IdleTimeout: cfg.IdleTimeout, Models: cfg.Models,
		CacheTTL: cfg.CacheTTL, Retry: cfg.Retry, Headers: headers, HTTPClient: cfg.HTTPClient, Log: cfg.Log,
		Hooks: openaicompat.Hooks{
			Body:                 reasoningBody(cfg.ReasoningEffort),
			DecodeModels:         DecodeModels,
			EchoReasoningDetails: true,
		},
	}
	if err := opts.Validate("openrouter: Config."); err != nil {
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

// reasoningBody asks a reasoning model to reason when the request says so.
func reasoningBody(effort string) func(*openaicompat.ChatRequest, *providers.Request, providers.ModelInfo) {
	return func(b *openaicompat.ChatRequest, req *providers.Request, info providers.ModelInfo) {
		if !req.Think || !info.Reasoning {
			return
		}
		if effort != "" {
			b.Reasoning = map[string]any{"effort": effort}
		} else {
			b.Reasoning = map[string]any{"enabled": true}
		}
	}
}

// DecodeModels reads OpenRouter's /models: the window is
// top_provider.context_length, else context_length; supported_parameters
// says tools and reasoning.
func DecodeModels(body []byte) ([]openaicompat.DiscoveredModel, error) {
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			ContextLength *int   `json:"context_length"`
			TopProvider   *struct {
				ContextLength *int `json:"context_length"`
			} `json:"top_provider"`
			SupportedParameters []string `json:"supported_parameters"`
			Pricing             *struct {
				Prompt         string `json:"prompt"`
				Completion     string `json:"completion"`
				InputCacheRead string `json:"input_cache_read"`
			} `json:"pricing"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	out := make([]openaicompat.DiscoveredModel, 0, len(list.Data))
	for _, m := range list.Data {
		d := openaicompat.DiscoveredModel{Name: m.ID, Known: true,
			Tools:     slices.Contains(m.SupportedParameters, "tools"),
			Reasoning: slices.Contains(m.SupportedParameters, "reasoning") || slices.Contains(m.SupportedParameters, "include_reasoning"),
		}
		if m.TopProvider != nil && m.TopProvider.ContextLength != nil && *m.TopProvider.ContextLength > 0 {
			d.Window = *m.TopProvider.ContextLength
		} else if m.ContextLength != nil && *m.ContextLength > 0 {
			d.Window = *m.ContextLength
		}
		if m.Pricing != nil {
			d.Price = price(m.Pricing.Prompt, m.Pricing.Completion, m.Pricing.InputCacheRead)
		}
		out = append(out, d)
	}
	return out, nil
}

// price reads OpenRouter's per-token prices (decimal strings in US
// dollars) as dollars per million tokens; nil when the prompt or
// completion price is missing or not a number ("-1" marks a variable
// price, which is no price). A missing cache price is the input price.
func price(prompt, completion, cacheRead string) *providers.Price {
	in, err1 := strconv.ParseFloat(prompt, 64)
	out, err2 := strconv.ParseFloat(completion, 64)
	if err1 != nil || err2 != nil || in < 0 || out < 0 || math.IsNaN(in) || math.IsNaN(out) || math.IsInf(in, 0) || math.IsInf(out, 0) {
		return nil
	}
	p := &providers.Price{Input: in * 1e6, Output: out * 1e6, CachedInput: in * 1e6}
	if c, err := strconv.ParseFloat(cacheRead, 64); err == nil && c >= 0 && !math.IsInf(c, 0) {
		p.CachedInput = c * 1e6
	}
	return p
}
