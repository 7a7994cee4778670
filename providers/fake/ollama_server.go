package fake

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
	"time"
)

// OllamaModel is one model of the fake Ollama catalogue.
type OllamaModel struct {
	Name         string
	Arch         string
	Window       int // 0: no <arch>.context_length key
	Capabilities []string
	Remote       bool // a cloud model proxied by a local daemon
}

// OllamaModels is the fake Ollama catalogue.
var OllamaModels = []OllamaModel{
	{Name: "qwen3:8b", Arch: "qwen3", Window: 40960, Capabilities: []string{"completion", "tools", "thinking"}},
	{Name: "llama3.2:latest", Arch: "llama", Window: 131072, Capabilities: []string{"completion", "tools"}},
	{Name: "gpt-oss:120b-cloud", Arch: "gptoss", Window: 131072, Capabilities: []string{"completion", "tools", "thinking"}, Remote: true},
	{Name: "nomic-embed-text:latest", Arch: "nomic-bert", Window: 2048, Capabilities: []string{"embedding"}},
	{Name: "mystery:latest", Arch: "mystery", Capabilities: []string{"completion"}},
}

func ollamaModel(name string) (OllamaModel, bool) {
	for _, m := range OllamaModels {
		if m.Name == name || strings.TrimSuffix(m.Name, ":latest") == name {
			return m, true
		}
	}
	return OllamaModel{}, false
}

func ollamaErr(msg string) string { return string(mustJSON(map[string]string{"error": msg})) }

func ollamaErrorBody(sc Scenario, model string) (string, string) {
	msg := sc.Message
	switch sc.Status {
	case http.StatusUnauthorized:
		return `{"error":"unauthorized","signin_url":"https://ollama.com/connect?name=fake"}`, ollamaJSON
	case http.StatusNotFound:
		if msg == "" {
			msg = fmt.Sprintf("model '%s' not found", model)
		}
	case http.StatusTooManyRequests:
		if msg == "" {
			msg = "too many requests"
		}
	case http.StatusInternalServerError, http.StatusBadGateway:
		if msg == "" {
			return "<html>\n<body>" + http.StatusText(sc.Status) + "</body>\n</html>\n", "text/html"
		}
	case http.StatusServiceUnavailable:
		if msg == "" {
			msg = "server busy, please try again.  maximum pending requests exceeded"
		}
	}
	if msg == "" {
		msg = strings.ToLower(http.StatusText(sc.Status))
	}
	return ollamaErr(msg), ollamaJSON
}

// ollamaJSON is the content type of Ollama's JSON answers.
const ollamaJSON = "application/json; charset=utf-8"

func (s *Server) serveOllama(w http.ResponseWriter, r *http.Request, body []byte) {
	if !s.bearer(r) {
		w.Header().Set("Content-Type", ollamaJSON)
		w.WriteHeader(http.StatusUnauthorized)
		_, _ = io.WriteString(w, `{"error":"unauthorized"}`)
		return
	}
	switch r.URL.Path {
	case "/api/tags":
		s.ollamaTags(w)
	case "/api/show":
		s.ollamaShow(w, body)
	case "/api/chat":
		s.ollamaChat(w, r, body)
	case "/api/version":
		writeJSON(w, map[string]string{"version": "0.17.4"})
	case "/api/ps":
		writeJSON(w, map[string]any{"models": []map[string]any{{"name": "qwen3:8b", "model": "qwen3:8b", "context_length": 8192}}})
	case "/api/embed":
		s.ollamaEmbed(w, body)
	case "/":
		_, _ = io.WriteString(w, "Ollama is running")
	default:
		w.Header().Set("Content-Type", "text/plain")
		w.WriteHeader(http.StatusNotFound)
		_, _ = io.WriteString(w, "404 page not found")
	}
}

func writeJSON(w http.ResponseWriter, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(mustJSON(v))
}

func (s *Server) ollamaTags(w http.ResponseWriter) {
	var models []map[string]any
	for _, m := range OllamaModels {
		e := map[string]any{"name": m.Name, "model": m.Name, "modified_at": "2025-05-04T17:37:44.7-07:00",
			"size": 2019393189, "digest": "a80c4f17acd55265feec403c7aef86be0c25983ab279d83f3bcd3abbcb5b8b72"}
		if m.Remote {
			e["remote_model"], e["remote_host"] = strings.TrimSuffix(m.Name, "-cloud"), "https://ollama.com:443"
			e["details"] = map[string]any{"format": "", "family": "", "families": nil}
		} else {
			e["details"] = map[string]any{"parent_model": "", "format": "gguf", "family": m.Arch,
				"families": []string{m.Arch}, "parameter_size": "8B", "quantization_level": "Q4_K_M"}
		}
		models = append(models, e)
	}
	writeJSON(w, map[string]any{"models": models})
}

func (s *Server) ollamaShow(w http.ResponseWriter, body []byte) {
	var req struct {
		Model string `json:"model"`
		Name  string `json:"name"`
	}
	_ = json.Unmarshal(body, &req)
	name := req.Model
	if name == "" {
		name = req.Name
	}
	m, ok := ollamaModel(name)
	if !ok {
		writeError(w, Scenario{Status: http.StatusNotFound}, ollamaErr(fmt.Sprintf("model '%s' not found", name)), ollamaJSON)
		return
	}
	info := map[string]any{"general.architecture": m.Arch, "general.parameter_count": 8030261248}
	if m.Window > 0 {
		info[m.Arch+".context_length"] = m.Window
		info[m.Arch+".embedding_length"] = 4096
	}
	writeJSON(w, map[string]any{
		"details":      map[string]any{"format": "gguf", "family": m.Arch},
		"model_info":   info,
		"capabilities": m.Capabilities,
		"parameters":   "num_ctx 4096\nstop \"<|eot_id|>\"",
		"modified_at":  "2025-05-04T17:37:44.7-07:00",
	})
}

type ollamaChatReq struct {
	Model    string `json:"model"`
	Stream   *bool  `json:"stream"`
	Messages []struct {
		Role    string `json:"role"`
		Content string `json:"content"`
	} `json:"messages"`
	Tools []json.RawMessage `json:"tools"`
	Think json.RawMessage   `json:"think"`
}

func (s *Server) ollamaChat(w http.ResponseWriter, r *http.Request, body []byte) {
	var req ollamaChatReq
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, Scenario{Status: http.StatusBadRequest}, ollamaErr("invalid request body"), ollamaJSON)
		return
	}
	m, ok := ollamaModel(req.Model)
	if !ok {
		writeError(w, Scenario{Status: http.StatusNotFound}, ollamaErr(fmt.Sprintf("model '%s' not found", req.Model)), ollamaJSON)
		return
	}
	has := func(c string) bool {
		for _, x := range m.Capabilities {
			if x == c {
				return true
			}
		}
		return false
	}
	if len(req.Tools) > 0 && !has("tools") {
		writeError(w, Scenario{Status: http.StatusBadRequest}, ollamaErr(fmt.Sprintf("registry.ollama.ai/library/%s does not support tools", m.Name)), ollamaJSON)
		return
	}
	if string(req.Think) == "true" && !has("thinking") {
		writeError(w, Scenario{Status: http.StatusBadRequest}, ollamaErr(fmt.Sprintf("%q does not support thinking", m.Name)), ollamaJSON)
		return
	}
	msgs := make([]lastMessage, len(req.Messages))
	for i, m := range req.Messages {
		msgs[i] = lastMessage{role: strings.ToLower(m.Role), content: m.Content}
	}
	sc := s.pick(answered(msgs))
	if sc.Status >= 400 {
		b, ct := ollamaErrorBody(sc, req.Model)
		writeError(w, sc, b, ct)
		return
	}
	for k, v := range sc.Headers {
		w.Header().Set(k, v)
	}
	line := func(msg map[string]any, done bool, extra map[string]any) []byte {
		v := map[string]any{"model": req.Model, "created_at": time.Now().UTC().Format(time.RFC3339Nano), "message": msg, "done": done}
		for k, x := range extra {
			v[k] = x
		}
		return append(mustJSON(v), '\n')
	}
	finish := sc.Finish
	if finish == "" {
		finish = "stop" // Ollama says stop even after tool calls
	}
	u := sc.usage()
	metrics := map[string]any{"done_reason": finish, "total_duration": 182242375, "load_duration": 41295167,
		"prompt_eval_count": u.Prompt, "prompt_eval_duration": 24573166, "eval_count": u.Completion, "eval_duration": 115959084}
	calls := ollamaCalls(sc.ToolCalls, int(s.seq.Add(1)))

	if req.Stream != nil && !*req.Stream {
		var text, thinking strings.Builder
		for _, t := range sc.Text {
			text.WriteString(t)
		}
		for _, t := range sc.Reasoning {
			thinking.WriteString(t)
		}
		msg := map[string]any{"role": "assistant", "content": text.String()}
		if thinking.Len() > 0 {
			msg["thinking"] = thinking.String()
		}
		if len(calls) > 0 {
			msg["tool_calls"] = calls
		}
		w.Header().Set("Content-Type", "application/json; charset=utf-8")
		_, _ = w.Write(line(msg, true, metrics))
		return
	}

	w.Header().Set("Content-Type", "application/x-ndjson")
	w.WriteHeader(http.StatusOK)
	if sc.HugeLine > 0 {
		_, _ = w.Write([]byte(`{"x":"` + strings.Repeat("a", sc.HugeLine) + "\"}\n"))
	}
	for _, t := range sc.Reasoning {
		_, _ = w.Write(line(map[string]any{"role": "assistant", "content": "", "thinking": t}, false, nil))
		flush(w)
	}
	for _, t := range sc.Text {
		_, _ = w.Write(line(map[string]any{"role": "assistant", "content": t}, false, nil))
		flush(w)
	}
	for _, c := range calls {
		_, _ = w.Write(line(map[string]any{"role": "assistant", "content": "", "tool_calls": []any{c}}, false, nil))
		flush(w)
	}
	switch {
	case sc.MidStreamError != "":
		msg := sc.MidStreamError
		if !strings.HasPrefix(msg, "{") {
			msg = ollamaErr(msg)
		}
		_, _ = io.WriteString(w, msg+"\n")
		return
	case sc.Truncate:
		return
	case sc.Hold:
		flush(w)
		s.hold(r)
		return
	}
	_, _ = w.Write(line(map[string]any{"role": "assistant", "content": ""}, true, metrics))
}

// ollamaCalls renders scripted calls as Ollama does: whole, arguments as a
// JSON object with key order kept, ids call_ + 8 lowercase alphanumerics.
func ollamaCalls(cs []Call, seq int) []any {
	var out []any
	for i, c := range cs {
		id := c.ID
		if id == "" {
			id = fmt.Sprintf("call_%08d", seq*10+i)
		}
		args := json.RawMessage(c.Arguments)
		if !json.Valid(args) {
			args = json.RawMessage("{}")
		}
		out = append(out, map[string]any{"id": id, "function": map[string]any{"index": i, "name": c.Name, "arguments": args}})
	}
	return out
}
