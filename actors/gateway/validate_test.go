package gateway

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/asynkron/protoactor-go/actor"
	"github.com/asynkron/protoactor-go/remote"
	"google.golang.org/protobuf/proto"

	"lemo/api"
)

func TestValidate(t *testing.T) {
	long := strings.Repeat("x", maxTextBytes+1)
	cases := []struct {
		name string
		req  *api.Request
		want api.ErrorCode // UNSPECIFIED: valid
	}{
		{"create", create("fake/echo", "hi"), 0},
		{"create without model", create("", "hi"), 0},
		{"zero id", &api.Request{Command: &api.Request_Goodbye{Goodbye: &api.Goodbye{}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"no command", &api.Request{Id: 1}, api.ErrorCode_ERROR_CODE_INVALID},
		{"empty request", create("fake/echo", "  \n"), api.ErrorCode_ERROR_CODE_INVALID},
		{"huge request", create("fake/echo", long), api.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"bad model", create("noslash", "hi"), api.ErrorCode_ERROR_CODE_INVALID},
		{"relative workspace", &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "x", Workspace: "rel/dir"}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"tools without restriction", &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "x", Tools: []string{"files.read"}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"bad tool name", &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "x", Tools: []string{"Files Read"}, ToolsRestricted: true}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"task id with slash", taskRef("pause", "a/b"), api.ErrorCode_ERROR_CODE_INVALID},
		{"empty task id", taskRef("cancel", ""), api.ErrorCode_ERROR_CODE_INVALID},
		{"list limit", &api.Request{Command: &api.Request_ListTasks{ListTasks: &api.ListTasksRequest{Limit: 501}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"history limit", &api.Request{Command: &api.Request_History{History: &api.HistoryRequest{TaskId: "T", Limit: 1001}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"subscribe id 0", subscribe(0, "T", 1), api.ErrorCode_ERROR_CODE_INVALID},
		{"from_seq without task", subscribe(1, "", 5), api.ErrorCode_ERROR_CODE_INVALID},
		{"resume with task", &api.Request{Command: &api.Request_Subscribe{Subscribe: &api.SubscribeRequest{Subscription: 1, TaskId: "T", Resume: []*api.TaskSeq{{TaskId: "T"}}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"resume twice", &api.Request{Command: &api.Request_Subscribe{Subscribe: &api.SubscribeRequest{Subscription: 1, Resume: []*api.TaskSeq{{TaskId: "T"}, {TaskId: "T"}}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"ack of nothing", &api.Request{Command: &api.Request_Ack{Ack: &api.Ack{Subscription: 1}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"approval id without call", &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: "T"}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"approval", &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: "T.call-1-1", Approve: true}}}, 0},
		{"approval always for the task", &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: "T.call-1-1", Approve: true, AlwaysForTask: true}}}, 0},
		{"always for the task with a denial", &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: "T.call-1-1", AlwaysForTask: true, Reason: "no"}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"steer with non-JSON", &api.Request{Command: &api.Request_Steer{Steer: &api.SteerRequest{TaskId: "T", CallId: "c", Input: []byte("{")}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"service without operations", &api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: &api.ServiceSpec{Name: "s"}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"service with bad schema", &api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: &api.ServiceSpec{Name: "s", Operations: []*api.ServiceOperation{{Name: "o", InputSchema: []byte("{")}}}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"service with a duplicate operation", &api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: &api.ServiceSpec{Name: "s", Operations: []*api.ServiceOperation{{Name: "o"}, {Name: "o"}}}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"service result not JSON", &api.Request{Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: 1, Output: []byte("nope")}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"service error", &api.Request{Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: 1, Error: "failed"}}}, 0},
		{"hello without version", &api.Request{Command: &api.Request_Hello{Hello: &api.Hello{}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"raise budget", &api.Request{Command: &api.Request_RaiseBudget{RaiseBudget: &api.RaiseBudgetRequest{TaskId: "T", Add: &api.BudgetAmounts{Tokens: 5}}}}, 0},
		{"raise budget by nothing", &api.Request{Command: &api.Request_RaiseBudget{RaiseBudget: &api.RaiseBudgetRequest{TaskId: "T", Add: &api.BudgetAmounts{}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"raise budget of a bad task id", &api.Request{Command: &api.Request_RaiseBudget{RaiseBudget: &api.RaiseBudgetRequest{TaskId: "a/b", Add: &api.BudgetAmounts{Tokens: 5}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		// Control characters mean nothing in a request (a NUL would end
		// up in the title); tab, line feed and carriage return do.
		{"NUL in a request", create("fake/echo", "hi\x00there"), api.ErrorCode_ERROR_CODE_INVALID},
		{"escape in a request", create("fake/echo", "hi\x1b[2J"), api.ErrorCode_ERROR_CODE_INVALID},
		{"C1 control in a request", create("fake/echo", "hi\u009bthere"), api.ErrorCode_ERROR_CODE_INVALID},
		{"tabs and new lines in a request", create("fake/echo", "a\tb\r\nc"), 0},
		{"invalid UTF-8 in a request", create("fake/echo", "hi\xff"), api.ErrorCode_ERROR_CODE_INVALID},
		{"NUL in a message", &api.Request{Command: &api.Request_SendMessage{SendMessage: &api.SendMessageRequest{TaskId: "T", Text: "a\x00"}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"new line in a workspace", &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "x", Workspace: "/tmp/a\nb"}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"NUL in a workspace", &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "x", Workspace: "/tmp/a\x00"}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"control character in a model", create("fake/ec\x07ho", "hi"), api.ErrorCode_ERROR_CODE_INVALID},
		{"NUL in a reason", &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: "T.c", Reason: "no\x00"}}}, api.ErrorCode_ERROR_CODE_INVALID},
		{"control character in a service description", &api.Request{Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: &api.ServiceSpec{Name: "s", Description: "\x1b]0;x\x07", Operations: []*api.ServiceOperation{{Name: "o"}}}}}}, api.ErrorCode_ERROR_CODE_INVALID},
		// Every bound on bytes answers TOO_LARGE, whatever the size.
		{"long workspace", &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "x", Workspace: "/" + strings.Repeat("a", maxPathBytes)}}}, api.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"long reason", &api.Request{Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: "T.c", Reason: strings.Repeat("r", maxReasonBytes+1)}}}, api.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"long service error", &api.Request{Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: 1, Error: strings.Repeat("e", maxReasonBytes+1)}}}, api.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"long client name", &api.Request{Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: 1, Client: strings.Repeat("c", maxIDBytes+1)}}}, api.ErrorCode_ERROR_CODE_TOO_LARGE},
		{"short callback secret", &api.Request{Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: 1, CallbackSecret: []byte("short")}}}, api.ErrorCode_ERROR_CODE_INVALID},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if tc.req.Id == 0 && tc.name != "zero id" {
				tc.req.Id = 7
			}
			err := validate(tc.req)
			var got api.ErrorCode
			if err != nil {
				got = err.code
			}
			if got != tc.want {
				t.Fatalf("validate = %v (%v), want %v", got, err, tc.want)
			}
		})
	}
}

// FuzzRequest decodes anything a client may send as a Request and
// validates it: it must never panic, and a request it accepts survives an
// encoding round trip unchanged and still valid.
func FuzzRequest(f *testing.F) {
	seeds := []*api.Request{
		create("fake/echo", "hi"),
		subscribe(1, "T", 3),
		{Id: 3, Command: &api.Request_Subscribe{Subscribe: &api.SubscribeRequest{Subscription: 2, Resume: []*api.TaskSeq{{TaskId: "A", Seq: 4}}}}},
		{Id: 4, Command: &api.Request_RegisterService{RegisterService: &api.RegisterServiceRequest{Service: &api.ServiceSpec{Name: "s", Operations: []*api.ServiceOperation{{Name: "o", InputSchema: []byte(`{"type":"object"}`)}}}}}},
		{Id: 5, Command: &api.Request_Steer{Steer: &api.SteerRequest{TaskId: "T", CallId: "c", Input: []byte(`{"x":1}`)}}},
		{Id: 6, Command: &api.Request_ResolveApproval{ResolveApproval: &api.ResolveApprovalRequest{ApprovalId: "T.c", Reason: "no"}}},
		{Id: 7, Command: &api.Request_ServiceResult{ServiceResult: &api.ServiceResult{Call: 9, Output: []byte(`[1,2]`)}}},
		{Id: 8, Command: &api.Request_Hello{Hello: &api.Hello{ProtocolVersion: 1, CallbackSecret: []byte("0123456789abcdef0123")}}},
	}
	for _, s := range seeds {
		if s.Id == 0 {
			s.Id = 1
		}
		f.Add(marshal(s))
	}
	f.Add([]byte{0xff, 0x01})
	f.Fuzz(func(t *testing.T, data []byte) {
		var r api.Request
		if err := proto.Unmarshal(data, &r); err != nil {
			return
		}
		if validate(&r) != nil {
			return
		}
		again := new(api.Request)
		if err := proto.Unmarshal(marshal(&r), again); err != nil {
			t.Fatalf("re-decoding an accepted request: %v", err)
		}
		if !proto.Equal(&r, again) {
			t.Fatalf("an accepted request changed in a round trip")
		}
		if err := validate(again); err != nil {
			t.Fatalf("an accepted request is refused after a round trip: %v", err)
		}
	})
}

// FuzzGuard feeds arbitrary remote messages to the guard: it must never
// panic, and what it lets through is addressed only to the gateway (with
// Request) and carries the guard's own header.
func FuzzGuard(f *testing.F) {
	me := &actor.PID{Address: testAddress, Id: "c1"}
	f.Add(marshal(connectMsg(testAddress)), marshal(batch(typeRequest, "gateway", marshal(create("fake/echo", "x")), me)))
	f.Add(marshal(connectMsg(testAddress)), marshal(batch("actor.Stop", "gateway", nil, nil)))
	f.Add(marshal(connectMsg(testAddress)), marshal(batch(typeWatch, "gateway/x", marshal(&actor.Watch{Watcher: me}), nil)))
	f.Add([]byte{}, []byte{0x0a, 0x00})
	f.Fuzz(func(t *testing.T, first, second []byte) {
		g := testGuard(t)
		var msgs []*remote.RemoteMessage
		for _, b := range [][]byte{first, second} {
			m := new(remote.RemoteMessage)
			if proto.Unmarshal(b, m) != nil {
				return
			}
			msgs = append(msgs, m)
		}
		seen, err := run(g, streamContext(testToken, "127.0.0.1:1"), msgs...)
		if err != nil {
			return
		}
		for _, m := range seen {
			b := m.GetMessageBatch()
			for _, env := range b.GetEnvelopes() {
				if id := b.GetTargets()[env.GetTarget()].GetId(); id != "gateway" || b.GetTypeNames()[env.GetTypeId()] != typeRequest {
					t.Fatalf("let through %s to %q", b.GetTypeNames()[env.GetTypeId()], id)
				}
				if env.GetMessageHeader().GetHeaderData()[hdrOwner] != "alice" {
					t.Fatalf("header not stamped: %v", env.GetMessageHeader())
				}
			}
		}
	})
}

func TestTokens(t *testing.T) {
	toks, err := NewTokens(Token{Secret: "0123456789abcdefX", Principal: alice}, Token{Secret: "fedcba9876543210Y", Principal: operator})
	if err != nil {
		t.Fatal(err)
	}
	if p, ok := toks.Lookup("0123456789abcdefX"); !ok || p != alice {
		t.Errorf("Lookup(alice's) = %v, %v", p, ok)
	}
	if p, ok := toks.Lookup("fedcba9876543210Y"); !ok || !p.Operator {
		t.Errorf("Lookup(operator's) = %v, %v", p, ok)
	}
	for _, bad := range []string{"", "0123456789abcdef", "0123456789abcdefX "} {
		if _, ok := toks.Lookup(bad); ok {
			t.Errorf("Lookup(%q) accepted", bad)
		}
	}
	for name, list := range map[string][]Token{
		"short":     {{Secret: "short", Principal: alice}},
		"space":     {{Secret: "0123456789 abcdefX", Principal: alice}},
		"bad owner": {{Secret: "0123456789abcdefX", Principal: Principal{Owner: "a b"}}},
		"duplicate": {{Secret: "0123456789abcdefX", Principal: alice}, {Secret: "0123456789abcdefX", Principal: bob}},
		"none":      nil,
	} {
		if _, err := NewTokens(list...); err == nil {
			t.Errorf("NewTokens(%s) accepted", name)
		}
	}
	list, err := ParseTokens("tokens", []byte("# team\nalice 0123456789abcdefX\n\n* fedcba9876543210Y\n"), "root")
	if err != nil || len(list) != 2 || list[0].Owner != "alice" || !list[1].Operator || list[1].Owner != "root" {
		t.Fatalf("ParseTokens = %v, %v", list, err)
	}
	if _, err := ParseTokens("tokens", []byte("alice\n"), "root"); err == nil || !strings.Contains(err.Error(), "tokens:1") {
		t.Errorf("a line without a token: %v", err)
	}
}

func TestLoadOrCreateToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	first, err := LoadOrCreateToken(path)
	if err != nil || len(first) < 40 {
		t.Fatalf("create: %q, %v", first, err)
	}
	fi, err := os.Stat(path)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file mode %v, %v; want 0600", fi.Mode().Perm(), err)
	}
	again, err := LoadOrCreateToken(path)
	if err != nil || again != first {
		t.Fatalf("second start: %q, %v; want the same token", again, err)
	}
	if err := os.Chmod(path, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadOrCreateToken(path); err == nil || !strings.Contains(err.Error(), "readable by others") {
		t.Fatalf("a world-readable token: %v", err)
	}
	tf := filepath.Join(t.TempDir(), "tokens")
	if err := os.WriteFile(tf, []byte("bob 0123456789abcdefX\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := ParseTokensFile(tf, "root"); err == nil {
		t.Fatal("a world-readable tokens file was accepted")
	}
}

func TestOutboxSplit(t *testing.T) {
	o := &outbox{max: 1000}
	batch := &api.UpdateBatch{Subscription: 3}
	for i := 0; i < 50; i++ {
		batch.Updates = append(batch.Updates, &api.Update{Body: &api.Update_Delta{Delta: &api.Delta{TaskId: "T", Text: strings.Repeat("é", 40)}}})
	}
	chunks := o.split(batch)
	if len(chunks) < 3 {
		t.Fatalf("%d chunks", len(chunks))
	}
	var data []byte
	for i, c := range chunks {
		if proto.Size(c) > 1000 {
			t.Fatalf("chunk %d is %d bytes", i, proto.Size(c))
		}
		if c.GetIndex() != uint32(i) || c.GetCount() != uint32(len(chunks)) || c.GetId() != chunks[0].GetId() {
			t.Fatalf("chunk %d = id %d index %d count %d", i, c.GetId(), c.GetIndex(), c.GetCount())
		}
		data = append(data, c.GetData()...)
	}
	var tc api.ToClient
	if err := proto.Unmarshal(data, &tc); err != nil || !proto.Equal(tc.GetUpdates(), batch) {
		t.Fatalf("reassembled = %v, %v", tc.GetUpdates(), err)
	}
	if next := o.split(batch); next[0].GetId() == chunks[0].GetId() {
		t.Fatal("two messages share a chunk id")
	}
}

// Over the remote API an owner's token cannot put a Task in the daemon's
// data folder or outside what is granted (PERMISSION_DENIED, naming the
// rule), and a request over the daemon's own size limit answers TOO_LARGE
// like one over the gateway's.
func TestCreateTaskRefusals(t *testing.T) {
	h := newHarness(t, Limits{}, nil)
	c := h.connect(Principal{Owner: "alice"})
	withWorkspace := func(ws string) *api.Request {
		return &api.Request{Command: &api.Request_CreateTask{CreateTask: &api.CreateTaskRequest{Request: "read the token", Model: "fake/echo", Workspace: ws}}}
	}
	for _, ws := range []string{h.dd.Path(), filepath.Join(h.dd.Path(), "store"), "/", "/etc"} {
		r := c.call(withWorkspace(ws))
		if errCode(r) != api.ErrorCode_ERROR_CODE_PERMISSION_DENIED || !strings.Contains(r.GetError().GetMessage(), "workspace") {
			t.Errorf("create_task in %s: %v, want PERMISSION_DENIED naming the workspace rule", ws, r)
		}
	}
	if r := c.call(withWorkspace("/nonexistent-folder-of-lemo")); errCode(r) != api.ErrorCode_ERROR_CODE_INVALID {
		t.Errorf("create_task in a missing folder: %v, want INVALID", r)
	}
	if r := c.call(create("fake/echo", strings.Repeat("x", 300<<10))); errCode(r) != api.ErrorCode_ERROR_CODE_TOO_LARGE {
		t.Errorf("a 300 KB request: %v, want TOO_LARGE", r)
	}
}
