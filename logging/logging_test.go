package logging

import (
	"bytes"
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
