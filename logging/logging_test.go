package logging

import (
	"bytes"
	"errors"
	"log/slog"
	"strings"
	"testing"
)

func TestNew(t *testing.T) {
	var b bytes.Buffer
	log, err := New(&b, "warn", FormatJSON)
	if err != nil {
		t.Fatal(err)
	}
	log.Info().Msg("hidden")
	log.Warn().Str("k", "v").Msg("shown")
	if out := b.String(); strings.Contains(out, "hidden") || !strings.Contains(out, `"k":"v"`) || !strings.Contains(out, `"message":"shown"`) {
		t.Fatalf("output = %s", out)
	}
	for _, bad := range [][2]string{{"loud", "json"}, {"info", "xml"}, {"", "json"}} {
		if _, err := New(&b, bad[0], bad[1]); err == nil {
			t.Errorf("New(%q, %q) accepted", bad[0], bad[1])
		}
	}
}

func TestAdapters(t *testing.T) {
	var b bytes.Buffer
	log, _ := New(&b, "trace", FormatJSON)
	Slog(log, "protoactor").Info("dead letter", "message", "payload", "pid", "x")
	out := b.String()
	if !strings.Contains(out, `"lib":"protoactor"`) || !strings.Contains(out, `"detail":"payload"`) || strings.Count(out, `"message"`) != 1 {
		t.Fatalf("slog line = %s", out)
	}
	b.Reset()
	p := NewPrintf(log, "badger")
	p.Infof("opened %d tables\n", 3)
	p.Errorf("disk %s", "full")
	out = b.String()
	if !strings.Contains(out, `"level":"debug","lib":"badger"`) || !strings.Contains(out, `"message":"opened 3 tables"`) || !strings.Contains(out, `"level":"error"`) {
		t.Fatalf("printf lines = %s", out)
	}
}

// A library's line below the level logged is not formatted.
func TestPrintfFormatsOnlyWhatIsLogged(t *testing.T) {
	var b bytes.Buffer
	log, _ := New(&b, "info", FormatJSON)
	p := NewPrintf(log, "badger")
	formatted := 0
	arg := stringerFunc(func() string { formatted++; return "x" })
	p.Debugf("%s", arg)
	p.Infof("%s", arg)
	if formatted != 0 || b.Len() != 0 {
		t.Fatalf("below info: formatted %d times, wrote %q", formatted, b.String())
	}
	p.Warningf("%s", arg)
	if formatted != 1 || !strings.Contains(b.String(), `"message":"x"`) {
		t.Fatalf("a warning: formatted %d times, wrote %q", formatted, b.String())
	}
}

type stringerFunc func() string

func (f stringerFunc) String() string { return f() }

func TestLibLevel(t *testing.T) {
	for _, tc := range []struct {
		level   slog.Level
		msg     string
		errText string
		want    slog.Level
	}{
		{slog.LevelInfo, "Started EndpointWriter. connecting", "", slog.LevelDebug},
		{slog.LevelDebug, "anything", "", slog.LevelDebug - 4},
		{slog.LevelWarn, "slow handler", "", slog.LevelWarn},
		{slog.LevelError, "EndpointWriter lost connection", "rpc error: code = Canceled desc = grpc: the client connection is closing", slog.LevelDebug},
		{slog.LevelError, "EndpointWriter lost connection", "rpc error: code = Unavailable desc = connection refused", slog.LevelError},
	} {
		if got := LibLevel(tc.level, tc.errText); got != tc.want {
			t.Errorf("LibLevel(%v, %q) for %q = %v, want %v", tc.level, tc.errText, tc.msg, got, tc.want)
		}
	}
}

// At the default level (info) protoactor's informational lines and a
// client's normal disconnect are not shown; its real errors are.
func TestSlogQuietAtInfo(t *testing.T) {
	var b bytes.Buffer
	log, _ := New(&b, "info", FormatJSON)
	l := Slog(log, "protoactor")
	l.Info("Started EndpointWriter. connecting", "address", "127.0.0.1:1")
	l.Error("EndpointWriter lost connection", "error", errors.New("rpc error: code = Canceled desc = grpc: the client connection is closing"))
	l.Error("EndpointWriter lost connection", "error", errors.New("rpc error: code = Unavailable desc = refused"))
	out := b.String()
	if strings.Contains(out, "connecting") || strings.Contains(out, "Canceled") || !strings.Contains(out, "Unavailable") {
		t.Fatalf("output at info = %s", out)
	}
}
