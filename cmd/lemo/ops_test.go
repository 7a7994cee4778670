package main

import (
	"io"
	"net/http"
	"regexp"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"lemo/actors/live"
	"lemo/persistence"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// The gauges answer before the store opens (no store series) and read it
// once it is set; /readyz follows the ready flag.
func TestOpsGaugesAndReadiness(t *testing.T) {
	o := newOps()
	o.floor.Store(512 << 20)
	if err := o.serve("127.0.0.1:0", zerolog.Nop()); err != nil {
		t.Fatal(err)
	}
	defer o.close(zerolog.Nop())
	base := "http://" + o.srv.Addr()
	if code, _ := get(t, base+"/readyz"); code != http.StatusServiceUnavailable {
		t.Fatalf("/readyz before ready = %d, want 503", code)
	}
	_, body := get(t, base+"/metrics")
	for _, want := range []string{`lemo_tasks{status="running"} 0`, `lemo_tasks{status="awaiting_approval"} 0`, "lemo_ready 0", "lemo_clients 0", "lemo_store_min_free_bytes 536870912"} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("/metrics before the store opened lacks %q:\n%s", want, body)
		}
	}
	if regexp.MustCompile(`(?m)^lemo_store_size_bytes `).MatchString(body) || strings.Contains(body, `status="unspecified"`) {
		t.Errorf("/metrics before the store opened:\n%s", body)
	}

	dd, err := persistence.OpenDataDir(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer dd.Close()
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20, OnCommit: o.daemon.Commit})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	o.store.Store(st)
	lv, err := live.New(dd.Join("live"), live.Limits{})
	if err != nil {
		t.Fatal(err)
	}
	o.live.Store(lv)
	o.ready.Store(true)
	if code, _ := get(t, base+"/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz when ready = %d, want 200", code)
	}
	_, body = get(t, base+"/metrics")
	for _, re := range []string{`(?m)^lemo_store_size_bytes [1-9][0-9]*$`, `(?m)^lemo_store_free_bytes [1-9][0-9]*$`, `(?m)^lemo_store_disk_full 0$`, `(?m)^lemo_ready 1$`,
		`(?m)^lemo_live_bytes\{where="memory"\} 0$`, `(?m)^lemo_live_bytes\{where="spill"\} 0$`, `(?m)^lemo_live_results 0$`, `(?m)^lemo_live_evicted 0$`} {
		if !regexp.MustCompile(re).MatchString(body) {
			t.Errorf("/metrics lacks %s:\n%s", re, body)
		}
	}
}
