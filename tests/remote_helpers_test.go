package tests

import (
	"bufio"
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/protobuf/encoding/protojson"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/reflect/protoreflect"

	"lemo/api"
	"lemo/client"
)

// The test process is a client of the daemons it starts: one Node for the
// whole process (protoactor's remote may run once per process). Other
// identities and TLS clients run as lemo CLI processes.
var (
	nodeOnce sync.Once
	node     *client.Node
	nodeErr  error
)

func testNode(t testing.TB) *client.Node {
	t.Helper()
	nodeOnce.Do(func() { node, nodeErr = client.NewNode(client.NodeOptions{}) })
	if nodeErr != nil {
		t.Fatal(nodeErr)
	}
	return node
}

// remoteDaemon is a lemo serve with its remote API on a free port.
type remoteDaemon struct {
	*daemon
	addr  string
	token string
}

// writeConfig writes a lemo.yaml into a temporary folder.
func writeConfig(t testing.TB, yaml string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "lemo.yaml")
	if err := os.WriteFile(p, []byte(yaml), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// serveRemote starts lemo serve on data with the API on 127.0.0.1:0 and
// reads where it listens from daemon.json.
func serveRemote(t testing.TB, data string, args ...string) *remoteDaemon {
	t.Helper()
	d := startDaemon(t, data, append([]string{"--listen", "127.0.0.1:0"}, args...)...)
	l, err := client.FindLocal(data)
	if err != nil {
		t.Fatalf("FindLocal: %v\n%s", err, d.logs())
	}
	if l.TokenErr != nil {
		t.Fatal(l.TokenErr)
	}
	info, err := os.Stat(filepath.Join(data, "token"))
	if err != nil || info.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want 0600", err, info.Mode().Perm())
	}
	return &remoteDaemon{daemon: d, addr: l.Address, token: l.Token}
}

// connect opens a Conn with token (the data folder's when "").
func (d *remoteDaemon) connect(t testing.TB, token string) *client.Conn {
	t.Helper()
	if token == "" {
		token = d.token
	}
	c, err := testNode(t).Connect(context.Background(), client.Options{Addr: d.addr, Token: token, Name: "e2e"})
	if err != nil {
		t.Fatalf("connect: %v\n%s", err, d.logs())
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// alive reports whether the daemon process is still running.
func (d *daemon) alive() bool {
	select {
	case <-d.done:
		return false
	default:
		return true
	}
}

// cli runs a lemo client command against data and returns its output and
// exit code.
func cli(t testing.TB, data string, args ...string) (string, int) {
	t.Helper()
	return lemo(t, cleanEnv("LEMO_DATA="+data), args...)
}

// stream is a lemo client command whose output is read line by line.
type stream struct {
	cmd   *exec.Cmd
	lines chan string
	done  chan struct{}
	mu    sync.Mutex
	err   strings.Builder
}

func startCLI(t testing.TB, data string, args ...string) *stream {
	t.Helper()
	s := &stream{lines: make(chan string, 100000), done: make(chan struct{})}
	s.cmd = exec.Command(lemoBin, privateUnlessNamed(args)...)
	s.cmd.Env = cleanEnv("LEMO_DATA=" + data)
	out, err := s.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	s.cmd.Stderr = &lockedWriter{s: s}
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(out)
		sc.Buffer(make([]byte, 1<<20), 16<<20)
		for sc.Scan() {
			s.lines <- sc.Text()
		}
		_, _ = io.Copy(io.Discard, out)
		_ = s.cmd.Wait()
		close(s.lines)
		close(s.done)
	}()
	t.Cleanup(func() {
		_ = s.cmd.Process.Kill()
		<-s.done
	})
	return s
}

type lockedWriter struct{ s *stream }

func (w *lockedWriter) Write(p []byte) (int, error) {
	w.s.mu.Lock()
	defer w.s.mu.Unlock()
	return w.s.err.Write(p)
}

func (s *stream) stderr() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.err.String()
}

// next returns the next line, or false at the end or after timeout.
func (s *stream) next(timeout time.Duration) (string, bool) {
	select {
	case l, ok := <-s.lines:
		return l, ok
	case <-time.After(timeout):
		return "", false
	}
}

// wait waits for the command to exit and returns its exit code.
func (s *stream) wait(t testing.TB, timeout time.Duration) int {
	t.Helper()
	select {
	case <-s.done:
	case <-time.After(timeout):
		t.Fatalf("%v did not exit within %v; stderr:\n%s", s.cmd.Args, timeout, s.stderr())
	}
	return s.cmd.ProcessState.ExitCode()
}

func (s *stream) signal(sig syscall.Signal) { _ = s.cmd.Process.Signal(sig) }

// parseUpdate decodes one line of lemo attach/run --json.
func parseUpdate(t testing.TB, line string) *api.Update {
	t.Helper()
	u := new(api.Update)
	if err := unmarshalScriptJSON([]byte(line), u); err != nil {
		t.Fatalf("not an update: %q: %v", line, err)
	}
	return u
}

// unmarshalScriptJSON decodes the CLI's --json (docs/json.md) into m: it
// is protojson but for bytes fields, which hold their JSON as is unless
// they are base64 strings.
func unmarshalScriptJSON(b []byte, m proto.Message) error {
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.UseNumber()
	var v any
	if err := dec.Decode(&v); err != nil {
		return err
	}
	out, err := json.Marshal(toProtoJSON(v, m.ProtoReflect().Descriptor()))
	if err != nil {
		return err
	}
	return protojson.Unmarshal(out, m)
}

func toProtoJSON(v any, md protoreflect.MessageDescriptor) any {
	obj, ok := v.(map[string]any)
	if !ok || strings.HasPrefix(string(md.FullName()), "google.protobuf.") {
		return v
	}
	for k, fv := range obj {
		fd := md.Fields().ByName(protoreflect.Name(k))
		if fd == nil {
			continue
		}
		switch {
		case fd.IsList():
			if arr, ok := fv.([]any); ok {
				for i := range arr {
					arr[i] = fieldToProtoJSON(arr[i], fd)
				}
			}
		case fd.IsMap():
			if mm, ok := fv.(map[string]any); ok {
				for mk := range mm {
					mm[mk] = fieldToProtoJSON(mm[mk], fd.MapValue())
				}
			}
		default:
			obj[k] = fieldToProtoJSON(fv, fd)
		}
	}
	return obj
}

func fieldToProtoJSON(v any, fd protoreflect.FieldDescriptor) any {
	switch fd.Kind() {
	case protoreflect.MessageKind:
		return toProtoJSON(v, fd.Message())
	case protoreflect.BytesKind:
		if _, isString := v.(string); isString {
			return v // base64
		}
		raw, _ := json.Marshal(v)
		return base64.StdEncoding.EncodeToString(raw)
	}
	return v
}

// waitTask polls until cond holds for the Task's metadata.
func waitTask(t testing.TB, c *client.Conn, id string, what string, cond func(*api.TaskMeta) bool) *api.TaskMeta {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		m, err := c.Task(context.Background(), id)
		if err == nil && cond(m) {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %s: last %v, %v", id, what, m, err)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func statusIs(st api.TaskStatus) func(*api.TaskMeta) bool {
	return func(m *api.TaskMeta) bool { return m.GetStatus() == st }
}

// contiguousFrom checks evs are seqs from, from+1, ... of one Task.
func contiguousFrom(evs []*api.Event, from uint64) error {
	for i, ev := range evs {
		if ev.GetSeq() != from+uint64(i) {
			return fmt.Errorf("event %d has seq %d, want %d", i, ev.GetSeq(), from+uint64(i))
		}
	}
	return nil
}

func mustJSON(t testing.TB, s string, v any) {
	t.Helper()
	if err := json.Unmarshal([]byte(s), v); err != nil {
		t.Fatalf("not JSON: %v\n%s", err, s)
	}
}
