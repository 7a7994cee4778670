package fake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// OpenRouterModels is the fake OpenRouter catalogue (the rich /models
// schema); ContextLength -1 encodes null. Pricing is OpenRouter's
// pricing object: US dollars per token as decimal strings (prompt,
// completion, input_cache_read; "" leaves a field out, "-1" is a variable
// price).
var OpenRouterModels = []struct {
	ID                  string
	ContextLength       int
	TopProviderContext  int
	SupportedParameters []string
	Pricing             [3]string
}{
	{"openai/gpt-4o", 128000, 128000, []string{"tools", "tool_choice", "max_tokens", "temperature"}, [3]string{"0.0000025", "0.00001", "0.00000125"}},
	{"anthropic/claude-sonnet-4.5", 1000000, 200000, []string{"tools", "tool_choice", "reasoning", "include_reasoning"}, [3]string{"0.000003", "0.000015", "0.0000003"}},
	{"deepseek/deepseek-r1:free", 163840, 0, []string{"reasoning", "include_reasoning", "max_tokens"}, [3]string{"0", "0", ""}},
	{"meta-llama/llama-3.3-70b-instruct:free", 131072, 65536, []string{"tools", "tool_choice"}, [3]string{"0", "0", ""}},
	{"mystery/null-context", -1, 0, []string{"temperature"}, [3]string{"-1", "-1", ""}},
}

// NVIDIAModels is the fake NVIDIA catalogue: a duplicate id and non-chat
// models, no context data.
var NVIDIAModels = []string{
	"meta/llama-3.3-70b-instruct", "meta/llama-3.3-70b-instruct", "deepseek-ai/deepseek-v3.1", "deepseek-ai/deepseek-r1",
	"nvidia/nv-embedqa-mistral-7b-v2", "nvidia/llama-3.1-nemotron-70b-reward", "acme/unknown-chat",
}

// ZenModels is the fake OpenCode Zen catalogue (chat/completions models and
// models of other protocols).
var ZenModels = []string{"glm-5", "kimi-k2.5", "big-pickle", "minimax-m2.5-free", "claude-sonnet-4-5", "gpt-5.1", "gemini-3-pro", "acme-unknown"}

// OpenAIModels is the fake plain OpenAI-compatible (vLLM-like) catalogue:
// name → max_model_len (0: not reported).
var OpenAIModels = map[string]int{"local-model": 32768, "other-model": 0}

// openRouterPricing is a catalogue entry's pricing object, with the zero
// fields OpenRouter sends beside the ones that matter here.
func openRouterPricing(p [3]string) map[string]string {
	out := map[string]string{"prompt": p[0], "completion": p[1], "request": "0", "image": "0", "web_search": "0", "internal_reasoning": "0"}
	if p[2] != "" {
		out["input_cache_read"] = p[2]
	}
	return out
}

func (s *Server) catalogue() []string {
	switch s.flavor {
	case FlavorOpenRouter:
		var ids []string
		for _, m := range OpenRouterModels {
			ids = append(ids, m.ID)
		}
		return ids
	case FlavorNVIDIA:
		return NVIDIAModels
	case FlavorZen:
		return ZenModels
	}
	return []string{"local-model", "other-model"}
}

func (s *Server) known(model string) bool {
	for _, id := range s.catalogue() {
		if id == model {
			return true
		}
	}
	return false
}

func (s *Server) serveOpenAI(w http.ResponseWriter, r *http.Request, body []byte) {
	path := strings.TrimPrefix(r.URL.Path, s.prefix())
	if path == r.URL.Path {
		s.writeFlavorError(w, Scenario{Status: http.StatusNotFound, Body: "404 page not found", ContentType: "text/plain"}, "")
		return
	}
	switch {
	case path == "/models" && r.Method == http.MethodGet:
		s.openaiModels(w, r)
	case path == "/chat/completions" && r.Method == http.MethodPost:
		s.openaiChat(w, r, body)
	case path == "/embeddings" && r.Method == http.MethodPost:
		s.openaiEmbed(w, body)
	default:
		s.writeFlavorError(w, Scenario{Status: http.StatusNotFound, Body: "404 page not found", ContentType: "text/plain"}, "")
	}
}

func (s *Server) openaiModels(w http.ResponseWriter, r *http.Request) {
	if s.flavor == FlavorOpenRouter {
		var data []map[string]any
		for _, m := range OpenRouterModels {
			e := map[string]any{"id": m.ID, "canonical_slug": m.ID, "name": m.ID, "created": 1692901234,
				"pricing":              openRouterPricing(m.Pricing),
				"supported_parameters": m.SupportedParameters, "per_request_limits": nil,
				"links": map[string]string{"details": "/api/v1/models/" + m.ID + "/endpoints"}}
			if m.ContextLength >= 0 {
				e["context_length"] = m.ContextLength
			} else {
				e["context_length"] = nil
			}
			tp := map[string]any{"max_completion_tokens": 4096, "is_moderated": false, "context_length": nil}
			if m.TopProviderContext > 0 {
				tp["context_length"] = m.TopProviderContext
			}
			e["top_provider"] = tp
			for _, p := range m.SupportedParameters {
				if p == "reasoning" {
					e["reasoning"] = map[string]any{"supported_efforts": []string{"high", "medium", "low"}, "default_effort": "medium", "mandatory": false}
				}
			}
			data = append(data, e)
		}
		writeJSON(w, map[string]any{"data": data, "total_count": len(data), "links": map[string]any{"next": nil}})
		return
	}
	var data []map[string]any
	for _, id := range s.catalogue() {
		e := map[string]any{"id": id, "object": "model", "created": 735790403, "owned_by": strings.Split(id, "/")[0]}
		switch s.flavor {
		case FlavorZen:
			e["created"], e["owned_by"] = time.Now().Unix(), "opencode"
		case FlavorOpenAI:
			if n := OpenAIModels[id]; n > 0 {
				e["max_model_len"] = n
			}
		}
		data = append(data, e)
	}
	writeJSON(w, map[string]any{"object": "list", "data": data})
}

// defaultErrorBody is the flavour's error envelope for a status.
func (s *Server) defaultErrorBody(sc Scenario, model string) (string, string) {
	st := sc.Status
	msg := sc.Message
	if msg == "" {
		msg = http.StatusText(st)
	}
	switch s.flavor {
	case FlavorOpenRouter:
		e := map[string]any{"code": st, "message": msg}
		switch st {
		case http.StatusTooManyRequests:
			e["metadata"] = map[string]any{"error_type": "rate_limit_exceeded"}
		case http.StatusBadRequest:
			if sc.Message == "" {
				e["message"] = model + " is not a valid model ID"
			}
		}
		return string(mustJSON(map[string]any{"error": e})), "application/json"
	case FlavorNVIDIA:
		if st == http.StatusNotFound && sc.Message == "" {
			return "404 page not found", "text/plain; charset=utf-8"
		}
		p := map[string]any{"status": st, "title": http.StatusText(st)}
		if sc.Message != "" {
			p["detail"] = sc.Message
		}
		return string(mustJSON(p)), "application/problem+json"
	case FlavorZen:
		typ := "error"
		switch st {
		case http.StatusUnauthorized:
			typ = "AuthError"
		case http.StatusTooManyRequests:
			typ = "RateLimitError"
		case http.StatusForbidden:
			typ = "RegionError"
		case http.StatusInternalServerError:
			if sc.Message == "" {
				msg = "Internal server error"
			}
		}
		v := map[string]any{"type": "error", "error": map[string]any{"type": typ, "message": msg}}
		if st == http.StatusTooManyRequests {
			v["metadata"] = map[string]any{}
		}
		return string(mustJSON(v)), "application/json"
	}
	return string(mustJSON(map[string]any{"error": map[string]any{"message": msg, "type": "invalid_request_error", "code": nil}})), "application/json"
}

func (s *Server) writeFlavorError(w http.ResponseWriter, sc Scenario, model string) {
	b, ct := s.defaultErrorBody(sc, model)
	writeError(w, sc, b, ct)
}

type openaiChatReq struct {
	Model    string `json:"model"`
	Messages []struct {
		Role string `json:"role"`
		// Content is a string, null, or an array of parts
		// ({"type":"text","text":...}), as OpenAI accepts.
		Content json.RawMessage `json:"content"`
	} `json:"messages"`
	StreamOptions *struct {
		IncludeUsage bool `json:"include_usage"`
	} `json:"stream_options"`
}

func (s *Server) openaiChat(w http.ResponseWriter, r *http.Request, body []byte) {
	var req openaiChatReq
	if err := json.Unmarshal(body, &req); err != nil {
		if s.flavor == FlavorNVIDIA {
			writeError(w, Scenario{Status: 500, Body: "failed to decode json body: " + err.Error(), ContentType: "text/plain"}, "", "")
			return
		}
		s.writeFlavorError(w, Scenario{Status: 400, Message: "invalid JSON body"}, "")
		return
	}
	free := s.flavor == FlavorZen && (strings.HasSuffix(req.Model, "-free") || req.Model == "big-pickle")
	if !s.bearer(r) && !free {
		switch s.flavor {
		case FlavorNVIDIA:
			s.writeFlavorError(w, Scenario{Status: http.StatusForbidden, Message: "Authorization failed"}, "")
		case FlavorOpenRouter:
			s.writeFlavorError(w, Scenario{Status: http.StatusUnauthorized, Message: "No auth credentials found"}, "")
		case FlavorZen:
			s.writeFlavorError(w, Scenario{Status: http.StatusUnauthorized, Message: "Missing API key."}, "")
		default:
			writeError(w, Scenario{Status: 401, Body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}, "", "")
		}
		return
	}
	if !s.known(req.Model) {
		switch s.flavor {
		case FlavorOpenRouter:
			s.writeFlavorError(w, Scenario{Status: 400}, req.Model)
		case FlavorNVIDIA:
			s.writeFlavorError(w, Scenario{Status: 404}, req.Model)
		case FlavorZen:
			writeError(w, Scenario{Status: 401, Body: `{"type":"error","error":{"type":"ModelError","message":"Model ` + req.Model + ` not supported"}}`}, "", "")
		default:
			writeError(w, Scenario{Status: 404, Body: `{"error":{"message":"The model '` + req.Model + `' does not exist","type":"invalid_request_error","code":"model_not_found"}}`}, "", "")
		}
		return
	}
	msgs := make([]lastMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = lastMessage{role: m.Role, content: contentText(m.Content)}
	}
	sc := s.pick(answered(msgs))
	if sc.Status >= 400 {
		s.writeFlavorError(w, sc, req.Model)
		return
	}
	if sc.JSONAnswer {
		s.openaiWhole(w, req, sc)
		return
	}
	s.openaiStream(w, r, req, sc)
}

// openaiWhole answers with one non-streamed completion.
func (s *Server) openaiWhole(w http.ResponseWriter, req openaiChatReq, sc Scenario) {
	for k, v := range sc.Headers {
		w.Header().Set(k, v)
	}
	msg := map[string]any{"role": "assistant", "content": strings.Join(sc.Text, "")}
	if len(sc.Reasoning) > 0 {
		msg["reasoning_content"] = strings.Join(sc.Reasoning, "")
	}
	var calls []any
	for i, c := range sc.ToolCalls {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%d%d", s.seq.Add(1), i)
		}
		calls = append(calls, map[string]any{"id": id, "type": "function", "function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
	}
	if calls != nil {
		msg["tool_calls"] = calls
	}
	choice := map[string]any{"index": 0, "message": msg, "finish_reason": "stop"}
	if len(calls) > 0 {
		choice["finish_reason"] = "tool_calls"
	}
	if sc.Finish != "" {
		choice["finish_reason"] = sc.Finish
	}
	if sc.MidStreamError != "" {
		choice["finish_reason"] = "error"
		choice["error"] = map[string]any{"code": 502, "message": sc.MidStreamError}
	}
	u := sc.usage()
	writeJSON(w, map[string]any{"id": "gen-" + strconv.FormatInt(s.seq.Add(1), 10), "object": "chat.completion", "model": req.Model,
		"choices": []any{choice}, "usage": map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion}})
}

// sse writes SSE events in the flavour's style.
type sse struct {
	s     *Server
	w     http.ResponseWriter
	sc    Scenario
	id    string
	model string
	// head and tail frame a single-choice delta chunk; only the delta
	// object goes between them (cheap enough for benchmarks).
	head, tail []byte
	buf        []byte
}

func (e *sse) comments() {
	for i := 0; i < e.sc.KeepAlives; i++ {
		_, _ = io.WriteString(e.w, ": OPENROUTER PROCESSING\n\n")
	}
}

func (e *sse) data(v []byte) {
	e.comments()
	_, _ = io.WriteString(e.w, "data: ")
	_, _ = e.w.Write(v)
	_, _ = io.WriteString(e.w, "\n\n")
	flush(e.w)
}

// chunk writes a chat.completion.chunk with the given choices.
func (e *sse) chunk(choices []map[string]any, extra map[string]any) {
	v := map[string]any{"id": e.id, "object": "chat.completion.chunk", "created": 1750000000, "model": e.model, "choices": choices}
	switch e.s.flavor {
	case FlavorOpenRouter:
		v["provider"] = "FakeProvider"
	case FlavorNVIDIA:
		v["nvext"] = map[string]any{"worker_id": "fake-worker"}
	}
	for k, x := range extra {
		v[k] = x
	}
	e.data(mustJSON(v))
}

func (e *sse) delta(d map[string]any) {
	e.deltaRaw(mustJSON(d))
}

// content streams one text delta.
func (e *sse) content(t string) {
	q, _ := json.Marshal(t)
	e.buf = append(append(append(e.buf[:0], `{"content":`...), q...), '}')
	e.deltaRaw(e.buf)
}

func (e *sse) deltaRaw(d []byte) {
	if e.head == nil {
		v := map[string]any{"id": e.id, "object": "chat.completion.chunk", "created": 1750000000, "model": e.model, "choices": "\x00"}
		switch e.s.flavor {
		case FlavorOpenRouter:
			v["provider"] = "FakeProvider"
		case FlavorNVIDIA:
			v["nvext"] = map[string]any{"worker_id": "fake-worker"}
		}
		head, tail, _ := strings.Cut(string(mustJSON(v)), `"\u0000"`)
		e.head = []byte(head + `[{"index":0,"delta":`)
		e.tail = []byte(`,"finish_reason":null}]` + tail)
	}
	e.comments()
	_, _ = io.WriteString(e.w, "data: ")
	_, _ = e.w.Write(e.head)
	_, _ = e.w.Write(d)
	_, _ = e.w.Write(e.tail)
	_, _ = io.WriteString(e.w, "\n\n")
	flush(e.w)
}

func (s *Server) openaiStream(w http.ResponseWriter, r *http.Request, req openaiChatReq, sc Scenario) {
	for k, v := range sc.Headers {
		w.Header().Set(k, v)
	}
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	if s.flavor == FlavorNVIDIA {
		w.Header().Set("Nvcf-Reqid", "fake-"+strconv.FormatInt(s.seq.Add(1), 10))
	}
	w.WriteHeader(http.StatusOK)
	e := &sse{s: s, w: w, sc: sc, id: "gen-" + strconv.FormatInt(s.seq.Add(1), 10), model: req.Model}
	if sc.HugeLine > 0 {
		_, _ = io.WriteString(w, "data: "+strings.Repeat("a", sc.HugeLine)+"\n\n")
	}
	if s.flavor == FlavorOpenRouter {
		_, _ = io.WriteString(w, ": OPENROUTER PROCESSING\n\n")
		flush(w)
	}
	e.delta(map[string]any{"role": "assistant", "content": ""})
	if sc.InlineThink && len(sc.Reasoning) > 0 {
		e.content("<think>")
		for _, t := range sc.Reasoning {
			e.content(t)
		}
		e.content("</think>\n\n")
		sc.Reasoning = nil
	}
	for i, t := range sc.Reasoning {
		switch s.flavor {
		case FlavorOpenRouter:
			e.delta(map[string]any{"content": "", "reasoning": t, "reasoning_details": []any{map[string]any{
				"type": "reasoning.text", "text": t, "signature": nil, "id": nil, "format": "anthropic-claude-v1", "index": i}}})
		default:
			e.delta(map[string]any{"content": nil, "reasoning_content": t})
		}
	}
	if s.flavor == FlavorOpenRouter && len(sc.Reasoning) > 0 {
		e.delta(map[string]any{"content": nil, "reasoning": nil, "reasoning_details": []any{map[string]any{
			"type": "reasoning.encrypted", "data": "ZmFrZS1zaWduYXR1cmU=", "id": "rs_1", "format": "anthropic-claude-v1", "index": len(sc.Reasoning)}}})
	}
	for _, t := range sc.Text {
		e.content(t)
	}
	for i, c := range sc.ToolCalls {
		id := c.ID
		if id == "" {
			switch s.flavor {
			case FlavorNVIDIA:
				id = fmt.Sprintf("chatcmpl-tool-%x", s.seq.Add(1)*7919+int64(i))
			case FlavorOpenRouter:
				id = fmt.Sprintf("toolu_%02d%d", s.seq.Add(1), i)
			default:
				id = fmt.Sprintf("call_%d%d", s.seq.Add(1), i)
			}
		}
		args := c.Arguments
		first := ""
		if sc.WholeArgs {
			first, args = args, ""
		}
		e.delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "id": id, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": first}}}})
		for len(args) > 0 {
			n := min(len(args), max(1, len(c.Arguments)/3))
			e.delta(map[string]any{"tool_calls": []any{map[string]any{"index": i, "function": map[string]any{"arguments": args[:n]}}}})
			args = args[n:]
		}
	}
	switch {
	case sc.MidStreamError != "":
		msg := sc.MidStreamError
		if strings.HasPrefix(msg, "{") {
			e.data([]byte(msg))
			return
		}
		if s.flavor == FlavorOpenRouter {
			e.chunk([]map[string]any{{"index": 0, "delta": map[string]any{"content": ""}, "finish_reason": "error"}},
				map[string]any{"error": map[string]any{"code": 502, "message": msg, "metadata": map[string]any{"error_type": "provider_unavailable"}}})
		} else {
			e.data(mustJSON(map[string]any{"error": map[string]any{"object": "error", "message": msg, "type": "InternalServerError", "code": 500}}))
		}
		return
	case sc.Truncate:
		return
	case sc.Hold:
		s.hold(r)
		return
	}
	finish := sc.Finish
	if finish == "" {
		finish = "stop"
		if len(sc.ToolCalls) > 0 {
			finish = "tool_calls"
		}
	}
	fc := map[string]any{"index": 0, "delta": map[string]any{}, "finish_reason": finish}
	switch s.flavor {
	case FlavorOpenRouter:
		fc["delta"] = map[string]any{"content": ""}
		fc["native_finish_reason"] = finish
	case FlavorNVIDIA:
		fc["stop_reason"] = 128008
	}
	e.chunk([]map[string]any{fc}, nil)
	u := sc.usage()
	usage := map[string]any{"prompt_tokens": u.Prompt, "completion_tokens": u.Completion, "total_tokens": u.Prompt + u.Completion}
	wantUsage := s.flavor == FlavorOpenRouter || s.flavor == FlavorZen || (req.StreamOptions != nil && req.StreamOptions.IncludeUsage)
	if wantUsage {
		if s.flavor == FlavorOpenRouter {
			usage["cost"] = 0.00123
		}
		e.chunk([]map[string]any{}, map[string]any{"usage": usage})
	}
	if sc.NoDone {
		return
	}
	e.data([]byte("[DONE]"))
	if s.flavor == FlavorZen {
		e.data([]byte(`{"id":"","object":"chat.completion.chunk","created":0,"model":"","choices":[],"cost":"0.0012"}`))
	}
}

// contentText returns the text of a message's content: the string itself,
// or the text parts joined, or "" for null and other parts.
func contentText(raw json.RawMessage) string {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Type string `json:"type"`
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) != nil {
		return ""
	}
	var b strings.Builder
	for _, p := range parts {
		if p.Type == "text" {
			b.WriteString(p.Text)
		}
	}
	return b.String()
}
