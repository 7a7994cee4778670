// HTTP fakes of the providers' wire protocols (see doc.go for the package).
//
// A Server speaks one Flavor: ollama (native NDJSON API: /api/tags,
// /api/show, /api/chat, /api/embed, /api/ps, /api/version) or an
// OpenAI-compatible one (openrouter under /api/v1, nvidia and openai under
// /v1, zen under /zen/v1: GET /models, POST /chat/completions, POST
// /embeddings), each with
// its catalogue, error envelopes and stream quirks (notes/providers.md §7).
//
// Lifecycle:
//  1. StartServer(t, Options{Flavor, Script, APIKey}) in a test, or
//     NewServer + Start(addr) elsewhere (cmd/fakeprovider); configure the
//     provider with URL().
//  2. Each chat request is answered by the first Scenario that matches it,
//     else by keywords; every request is recorded (Requests, ChatRequests).
//  3. Close releases held streams and waits for every handler.
//
// Scenario matching: a Scenario matches when the last message of the
// request (skipping Lemo's trailing recalled evidence, see RecallPrefix)
// contains Match and is a tool result exactly when AfterTool is set; Times
// limits how often it matches (so "fail once, then succeed" is two
// scenarios). The script file of cmd/fakeprovider is the JSON form:
//
//	{"scenarios":[
//	  {"match":"weather","tool_calls":[{"name":"get_weather","arguments":"{\"city\":\"Oslo\"}"}]},
//	  {"after_tool":true,"text":["It is ","22C."]},
//	  {"match":"busy","status":429,"headers":{"Retry-After":"2"},"times":1}
//	]}
//
// Keywords, when no scenario matches the last user message:
//
//	ERR <status> [RA=<retry-after>]  answer with that status and the flavour's error body
//	TOOL                             one tool call echo{"text":"hi"}
//	THINK                            reasoning before the text
//	SLOW                             one delta, then hold until the client disconnects
//	TRUNC                            one delta, then end without a terminal marker
//	MIDERR                           one delta, then an in-stream error
//	(a tool result)                  the text "tool said: <result>"
//	(anything else)                  the text "Hello from the fake" in four deltas

package fake

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
)

// Flavor names the wire protocol a Server speaks.
type Flavor string

// Flavours of Server.
const (
	FlavorOllama     Flavor = "ollama"     // native Ollama NDJSON, base URL without a path
	FlavorOpenRouter Flavor = "openrouter" // OpenAI-compatible SSE under /api/v1
	FlavorNVIDIA     Flavor = "nvidia"     // OpenAI-compatible SSE under /v1
	FlavorZen        Flavor = "zen"        // OpenAI-compatible SSE under /zen/v1
	FlavorOpenAI     Flavor = "openai"     // plain OpenAI-compatible SSE under /v1
)

// Flavors lists every flavour.
var Flavors = []Flavor{FlavorOllama, FlavorOpenRouter, FlavorNVIDIA, FlavorZen, FlavorOpenAI}

// Scenario is one scripted answer. The first scenario of the script that
// matches a request answers it; keywords in the last user message answer
// requests no scenario matches (see the package doc).
type Scenario struct {
	// Match selects requests whose last message contains Match ("" matches
	// every request). The last message is a user message unless AfterTool.
	Match string `json:"match,omitempty"`
	// AfterTool selects requests whose last message is a tool result.
	AfterTool bool `json:"after_tool,omitempty"`
	// Times limits the scenario to its first Times matches (0: unlimited).
	Times int `json:"times,omitempty"`

	// Reasoning and Text are streamed as one delta per element, reasoning
	// first.
	Reasoning []string `json:"reasoning,omitempty"`
	Text      []string `json:"text,omitempty"`
	// ToolCalls are streamed after the text; SSE flavours split the
	// arguments into fragments unless WholeArgs.
	ToolCalls []Call `json:"tool_calls,omitempty"`
	WholeArgs bool   `json:"whole_args,omitempty"`
	// Finish is the finish reason (default "stop", or "tool_calls" for SSE
	// flavours when there are tool calls; Ollama keeps "stop").
	Finish string `json:"finish,omitempty"`
	// Usage reported at the end (default 10 prompt, 5 completion tokens).
	Usage *Usage `json:"usage,omitempty"`

	// Status, when >= 400, answers with that status before any stream.
	// Body is sent verbatim (default: the flavour's error envelope with
	// Message), with ContentType (default application/json).
	Status      int    `json:"status,omitempty"`
	Body        string `json:"body,omitempty"`
	ContentType string `json:"content_type,omitempty"`
	// Message is the error text used by the default envelopes.
	Message string `json:"message,omitempty"`
	// Headers are added to the response (e.g. "Retry-After": "2").
	Headers map[string]string `json:"headers,omitempty"`

	// MidStreamError ends the stream after the deltas with an in-stream
	// error: the flavour's error event carrying this text, or this text
	// verbatim when it is a JSON object.
	MidStreamError string `json:"mid_stream_error,omitempty"`
	// Truncate ends the stream after the deltas without a terminal marker.
	Truncate bool `json:"truncate,omitempty"`
	// Hold keeps the stream open after the deltas until the client
	// disconnects (observable with Server.Disconnects).
	Hold bool `json:"hold,omitempty"`
	// KeepAlives writes that many ": OPENROUTER PROCESSING" comments before
	// every event (SSE flavours).
	KeepAlives int `json:"keep_alives,omitempty"`
	// NoDone omits "data: [DONE]" after the finish (a clean EOF).
	NoDone bool `json:"no_done,omitempty"`
	// HugeLine writes one line of that many bytes before anything else.
	HugeLine int `json:"huge_line,omitempty"`
	// InlineThink sends the reasoning as a <think>...</think> block at the
	// start of the content (SSE flavours; R1-style models on NVIDIA).
	InlineThink bool `json:"inline_think,omitempty"`
	// JSONAnswer answers with one application/json completion even though
	// the request asked to stream (SSE flavours); with MidStreamError it
	// carries choices[0].finish_reason "error" and choices[0].error.
	JSONAnswer bool `json:"json_answer,omitempty"`

	// Capture is a regular expression with one group, matched against the
	// answered message: "$1" in Text and in the tool calls' arguments
	// becomes what it captured (an id the conversation named).
	Capture string `json:"capture,omitempty"`
	// EchoTools appends the results of every tool call the request
	// answers (the tool messages after the last assistant message, in
	// order) to Text.
	EchoTools bool `json:"echo_tools,omitempty"`
}

// Call is a scripted tool call.
type Call struct {
	ID        string `json:"id,omitempty"`
	Name      string `json:"name"`
	Arguments string `json:"arguments"` // a JSON object as text
}

// Usage is scripted token usage.
type Usage struct {
	Prompt     int `json:"prompt"`
	Completion int `json:"completion"`
}

// Script is the JSON form of a scenario list, as the fakeprovider command
// loads it.
type Script struct {
	Scenarios []Scenario `json:"scenarios"`
}

// LoadScript reads a Script from a JSON file, rejecting unknown fields.
func LoadScript(path string) ([]Scenario, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	var s Script
	if err := dec.Decode(&s); err != nil {
		return nil, fmt.Errorf("fake: script %s: %w", path, err)
	}
	return s.Scenarios, nil
}

// Options configure a Server.
type Options struct {
	Flavor Flavor
	// Script is the ordered scenario list.
	Script []Scenario
	// APIKey, when set, is required as "Authorization: Bearer <key>"
	// (Zen still lets free models through without a key).
	APIKey string
}

// Request is a recorded request.
type Request struct {
	Method string
	Path   string
	Header http.Header
	Body   []byte
}

// JSON decodes the recorded body into a generic map (nil when not JSON).
func (r Request) JSON() map[string]any {
	var m map[string]any
	if json.Unmarshal(r.Body, &m) != nil {
		return nil
	}
	return m
}

// Server is a fake provider HTTP server. It is safe for concurrent use.
type Server struct {
	flavor Flavor
	apiKey string

	mu       sync.Mutex
	script   []Scenario
	used     []int
	requests []Request

	disconnects atomic.Int64
	holding     atomic.Int64
	seq         atomic.Int64

	closing  chan struct{}
	closeOne sync.Once
	srv      *http.Server
	url      string
	handlers sync.WaitGroup
	serving  sync.WaitGroup
}

// NewServer returns a Server that is not listening yet; use Start, or
// use it as an http.Handler.
func NewServer(o Options) (*Server, error) {
	switch o.Flavor {
	case FlavorOllama, FlavorOpenRouter, FlavorNVIDIA, FlavorZen, FlavorOpenAI:
	default:
		return nil, fmt.Errorf("fake: unknown flavor %q: want one of ollama, openrouter, nvidia, zen, openai", o.Flavor)
	}
	s := &Server{flavor: o.Flavor, apiKey: o.APIKey, closing: make(chan struct{})}
	s.SetScript(o.Script...)
	return s, nil
}

// StartServer starts a Server on a loopback port for a test and closes it
// when the test ends.
func StartServer(t testing.TB, o Options) *Server {
	t.Helper()
	s, err := NewServer(o)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Close)
	return s
}

// Start listens on addr ("127.0.0.1:0" for any free port) and serves in a
// goroutine that Close stops.
func (s *Server) Start(addr string) error {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("fake: listen %s: %w", addr, err)
	}
	s.srv = &http.Server{Handler: s}
	s.url = "http://" + ln.Addr().String() + s.prefix()
	s.serving.Add(1)
	go func() {
		defer s.serving.Done()
		_ = s.srv.Serve(ln) // returns http.ErrServerClosed after Close
	}()
	return nil
}

// URL is the base URL to configure a provider with, including the
// flavour's path prefix (for example http://127.0.0.1:port/api/v1).
func (s *Server) URL() string { return s.url }

// Close releases held streams, closes every connection and waits for the
// handlers and the serving goroutine to end.
func (s *Server) Close() {
	s.closeOne.Do(func() {
		close(s.closing)
		if s.srv != nil {
			_ = s.srv.Close()
		}
		s.handlers.Wait()
		s.serving.Wait()
	})
}

// SetScript replaces the script and resets the match counts.
func (s *Server) SetScript(script ...Scenario) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.script = append([]Scenario(nil), script...)
	s.used = make([]int, len(script))
}

// Requests returns the requests recorded so far, in arrival order.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Request(nil), s.requests...)
}

// ChatRequests returns the recorded chat requests (POST /api/chat or
// /chat/completions).
func (s *Server) ChatRequests() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if strings.HasSuffix(r.Path, "/chat") || strings.HasSuffix(r.Path, "/chat/completions") {
			out = append(out, r)
		}
	}
	return out
}

// Disconnects counts streams that ended because the client went away
// while the server held them (Scenario.Hold).
func (s *Server) Disconnects() int { return int(s.disconnects.Load()) }

// Holding counts streams currently held open.
func (s *Server) Holding() int { return int(s.holding.Load()) }

func (s *Server) prefix() string {
	switch s.flavor {
	case FlavorOpenRouter:
		return "/api/v1"
	case FlavorNVIDIA, FlavorOpenAI:
		return "/v1"
	case FlavorZen:
		return "/zen/v1"
	}
	return ""
}

// ServeHTTP records the request and answers it as the flavour would.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	select {
	case <-s.closing:
		http.Error(w, "closing", http.StatusServiceUnavailable)
		return
	default:
	}
	s.handlers.Add(1)
	defer s.handlers.Done()
	body, _ := io.ReadAll(io.LimitReader(r.Body, 64<<20))
	s.mu.Lock()
	s.requests = append(s.requests, Request{Method: r.Method, Path: r.URL.Path, Header: r.Header.Clone(), Body: body})
	s.mu.Unlock()
	if s.flavor == FlavorOllama {
		s.serveOllama(w, r, body)
		return
	}
	s.serveOpenAI(w, r, body)
}

// hold blocks until the client disconnects or the server closes.
func (s *Server) hold(r *http.Request) {
	s.holding.Add(1)
	defer s.holding.Add(-1)
	select {
	case <-r.Context().Done():
		s.disconnects.Add(1)
	case <-s.closing:
	}
}

// lastMessage is the last chat message of a request, role and text.
type lastMessage struct {
	role, content string
	// tools are the contents of the tool messages after the last
	// assistant message, joined by newlines (set by answered).
	tools string
}

// RecallPrefix opens the message of recalled evidence that Lemo appends
// after a Task's conversation (prompt/recall.go). A real model answers the
// conversation, not the evidence, so the fake skips that message when it
// chooses the message it answers.
const RecallPrefix = "[Recalled evidence:"

// answered is the message a request asks the model to answer: its last
// message, skipping trailing recalled evidence.
func answered(msgs []lastMessage) lastMessage {
	for i := len(msgs) - 1; i >= 0; i-- {
		m := msgs[i]
		if m.role == "user" && strings.HasPrefix(m.content, RecallPrefix) {
			continue
		}
		var run []string
		for j := i; j >= 0 && msgs[j].role != "assistant"; j-- {
			if msgs[j].role == "tool" {
				run = append([]string{msgs[j].content}, run...)
			}
		}
		m.tools = strings.Join(run, "\n")
		return m
	}
	return lastMessage{}
}

// fill applies a scenario's Capture and EchoTools to the message it answers.
func (sc Scenario) fill(last lastMessage) Scenario {
	if sc.Capture != "" {
		got := ""
		if re, err := regexp.Compile(sc.Capture); err == nil {
			if m := re.FindStringSubmatch(last.content); len(m) > 1 {
				got = m[1]
			}
		}
		text := make([]string, len(sc.Text))
		for i, t := range sc.Text {
			text[i] = strings.ReplaceAll(t, "$1", got)
		}
		calls := make([]Call, len(sc.ToolCalls))
		for i, c := range sc.ToolCalls {
			c.Arguments = strings.ReplaceAll(c.Arguments, "$1", got)
			calls[i] = c
		}
		sc.Text, sc.ToolCalls = text, calls
	}
	if sc.EchoTools {
		sc.Text = append(append([]string(nil), sc.Text...), last.tools)
	}
	return sc
}

// pick chooses the scenario for a chat request.
func (s *Server) pick(last lastMessage) Scenario {
	s.mu.Lock()
	defer s.mu.Unlock()
	isTool := last.role == "tool"
	for i, sc := range s.script {
		if sc.AfterTool != isTool || !strings.Contains(last.content, sc.Match) {
			continue
		}
		if sc.Times > 0 && s.used[i] >= sc.Times {
			continue
		}
		s.used[i]++
		return sc.fill(last)
	}
	return keywordScenario(last)
}

// keywordScenario answers a request no script entry matched.
func keywordScenario(last lastMessage) Scenario {
	if last.role == "tool" {
		return Scenario{Text: []string{"tool said: ", last.content}}
	}
	m := last.content
	sc := Scenario{Text: []string{"Hello", " from", " the", " fake"}}
	if i := strings.Index(m, "ERR "); i >= 0 {
		f := strings.Fields(m[i+4:])
		if len(f) > 0 {
			if code, err := strconv.Atoi(f[0]); err == nil {
				sc.Status = code
				if len(f) > 1 && strings.HasPrefix(f[1], "RA=") {
					sc.Headers = map[string]string{"Retry-After": strings.TrimPrefix(f[1], "RA=")}
				}
				return sc
			}
		}
	}
	if strings.Contains(m, "THINK") {
		sc.Reasoning = []string{"Let me", " think."}
	}
	if strings.Contains(m, "TOOL") {
		sc.Text = nil
		sc.ToolCalls = []Call{{Name: "echo", Arguments: `{"text":"hi"}`}}
	}
	switch {
	case strings.Contains(m, "SLOW"):
		sc.Text, sc.Hold = []string{"slow"}, true
	case strings.Contains(m, "TRUNC"):
		sc.Text, sc.Truncate = []string{"cut"}, true
	case strings.Contains(m, "MIDERR"):
		sc.Text, sc.MidStreamError = []string{"partial"}, "an error was encountered while running the model"
	}
	return sc
}

func (sc Scenario) usage() Usage {
	if sc.Usage != nil {
		return *sc.Usage
	}
	return Usage{Prompt: 10, Completion: 5}
}

// writeError answers with a scenario's error status.
func writeError(w http.ResponseWriter, sc Scenario, defBody, defType string) {
	for k, v := range sc.Headers {
		w.Header().Set(k, v)
	}
	body, ct := sc.Body, sc.ContentType
	if body == "" {
		body, ct = defBody, defType
	}
	if ct == "" {
		ct = "application/json"
	}
	w.Header().Set("Content-Type", ct)
	w.WriteHeader(sc.Status)
	_, _ = io.WriteString(w, body)
}

// flush sends what was written so far.
func flush(w http.ResponseWriter) {
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		return []byte(`{"error":` + strconv.Quote(errors.New("fake: marshal: "+err.Error()).Error()) + `}`)
	}
	return b
}

// bearer reports whether the request carries the configured key.
func (s *Server) bearer(r *http.Request) bool {
	return s.apiKey == "" || r.Header.Get("Authorization") == "Bearer "+s.apiKey
}
