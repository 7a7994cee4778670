package client_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/client"
)

func ev(seq uint64, body proto.Message) *api.Event {
	return api.NewEvent("T1", seq, timestamppb.Now(), body)
}

func TestProjectionApply(t *testing.T) {
	p := client.NewProjection()
	delta := func(kind api.DeltaKind, cycle uint32, text, call string, data string) *api.Update {
		return &api.Update{Body: &api.Update_Delta{Delta: &api.Delta{TaskId: "T1", Cycle: cycle, Kind: kind, Text: text, CallId: call, Data: []byte(data)}}}
	}
	event := func(e *api.Event) *api.Update { return &api.Update{Body: &api.Update_Event{Event: e}} }
	p.Apply(event(ev(1, &api.TaskCreated{Owner: "alice"})))
	p.Apply(delta(api.DeltaKind_DELTA_KIND_TEXT, 1, "hel", "", ""))
	p.Apply(delta(api.DeltaKind_DELTA_KIND_TEXT, 1, "lo", "", ""))
	p.Apply(delta(api.DeltaKind_DELTA_KIND_REASONING, 1, "hmm", "", ""))
	p.Apply(delta(api.DeltaKind_DELTA_KIND_TOOL_STATE, 1, "", "c1", `{"n":1}`))
	v, ok := p.Task("T1")
	if !ok || v.Text != "hello" || v.Reasoning != "hmm" || string(v.ToolState["c1"]) != `{"n":1}` {
		t.Fatalf("in flight: %+v", v)
	}
	select {
	case <-p.Changed():
	default:
		t.Fatal("no change signalled")
	}
	p.Apply(event(ev(2, &api.AssistantMessage{Cycle: 1, Text: "hello"})))
	p.Apply(event(ev(2, &api.AssistantMessage{Cycle: 1, Text: "duplicate"}))) // already held
	p.Apply(event(ev(3, &api.ToolResult{CallId: "c1"})))
	v, _ = p.Task("T1")
	if v.Text != "" || v.Reasoning != "" || len(v.ToolState) != 0 || len(v.Events) != 3 || v.Meta.GetLastSeq() != 3 {
		t.Fatalf("after the answer: %+v", v)
	}
	p.SetMeta(&api.TaskMeta{TaskId: "T2", LastSeq: 9, Status: api.TaskStatus_TASK_STATUS_FINISHED})
	if got := p.LastSeqs(); got["T1"] != 3 || len(got) != 1 {
		t.Errorf("LastSeqs = %v (a listed Task without events holds none)", got)
	}
	if all := p.Tasks(); len(all) != 2 || all[0].Meta.GetTaskId() != "T2" {
		t.Errorf("Tasks = %v", all)
	}
}

func TestViews(t *testing.T) {
	views := client.NewViews([]*api.ToolInfo{
		{Name: "files.read", View: "files"}, {Name: "files.edit", View: "files"}, {Name: "shell.run", View: "shell"},
		{Name: "system", View: "system"}, {Name: "custom", View: "mine"}, {Name: "plain"},
	})
	cases := []struct {
		tool, part, in, want string
	}{
		{"files.read", "call", `{"path":"a.go","offset":10}`, "read a.go from line 10"},
		{"files.read", "result", `{"path":"a.go","start_line":1,"end_line":20,"total_lines":99}`, "a.go lines 1-20 of 99"},
		{"files.edit", "call", `{"path":"a.go","old_text":"x","new_text":"y"}`, `edit a.go: "x" → "y"`},
		{"shell.run", "call", `{"command":"ls -la\nrm x"}`, "$ ls -la …"},
		{"shell.run", "state", `{"phase":"running","elapsed_ms":1500,"stdout_bytes":10,"last_line":"ok"}`, "running 1.5s, 10 bytes out: ok"},
		{"shell.run", "result", `{"exit_code":1,"stdout":"out\n","stderr":"bad"}`, "exit 1\n  out\n  stderr: bad"},
		{"system", "call", `{"action":"execute","service":"kv","operation":"get","input":{"k":"a"}}`, `kv.get {"k":"a"}`},
		{"system", "call", `{"action":"list"}`, "list the attached Services"},
		{"system", "result", `{"services":[{"name":"b"},{"name":"a"}]}`, "Services: a, b"},
		{"system", "result", `{"service":"kv","operation":"get","output":{"v":1}}`, `(untrusted) {"v":1}`},
		{"custom", "call", `{"a": 1}`, `custom {"a":1}`},
		{"plain", "result", `[1, 2]`, `[1,2]`},
		{"unknown.tool", "call", `{}`, `unknown.tool {}`},
		{"files.read", "call", `not json`, `files.read not json`},
	}
	for _, tc := range cases {
		v := views.For(tc.tool)
		var got string
		switch tc.part {
		case "call":
			got = v.Call(tc.tool, json.RawMessage(tc.in))
		case "state":
			got = v.State(tc.tool, json.RawMessage(tc.in))
		default:
			got = v.Result(tc.tool, json.RawMessage(tc.in))
		}
		if got != tc.want {
			t.Errorf("%s %s(%s) = %q, want %q", tc.tool, tc.part, tc.in, got, tc.want)
		}
	}
	views.Register("mine", client.JSONView{})
	if got := views.For("custom").Result("custom", json.RawMessage(strings.Repeat(`"x"`, 1))); got != `"x"` {
		t.Errorf("a registered View: %q", got)
	}
}

func TestErrorCodes(t *testing.T) {
	for code, want := range map[api.ErrorCode]error{
		api.ErrorCode_ERROR_CODE_NOT_FOUND: client.ErrNotFound, api.ErrorCode_ERROR_CODE_INVALID: client.ErrInvalid,
		api.ErrorCode_ERROR_CODE_CONFLICT: client.ErrConflict, api.ErrorCode_ERROR_CODE_BUSY: client.ErrBusy,
		api.ErrorCode_ERROR_CODE_UNAVAILABLE: client.ErrUnavailable, api.ErrorCode_ERROR_CODE_TIMEOUT: client.ErrTimeout,
		api.ErrorCode_ERROR_CODE_TOO_LARGE: client.ErrTooLarge, api.ErrorCode_ERROR_CODE_UNAUTHENTICATED: client.ErrUnauthenticated,
	} {
		err := error(&client.Error{Code: code, Message: "m"})
		if !errors.Is(err, want) || errors.Is(err, client.ErrClosed) {
			t.Errorf("code %v does not match %v alone", code, want)
		}
	}
	if client.CodeName(api.ErrorCode_ERROR_CODE_NOT_FOUND) != "not_found" {
		t.Error("CodeName")
	}
}

// A snapshot taken mid-stream keeps what it saw while the stream goes on,
// and a new Cycle starts its text afresh.
func TestProjectionSnapshotIsStable(t *testing.T) {
	p := client.NewProjection()
	delta := func(cycle uint32, text string) *api.Update {
		return &api.Update{Body: &api.Update_Delta{Delta: &api.Delta{TaskId: "T1", Cycle: cycle, Kind: api.DeltaKind_DELTA_KIND_TEXT, Text: text}}}
	}
	p.Apply(delta(1, "one "))
	before, _ := p.Task("T1")
	p.Apply(delta(1, "two"))
	after, _ := p.Task("T1")
	if before.Text != "one " || after.Text != "one two" {
		t.Fatalf("snapshots = %q then %q", before.Text, after.Text)
	}
	p.Apply(delta(2, "fresh"))
	if v, _ := p.Task("T1"); v.Cycle != 2 || v.Text != "fresh" {
		t.Fatalf("new cycle: %d %q", v.Cycle, v.Text)
	}
}

// BenchmarkProjectionLongStream applies the deltas of a 1 MB answer in
// 8-byte pieces: the cost per delta must not grow with the answer so far.
func BenchmarkProjectionLongStream(b *testing.B) {
	u := &api.Update{Body: &api.Update_Delta{Delta: &api.Delta{TaskId: "T1", Cycle: 1, Kind: api.DeltaKind_DELTA_KIND_TEXT, Text: "8 bytes."}}}
	const deltas = 1 << 17
	b.ReportAllocs()
	for b.Loop() {
		p := client.NewProjection()
		for range deltas {
			p.Apply(u)
		}
		if v, _ := p.Task("T1"); len(v.Text) != 8*deltas {
			b.Fatalf("text is %d bytes", len(v.Text))
		}
	}
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*deltas), "ns/delta")
}

// A node's listen and advertised addresses: the defaults, the forms
// accepted, and errors that say what is accepted.
func TestCheckCallback(t *testing.T) {
	for _, tc := range []struct {
		listen, advertise string
		want              client.Callback
		err               string
	}{
		{"", "", client.Callback{Host: "127.0.0.1"}, ""},
		{"127.0.0.1:7466", "", client.Callback{Host: "127.0.0.1", Port: 7466}, ""},
		{"127.0.0.1:7466", "127.0.0.1:9000", client.Callback{Host: "127.0.0.1", Port: 7466, Advertise: "127.0.0.1:9000"}, ""},
		{"0.0.0.0:7466", "laptop.lan", client.Callback{Host: "0.0.0.0", Port: 7466, Advertise: "laptop.lan:7466"}, ""},
		{"[::]:7466", "[fd00::5]", client.Callback{Host: "::", Port: 7466, Advertise: "[fd00::5]:7466"}, ""},
		{"", "10.0.0.5:7466", client.Callback{Host: "127.0.0.1", Advertise: "10.0.0.5:7466"}, ""},
		{"127.0.0.1", "", client.Callback{}, "want host:port"},
		{":7466", "", client.Callback{}, "want host:port"},
		{"127.0.0.1:99999", "", client.Callback{}, "from 0 to 65535"},
		{"127.0.0.1:x", "", client.Callback{}, "from 0 to 65535"},
		{"bad_host:7466", "", client.Callback{}, "neither an IP address nor a host name"},
		{"0.0.0.0:7466", "", client.Callback{}, "names every interface"},
		{"127.0.0.1:0", "10.0.0.5", client.Callback{}, "has no port"},
		{"", "10.0.0.5:0", client.Callback{}, "from 1 to 65535"},
		{"", "0.0.0.0:7466", client.Callback{}, "cannot dial 0.0.0.0"},
	} {
		got, err := client.CheckCallback(tc.listen, tc.advertise)
		if tc.err != "" {
			if err == nil || !strings.Contains(err.Error(), tc.err) {
				t.Errorf("CheckCallback(%q, %q) = %+v, %v; want an error with %q", tc.listen, tc.advertise, got, err, tc.err)
			}
			continue
		}
		if err != nil || got != tc.want {
			t.Errorf("CheckCallback(%q, %q) = %+v, %v; want %+v", tc.listen, tc.advertise, got, err, tc.want)
		}
	}
}
