package openaicompat

import (
	"bytes"
	"encoding/json"
	"strconv"
	"strings"
	"sync"

	"lemo/providers"
)

// ChatRequest is the body of POST /chat/completions. Hooks.Body may set
// the vendor fields. The tools the request offers are not in it: their
// encoding, kept per tool set (encodeTools), is added to the encoded body
// with "tool_choice": "auto" (requestBody).
type ChatRequest struct {
	Model         string         `json:"model"`
	Messages      []WireMessage  `json:"messages"`
	Stream        bool           `json:"stream"`
	StreamOptions *StreamOptions `json:"stream_options,omitempty"`
	// Reasoning is OpenRouter's reasoning{effort|max_tokens|exclude|enabled}.
	Reasoning map[string]any `json:"reasoning,omitempty"`
	// ChatTemplateKwargs is passed to the chat template by vLLM-style
	// servers (NVIDIA NIM).
	ChatTemplateKwargs map[string]any `json:"chat_template_kwargs,omitempty"`
	// MaxTokens caps the answer (Request.MaxOutputTokens); 0: not sent.
	MaxTokens int `json:"max_tokens,omitempty"`
}

// StreamOptions asks for a usage chunk at the end of the stream.
type StreamOptions struct {
	IncludeUsage bool `json:"include_usage"`
}

// WireMessage is one message as the OpenAI chat API sends it.
type WireMessage struct {
	Role       string          `json:"role"`
	Content    *string         `json:"content"`
	ToolCalls  []WireToolCall  `json:"tool_calls,omitempty"`
	ToolCallID string          `json:"tool_call_id,omitempty"`
	Reasoning  json.RawMessage `json:"reasoning_details,omitempty"`
}

// WireToolCall is a tool call in an assistant message.
type WireToolCall struct {
	ID       string       `json:"id"`
	Type     string       `json:"type"`
	Function WireFunction `json:"function"`
}

// WireFunction names a function and carries its arguments as JSON text.
type WireFunction struct {
	Name      string `json:"name"`
	Arguments string `json:"arguments"`
}

// WireTool offers a function to the model.
type WireTool struct {
	Type     string          `json:"type"`
	Function WireToolFuncDef `json:"function"`
}

// WireToolFuncDef describes a function offered to the model.
type WireToolFuncDef struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	Parameters  json.RawMessage `json:"parameters"`
}

// metadata is what Response.ProviderMetadata holds for this core.
type metadata struct {
	ReasoningDetails json.RawMessage `json:"reasoning_details,omitempty"`
}

var emptySchema = json.RawMessage(`{"type":"object","properties":{}}`)

// buildRequest turns a providers.Request into the wire body. echoDetails
// passes reasoning_details from Message.ProviderMetadata back. The body
// points to req's texts (it is only encoded), and its messages' slice is
// taken from a pool: releaseRequest gives it back once encoded.
func buildRequest(model string, req *providers.Request, echoDetails bool) *ChatRequest {
	msgs := wireMessages(len(req.Messages) + 1)
	body := &ChatRequest{Model: model, Stream: true, MaxTokens: req.MaxOutputTokens, Messages: msgs}
	if req.System != "" {
		body.Messages = append(body.Messages, WireMessage{Role: "system", Content: &req.System})
	}
	for i := range req.Messages {
		m := &req.Messages[i]
		wm := WireMessage{Role: string(m.Role)}
		switch m.Role {
		case providers.RoleAssistant:
			if m.Content != "" || len(m.ToolCalls) == 0 {
				wm.Content = &m.Content
			}
			for _, tc := range m.ToolCalls {
				args := string(bytes.TrimSpace(tc.Arguments))
				if args == "" {
					args = "{}"
				}
				wm.ToolCalls = append(wm.ToolCalls, WireToolCall{ID: tc.ID, Type: "function",
					Function: WireFunction{Name: tc.Name, Arguments: args}})
			}
			if echoDetails && len(m.ProviderMetadata) > 0 {
				var md metadata
				if json.Unmarshal(m.ProviderMetadata, &md) == nil && len(md.ReasoningDetails) > 0 {
					wm.Reasoning = md.ReasoningDetails
				}
			}
		case providers.RoleTool:
			wm.Content = &m.Content
			wm.ToolCallID = m.ToolCallID
		default:
			wm.Content = &m.Content
		}
		body.Messages = append(body.Messages, wm)
	}
	return body
}

// messagesPool holds the messages' slices of encoded bodies (a request's
// largest allocation after its encoding), up to maxPooledMessages each.
var messagesPool sync.Pool // of *[]WireMessage

const maxPooledMessages = 1024

// wireMessages returns an empty slice with room for n messages.
func wireMessages(n int) []WireMessage {
	if p, ok := messagesPool.Get().(*[]WireMessage); ok {
		if cap(*p) >= n {
			return (*p)[:0]
		}
		messagesPool.Put(p)
	}
	return make([]WireMessage, 0, n)
}

// releaseRequest gives body's messages' slice back to the pool; body is
// not used after.
func releaseRequest(body *ChatRequest) {
	msgs := body.Messages
	body.Messages = nil
	if cap(msgs) == 0 || cap(msgs) > maxPooledMessages {
		return
	}
	clear(msgs[:cap(msgs)]) // keep no texts alive
	msgs = msgs[:0]
	messagesPool.Put(&msgs)
}

// encodeTools encodes tools as the "tools" array of a request.
func encodeTools(tools []providers.ToolSpec) (json.RawMessage, error) {
	wire := make([]WireTool, len(tools))
	for i, t := range tools {
		params := t.Parameters
		if len(bytes.TrimSpace(params)) == 0 {
			params = emptySchema
		}
		wire[i] = WireTool{Type: "function", Function: WireToolFuncDef{Name: t.Name, Description: t.Description, Parameters: params}}
	}
	return json.Marshal(wire)
}

// toolChoiceAuto lets the model choose whether to call a tool.
var toolChoiceAuto = json.RawMessage(`"auto"`)

// requestBody encodes body and adds the tools of req, encoded once per
// tool set (cache), into one slice sized for both: the body is encoded
// once, into the slice the request sends (json.Marshal's copy of it, then
// a join with the tools, were two more of the body's size).
func requestBody(body *ChatRequest, req *providers.Request, cache *providers.ToolCache) (providers.Body, error) {
	var tools json.RawMessage
	if len(req.Tools) > 0 {
		var err error
		if tools, err = cache.Encoded(req.Tools, encodeTools); err != nil {
			return nil, err
		}
	}
	var buf bytes.Buffer
	buf.Grow(encodedSize(body) + len(tools) + len(`,"tools":,"tool_choice":"auto"}`))
	enc := json.NewEncoder(&buf) // escapes as json.Marshal does
	if err := enc.Encode(body); err != nil {
		return nil, err
	}
	b := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
	if tools == nil {
		return providers.Body{b}, nil
	}
	// body encodes as an object with fields ("model" at least): the tools
	// go before its closing brace.
	b = append(b[:len(b)-1], `,"tools":`...)
	b = append(b, tools...)
	b = append(b, `,"tool_choice":`...)
	b = append(b, toolChoiceAuto...)
	return providers.Body{append(b, '}')}, nil
}

// encodedSize estimates the size of body encoded, so that its buffer is
// allocated once: each text with what escaping adds to it (a tool result
// is often JSON, whose every quote is escaped; json escapes <, > and & as
// \u003c and the like) and the names and punctuation around it.
func encodedSize(body *ChatRequest) int {
	n := 256
	for _, m := range body.Messages {
		n += 64 + len(m.ToolCallID) + len(m.Reasoning)
		if m.Content != nil {
			n += escapedLen(*m.Content)
		}
		for _, tc := range m.ToolCalls {
			n += 80 + len(tc.ID) + len(tc.Function.Name) + escapedLen(tc.Function.Arguments)
		}
	}
	return n
}

// escapedLen is about the length of s as a JSON string's contents: exact
// but for control characters other than newlines and tabs, and invalid
// UTF-8.
func escapedLen(s string) int {
	return len(s) + strings.Count(s, `"`) + strings.Count(s, `\`) + strings.Count(s, "\n") + strings.Count(s, "\t") +
		5*(strings.Count(s, "<")+strings.Count(s, ">")+strings.Count(s, "&"))
}

// chunk is one streamed event (chat.completion.chunk), or a whole
// non-streamed completion (message instead of delta). JSON null decodes to
// the zero value, which is what the decoder treats as absent.
type chunk struct {
	Choices []struct {
		Delta        delta           `json:"delta"`
		Message      *delta          `json:"message"`
		FinishReason string          `json:"finish_reason"`
		Error        json.RawMessage `json:"error"`
	} `json:"choices"`
	Usage *struct {
		PromptTokens     int `json:"prompt_tokens"`
		CompletionTokens int `json:"completion_tokens"`
		// PromptTokensDetails.CachedTokens: prompt tokens read from the
		// provider's cache (OpenAI, OpenRouter).
		PromptTokensDetails *struct {
			CachedTokens int `json:"cached_tokens"`
		} `json:"prompt_tokens_details"`
	} `json:"usage"`
	Error json.RawMessage `json:"error"`
}

// reset makes c ready for the next event while keeping the Choices
// array: encoding/json decodes into existing slice elements without
// zeroing them, so they are cleared here.
func (c *chunk) reset() {
	clear(c.Choices[:cap(c.Choices)])
	*c = chunk{Choices: c.Choices[:0]}
}

type delta struct {
	Content          string          `json:"content"`
	Reasoning        string          `json:"reasoning"`
	ReasoningContent string          `json:"reasoning_content"`
	ReasoningDetails json.RawMessage `json:"reasoning_details"`
	ToolCalls        []struct {
		Index    *int   `json:"index"`
		ID       string `json:"id"`
		Function struct {
			Name      string `json:"name"`
			Arguments string `json:"arguments"`
		} `json:"function"`
	} `json:"tool_calls"`
}

// ErrorInfo is what the core extracts from an error body or a mid-stream
// error object, whatever its envelope.
type ErrorInfo struct {
	// Message is the human-readable explanation (unbounded, uncleaned).
	Message string
	// Code is error.code (number or string) as text, or the status field.
	Code string
	// Types holds error.type, error.metadata.error_type, type and
	// error.availability.code, as given.
	Types []string
	// Reasons is OpenRouter's error.metadata.reasons (moderation).
	Reasons bool
}

// ParseErrorBody extracts an ErrorInfo from any of the envelopes the notes
// list: {"error":{...}}, {"error":"..."}, vLLM {"object":"error",...},
// problem+json {"status","title","detail"}, Zen {"type":"error","error":{}}
// and plain text.
func ParseErrorBody(body []byte) ErrorInfo {
	body = bytes.TrimSpace(body)
	var env struct {
		Error   json.RawMessage `json:"error"`
		Message string          `json:"message"`
		Type    string          `json:"type"`
		Code    json.RawMessage `json:"code"`
		Status  json.RawMessage `json:"status"`
		Title   string          `json:"title"`
		Detail  string          `json:"detail"`
	}
	if len(body) == 0 || body[0] != '{' || json.Unmarshal(body, &env) != nil {
		return ErrorInfo{Message: string(body)}
	}
	var info ErrorInfo
	if len(env.Error) > 0 {
		info = parseErrorObject(env.Error)
	}
	if env.Type != "" && env.Type != "error" {
		info.Types = append(info.Types, env.Type)
	}
	if info.Code == "" {
		info.Code = rawText(env.Code)
	}
	if info.Code == "" {
		info.Code = rawText(env.Status)
	}
	for _, m := range []string{env.Message, env.Detail, env.Title} {
		if info.Message == "" {
			info.Message = m
		}
	}
	if info.Message == "" && info.Code == "" && len(info.Types) == 0 {
		info.Message = string(body)
	}
	return info
}

// parseErrorObject reads an "error" member: an object or a string.
func parseErrorObject(raw json.RawMessage) ErrorInfo {
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return ErrorInfo{Message: s}
	}
	var e struct {
		Code       json.RawMessage `json:"code"`
		HTTPStatus json.RawMessage `json:"http_status"`
		Message    string          `json:"message"`
		Type       string          `json:"type"`
		ErrorType  string          `json:"error_type"`
		Metadata   struct {
			ErrorType string          `json:"error_type"`
			Reasons   json.RawMessage `json:"reasons"`
		} `json:"metadata"`
		Availability struct {
			Code string `json:"code"`
		} `json:"availability"`
	}
	if json.Unmarshal(raw, &e) != nil {
		return ErrorInfo{Message: string(raw)}
	}
	info := ErrorInfo{Message: e.Message, Code: rawText(e.Code)}
	if info.Code == "" {
		info.Code = rawText(e.HTTPStatus)
	}
	for _, t := range []string{e.Type, e.ErrorType, e.Metadata.ErrorType, e.Availability.Code} {
		if t != "" && t != "error" {
			info.Types = append(info.Types, t)
		}
	}
	info.Reasons = len(e.Metadata.Reasons) > 0 && string(e.Metadata.Reasons) != "null"
	return info
}

// rawText returns a JSON number or string as text ("" for null or absent).
func rawText(raw json.RawMessage) string {
	if len(raw) == 0 || string(raw) == "null" {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var f float64
	if json.Unmarshal(raw, &f) == nil {
		return strconv.FormatFloat(f, 'f', -1, 64)
	}
	return ""
}
