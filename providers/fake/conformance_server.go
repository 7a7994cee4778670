package fake

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"lemo/providers"
)

// ConformanceKey is the API key the conformance fakes require.
const ConformanceKey = "sk-conformance-secret-0123456789"

// ProviderParams are what a conformance test varies when it builds a
// provider against a fake.
type ProviderParams struct {
	BaseURL string
	APIKey  string
	Models  []string
	// IdleTimeout is the stream idle timeout (0: the provider's default).
	IdleTimeout time.Duration
}

// Conformance describes a provider for RunConformance.
type Conformance struct {
	Flavor Flavor
	// Model is a model name of the flavour's catalogue that supports
	// tools.
	Model string
	// New builds the provider with a fast retry policy (MaxAttempts 3,
	// millisecond delays, MaxRetryAfter 1s).
	New func(t testing.TB, p ProviderParams) providers.Provider
}

// RunConformance runs the scenarios every provider must pass against its
// fake: streaming, reasoning, a tool round trip, cancellation, truncation,
// mid-stream errors, retry only before output, Retry-After, auth, unknown
// models and the allow-list.
func RunConformance(t *testing.T, c Conformance) {
	start := func(t *testing.T, script ...Scenario) (*Server, providers.Model) {
		t.Helper()
		s := StartServer(t, Options{Flavor: c.Flavor, APIKey: ConformanceKey, Script: script})
		p := c.New(t, ProviderParams{BaseURL: s.URL(), APIKey: ConformanceKey})
		m, err := p.Model(context.Background(), c.Model)
		if err != nil {
			t.Fatalf("Model(%q) = %v", c.Model, err)
		}
		return s, m
	}
	user := func(text string) *providers.Request {
		return &providers.Request{System: "be brief", Messages: []providers.Message{{Role: providers.RoleUser, Content: text}}}
	}
	ctx := context.Background()

	t.Run("stream deltas in order", func(t *testing.T) {
		s, m := start(t, Scenario{Match: "hello", Text: []string{"Hel", "lo", " world"}, Usage: &Usage{Prompt: 12, Completion: 3}})
		var got []providers.Delta
		resp, err := m.Stream(ctx, user("hello"), func(d providers.Delta) { got = append(got, d) })
		if err != nil {
			t.Fatalf("Stream() = %v", err)
		}
		var texts []string
		for _, d := range got {
			if d.Kind != providers.DeltaText {
				t.Fatalf("delta kind = %v, want text", d.Kind)
			}
			texts = append(texts, d.Text)
		}
		if strings.Join(texts, "|") != "Hel|lo| world" {
			t.Fatalf("deltas = %q, want Hel|lo| world", texts)
		}
		if resp.Text != "Hello world" || resp.FinishReason != "stop" {
			t.Fatalf("Response = %+v, want text %q finish stop", resp, "Hello world")
		}
		if resp.Usage != (providers.Usage{PromptTokens: 12, CompletionTokens: 3}) {
			t.Fatalf("Usage = %+v, want 12/3", resp.Usage)
		}
		if n := len(s.ChatRequests()); n != 1 {
			t.Fatalf("chat requests = %d, want 1", n)
		}
	})

	t.Run("reasoning before text", func(t *testing.T) {
		_, m := start(t, Scenario{Match: "why", Reasoning: []string{"Let me", " think."}, Text: []string{"Because."}})
		var kinds []providers.DeltaKind
		resp, err := m.Stream(ctx, &providers.Request{Think: true, Messages: []providers.Message{{Role: providers.RoleUser, Content: "why"}}},
			func(d providers.Delta) { kinds = append(kinds, d.Kind) })
		if err != nil {
			t.Fatalf("Stream() = %v", err)
		}
		if resp.Reasoning != "Let me think." || resp.Text != "Because." {
			t.Fatalf("Reasoning, Text = %q, %q; want %q, %q", resp.Reasoning, resp.Text, "Let me think.", "Because.")
		}
		want := []providers.DeltaKind{providers.DeltaReasoning, providers.DeltaReasoning, providers.DeltaText}
		if len(kinds) != len(want) {
			t.Fatalf("delta kinds = %v, want %v", kinds, want)
		}
		for i := range want {
			if kinds[i] != want[i] {
				t.Fatalf("delta kinds = %v, want %v", kinds, want)
			}
		}
	})

	t.Run("tool call round trip", func(t *testing.T) {
		s, m := start(t,
			Scenario{Match: "weather", Reasoning: []string{"Need the tool."}, ToolCalls: []Call{
				{Name: "get_weather", Arguments: `{"city":"Tokyo","unit":"C"}`},
				{Name: "get_time", Arguments: `{"zone":"Asia/Tokyo"}`}}},
			Scenario{AfterTool: true, Text: []string{"22C", " in Tokyo"}})
		req := &providers.Request{Think: true,
			Messages: []providers.Message{{Role: providers.RoleUser, Content: "weather in Tokyo?"}},
			Tools: []providers.ToolSpec{{Name: "get_weather", Description: "weather",
				Parameters: json.RawMessage(`{"type":"object","required":["city"],"properties":{"city":{"type":"string","description":"City"}}}`)},
				{Name: "get_time", Description: "time", Parameters: json.RawMessage(`{"type":"object","properties":{"zone":{"type":"string"}}}`)}}}
		resp, err := m.Stream(ctx, req, func(providers.Delta) {})
		if err != nil {
			t.Fatalf("Stream() = %v", err)
		}
		if len(resp.ToolCalls) != 2 {
			t.Fatalf("ToolCalls = %+v, want 2", resp.ToolCalls)
		}
		tc := resp.ToolCalls[0]
		var args map[string]string
		if err := json.Unmarshal(tc.Arguments, &args); err != nil || tc.Name != "get_weather" || args["city"] != "Tokyo" || args["unit"] != "C" || tc.ID == "" {
			t.Fatalf("ToolCalls[0] = {%q %q %s} (%v), want get_weather Tokyo/C with an id", tc.ID, tc.Name, tc.Arguments, err)
		}
		if resp.ToolCalls[1].Name != "get_time" || string(resp.ToolCalls[1].Arguments) != `{"zone":"Asia/Tokyo"}` {
			t.Fatalf("ToolCalls[1] = %+v, want get_time", resp.ToolCalls[1])
		}
		if resp.FinishReason != "tool_calls" {
			t.Fatalf("FinishReason = %q, want tool_calls", resp.FinishReason)
		}
		// Lemo sends the history back with its own call ids.
		req.Messages = append(req.Messages,
			providers.Message{Role: providers.RoleAssistant, Reasoning: resp.Reasoning, ProviderMetadata: resp.ProviderMetadata,
				ToolCalls: []providers.ToolCall{{ID: "lemo-call-1", Name: tc.Name, Arguments: tc.Arguments},
					{ID: "lemo-call-2", Name: "get_time", Arguments: resp.ToolCalls[1].Arguments}}},
			providers.Message{Role: providers.RoleTool, ToolCallID: "lemo-call-1", ToolName: "get_weather", Content: `{"temp":"22C"}`},
			providers.Message{Role: providers.RoleTool, ToolCallID: "lemo-call-2", ToolName: "get_time", Content: "10:00"})
		final, err := m.Stream(ctx, req, func(providers.Delta) {})
		if err != nil {
			t.Fatalf("second Stream() = %v", err)
		}
		if final.Text != "22C in Tokyo" {
			t.Fatalf("final Text = %q, want %q", final.Text, "22C in Tokyo")
		}
		reqs := s.ChatRequests()
		if len(reqs) != 2 {
			t.Fatalf("chat requests = %d, want 2", len(reqs))
		}
		var body struct {
			Messages []struct {
				Role       string `json:"role"`
				Content    any    `json:"content"`
				ToolCallID string `json:"tool_call_id"`
				ToolName   string `json:"tool_name"`
				ToolCalls  []struct {
					ID       string `json:"id"`
					Function struct {
						Name      string          `json:"name"`
						Arguments json.RawMessage `json:"arguments"`
					} `json:"function"`
				} `json:"tool_calls"`
			} `json:"messages"`
			Tools []json.RawMessage `json:"tools"`
		}
		if err := json.Unmarshal(reqs[1].Body, &body); err != nil {
			t.Fatalf("second request body: %v", err)
		}
		if len(body.Tools) != 2 {
			t.Fatalf("second request tools = %d, want 2", len(body.Tools))
		}
		n := len(body.Messages)
		if n < 4 {
			t.Fatalf("second request has %d messages, want >= 4: %s", n, reqs[1].Body)
		}
		asst, tool := body.Messages[n-3], body.Messages[n-2]
		if asst.Role != "assistant" || len(asst.ToolCalls) != 2 || asst.ToolCalls[0].ID != "lemo-call-1" || asst.ToolCalls[0].Function.Name != "get_weather" {
			t.Fatalf("assistant message on the wire = %+v, want tool call lemo-call-1 get_weather", asst)
		}
		if !strings.Contains(string(asst.ToolCalls[0].Function.Arguments), "Tokyo") {
			t.Fatalf("assistant tool call arguments on the wire = %s, want Tokyo", asst.ToolCalls[0].Function.Arguments)
		}
		if tool.Role != "tool" || tool.ToolCallID != "lemo-call-1" || tool.Content != `{"temp":"22C"}` {
			t.Fatalf("tool message on the wire = %+v, want tool_call_id lemo-call-1", tool)
		}
		if c.Flavor == FlavorOllama && tool.ToolName != "get_weather" {
			t.Fatalf("ollama tool message tool_name = %q, want get_weather", tool.ToolName)
		}
	})

	t.Run("cancel stops the stream promptly", func(t *testing.T) {
		s, m := start(t, Scenario{Match: "slow", Text: []string{"first"}, Hold: true})
		cctx, cancel := context.WithCancel(ctx)
		defer cancel()
		first := make(chan struct{})
		var once sync.Once
		done := make(chan error, 1)
		go func() {
			_, err := m.Stream(cctx, user("slow"), func(providers.Delta) { once.Do(func() { close(first) }) })
			done <- err
		}()
		select {
		case <-first:
		case err := <-done:
			t.Fatalf("Stream() returned before cancel: %v", err)
		case <-time.After(5 * time.Second):
			t.Fatal("no delta within 5s")
		}
		cancel()
		var err error
		select {
		case err = <-done:
		case <-time.After(2 * time.Second):
			t.Fatal("Stream() did not return within 2s of cancel")
		}
		if providers.ClassOf(err) != providers.ClassCancelled {
			t.Fatalf("Stream() after cancel = %v (class %v), want class cancelled", err, providers.ClassOf(err))
		}
		Eventually(t, 2*time.Second, func() error {
			if s.Disconnects() < 1 {
				return errors.New("the fake has not seen the disconnect")
			}
			return nil
		})
	})

	t.Run("a stream that stops sending fails after the idle timeout", func(t *testing.T) {
		s := StartServer(t, Options{Flavor: c.Flavor, APIKey: ConformanceKey, Script: []Scenario{
			{Match: "stall", Text: []string{"first"}, Hold: true}}})
		p := c.New(t, ProviderParams{BaseURL: s.URL(), APIKey: ConformanceKey, IdleTimeout: 50 * time.Millisecond})
		m, err := p.Model(ctx, c.Model)
		if err != nil {
			t.Fatalf("Model(%q) = %v", c.Model, err)
		}
		_, err = m.Stream(ctx, user("stall"), func(providers.Delta) {})
		if !errors.Is(err, providers.ErrStreamIdle) || providers.ClassOf(err) != providers.ClassTransient {
			t.Fatalf("Stream() = %v, want a transient error wrapping ErrStreamIdle", err)
		}
		var pe *providers.Error
		if !errors.As(err, &pe) || !pe.OutputStarted || !strings.Contains(pe.Message, "idle_timeout") {
			t.Fatalf("Stream() = %#v, want OutputStarted and a message naming idle_timeout", err)
		}
		if n := len(s.ChatRequests()); n != 1 {
			t.Fatalf("chat requests = %d, want 1 (no retry after output)", n)
		}
		Eventually(t, 2*time.Second, func() error {
			if s.Disconnects() < 1 {
				return errors.New("the fake has not seen the stalled stream closed")
			}
			return nil
		})
	})

	t.Run("truncated stream is an error and is not retried after output", func(t *testing.T) {
		s, m := start(t,
			Scenario{Match: "cut", Text: []string{"partial"}, Truncate: true, Times: 1},
			Scenario{Match: "cut", Text: []string{"would succeed"}})
		_, err := m.Stream(ctx, user("cut"), func(providers.Delta) {})
		if !errors.Is(err, providers.ErrTruncated) || providers.ClassOf(err) != providers.ClassTransient {
			t.Fatalf("Stream() = %v, want a transient error wrapping ErrTruncated", err)
		}
		var pe *providers.Error
		if !errors.As(err, &pe) || !pe.OutputStarted {
			t.Fatalf("Stream() = %#v, want OutputStarted", err)
		}
		if n := len(s.ChatRequests()); n != 1 {
			t.Fatalf("chat requests = %d, want 1 (no retry after output)", n)
		}
	})

	t.Run("tool call then truncation is not retried", func(t *testing.T) {
		s, m := start(t,
			Scenario{Match: "tc", ToolCalls: []Call{{Name: "get_weather", Arguments: `{"city":"Oslo"}`}}, Truncate: true, Times: 1},
			Scenario{Match: "tc", Text: []string{"would succeed"}})
		_, err := m.Stream(ctx, user("tc"), func(providers.Delta) {})
		if !errors.Is(err, providers.ErrTruncated) {
			t.Fatalf("Stream() = %v, want ErrTruncated", err)
		}
		if n := len(s.ChatRequests()); n != 1 {
			t.Fatalf("chat requests = %d, want 1 (no retry after a tool call)", n)
		}
	})

	t.Run("mid-stream error", func(t *testing.T) {
		s, m := start(t, Scenario{Match: "boom", Text: []string{"partial"}, MidStreamError: "an error was encountered while running the model"})
		var deltas int
		_, err := m.Stream(ctx, user("boom"), func(providers.Delta) { deltas++ })
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Class != providers.ClassTransient || !errors.Is(err, providers.ErrTruncated) || !pe.OutputStarted {
			t.Fatalf("Stream() = %v, want a transient ErrTruncated error with OutputStarted", err)
		}
		if !strings.Contains(pe.Message, "error") {
			t.Fatalf("Message = %q, want the provider's text", pe.Message)
		}
		if deltas != 1 || len(s.ChatRequests()) != 1 {
			t.Fatalf("deltas, requests = %d, %d; want 1, 1", deltas, len(s.ChatRequests()))
		}
	})

	t.Run("failure before output is retried", func(t *testing.T) {
		s, m := start(t,
			Scenario{Match: "retry", Status: http.StatusServiceUnavailable, Times: 1},
			Scenario{Match: "retry", Status: http.StatusBadGateway, Times: 1},
			Scenario{Match: "retry", Text: []string{"third time"}})
		resp, err := m.Stream(ctx, user("retry"), func(providers.Delta) {})
		if err != nil || resp.Text != "third time" {
			t.Fatalf("Stream() = %+v, %v; want third time", resp, err)
		}
		if n := len(s.ChatRequests()); n != 3 {
			t.Fatalf("chat requests = %d, want 3", n)
		}
	})

	t.Run("not found before output is not retried", func(t *testing.T) {
		s, m := start(t, Scenario{Match: "bad", Status: http.StatusBadRequest, Message: "invalid request"})
		_, err := m.Stream(ctx, user("bad"), func(providers.Delta) {})
		if c := providers.ClassOf(err); c == providers.ClassTransient || c == providers.ClassRateLimit {
			t.Fatalf("Stream() = %v, want a non-retryable class", err)
		}
		if n := len(s.ChatRequests()); n != 1 {
			t.Fatalf("chat requests = %d, want 1", n)
		}
	})

	t.Run("retry-after beyond the cap fails at once", func(t *testing.T) {
		date := time.Now().Add(100 * time.Second).UTC().Format(http.TimeFormat)
		for _, ra := range []string{"120", date} {
			s, m := start(t, Scenario{Match: "rl", Status: http.StatusTooManyRequests, Headers: map[string]string{"Retry-After": ra}})
			_, err := m.Stream(ctx, user("rl"), func(providers.Delta) {})
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != providers.ClassRateLimit || pe.Status != 429 {
				t.Fatalf("Retry-After %s: Stream() = %v, want rate_limit 429", ra, err)
			}
			if pe.RetryAfter < 90*time.Second || pe.RetryAfter > 121*time.Second {
				t.Fatalf("Retry-After %s: RetryAfter = %v, want about 100-120s", ra, pe.RetryAfter)
			}
			if n := len(s.ChatRequests()); n != 1 {
				t.Fatalf("Retry-After %s: chat requests = %d, want 1", ra, n)
			}
		}
	})

	t.Run("short retry-after is waited for", func(t *testing.T) {
		s, m := start(t,
			Scenario{Match: "wait", Status: http.StatusTooManyRequests, Headers: map[string]string{"Retry-After": "0.05"}, Times: 1},
			Scenario{Match: "wait", Text: []string{"ok"}})
		began := time.Now()
		if _, err := m.Stream(ctx, user("wait"), func(providers.Delta) {}); err != nil {
			t.Fatalf("Stream() = %v", err)
		}
		if d := time.Since(began); d < 50*time.Millisecond {
			t.Fatalf("Stream() took %v, want >= 50ms (Retry-After honoured)", d)
		}
		if n := len(s.ChatRequests()); n != 2 {
			t.Fatalf("chat requests = %d, want 2", n)
		}
	})

	t.Run("error classes", func(t *testing.T) {
		for _, ec := range ErrorCases(c.Flavor) {
			t.Run(ec.Name, func(t *testing.T) {
				sc := ec.Scenario
				sc.Match = "fail"
				s, m := start(t, sc)
				_, err := m.Stream(ctx, user("fail"), func(providers.Delta) {})
				var pe *providers.Error
				if !errors.As(err, &pe) || pe.Class != ec.Class || pe.Status != sc.Status {
					t.Fatalf("Stream() = %v, want class %v with HTTP %d", err, ec.Class, sc.Status)
				}
				if !strings.Contains(err.Error(), pe.Provider) || pe.Provider == "" {
					t.Fatalf("Stream() = %v, want the provider named", err)
				}
				if n := len(s.ChatRequests()); !ec.Class.Retryable() && n != 1 {
					t.Fatalf("chat requests = %d, want 1: class %v is not retried", n, ec.Class)
				}
			})
		}
	})

	t.Run("wrong key is auth and never echoed", func(t *testing.T) {
		s := StartServer(t, Options{Flavor: c.Flavor, APIKey: ConformanceKey})
		const bad = "sk-wrong-key-should-not-leak-42"
		p := c.New(t, ProviderParams{BaseURL: s.URL(), APIKey: bad})
		m, err := p.Model(ctx, c.Model)
		if err == nil {
			_, err = m.Stream(ctx, user("hi"), func(providers.Delta) {})
		}
		if providers.ClassOf(err) != providers.ClassAuth {
			t.Fatalf("err = %v, want class auth", err)
		}
		if strings.Contains(err.Error(), bad) {
			t.Fatalf("error %q contains the key", err)
		}
	})

	t.Run("unknown model and allow-list", func(t *testing.T) {
		s := StartServer(t, Options{Flavor: c.Flavor, APIKey: ConformanceKey})
		p := c.New(t, ProviderParams{BaseURL: s.URL(), APIKey: ConformanceKey})
		if _, err := p.Model(ctx, "no-such/model-x"); providers.ClassOf(err) != providers.ClassModelNotFound {
			t.Fatalf("Model(unknown) = %v, want class model_not_found", err)
		}
		p = c.New(t, ProviderParams{BaseURL: s.URL(), APIKey: ConformanceKey, Models: []string{"only-this"}})
		if _, err := p.Model(ctx, c.Model); providers.ClassOf(err) != providers.ClassModelNotFound {
			t.Fatalf("Model(outside allow-list) = %v, want class model_not_found", err)
		}
	})

	t.Run("discovery failure names the provider", func(t *testing.T) {
		s := StartServer(t, Options{Flavor: c.Flavor})
		p := c.New(t, ProviderParams{BaseURL: s.URL() + "/nowhere", APIKey: ConformanceKey})
		ms, err := p.Models(ctx)
		if err == nil || ms != nil || !strings.Contains(err.Error(), p.Name()) {
			t.Fatalf("Models() = %v, %v; want an error naming %q and no list", ms, err, p.Name())
		}
	})
}

// Eventually polls f until it returns nil or the deadline passes.
func Eventually(t testing.TB, within time.Duration, f func() error) {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		err := f()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v: %v", within, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// ErrorCase is one error answer of a real service and the class Lemo
// must map it to.
type ErrorCase struct {
	Name     string
	Scenario Scenario // Status, Body/Message, ContentType, Headers
	Class    providers.Class
}

// ErrorCases are the error answers each service sends for the failure
// classes (auth, quota, rate limit, context overflow, unknown model,
// server trouble), as notes/providers.md records them (§1.6, §2.4, §3.3,
// §4.4). Bodies given verbatim are the service's own envelopes; the others
// use the flavour's default envelope.
func ErrorCases(f Flavor) []ErrorCase {
	switch f {
	case FlavorOllama:
		return []ErrorCase{
			{"auth 401", Scenario{Status: 401}, providers.ClassAuth},
			{"cloud quota 429", Scenario{Status: 429, Message: "you (fake-user) have reached your session usage limit, upgrade for higher limits: https://ollama.com/upgrade"}, providers.ClassQuota},
			{"rate limit 429", Scenario{Status: 429}, providers.ClassRateLimit},
			{"context overflow 400", Scenario{Status: 400, Message: "the input length exceeds the context length"}, providers.ClassContextOverflow},
			{"model not found 404", Scenario{Status: 404, Message: `model "x" not found, try pulling it first`}, providers.ClassModelNotFound},
			{"html 502", Scenario{Status: 502}, providers.ClassTransient},
		}
	case FlavorOpenRouter:
		return []ErrorCase{
			{"auth 401", Scenario{Status: 401, Message: "User not found."}, providers.ClassAuth},
			{"credits 402", Scenario{Status: 402, Body: `{"error":{"code":402,"message":"Insufficient credits. Add more using https://openrouter.ai/settings/credits","metadata":{"error_type":"payment_required"}}}`}, providers.ClassQuota},
			{"rate limit 429", Scenario{Status: 429}, providers.ClassRateLimit},
			{"context overflow 400", Scenario{Status: 400, Body: `{"error":{"message":"This endpoint's maximum context length is 131072 tokens. However, you requested about 150321 tokens (150321 of text input). Please reduce the length of either one, or use the \"middle-out\" transform to compress your prompt automatically.","code":400,"metadata":{"provider_name":null}}}`}, providers.ClassContextOverflow},
			{"typed context overflow 400", Scenario{Status: 400, Body: `{"error":{"code":400,"message":"Input is too long for requested model.","metadata":{"error_type":"context_length_exceeded","provider_name":"Anthropic"}}}`}, providers.ClassContextOverflow},
			{"no tool endpoints 404", Scenario{Status: 404, Message: "No endpoints found that support tool use"}, providers.ClassModelNotFound},
			{"provider down 502", Scenario{Status: 502, Body: `{"error":{"code":502,"message":"Provider returned error","metadata":{"error_type":"provider_unavailable"}}}`}, providers.ClassTransient},
		}
	case FlavorNVIDIA:
		return []ErrorCase{
			{"auth 403 problem", Scenario{Status: 403, Message: "Authorization failed"}, providers.ClassAuth},
			// NVIDIA's credits error is unverified (notes §3.3): a 402
			// problem+json, as its gateway answers other statuses.
			{"credits 402 problem", Scenario{Status: 402, Body: `{"status":402,"title":"Payment Required","detail":"Account has insufficient credits"}`, ContentType: "application/problem+json"}, providers.ClassQuota},
			{"rate limit 429 problem", Scenario{Status: 429}, providers.ClassRateLimit},
			{"context overflow 400 vllm", Scenario{Status: 400, Body: `{"object":"error","message":"This model's maximum context length is 16384 tokens. However, you requested 16448 tokens (64 in the messages, 16384 in the completion). Please reduce the length of the messages or completion.","type":"BadRequestError","param":null,"code":400}`}, providers.ClassContextOverflow},
			{"not entitled 404", Scenario{Status: 404, Body: `{"detail":"Function not found for account"}`, ContentType: "application/problem+json"}, providers.ClassModelNotFound},
			{"bad gateway 502", Scenario{Status: 502}, providers.ClassTransient},
		}
	case FlavorZen:
		return []ErrorCase{
			{"auth 401", Scenario{Status: 401, Message: "Invalid API key."}, providers.ClassAuth},
			{"credits 401", Scenario{Status: 401, Body: `{"type":"error","error":{"type":"CreditsError","message":"No payment method. Add a payment method here: https://opencode.ai/workspace/billing"}}`}, providers.ClassQuota},
			{"monthly limit 401", Scenario{Status: 401, Body: `{"type":"error","error":{"type":"MonthlyLimitError","message":"Your workspace has reached its monthly spending limit."}}`}, providers.ClassQuota},
			{"free usage 429", Scenario{Status: 429, Body: `{"type":"error","error":{"type":"FreeUsageLimitError","message":"Rate limit exceeded. Please try again later."},"metadata":{}}`}, providers.ClassQuota},
			{"rate limit 429", Scenario{Status: 429}, providers.ClassRateLimit},
			// Upstream errors pass through with their status (404 becomes
			// 400) and the message prefixed with the provider's name.
			{"upstream context overflow 400", Scenario{Status: 400, Body: `{"error":{"message":"Error from provider (OpenAI): This model's maximum context length is 128000 tokens. However, your messages resulted in 131211 tokens. Please reduce the length of the messages.","type":"invalid_request_error","param":"messages","code":"context_length_exceeded"}}`}, providers.ClassContextOverflow},
			{"upstream token limit 400", Scenario{Status: 400, Body: `{"error":{"message":"Error from provider (Moonshot AI): Invalid request: Your request exceeded model token limit: 262144","type":"invalid_request_error"}}`}, providers.ClassContextOverflow},
			{"model 401", Scenario{Status: 401, Body: `{"type":"error","error":{"type":"ModelError","message":"Model acme-x not supported"}}`}, providers.ClassModelNotFound},
			{"internal 500", Scenario{Status: 500}, providers.ClassTransient},
		}
	}
	return []ErrorCase{
		{"auth 401", Scenario{Status: 401, Body: `{"error":{"message":"Incorrect API key provided","type":"invalid_request_error","code":"invalid_api_key"}}`}, providers.ClassAuth},
		{"quota 429", Scenario{Status: 429, Body: `{"error":{"message":"You exceeded your current quota, please check your plan and billing details.","type":"insufficient_quota","param":null,"code":"insufficient_quota"}}`}, providers.ClassQuota},
		{"rate limit 429", Scenario{Status: 429}, providers.ClassRateLimit},
		{"context overflow 400", Scenario{Status: 400, Body: `{"object":"error","message":"This model's maximum context length is 32768 tokens. However, you requested 40000 tokens.","type":"BadRequestError","param":null,"code":400}`}, providers.ClassContextOverflow},
		{"model not found 404", Scenario{Status: 404, Body: `{"error":{"message":"The model 'x' does not exist","type":"invalid_request_error","code":"model_not_found"}}`}, providers.ClassModelNotFound},
		{"server 500", Scenario{Status: 500}, providers.ClassTransient},
	}
}
