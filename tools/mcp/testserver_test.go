package mcp

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"
)

// The in-test MCP server: the test binary itself, run with
// MCPTEST_ROLE=server, serving over stdio the tools below; failure modes
// included. MCPTEST_DIR is where it leaves its markers.

const roleVariable = "MCPTEST_ROLE"

func obj(props string, required ...string) json.RawMessage {
	req, _ := json.Marshal(required)
	if required == nil {
		req = []byte("[]")
	}
	return json.RawMessage(`{"type":"object","properties":{` + props + `},"required":` + string(req) + `}`)
}

func textResult(s string) *gomcp.CallToolResult {
	return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: s}}}
}

// mark appends a line to the marker file name in MCPTEST_DIR.
func mark(name, line string) {
	if os.Getenv("MCPTEST_DIR") == "" {
		return // the in-process HTTP server leaves none
	}
	f, err := os.OpenFile(filepath.Join(os.Getenv("MCPTEST_DIR"), name), os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o600)
	if err != nil {
		return
	}
	fmt.Fprintln(f, line)
	f.Close()
}

// testServer builds the in-test server.
func testServer() *gomcp.Server {
	s := gomcp.NewServer(&gomcp.Implementation{Name: "lemo-test", Version: "1"}, nil)
	readOnly := &gomcp.ToolAnnotations{ReadOnlyHint: true}
	s.AddTool(&gomcp.Tool{Name: "echo", Description: "Echo the text back.\nSecond line.", InputSchema: obj(`"text":{"type":"string"},"seen_file":{"type":"string"}`, "text"), Annotations: readOnly},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			var in struct {
				Text     string
				SeenFile string `json:"seen_file"`
			}
			_ = json.Unmarshal(req.Params.Arguments, &in)
			if tok := req.Params.GetProgressToken(); tok != nil {
				for i := 1; i <= 3; i++ {
					_ = req.Session.NotifyProgress(ctx, &gomcp.ProgressNotificationParams{ProgressToken: tok, Progress: float64(i), Total: 3, Message: "step " + strconv.Itoa(i)})
				}
				// The client handles notifications apart from responses:
				// answer once it says it saw them all (or after a while).
				for deadline := time.Now().Add(20 * time.Second); in.SeenFile != "" && time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
					if _, err := os.Stat(in.SeenFile); err == nil {
						break
					}
				}
			}
			mark("echo", in.Text)
			return &gomcp.CallToolResult{Content: []gomcp.Content{
				&gomcp.TextContent{Text: "echo: " + in.Text},
				&gomcp.ImageContent{Data: make([]byte, 1234), MIMEType: "image/png"},
				&gomcp.EmbeddedResource{Resource: &gomcp.ResourceContents{URI: "file:///x.txt", MIMEType: "text/plain", Text: "hello"}},
			}}, nil
		})
	s.AddTool(&gomcp.Tool{Name: "crash", Description: "Exit while answering.", InputSchema: obj(``)},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			mark("crash", "called")
			os.Exit(3)
			return nil, nil
		})
	s.AddTool(&gomcp.Tool{Name: "hang", Description: "Start a child and never answer.", InputSchema: obj(``)},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			// A child that leaves the server's process group and session:
			// only the server's tag finds it.
			child := exec.Command("sleep", "1000")
			child.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
			if err := child.Start(); err == nil {
				mark("hang", "child "+strconv.Itoa(child.Process.Pid))
			}
			<-ctx.Done()
			mark("hang", "ended")
			select {} // and still no answer
		})
	s.AddTool(&gomcp.Tool{Name: "wait", Description: "Answer once the call is cancelled or the connection ends.", InputSchema: obj(``)},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			mark("wait", "started")
			<-ctx.Done()
			select {} // and no answer either

		})
	s.AddTool(&gomcp.Tool{Name: "badout", Description: "Return structured content that fails its schema.", InputSchema: obj(``),
		OutputSchema: obj(`"n":{"type":"integer"}`, "n")},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: "{}"}}, StructuredContent: map[string]any{"n": "not a number"}}, nil
		})
	s.AddTool(&gomcp.Tool{Name: "goodout", Description: "Return structured content that fits its schema.", InputSchema: obj(``),
		OutputSchema: obj(`"n":{"type":"integer"}`, "n")},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			return &gomcp.CallToolResult{Content: []gomcp.Content{&gomcp.TextContent{Text: `{"n":7}`}}, StructuredContent: map[string]any{"n": 7}}, nil
		})
	s.AddTool(&gomcp.Tool{Name: "big", Description: "Return a text of the given size.", InputSchema: obj(`"bytes":{"type":"integer"}`, "bytes")},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			var in struct{ Bytes int }
			_ = json.Unmarshal(req.Params.Arguments, &in)
			if in.Bytes > 1<<20 {
				// expandWriter writes the text on the wire: encoding
				// 100 MB in a race-instrumented server takes a minute.
				return textResult(bigMarker + strconv.Itoa(in.Bytes-8) + "$"), nil
			}
			return textResult("HEAD" + strings.Repeat("x", in.Bytes-8) + "TAIL"), nil
		})
	s.AddTool(&gomcp.Tool{Name: "env", Description: "List the environment.", InputSchema: obj(``), Annotations: readOnly},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			env := os.Environ()
			sort.Strings(env)
			return textResult(strings.Join(env, "\n")), nil
		})
	s.AddTool(&gomcp.Tool{Name: "cwd", Description: "Say the working folder.", InputSchema: obj(``), Annotations: readOnly},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			wd, err := os.Getwd()
			if err != nil {
				return nil, err
			}
			return textResult(wd), nil
		})
	s.AddTool(&gomcp.Tool{Name: "fails", Description: "Report a failure in the result.", InputSchema: obj(``)},
		func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
			return &gomcp.CallToolResult{IsError: true, Content: []gomcp.Content{&gomcp.TextContent{Text: "no such thing\x1b[31m"}}}, nil
		})
	if n := os.Getenv("MCPTEST_TOOL"); n != "" {
		s.AddTool(&gomcp.Tool{Name: n, Description: "A tool named by MCPTEST_TOOL.", InputSchema: obj(``)},
			func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
				return textResult(n), nil
			})
	}
	if os.Getenv("MCPTEST_COLLIDE") != "" {
		for _, n := range []string{"getUser", "get_user"} {
			s.AddTool(&gomcp.Tool{Name: n, Description: "Collides.", InputSchema: obj(``)},
				func(ctx context.Context, req *gomcp.CallToolRequest) (*gomcp.CallToolResult, error) {
					return textResult(n), nil
				})
		}
	}
	return s
}

// bigMarker stands in a result's text for "HEAD", n bytes of "x" and
// "TAIL" ("<marker>n$"), which expandWriter writes in its place.
const bigMarker = "\u0000BIG:"

// expandWriter writes what the server sends to w, with each bigMarker
// expanded: the message on the wire is a real response of that size.
type expandWriter struct{ w io.Writer }

func (e expandWriter) Write(p []byte) (int, error) {
	marker := []byte(`\u0000BIG:`) // as JSON encodes it
	i := bytes.Index(p, marker)
	if i < 0 {
		return e.w.Write(p)
	}
	j := bytes.IndexByte(p[i:], '$')
	n, _ := strconv.Atoi(string(p[i+len(marker) : i+j]))
	if _, err := e.w.Write(append(p[:i:i], "HEAD"...)); err != nil {
		return 0, err
	}
	chunk := bytes.Repeat([]byte("x"), 1<<20)
	for n > 0 {
		k := min(n, len(chunk))
		if _, err := e.w.Write(chunk[:k]); err != nil {
			return 0, err
		}
		n -= k
	}
	if _, err := e.w.Write(append([]byte("TAIL"), p[i+j+1:]...)); err != nil {
		return 0, err
	}
	return len(p), nil
}

// serveTestStdio runs the in-test server over stdio until stdin closes.
// With MCPTEST_FAIL_STARTS=n its first n starts (counted in the marker
// "starts") exit at once; with MCPTEST_START_HANG set it never answers.
func serveTestStdio() int {
	if n, err := strconv.Atoi(os.Getenv("MCPTEST_FAIL_STARTS")); err == nil {
		mark("starts", "start")
		if len(readMarker(os.Getenv("MCPTEST_DIR"), "starts")) <= n {
			fmt.Fprintln(os.Stderr, "test server: failing this start")
			return 1
		}
	}
	if os.Getenv("MCPTEST_START_HANG") != "" {
		mark("starts", "hang")
		select {}
	}
	t := &gomcp.IOTransport{Reader: seenReader{os.Stdin}, Writer: nopCloser{expandWriter{os.Stdout}}}
	if err := testServer().Run(context.Background(), t); err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		return 1
	}
	return 0
}

// seenReader marks "received" with every cancellation the server reads.
type seenReader struct{ io.ReadCloser }

func (r seenReader) Read(p []byte) (int, error) {
	n, err := r.ReadCloser.Read(p)
	for _, line := range bytes.Split(p[:n], []byte("\n")) {
		if bytes.Contains(line, []byte(`"notifications/cancelled"`)) {
			mark("received", "cancelled")
		}
	}
	return n, err
}

// serveTestHTTP runs the in-test server over streamable HTTP on a local
// port, with JSON responses when MCPTEST_JSON is set; it prints its URL
// and serves until stdin closes.
func serveTestHTTP() int {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		fmt.Fprintln(os.Stderr, "test server:", err)
		return 1
	}
	srv := &http.Server{Handler: testHTTPHandler(&gomcp.StreamableHTTPOptions{JSONResponse: os.Getenv("MCPTEST_JSON") != ""})}
	go func() { _ = srv.Serve(l) }()
	fmt.Printf("http://%s\n", l.Addr())
	_, _ = io.Copy(io.Discard, os.Stdin)
	_ = srv.Close()
	return 0
}

type nopCloser struct{ io.Writer }

func (nopCloser) Close() error { return nil }

// testHTTPHandler serves the in-test server over streamable HTTP, with
// opts (nil: the SDK's defaults); every request must carry the header
// X-Test: yes.
func testHTTPHandler(opts *gomcp.StreamableHTTPOptions) http.Handler {
	h := gomcp.NewStreamableHTTPHandler(func(*http.Request) *gomcp.Server { return testServer() }, opts)
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("X-Test") != "yes" {
			http.Error(w, "missing X-Test header", http.StatusUnauthorized)
			return
		}
		h.ServeHTTP(expandResponse{w}, r)
	})
}

// expandResponse writes a response with each bigMarker expanded, as
// expandWriter does on stdio.
type expandResponse struct{ http.ResponseWriter }

func (e expandResponse) Write(p []byte) (int, error) {
	return expandWriter{e.ResponseWriter}.Write(p)
}

func (e expandResponse) Flush() {
	if f, ok := e.ResponseWriter.(http.Flusher); ok {
		f.Flush()
	}
}

func (e expandResponse) Unwrap() http.ResponseWriter { return e.ResponseWriter }
