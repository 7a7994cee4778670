package ollama

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/ollama/ollama/api"

	"lemo/providers"
	"lemo/providers/openaicompat"
	"lemo/providers/retry"
)

// Provider talks to an Ollama server: discovery through the ollama api
// client, chat through Lemo's own NDJSON reader. It is safe for concurrent
// use.
type Provider struct {
	cfg Config
	// client serves discovery (List, Show); chatOnce posts to chatURL
	// through hc, the http.Client (and transport) client uses.
	client  *api.Client
	hc      *http.Client
	chatURL string
	// maxResponse is MaxResponseBytes (smaller in tests).
	maxResponse int
	// tools keeps the encoded tool sets of chat requests.
	tools providers.ToolCache

	mu       sync.Mutex
	cached   []providers.ModelInfo
	cachedAt time.Time
}

var _ providers.Provider = (*Provider)(nil)

// New validates cfg, applies the defaults and returns a Provider.
func New(cfg Config) (*Provider, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if cfg.Name == "" {
		cfg.Name = DefaultName
	}
	if cfg.BaseURL == "" {
		cfg.BaseURL = DefaultBaseURL
	}
	if cfg.Timeout == 0 {
		cfg.Timeout = DefaultTimeout
	}
	if cfg.IdleTimeout == 0 {
		cfg.IdleTimeout = providers.DefaultIdleTimeout
	}
	if cfg.CacheTTL == 0 {
		cfg.CacheTTL = DefaultCacheTTL
	}
	if cfg.NumCtxCap == 0 {
		cfg.NumCtxCap = DefaultNumCtxCap
	}
	if cfg.MaxLineBytes == 0 {
		cfg.MaxLineBytes = MaxLineBytes
	}
	cfg.Retry = cfg.Retry.WithDefaults()
	target, _ := url.Parse(strings.TrimRight(cfg.BaseURL, "/"))
	alias := &url.URL{Scheme: target.Scheme, Host: aliasHost, Path: target.Path}
	base := openaicompat.HTTPClient(cfg.HTTPClient, cfg.Timeout)
	rt := base.Transport
	if rt == nil {
		rt = http.DefaultTransport
	}
	hc := &http.Client{Transport: &transport{base: rt, target: target, key: cfg.APIKey},
		Timeout: base.Timeout, Jar: base.Jar}
	return &Provider{cfg: cfg, client: api.NewClient(alias, hc), hc: hc, chatURL: alias.JoinPath("/api/chat").String(),
		maxResponse: MaxResponseBytes}, nil
}

// Name returns the registry name.
func (p *Provider) Name() string { return p.cfg.Name }

// Models lists the chat models (from /api/tags and /api/show), from the
// cache when it is fresh.
func (p *Provider) Models(ctx context.Context) ([]providers.ModelInfo, error) {
	p.mu.Lock()
	if p.cached != nil && p.cfg.CacheTTL > 0 && time.Since(p.cachedAt) < p.cfg.CacheTTL {
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
	ctx, c := withCapture(ctx)
	list, err := p.client.List(ctx)
	if err != nil {
		e := p.classify(ctx, err, c)
		e.Message = "listing models: " + e.Message
		return nil, e
	}
	var names []string
	for _, m := range list.Models {
		if p.allowed(m.Name) {
			names = append(names, m.Name)
		}
	}
	// Describe the models a few at a time: Ollama Cloud lists dozens.
	type result struct {
		info providers.ModelInfo
		ok   bool
		err  error
	}
	results := make([]result, len(names))
	sem := make(chan struct{}, showConcurrency)
	var wg sync.WaitGroup
	for i, name := range names {
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() {
				if v := recover(); v != nil {
					results[i].err = &providers.Error{Provider: p.cfg.Name, Class: providers.ClassTransient,
						Message: fmt.Sprintf("describing model %q: panic: %v", name, v)}
				}
			}()
			sem <- struct{}{}
			defer func() { <-sem }()
			r := &results[i]
			r.info, r.ok, r.err = p.show(ctx, name)
		}()
	}
	wg.Wait()
	out := []providers.ModelInfo{}
	for _, r := range results {
		if r.err != nil {
			return nil, r.err
		}
		if r.ok {
			out = append(out, r.info)
		}
	}
	slices.SortFunc(out, func(a, b providers.ModelInfo) int { return strings.Compare(a.Name, b.Name) })
	return out, nil
}

// showConcurrency bounds concurrent /api/show requests during discovery.
const showConcurrency = 4

// show describes one model; ok is false for a model that cannot chat
// (embedding only) or vanished between the list and the show.
func (p *Provider) show(ctx context.Context, name string) (providers.ModelInfo, bool, error) {
	ctx, c := withCapture(ctx)
	s, err := p.client.Show(ctx, &api.ShowRequest{Model: name})
	if err != nil {
		var se api.StatusError
		if errors.As(err, &se) && se.StatusCode == http.StatusNotFound {
			return providers.ModelInfo{}, false, nil
		}
		e := p.classify(ctx, err, c)
		e.Message = fmt.Sprintf("describing model %q: %s", name, e.Message)
		return providers.ModelInfo{}, false, e
	}
	caps := make(map[string]bool, len(s.Capabilities))
	for _, k := range s.Capabilities {
		caps[string(k)] = true
	}
	if len(caps) > 0 && !caps["completion"] {
		return providers.ModelInfo{}, false, nil
	}
	window := p.cfg.NumCtxCap
	if w, ok := contextLength(s.ModelInfo); ok && w > 0 {
		window = min(w, p.cfg.NumCtxCap)
	}
	return providers.ModelInfo{ID: p.cfg.Name + "/" + name, Provider: p.cfg.Name, Name: name,
		Window: window, Tools: caps["tools"], Reasoning: caps["thinking"]}, true, nil
}

// contextLength reads <arch>.context_length from model_info, falling back
// to any *.context_length key.
func contextLength(info map[string]any) (int, bool) {
	num := func(v any) (int, bool) {
		switch n := v.(type) {
		case float64:
			return int(n), n > 0
		case json.Number:
			i, err := n.Int64()
			return int(i), err == nil && i > 0
		}
		return 0, false
	}
	if arch, ok := info["general.architecture"].(string); ok {
		if w, ok := num(info[arch+".context_length"]); ok {
			return w, true
		}
	}
	keys := make([]string, 0, len(info))
	for k := range info {
		if strings.HasSuffix(k, ".context_length") {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	for _, k := range keys {
		if w, ok := num(info[k]); ok {
			return w, true
		}
	}
	return 0, false
}

func (p *Provider) allowed(name string) bool {
	return len(p.cfg.Models) == 0 || slices.Contains(p.cfg.Models, name)
}

// Model returns the model called name ("llama3.2" also finds
// "llama3.2:latest"). Unknown or disallowed names are ClassModelNotFound.
func (p *Provider) Model(ctx context.Context, name string) (providers.Model, error) {
	notFound := func(msg string) error {
		return &providers.Error{Provider: p.cfg.Name, Class: providers.ClassModelNotFound, Message: msg}
	}
	if !p.allowed(name) && !p.allowed(name+":latest") {
		return nil, notFound(fmt.Sprintf("model %q is not in the configured allow-list (%s)", name, strings.Join(p.cfg.Models, ", ")))
	}
	ms, err := p.Models(ctx)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		if m.Name == name || (!strings.Contains(name, ":") && m.Name == name+":latest") {
			return &Model{p: p, info: m}, nil
		}
	}
	return nil, notFound(fmt.Sprintf("model %q is not offered by %s (pull it first, or check the name)", name, p.cfg.Name))
}

// classify maps an error of a discovery call to a *providers.Error,
// recovering the Retry-After the api client drops from the call's capture.
func (p *Provider) classify(ctx context.Context, err error, c *capture) *providers.Error {
	if ctx.Err() != nil {
		return providers.Cancelled(p.cfg.Name, ctx.Err())
	}
	e := &providers.Error{Provider: p.cfg.Name}
	var ae api.AuthorizationError
	var se api.StatusError
	var ue *url.Error
	switch {
	case errors.As(err, &ae):
		e.Class, e.Status, e.Message = providers.ClassAuth, ae.StatusCode, "unauthorized"
		if p.cfg.APIKey == "" {
			e.Message += " (no API key configured)"
		}
	case errors.As(err, &se):
		e.Status, e.Message = se.StatusCode, se.ErrorMessage
		e.Class = retry.ClassForStatus(se.StatusCode, se.ErrorMessage)
		if h := c.get(); h != nil && (e.Class == providers.ClassRateLimit || e.Class == providers.ClassTransient || e.Class == providers.ClassQuota) {
			e.RetryAfter = retry.ParseRetryAfter(h, time.Now())
		}
	case errors.As(err, &ue):
		e.Class, e.Message, e.Err = providers.ClassTransient, "request failed: "+ue.Err.Error(), ue.Err
	default:
		e.Class, e.Message, e.Err = providers.ClassTransient, "unexpected answer: "+err.Error(), err
	}
	e.Message = retry.CleanMessage(e.Message, p.cfg.APIKey)
	if e.Message == "" && e.Status != 0 {
		e.Message = http.StatusText(e.Status)
	}
	return e
}

// Model is one Ollama model.
type Model struct {
	p    *Provider
	info providers.ModelInfo
}

var _ providers.Model = (*Model)(nil)

// Info describes the model; Window is the num_ctx sent with every chat.
func (m *Model) Info() providers.ModelInfo { return m.info }

// Stream runs one streamed chat, retrying transient and rate-limit
// failures that happen before any output.
func (m *Model) Stream(ctx context.Context, req *providers.Request, emit func(providers.Delta)) (*providers.Response, error) {
	p := m.p
	if req == nil {
		return nil, &providers.Error{Provider: p.cfg.Name, Class: providers.ClassBadRequest, Message: "nil request"}
	}
	chat, err := buildChat(m.info, req)
	if err != nil {
		return nil, &providers.Error{Provider: p.cfg.Name, Class: providers.ClassBadRequest, Message: retry.CleanMessage(err.Error(), ""), Err: err}
	}
	payload, err := chatBody(chat, req, &p.tools)
	if err != nil {
		return nil, &providers.Error{Provider: p.cfg.Name, Class: providers.ClassBadRequest, Message: retry.CleanMessage(err.Error(), ""), Err: err}
	}
	return p.cfg.Retry.Do(ctx, p.cfg.Log, p.cfg.Name, emit, func(ctx context.Context, emit func(providers.Delta)) (*providers.Response, error) {
		return p.chatOnce(ctx, payload, emit)
	})
}

// encodeTools encodes tools as the "tools" array of a chat request; a
// tool whose parameters are not a JSON Schema object is an error.
func encodeTools(tools []providers.ToolSpec) (json.RawMessage, error) {
	wire := make([]api.Tool, len(tools))
	for i, t := range tools {
		var params api.ToolFunctionParameters
		schema := t.Parameters
		if len(schema) == 0 {
			schema = json.RawMessage(`{"type":"object","properties":{}}`)
		}
		if err := json.Unmarshal(schema, &params); err != nil {
			return nil, fmt.Errorf("tool %s: parameters are not a JSON Schema object: %w", t.Name, err)
		}
		wire[i] = api.Tool{Type: "function", Function: api.ToolFunction{Name: t.Name, Description: t.Description, Parameters: params}}
	}
	return json.Marshal(wire)
}

// chatBody encodes chat and adds the tools of req, encoded once per tool
// set (cache) and shared, not copied, by the bodies that offer them.
func chatBody(chat *api.ChatRequest, req *providers.Request, cache *providers.ToolCache) (providers.Body, error) {
	payload, err := json.Marshal(chat)
	if err != nil {
		return nil, fmt.Errorf("encode request: %w", err)
	}
	if len(req.Tools) == 0 {
		return providers.Body{payload}, nil
	}
	tools, err := cache.Encoded(req.Tools, encodeTools)
	if err != nil {
		return nil, err
	}
	return providers.WithFields(payload, providers.Field{Name: "tools", Value: tools}), nil
}

// buildChat turns a providers.Request into an api.ChatRequest that always
// carries options.num_ctx. The tools are not in it: chatBody adds their
// encoding, kept per tool set.
func buildChat(info providers.ModelInfo, req *providers.Request) (*api.ChatRequest, error) {
	stream := true
	chat := &api.ChatRequest{Model: info.Name, Stream: &stream, Options: map[string]any{"num_ctx": info.Window}, Messages: make([]api.Message, 0, len(req.Messages)+1)}
	if req.MaxOutputTokens > 0 {
		chat.Options["num_predict"] = req.MaxOutputTokens
	}
	if info.Reasoning {
		chat.Think = &api.ThinkValue{Value: req.Think}
	}
	if req.System != "" {
		chat.Messages = append(chat.Messages, api.Message{Role: "system", Content: req.System})
	}
	callNames := map[string]string{} // Lemo call id -> function name
	for i, m := range req.Messages {
		am := api.Message{Role: string(m.Role), Content: m.Content}
		switch m.Role {
		case providers.RoleAssistant:
			if len(m.ToolCalls) > 0 {
				am.Thinking = m.Reasoning
			}
			for j, tc := range m.ToolCalls {
				args := api.NewToolCallFunctionArguments()
				if len(tc.Arguments) > 0 {
					if err := json.Unmarshal(tc.Arguments, &args); err != nil {
						return nil, fmt.Errorf("messages[%d].tool_calls[%d] %s: arguments are not a JSON object: %w", i, j, tc.Name, err)
					}
				}
				callNames[tc.ID] = tc.Name
				am.ToolCalls = append(am.ToolCalls, api.ToolCall{ID: tc.ID,
					Function: api.ToolCallFunction{Index: j, Name: tc.Name, Arguments: args}})
			}
		case providers.RoleTool:
			am.ToolCallID, am.ToolName = m.ToolCallID, m.ToolName
			if am.ToolName == "" {
				am.ToolName = callNames[m.ToolCallID]
			}
		}
		chat.Messages = append(chat.Messages, am)
	}
	return chat, nil
}

var _ providers.Embedder = (*Provider)(nil)

// Embed returns the vectors of texts made by the model called model
// (POST /api/embed, one request for all texts; the server truncates a
// text longer than the model's context).
func (p *Provider) Embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	if err := providers.CheckEmbedRequest(p.cfg.Name, model, texts); err != nil {
		return nil, err
	}
	ctx, c := withCapture(ctx)
	c.max = providers.MaxEmbedResponseBytes
	truncate := true
	resp, err := p.client.Embed(ctx, &api.EmbedRequest{Model: model, Input: texts, Truncate: &truncate})
	if err != nil {
		e := p.classify(ctx, err, c)
		if e.Status == http.StatusNotFound {
			e.Class = providers.ClassModelNotFound
		}
		e.Message = fmt.Sprintf("embedding with %q: %s", model, e.Message)
		return nil, e
	}
	if err := providers.CheckEmbeddings(p.cfg.Name, resp.Embeddings, len(texts)); err != nil {
		return nil, err
	}
	return resp.Embeddings, nil
}
