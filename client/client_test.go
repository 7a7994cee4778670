package client_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/client"
)

func freePort(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

func TestConnectErrors(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "127.0.0.1:0")
	n := testNode(t)
	ctx := context.Background()
	if _, err := n.Connect(ctx, client.Options{Addr: freePort(t), Token: aliceToken}); !errors.Is(err, client.ErrNotRunning) {
		t.Errorf("nothing listening: %v, want ErrNotRunning", err)
	}
	if _, err := n.Connect(ctx, client.Options{Addr: d.addr, Token: "wrong-token-0123456789"}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("wrong token: %v, want ErrUnauthenticated", err)
	}
	if _, err := n.Connect(ctx, client.Options{Addr: d.addr}); !errors.Is(err, client.ErrUnauthenticated) {
		t.Errorf("no token: %v, want ErrUnauthenticated", err)
	}
	if _, err := n.Connect(ctx, client.Options{Addr: "nohostport", Token: aliceToken}); err == nil {
		t.Errorf("a malformed address was accepted")
	}
	c := d.connect(t, aliceToken)
	if w := c.Welcome(); w.GetOwner() != "alice" || w.GetOperator() {
		t.Errorf("welcome = %v", w)
	}
	// One node, one identity per daemon.
	if _, err := n.Connect(ctx, client.Options{Addr: d.addr, Token: operatorToken}); err == nil || !strings.Contains(err.Error(), "another token") {
		t.Errorf("a second token on one node: %v", err)
	}
}

func TestCommands(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "127.0.0.1:0")
	c := d.connect(t, aliceToken)
	ctx := context.Background()
	meta, err := c.CreateTask(ctx, client.CreateTask{Request: "hello", Model: "fake/echo"})
	if err != nil || meta.GetOwner() != "alice" {
		t.Fatalf("CreateTask = %v, %v", meta, err)
	}
	id := meta.GetTaskId()
	waitStatus(t, c, id, api.TaskStatus_TASK_STATUS_FINISHED)
	list, next, err := c.ListTasks(ctx, "", 0)
	if err != nil || len(list) != 1 || next != "" {
		t.Fatalf("ListTasks = %v, %q, %v", list, next, err)
	}
	evs, err := c.ReadHistory(ctx, id, 1)
	if err != nil || len(evs) < 7 || evs[len(evs)-1].GetStatusChanged().GetStatus() != api.TaskStatus_TASK_STATUS_FINISHED {
		t.Fatalf("ReadHistory = %d events, %v", len(evs), err)
	}
	page, err := c.History(ctx, id, 2, 2)
	if err != nil || len(page.GetEvents()) != 2 || page.GetNextSeq() != 4 {
		t.Fatalf("History page = %v, %v", page, err)
	}
	tl, err := c.Tools(ctx)
	if err != nil || len(tl) != 2 {
		t.Fatalf("Tools = %v, %v", tl, err)
	}
	ml, err := c.Models(ctx)
	if err != nil || len(ml.GetModels()) != 3 {
		t.Fatalf("Models = %v, %v", ml, err)
	}
	if _, err := c.Pause(ctx, id); !errors.Is(err, client.ErrConflict) {
		t.Errorf("pause a finished task: %v, want ErrConflict", err)
	}
	var ce *client.Error
	if _, err := c.Task(ctx, "NOSUCHTASK"); !errors.Is(err, client.ErrNotFound) || !errors.As(err, &ce) || ce.Code != api.ErrorCode_ERROR_CODE_NOT_FOUND {
		t.Errorf("unknown task: %v", err)
	}
	if _, err := c.CreateTask(ctx, client.CreateTask{Request: strings.Repeat("x", 3<<20), Model: "fake/echo"}); !errors.Is(err, client.ErrTooLarge) {
		t.Errorf("a 3 MiB request: %v, want ErrTooLarge", err)
	}
	if m, err := c.Cancel(ctx, id); err != nil || m.GetStatus() != api.TaskStatus_TASK_STATUS_CANCELLED {
		t.Errorf("Cancel = %v, %v", m, err)
	}
	approvals, err := c.Approvals(ctx)
	if err != nil || len(approvals) != 0 {
		t.Errorf("Approvals = %v, %v", approvals, err)
	}
}

func waitStatus(t testing.TB, c *client.Conn, id string, st api.TaskStatus) *api.TaskMeta {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		m, err := c.Task(context.Background(), id)
		if err == nil && m.GetStatus() == st {
			return m
		}
		if time.Now().After(deadline) {
			t.Fatalf("task %s: %v, %v; want %v", id, m.GetStatus(), err, st)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// A hello that meets the node's failed link to the daemon's address (a
// daemon restarted on the address of one that died, within protoactor's
// redial pause) is sent again once a new link is made: the Conn gets its
// welcome instead of waiting out its timeout. The failed link is made here
// by a message sent over a link the daemon refuses; each round uses a new
// daemon, until a hello was sent again.
func TestHelloRetriedAfterAFailedLink(t *testing.T) {
	for round := 1; ; round++ {
		d := startDaemon(t, t.TempDir(), freePort(t))
		testNode(t).Poke(d.addr)
		c := d.connect(t, aliceToken)
		if _, _, err := c.ListTasks(context.Background(), "", 1); err != nil {
			t.Fatalf("round %d: the session does not work: %v", round, err)
		}
		if c.ResentHellos() > 0 {
			t.Logf("round %d: %d hellos sent again", round, c.ResentHellos())
			return
		}
		if round == 5 {
			t.Fatal("in 5 rounds no hello met the link that was down")
		}
		d.kill()
	}
}

// Follow survives a daemon killed mid-stream and restarted on the same
// address: it reconnects and resumes, delivering every event once and in
// order; the Conn's Service is registered again.
func TestFollowAcrossDaemonRestart(t *testing.T) {
	data, listen := t.TempDir(), freePort(t)
	d := startDaemon(t, data, listen)
	c := d.connect(t, aliceToken)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if err := c.RegisterService(ctx, &api.ServiceSpec{Name: "echo", Operations: []*api.ServiceOperation{{Name: "say"}}}, func(ctx context.Context, call client.ServiceCall) (json.RawMessage, error) {
		return call.Input, nil
	}); err != nil {
		t.Fatal(err)
	}
	meta, err := c.CreateTask(ctx, client.CreateTask{Request: "go", Model: "fake/loop"})
	if err != nil {
		t.Fatal(err)
	}
	id := meta.GetTaskId()
	var mu sync.Mutex
	var got []*api.Event
	var notices []string
	restarted := make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		done <- c.Follow(ctx, client.FollowOptions{TaskID: id, FromSeq: 1, Notice: func(why string) {
			mu.Lock()
			notices = append(notices, why)
			mu.Unlock()
		}}, func(u *api.Update) error {
			if ev := u.GetEvent(); ev != nil {
				mu.Lock()
				got = append(got, ev)
				n := len(got)
				mu.Unlock()
				if n == 20 {
					once.Do(func() {
						d.kill() // kill -9 mid-stream
						d = startDaemon(t, data, listen)
						close(restarted)
					})
				}
				select {
				case <-restarted:
					// After the restart the Task is paused (interrupted):
					// continue it once, then stop at the cycle limit.
					if ev.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_CYCLE_LIMIT {
						return client.ErrStopFollowing
					}
					if ev.GetStatusChanged().GetPauseReason() == api.PauseReason_PAUSE_REASON_INTERRUPTED {
						go c.Continue(ctx, id, "")
					}
				default:
				}
			}
			return nil
		})
	}()
	if err := <-done; err != nil {
		t.Fatalf("Follow: %v", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(notices) == 0 {
		t.Error("no notice of the interruption")
	}
	for i, ev := range got {
		if ev.GetSeq() != uint64(i+1) {
			t.Fatalf("event %d has seq %d: a gap or a repeat", i, ev.GetSeq())
		}
	}
	hist, err := c.ReadHistory(ctx, id, 1)
	if err != nil {
		t.Fatal(err)
	}
	for i := range got {
		if !proto.Equal(got[i], hist[i]) {
			t.Fatalf("seq %d differs from history", i+1)
		}
	}
	// The Conn opened a new session and registered its Service again.
	m, err := c.CreateTask(ctx, client.CreateTask{Request: `{"action":"execute","service":"echo","operation":"say","input":{"x":1}}`, Model: "fake/system"})
	if err != nil {
		t.Fatal(err)
	}
	waitStatus(t, c, m.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
	evs, _ := c.ReadHistory(ctx, m.GetTaskId(), 1)
	found := false
	for _, ev := range evs {
		if r := ev.GetToolResult(); r != nil && strings.Contains(string(r.GetRetainedOutput()), `"output":{"x":1}`) && r.GetUntrusted() {
			found = true
		}
	}
	if !found {
		t.Fatalf("the re-registered service was not reached: %v", evs)
	}
}

func TestProjectionRun(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "127.0.0.1:0")
	c := d.connect(t, aliceToken)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	meta, err := c.CreateTask(ctx, client.CreateTask{Request: "go", Model: "fake/loop"})
	if err != nil {
		t.Fatal(err)
	}
	p := client.NewProjection()
	all := client.NewProjection()
	errc := make(chan error, 2)
	go func() { errc <- p.Run(ctx, c, client.FollowOptions{TaskID: meta.GetTaskId()}) }()
	go func() { errc <- all.Run(ctx, c, client.FollowOptions{}) }()
	final := waitStatus(t, c, meta.GetTaskId(), api.TaskStatus_TASK_STATUS_PAUSED)
	deadline := time.Now().Add(10 * time.Second)
	for {
		v, _ := p.Task(meta.GetTaskId())
		w, _ := all.Task(meta.GetTaskId())
		if v.Meta.GetLastSeq() == final.GetLastSeq() && w.Meta.GetLastSeq() == final.GetLastSeq() {
			if v.Meta.GetStatus() != api.TaskStatus_TASK_STATUS_PAUSED || len(v.Events) != int(final.GetLastSeq()) || v.Meta.GetCycles() != final.GetCycles() {
				t.Fatalf("projection: status %v, %d events, %d cycles; want %v", v.Meta.GetStatus(), len(v.Events), v.Meta.GetCycles(), final)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("projections at seq %d and %d, want %d", v.Meta.GetLastSeq(), w.Meta.GetLastSeq(), final.GetLastSeq())
		}
		<-time.After(5 * time.Millisecond)
	}
	cancel()
	for i := 0; i < 2; i++ {
		if err := <-errc; err != nil {
			t.Errorf("Run: %v", err)
		}
	}
}

func TestServiceErrors(t *testing.T) {
	d := startDaemon(t, t.TempDir(), "127.0.0.1:0")
	c := d.connect(t, aliceToken)
	ctx := context.Background()
	spec := &api.ServiceSpec{Name: "flaky", Operations: []*api.ServiceOperation{{Name: "boom"}, {Name: "bad"}, {Name: "garbled"}}}
	if err := c.RegisterService(ctx, spec, func(ctx context.Context, call client.ServiceCall) (json.RawMessage, error) {
		if call.Operation == "boom" {
			panic("kaboom")
		}
		if call.Operation == "garbled" {
			// Not UTF-8 and a NUL: the error still reaches the Task.
			return nil, errors.New("bad \xff\x00 bytes")
		}
		return json.RawMessage(`not json`), nil
	}); err != nil {
		t.Fatal(err)
	}
	for op, want := range map[string]string{"boom": "the service panicked: kaboom", "bad": "not JSON", "garbled": "bad \uFFFD\uFFFD bytes"} {
		m, err := c.CreateTask(ctx, client.CreateTask{Request: fmt.Sprintf(`{"action":"execute","service":"flaky","operation":%q}`, op), Model: "fake/system"})
		if err != nil {
			t.Fatal(err)
		}
		waitStatus(t, c, m.GetTaskId(), api.TaskStatus_TASK_STATUS_FINISHED)
		evs, _ := c.ReadHistory(ctx, m.GetTaskId(), 1)
		found := false
		for _, ev := range evs {
			if f := ev.GetToolFailed(); f != nil && strings.Contains(f.GetMessage(), want) {
				found = true
			}
		}
		if !found {
			t.Errorf("%s: no tool failure saying %q", op, want)
		}
	}
	if err := c.RegisterService(ctx, &api.ServiceSpec{Name: "Bad Name"}, func(context.Context, client.ServiceCall) (json.RawMessage, error) { return nil, nil }); !errors.Is(err, client.ErrInvalid) {
		t.Errorf("an invalid spec: %v", err)
	}
}

func TestFindLocal(t *testing.T) {
	dir := t.TempDir()
	if _, err := client.FindLocal(dir); !errors.Is(err, client.ErrNotRunning) || !strings.Contains(err.Error(), "lemo serve --data "+dir) {
		t.Errorf("no daemon.json: %v", err)
	}
	write := func(pid int) {
		b, _ := json.Marshal(map[string]any{"address": "127.0.0.1:7465", "pid": pid, "api_version": 1})
		if err := os.WriteFile(filepath.Join(dir, client.DaemonFile), b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(1 << 22) // beyond pid_max: no such process
	if _, err := client.FindLocal(dir); !errors.Is(err, client.ErrNotRunning) || !strings.Contains(err.Error(), "has exited") {
		t.Errorf("dead pid: %v", err)
	}
	write(os.Getpid())
	l, err := client.FindLocal(dir)
	if err != nil || l.Address != "127.0.0.1:7465" || l.TokenErr == nil {
		t.Fatalf("live pid without a token: %+v, %v", l, err)
	}
	if err := os.WriteFile(filepath.Join(dir, client.TokenFile), []byte("tok-0123456789abcdef\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if l, err := client.FindLocal(dir); err != nil || l.Token != "tok-0123456789abcdef" {
		t.Fatalf("with a token: %+v, %v", l, err)
	}
}
