package openaicompat

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers"
	"lemo/providers/retry"
)

// Defaults of Options.
const (
	DefaultTimeout  = 60 * time.Second
	DefaultCacheTTL = 5 * time.Minute
	// maxErrorBody bounds how much of an error response is read.
	maxErrorBody = 64 << 10
)

// KnownModel is a static capability entry for vendors whose discovery does
// not expose them.
type KnownModel struct {
	Window    int
	Tools     bool
	Reasoning bool
}

// DiscoveredModel is one model found by discovery.
type DiscoveredModel struct {
	// Name is the vendor's model id.
	Name string
	// Window is the context window in tokens, 0 when not exposed.
	Window int
	// Tools and Reasoning are the capabilities; Known says discovery
	// exposed them (otherwise the static table or the defaults apply).
	Tools, Reasoning bool
	Known            bool
	// Price is the price discovery published, nil when none.
	Price *providers.Price
}

// Hooks customise the core for one vendor. Every field is optional.
type Hooks struct {
	// Auth sets the credentials on a request. nil sets
	// "Authorization: Bearer <key>" when a key is configured.
	Auth func(h http.Header, key string)
	// Body adds vendor fields to the request body.
	Body func(body *ChatRequest, req *providers.Request, info providers.ModelInfo)
	// DecodeModels decodes the GET /models body. nil uses DecodeModelList.
	DecodeModels func(body []byte) ([]DiscoveredModel, error)
	// Classify may change the class the core chose for an error.
	Classify func(status int, info ErrorInfo, class providers.Class) providers.Class
	// Usable reports whether a discovered model can be used through
	// /chat/completions; why explains a refusal.
	Usable func(name string) (ok bool, why string)
	// EchoReasoningDetails passes reasoning_details from
	// Message.ProviderMetadata back on assistant messages (OpenRouter).
	EchoReasoningDetails bool
	// UnknownTools is the Tools capability assumed for a model that neither
	// discovery nor the Known table describes.
	UnknownTools bool
	// ThinkTags moves a <think>...</think> block at the start of the
	// content into reasoning.
	ThinkTags bool
}

// Options configure a Provider. The vendor packages fill them from their
// Config; field names match those Configs so errors name the right field.
type Options struct {
	// Name is the registry name (required).
	Name string
	// BaseURL is the API root that /models and /chat/completions are
	// joined to, for example https://openrouter.ai/api/v1 (required).
	BaseURL string
	// APIKey is sent by Hooks.Auth; never logged or put in errors.
	APIKey string
	// Timeout bounds connecting and waiting for response headers (0 means
	// DefaultTimeout).
	Timeout time.Duration
	// IdleTimeout bounds the gap between two reads of a stream: a stream
	// that sends nothing for this long fails as transient (0 means
	// providers.DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Models, when not empty, is the allow-list of model names.
	Models []string
	// CacheTTL is how long discovery results are kept (0 means
	// DefaultCacheTTL, negative disables the cache).
	CacheTTL time.Duration
	// Retry is the retry policy.
	Retry retry.Policy
	// MaxLineBytes caps one stream line (0 means DefaultMaxLineBytes).
	MaxLineBytes int
	// MaxResponseBytes caps one answer (0 means DefaultMaxResponseBytes).
	MaxResponseBytes int
	// Headers are sent on every request (OpenRouter HTTP-Referer, X-Title).
	Headers map[string]string
	// Known is the static capability table, by model name.
	Known map[string]KnownModel
	// HTTPClient replaces the client built from Timeout (tests).
	HTTPClient *http.Client
	// Log receives retries (warn); the zero Logger logs nothing. Keys and
	// prompts are never logged.
	Log   zerolog.Logger
	Hooks Hooks
}

// Validate checks o and reports every problem, naming the field (prefixed
// with prefix, for example "openrouter: Config.").
func (o Options) Validate(prefix string) error {
	var errs []error
	if o.Name == "" || strings.Contains(o.Name, "/") {
		errs = append(errs, fmt.Errorf("%sName: %q is not accepted: want a non-empty registry name without '/'", prefix, o.Name))
	}
	if err := ValidateBaseURL(o.BaseURL); err != nil {
		errs = append(errs, fmt.Errorf("%sBaseURL: %w", prefix, err))
	}
	if o.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%sTimeout: %v is not accepted: want 0 (default %v) or a positive duration", prefix, o.Timeout, DefaultTimeout))
	}
	if o.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("%sIdleTimeout: %v is not accepted: want 0 (default %v) or a positive duration", prefix, o.IdleTimeout, providers.DefaultIdleTimeout))
	}
	if o.MaxResponseBytes < 0 {
		errs = append(errs, fmt.Errorf("%sMaxResponseBytes: want 0 (default %d) or a positive byte count", prefix, DefaultMaxResponseBytes))
	}
	if o.MaxLineBytes < 0 {
		errs = append(errs, fmt.Errorf("%sMaxLineBytes: want 0 (default %d) or a positive byte count", prefix, DefaultMaxLineBytes))
	}
	for i, m := range o.Models {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, fmt.Errorf("%sModels[%d]: empty model name", prefix, i))
		}
	}
	if err := o.Retry.Validate(prefix + "Retry."); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ValidateBaseURL accepts an absolute http or https URL with a host.
func ValidateBaseURL(s string) error {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return fmt.Errorf("%q is not accepted: want an absolute http:// or https:// URL such as https://host/v1", s)
	}
	if u.User != nil {
		return errors.New("credentials in the URL are not accepted: use APIKey")
	}
	return nil
}

// MaxIdleConnsPerHost is how many idle connections a provider keeps to its
// server: as many as Tasks that may call it at once, so that each model
// call reuses a connection instead of opening one. Go's default (2) made 50
// Tasks open a new connection for most of their calls.
const MaxIdleConnsPerHost = 256

// HTTPClient returns c, or a client whose transport bounds connecting, the
// TLS handshake and the wait for response headers by timeout, and keeps
// MaxIdleConnsPerHost idle connections for reuse (HTTP/2 where a TLS server
// offers it), and that sends a request of up to providers.WriteBuffer bytes
// in one write (Go's default of 4 KiB took two writes and a copy buffer
// allocated per request for a 16 KiB chat request). It sets no overall
// timeout: a stream is bounded by its context and, between reads, by the
// provider's IdleTimeout (IdleBody).
func HTTPClient(c *http.Client, timeout time.Duration) *http.Client {
	if c != nil {
		return c
	}
	t := http.DefaultTransport.(*http.Transport).Clone()
	t.MaxIdleConns = 0 // no daemon-wide cap: MaxIdleConnsPerHost bounds each server
	t.MaxIdleConnsPerHost = MaxIdleConnsPerHost
	t.WriteBufferSize = providers.WriteBuffer
	t.ForceAttemptHTTP2 = true
	t.DialContext = (&net.Dialer{Timeout: timeout, KeepAlive: 30 * time.Second}).DialContext
	t.TLSHandshakeTimeout = timeout
	t.ResponseHeaderTimeout = timeout
	return &http.Client{Transport: t}
}

// Provider is an OpenAI-compatible provider. It is safe for concurrent use.
type Provider struct {
	opts   Options
	base   string
	client *http.Client
	// tools keeps the encoded tool sets of requests.
	tools providers.ToolCache

	mu       sync.Mutex
	cached   []providers.ModelInfo
	cachedAt time.Time
}

var _ providers.Provider = (*Provider)(nil)

// New validates o and returns a Provider.
func New(o Options) (*Provider, error) {
	if err := o.Validate(o.Name + ": Config."); err != nil {
		return nil, err
	}
	if o.Timeout == 0 {
		o.Timeout = DefaultTimeout
	}
	if o.CacheTTL == 0 {
		o.CacheTTL = DefaultCacheTTL
	}
	if o.IdleTimeout == 0 {
		o.IdleTimeout = providers.DefaultIdleTimeout
	}
	if o.MaxLineBytes == 0 {
		o.MaxLineBytes = DefaultMaxLineBytes
	}
	o.Retry = o.Retry.WithDefaults()
	return &Provider{
		opts:   o,
		base:   strings.TrimRight(o.BaseURL, "/"),
		client: HTTPClient(o.HTTPClient, o.Timeout),
	}, nil
}

// Name returns the registry name.
func (p *Provider) Name() string { return p.opts.Name }

// Models lists the usable models of the allow-list, from the cache when
// it is fresh.
func (p *Provider) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	all, err := p.all(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]providers.ModelInfo, 0, len(all))
	for _, m := range all {
		if p.allowed(m.Name) {
			out = append(out, m)
		}
	}
	return out, nil
}

// all returns every usable model, cached for CacheTTL.
func (p *Provider) all(ctx context.Context) ([]providers.ModelInfo, error) {
	p.mu.Lock()
	if p.cached != nil && p.opts.CacheTTL > 0 && time.Since(p.cachedAt) < p.opts.CacheTTL {
		ms := slices.Clone(p.cached)
		p.mu.Unlock()
		return ms, nil
	}
	p.mu.Unlock()
	ms, err := p.discover(ctx)
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	p.cached, p.cachedAt = ms, time.Now()
	p.mu.Unlock()
	return slices.Clone(ms), nil
}

func (p *Provider) discover(ctx context.Context) ([]providers.ModelInfo, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, p.base+"/models", nil)
	if err != nil {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassBadRequest, Message: "build discovery request", Err: err}
	}
	p.setHeaders(req.Header)
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.opts.Name, ctx.Err())
		}
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassTransient, Message: retry.CleanMessage("listing models failed: "+cause(err), p.opts.APIKey), Err: err}
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, int64(p.opts.MaxLineBytes)))
	if err != nil {
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.opts.Name, ctx.Err())
		}
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassTransient, Message: "reading the model list failed", Err: err}
	}
	if resp.StatusCode >= 400 {
		e := p.httpError(resp, body)
		e.Message = "listing models: " + e.Message
		return nil, e
	}
	decode := p.opts.Hooks.DecodeModels
	if decode == nil {
		decode = DecodeModelList
	}
	found, err := decode(body)
	if err != nil {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassTransient, Message: "decoding the model list failed", Err: err}
	}
	seen := make(map[string]bool, len(found))
	var out []providers.ModelInfo
	for _, d := range found {
		if d.Name == "" || seen[d.Name] {
			continue
		}
		if p.opts.Hooks.Usable != nil {
			if ok, _ := p.opts.Hooks.Usable(d.Name); !ok {
				continue
			}
		}
		seen[d.Name] = true
		out = append(out, p.info(d))
	}
	slices.SortFunc(out, func(a, b providers.ModelInfo) int { return strings.Compare(a.Name, b.Name) })
	if out == nil {
		out = []providers.ModelInfo{}
	}
	return out, nil
}

// info completes a discovered model with the static table and defaults.
func (p *Provider) info(d DiscoveredModel) providers.ModelInfo {
	mi := providers.ModelInfo{ID: p.opts.Name + "/" + d.Name, Provider: p.opts.Name, Name: d.Name,
		Window: d.Window, Tools: d.Tools, Reasoning: d.Reasoning, Price: d.Price}
	k, known := p.opts.Known[d.Name]
	if mi.Window == 0 && known {
		mi.Window = k.Window
	}
	if !d.Known {
		if known {
			mi.Tools, mi.Reasoning = k.Tools, k.Reasoning
		} else {
			mi.Tools = p.opts.Hooks.UnknownTools
		}
	}
	return mi
}

func (p *Provider) allowed(name string) bool {
	return len(p.opts.Models) == 0 || slices.Contains(p.opts.Models, name)
}

func (p *Provider) notFound(msg string) *providers.Error {
	return &providers.Error{Provider: p.opts.Name, Class: providers.ClassModelNotFound, Message: msg}
}

// Model returns the model called name. Names outside the allow-list, or
// not offered by discovery, are ClassModelNotFound. A name with a variant
// suffix (OpenRouter "x/y:nitro") resolves through its base when the
// variant itself is not listed.
func (p *Provider) Model(ctx context.Context, name string) (providers.Model, error) {
	if !p.allowed(name) {
		return nil, p.notFound(fmt.Sprintf("model %q is not in the configured allow-list (%s)", name, strings.Join(p.opts.Models, ", ")))
	}
	if p.opts.Hooks.Usable != nil {
		if ok, why := p.opts.Hooks.Usable(name); !ok {
			return nil, p.notFound(fmt.Sprintf("model %q cannot be used: %s", name, why))
		}
	}
	ms, err := p.all(ctx)
	if err != nil {
		return nil, err
	}
	base, _, hasVariant := strings.Cut(name, ":")
	for _, try := range []string{name, base} {
		for _, m := range ms {
			if m.Name == try {
				m.Name, m.ID = name, p.opts.Name+"/"+name
				return &Model{p: p, info: m}, nil
			}
		}
		if !hasVariant {
			break
		}
	}
	return nil, p.notFound(fmt.Sprintf("model %q is not offered by %s", name, p.opts.Name))
}

// DecodeModelList decodes {"data":[{"id":...}]}, reading a context
// window from context_length, max_model_len (vLLM) or context_window when a
// server adds one.
func DecodeModelList(body []byte) ([]DiscoveredModel, error) {
	var list struct {
		Data []struct {
			ID            string `json:"id"`
			ContextLength *int   `json:"context_length"`
			MaxModelLen   *int   `json:"max_model_len"`
			ContextWindow *int   `json:"context_window"`
		} `json:"data"`
	}
	if err := json.Unmarshal(body, &list); err != nil {
		return nil, err
	}
	out := make([]DiscoveredModel, 0, len(list.Data))
	for _, d := range list.Data {
		m := DiscoveredModel{Name: d.ID}
		for _, w := range []*int{d.ContextLength, d.MaxModelLen, d.ContextWindow} {
			if w != nil && *w > 0 && m.Window == 0 {
				m.Window = *w
			}
		}
		out = append(out, m)
	}
	return out, nil
}

func (p *Provider) setHeaders(h http.Header) {
	for k, v := range p.opts.Headers {
		h.Set(k, v)
	}
	if p.opts.Hooks.Auth != nil {
		p.opts.Hooks.Auth(h, p.opts.APIKey)
	} else if p.opts.APIKey != "" {
		h.Set("Authorization", "Bearer "+p.opts.APIKey)
	}
}
