package client_test

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/rs/zerolog"
	"go.uber.org/goleak"

	"lemo/actors"
	"lemo/actors/gateway"
	"lemo/actors/services"
	"lemo/client"
	"lemo/persistence"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/tools"
	"lemo/tools/system"
)

// The tokens of the helper daemon.
const (
	aliceToken    = "alice-token-0123456789"
	operatorToken = "operator-token-0123456789"
)

// The test process is a client: one Node for all tests (protoactor's
// remote may run once per process). Daemons run as child processes (this
// binary in helper mode).
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

func TestMain(m *testing.M) {
	if os.Getenv("LEMO_CLIENT_TEST_DAEMON") != "" {
		if err := runHelperDaemon(); err != nil {
			fmt.Fprintln(os.Stderr, "helper daemon:", err)
			os.Exit(1)
		}
		os.Exit(0)
	}
	code := m.Run()
	if node != nil {
		_ = node.Close()
	}
	if code == 0 {
		// After Node.Close the remote layer leaves only goroutines that end
		// by themselves: gRPC's transport readers of connections being torn
		// down, and protoactor's dead-letter throttle timer (1 s). Both
		// belong to the libraries; goleak waits for them.
		if err := goleak.Find(
			goleak.IgnoreTopFunction("github.com/asynkron/protoactor-go/actor.NewDeadLetter.NewThrottle.func4.1"),
		); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			code = 1
		}
	}
	os.Exit(code)
}

// helperDaemon is a daemon in a child process.
type helperDaemon struct {
	t    testing.TB
	cmd  *exec.Cmd
	addr string
	data string
	done chan struct{}
	in   io.WriteCloser
}

// startDaemon runs the helper daemon on data, listening on listen.
func startDaemon(t testing.TB, data, listen string) *helperDaemon {
	t.Helper()
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), "LEMO_CLIENT_TEST_DAEMON=1", "LEMO_CLIENT_TEST_DATA="+data, "LEMO_CLIENT_TEST_LISTEN="+listen)
	cmd.Stderr = os.Stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	in, err := cmd.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	d := &helperDaemon{t: t, cmd: cmd, data: data, done: make(chan struct{}), in: in}
	ready := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			if addr, ok := strings.CutPrefix(sc.Text(), "ready "); ok {
				ready <- addr
			}
		}
		_ = cmd.Wait()
		close(d.done)
	}()
	t.Cleanup(d.kill)
	select {
	case d.addr = <-ready:
	case <-d.done:
		t.Fatal("helper daemon exited before it was ready")
	case <-time.After(30 * time.Second):
		t.Fatal("helper daemon did not start")
	}
	return d
}

func (d *helperDaemon) kill() {
	select {
	case <-d.done:
		return
	default:
	}
	_ = d.cmd.Process.Kill()
	<-d.done
}

func (d *helperDaemon) connect(t testing.TB, token string) *client.Conn {
	t.Helper()
	c, err := testNode(t).Connect(context.Background(), client.Options{Addr: d.addr, Token: token, Name: "test"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

// runHelperDaemon is the child process: a daemon with the fake models and
// a gateway, until stdin closes or SIGTERM.
func runHelperDaemon() error {
	dd, err := persistence.OpenDataDir(os.Getenv("LEMO_CLIENT_TEST_DATA"))
	if err != nil {
		return err
	}
	defer dd.Close()
	store, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		return err
	}
	defer store.Close()
	provs := providers.NewRegistry()
	loop := func(n int, req *providers.Request) fake.Turn {
		k := 0
		for _, m := range req.Messages {
			if m.Role == providers.RoleTool {
				k++
			}
		}
		return fake.Turn{Text: fmt.Sprintf("tick %d", k), ToolCalls: []providers.ToolCall{fake.ToolCall(fmt.Sprintf("t%d", k), "test_tick", map[string]int{"n": k})}}
	}
	sys := func(n int, req *providers.Request) fake.Turn {
		last := req.Messages[len(req.Messages)-1]
		if last.Role == providers.RoleTool {
			return fake.Turn{Text: "result: " + last.Content}
		}
		return fake.Turn{ToolCalls: []providers.ToolCall{{ID: "c1", Name: "system", Arguments: json.RawMessage(last.Content)}}}
	}
	if err := provs.Register(fake.NewScripted("fake", fake.NewScriptedModel("echo", 8192, fake.Echo()), fake.NewScriptedModel("loop", 8192, loop), fake.NewScriptedModel("system", 8192, sys))); err != nil {
		return err
	}
	svcs := services.New(services.Options{})
	reg := tools.NewRegistry()
	if err := reg.Register(tickTool{}); err != nil {
		return err
	}
	if err := reg.Register(system.New(svcs)); err != nil {
		return err
	}
	d, err := actors.Start(context.Background(), actors.Deps{Store: store, Providers: provs, Tools: reg, Log: zerolog.Nop()},
		actors.Options{WorkspaceRoot: dd.Join("workspaces"), DataDir: dd.Path(), MaxCycles: 40})
	if err != nil {
		return err
	}
	tokens, err := gateway.NewTokens(
		gateway.Token{Secret: aliceToken, Principal: gateway.Principal{Owner: "alice"}},
		gateway.Token{Secret: operatorToken, Principal: gateway.Principal{Owner: "root", Operator: true}})
	if err != nil {
		return err
	}
	gw, err := gateway.Start(context.Background(), gateway.Config{Listen: os.Getenv("LEMO_CLIENT_TEST_LISTEN"), Tokens: tokens, Daemon: d,
		Tools: reg, Models: provs, Services: svcs, Approvals: d, Version: "test", Log: zerolog.Nop()})
	if err != nil {
		return err
	}
	fmt.Printf("ready %s\n", gw.Addr())
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM)
	eof := make(chan struct{})
	go func() {
		_, _ = io.Copy(io.Discard, os.Stdin)
		close(eof)
	}()
	select {
	case <-stop:
	case <-eof:
	}
	_ = gw.Stop(context.Background())
	return d.Stop(context.Background())
}

type tickTool struct{}

func (tickTool) Name() string        { return "test.tick" }
func (tickTool) Description() string { return "returns its input" }
func (tickTool) InputSchema() json.RawMessage {
	return json.RawMessage(`{"type":"object","properties":{"n":{"type":"integer"}}}`)
}
func (tickTool) StateSchema() json.RawMessage  { return nil }
func (tickTool) ResultSchema() json.RawMessage { return json.RawMessage(`{"type":"object"}`) }
func (tickTool) Execute(ctx context.Context, c tools.Call, emit tools.Emit) (json.RawMessage, error) {
	t := time.NewTimer(2 * time.Millisecond)
	defer t.Stop()
	select {
	case <-t.C:
	case <-ctx.Done():
	}
	return c.Input, nil
}
func (tickTool) Retain(out, in json.RawMessage) json.RawMessage { return out }
func (tickTool) View() string                                   { return "" }
