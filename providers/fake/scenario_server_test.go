package fake

import (
	"bufio"
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func post(t *testing.T, url, body string) (*http.Response, string) {
	t.Helper()
	resp, err := http.Post(url, "application/json", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp, string(b)
}

func TestKeywordScenarios(t *testing.T) {
	s := StartServer(t, Options{Flavor: FlavorOpenRouter})
	resp, body := post(t, s.URL()+"/chat/completions", `{"model":"openai/gpt-4o","stream":true,"messages":[{"role":"user","content":"please ERR 429 RA=3"}]}`)
	if resp.StatusCode != 429 || resp.Header.Get("Retry-After") != "3" || !strings.Contains(body, `"code":429`) {
		t.Fatalf("ERR 429: %d %v %s", resp.StatusCode, resp.Header, body)
	}
	_, body = post(t, s.URL()+"/chat/completions", `{"model":"openai/gpt-4o","stream":true,"messages":[{"role":"user","content":"TOOL"}]}`)
	if !strings.Contains(body, `"tool_calls"`) || !strings.Contains(body, `"finish_reason":"tool_calls"`) || !strings.HasPrefix(body, ": OPENROUTER PROCESSING") || !strings.HasSuffix(body, "data: [DONE]\n\n") {
		t.Fatalf("TOOL body:\n%s", body)
	}
	_, body = post(t, s.URL()+"/chat/completions", `{"model":"openai/gpt-4o","stream":true,"messages":[{"role":"tool","tool_call_id":"c","content":"42"}]}`)
	if !strings.Contains(body, `"tool said: "`) || !strings.Contains(body, `"42"`) {
		t.Fatalf("after tool:\n%s", body)
	}
	_, body = post(t, s.URL()+"/chat/completions", `{"model":"openai/gpt-4o","stream":true,"messages":[{"role":"user","content":"TRUNC"}]}`)
	if strings.Contains(body, "[DONE]") || strings.Contains(body, "finish_reason\":\"") {
		t.Fatalf("TRUNC has a terminal marker:\n%s", body)
	}
	if n := len(s.ChatRequests()); n != 4 {
		t.Fatalf("ChatRequests() = %d, want 4", n)
	}
}

func TestScriptTimesAndAfterTool(t *testing.T) {
	s := StartServer(t, Options{Flavor: FlavorOllama, Script: []Scenario{
		{Match: "x", Status: 503, Times: 1},
		{Match: "x", Text: []string{"second"}},
	}})
	resp, _ := post(t, s.URL()+"/api/chat", `{"model":"qwen3:8b","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 503 {
		t.Fatalf("first = %d, want 503", resp.StatusCode)
	}
	resp, body := post(t, s.URL()+"/api/chat", `{"model":"qwen3:8b","messages":[{"role":"user","content":"x"}]}`)
	if resp.StatusCode != 200 || resp.Header.Get("Content-Type") != "application/x-ndjson" || !strings.Contains(body, `"second"`) || !strings.Contains(body, `"done":true`) {
		t.Fatalf("second = %d %s", resp.StatusCode, body)
	}
}

func TestHoldObservesDisconnect(t *testing.T) {
	for _, fl := range Flavors {
		t.Run(string(fl), func(t *testing.T) {
			s := StartServer(t, Options{Flavor: fl})
			path, model := "/chat/completions", "local-model"
			switch fl {
			case FlavorOllama:
				path, model = "/api/chat", "qwen3:8b"
			case FlavorOpenRouter:
				model = "openai/gpt-4o"
			case FlavorNVIDIA:
				model = "meta/llama-3.3-70b-instruct"
			case FlavorZen:
				model = "glm-5"
			}
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			req, _ := http.NewRequestWithContext(ctx, http.MethodPost, s.URL()+path,
				strings.NewReader(`{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"SLOW"}]}`))
			resp, err := http.DefaultClient.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			defer resp.Body.Close()
			if _, err := bufio.NewReader(resp.Body).ReadString('\n'); err != nil {
				t.Fatal(err)
			}
			Eventually(t, 2*time.Second, func() error {
				if s.Holding() != 1 {
					return io.ErrNoProgress
				}
				return nil
			})
			cancel()
			Eventually(t, 2*time.Second, func() error {
				if s.Disconnects() != 1 || s.Holding() != 0 {
					return io.ErrNoProgress
				}
				return nil
			})
		})
	}
}

func TestCloseReleasesHeldStreams(t *testing.T) {
	s, err := NewServer(Options{Flavor: FlavorNVIDIA})
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start("127.0.0.1:0"); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		resp, err := http.Post(s.URL()+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"meta/llama-3.3-70b-instruct","messages":[{"role":"user","content":"SLOW"}]}`))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	Eventually(t, 2*time.Second, func() error {
		if s.Holding() != 1 {
			return io.ErrNoProgress
		}
		return nil
	})
	s.Close() // must not hang on the held stream
	<-done
}

func TestLoadScript(t *testing.T) {
	dir := t.TempDir()
	good := filepath.Join(dir, "s.json")
	_ = os.WriteFile(good, []byte(`{"scenarios":[{"match":"hi","text":["a","b"]},{"after_tool":true,"text":["done"]}]}`), 0o600)
	sc, err := LoadScript(good)
	if err != nil || len(sc) != 2 || !sc[1].AfterTool {
		t.Fatalf("LoadScript() = %+v, %v", sc, err)
	}
	bad := filepath.Join(dir, "b.json")
	_ = os.WriteFile(bad, []byte(`{"scenarios":[{"mach":"typo"}]}`), 0o600)
	if _, err := LoadScript(bad); err == nil {
		t.Fatal("LoadScript(unknown field) = nil error")
	}
	if _, err := NewServer(Options{Flavor: "nope"}); err == nil {
		t.Fatal("NewServer(unknown flavor) = nil error")
	}
}

// TestRecalledEvidenceIsNotAnswered: Lemo appends recalled evidence after
// the conversation; the scenario answers the message before it.
func TestRecalledEvidenceIsNotAnswered(t *testing.T) {
	recall := RecallPrefix + ` records from your other tasks ... \"ERR 500\" ... TOOL]`
	for _, f := range []Flavor{FlavorOllama, FlavorZen} {
		s := StartServer(t, Options{Flavor: f, Script: []Scenario{{AfterTool: true, Text: []string{"after the tool"}}}})
		path, model := "/chat/completions", "glm-5"
		if f == FlavorOllama {
			path, model = "/api/chat", "qwen3:8b"
		}
		resp, body := post(t, s.URL()+path, `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"},`+
			`{"role":"tool","tool_call_id":"c","content":"42"},{"role":"user","content":"`+recall+`"}]}`)
		if resp.StatusCode != 200 || !strings.Contains(body, "after the tool") {
			t.Fatalf("%s: %d %s; want the after-tool scenario", f, resp.StatusCode, body)
		}
		resp, body = post(t, s.URL()+path, `{"model":"`+model+`","stream":true,"messages":[{"role":"user","content":"hi"},{"role":"user","content":"`+recall+`"}]}`)
		if resp.StatusCode != 200 || !strings.Contains(body, "Hello") {
			t.Fatalf("%s: %d %s; want the plain answer to hi, not the keywords of the evidence", f, resp.StatusCode, body)
		}
	}
}

// Capture fills "$1" in the answer from the answered message; EchoTools
// appends every tool result after the last assistant message.
func TestScriptCaptureAndEchoTools(t *testing.T) {
	s := StartServer(t, Options{Flavor: FlavorOllama, Script: []Scenario{
		{Match: "ping", Capture: `id=([a-z0-9]+)`, ToolCalls: []Call{{Name: "send", Arguments: `{"to":"$1"}`}}},
		{AfterTool: true, EchoTools: true, Text: []string{"all: "}},
	}})
	_, body := post(t, s.URL()+"/api/chat", `{"model":"qwen3:8b","messages":[{"role":"user","content":"ping id=ab12"}]}`)
	if !strings.Contains(body, `"to":"ab12"`) {
		t.Fatalf("captured call:\n%s", body)
	}
	_, body = post(t, s.URL()+"/api/chat", `{"model":"qwen3:8b","messages":[{"role":"user","content":"old"},{"role":"tool","content":"r0"},{"role":"assistant","content":""},{"role":"tool","content":"r1"},{"role":"tool","content":"r2"}]}`)
	if !strings.Contains(body, "r1") || !strings.Contains(body, "r2") || strings.Contains(body, "r0") {
		t.Fatalf("echoed tools:\n%s", body)
	}
}
