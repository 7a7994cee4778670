package main

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/rs/zerolog"

	"lemo/config"
	"lemo/persistence"
	"lemo/tools/isolation"
)

// doctorConfig is a configuration with no network provider but the fake
// one, on data.
func doctorConfig(data string) *config.Config {
	cfg := config.Default()
	cfg.Data = data
	cfg.Providers.Ollama.Disabled = true
	cfg.Providers.Fake.Enabled = true
	cfg.Storage.MinFreeMiB = 1
	return cfg
}

func runDoctor(t *testing.T, cfg *config.Config, mod func(*doctorEnv)) map[string][]checkResult {
	t.Helper()
	e := &doctorEnv{cfg: cfg, timeout: 5 * time.Second, lookPath: func(string) (string, error) { return "", errors.New("not found") }}
	if mod != nil {
		mod(e)
	}
	out := map[string][]checkResult{}
	for _, r := range e.run(context.Background()) {
		out[r.Check] = append(out[r.Check], r)
	}
	return out
}

// expect checks that check has a result with status whose detail (and
// fix) contain the words.
func expect(t *testing.T, got map[string][]checkResult, check, status string, words ...string) {
	t.Helper()
	for _, r := range got[check] {
		if r.Status != status {
			continue
		}
		ok := true
		for _, w := range words {
			ok = ok && strings.Contains(r.Detail+" fix: "+r.Fix, w)
		}
		if ok {
			return
		}
	}
	t.Errorf("no %s %q result containing %q; got %+v", status, check, words, got[check])
}

func TestDoctorFreshFolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	got := runDoctor(t, doctorConfig(data), nil)
	expect(t, got, "config", checkOK, "built-in defaults")
	expect(t, got, "data folder", checkInfo, "does not exist yet")
	expect(t, got, "store", checkInfo, "no store yet")
	expect(t, got, "token file", checkInfo, "does not exist yet")
	expect(t, got, "free space", checkOK, "MiB free")
	expect(t, got, "provider fake", checkOK, "fake/echo")
	for check, rs := range got {
		for _, r := range rs {
			if r.Status == checkFail {
				t.Errorf("%s: %+v", check, r)
			}
		}
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Fatalf("doctor created the data folder: %v", err)
	}
}

// A stopped daemon's folder: the store opens read-only and its Tasks are
// counted; loose permissions are reported with the command that fixes them.
func TestDoctorStoppedDaemonFolder(t *testing.T) {
	data := filepath.Join(t.TempDir(), "data")
	dd, err := persistence.OpenDataDir(data)
	if err != nil {
		t.Fatal(err)
	}
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), MemTableSize: 4 << 20, BlockCacheSize: 4 << 20})
	if err != nil {
		t.Fatal(err)
	}
	_ = st.Close()
	_ = dd.Close()
	token := filepath.Join(data, "token")
	if err := os.WriteFile(token, []byte("t0123456789abcdef0123456789\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(data, 0o755); err != nil {
		t.Fatal(err)
	}
	got := runDoctor(t, doctorConfig(data), nil)
	expect(t, got, "daemon", checkInfo, "not running")
	expect(t, got, "store", checkOK, "opens read-only: 0 Tasks")
	expect(t, got, "token file", checkFail, "mode 0644", "refuses to start", "chmod 600 "+token)
	if os.Getuid() != 0 {
		expect(t, got, "data folder", checkWarn, "mode 0755", "chmod 700 "+data)
	}

	if err := os.Chmod(token, 0o600); err != nil {
		t.Fatal(err)
	}
	got = runDoctor(t, doctorConfig(data), nil)
	expect(t, got, "token file", checkOK, "mode 0600")
}

func TestDoctorRefusesAForeignFolder(t *testing.T) {
	data := t.TempDir()
	if err := os.WriteFile(filepath.Join(data, "notes.txt"), []byte("mine"), 0o600); err != nil {
		t.Fatal(err)
	}
	got := runDoctor(t, doctorConfig(data), nil)
	expect(t, got, "data folder", checkFail, "no FORMAT marker")
}

func TestDoctorFreeSpace(t *testing.T) {
	cfg := doctorConfig(t.TempDir())
	cfg.Storage.MinFreeMiB = 1 << 30 // 1 PiB
	expect(t, runDoctor(t, cfg, nil), "free space", checkFail, "below the floor", "lower storage.min_free_mib")
	cfg.Storage.MinFreeMiB = 0
	expect(t, runDoctor(t, cfg, nil), "free space", checkWarn, "guard is off")
}

// Each provider is asked for its models: refused credentials and an
// unreachable server are told apart, with what to do.
func TestDoctorProviders(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer right" {
			w.WriteHeader(http.StatusUnauthorized)
			_, _ = w.Write([]byte(`{"error":{"message":"invalid api key"}}`))
			return
		}
		_, _ = w.Write([]byte(`{"object":"list","data":[{"id":"tiny","object":"model"}]}`))
	}))
	defer srv.Close()
	cfg := doctorConfig(t.TempDir())
	cfg.Providers.Fake.Enabled = false
	cfg.Providers.OpenAI.BaseURL = srv.URL
	cfg.Providers.OpenAI.APIKey = "wrong"
	expect(t, runDoctor(t, cfg, nil), "provider openai", checkFail, "authentication refused", "LEMO_OPENAI_API_KEY")
	cfg.Providers.OpenAI.APIKey = "right"
	expect(t, runDoctor(t, cfg, nil), "provider openai", checkOK, "1 models", "openai/tiny")
	cfg.Providers.OpenAI.BaseURL = "http://127.0.0.1:1"
	expect(t, runDoctor(t, cfg, nil), "provider openai", checkFail, "unreachable", "providers.openai.base_url")
	cfg.Providers.OpenAI.Disabled = true
	expect(t, runDoctor(t, cfg, nil), "providers", checkFail, "no provider is configured")
}

func TestDoctorDelegate(t *testing.T) {
	cfg := doctorConfig(t.TempDir())
	cfg.Delegate.Enabled = true
	expect(t, runDoctor(t, cfg, nil), "delegate", checkFail, `"pi" is not found`, "npm install -g @mariozechner/pi-coding-agent")
	agent := filepath.Join(t.TempDir(), "pi")
	if err := os.WriteFile(agent, []byte("#!/bin/sh\necho 0.42.0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	got := runDoctor(t, cfg, func(e *doctorEnv) {
		e.lookPath = func(name string) (string, error) {
			if name != "pi" {
				return "", errors.New("not found")
			}
			return agent, nil
		}
	})
	expect(t, got, "delegate", checkOK, "pi 0.42.0", agent)
}

// lemo doctor says whether tool processes run in namespaces of their own,
// and how to fix it when the kernel refuses them.
func TestDoctorToolIsolation(t *testing.T) {
	refused := func() (*isolation.Namespaces, error) { return nil, errors.New("operation not permitted") }
	allowed := func() (*isolation.Namespaces, error) { return &isolation.Namespaces{User: true}, nil }
	for _, tc := range []struct {
		setting string
		detect  func() (*isolation.Namespaces, error)
		status  string
		detail  string
	}{
		{"auto", allowed, checkOK, "user, pid and mount namespaces"},
		{"auto", refused, checkWarn, "operation not permitted"},
		{"off", refused, checkInfo, "tools.namespaces is off"},
	} {
		cfg := config.Default()
		cfg.Tools.Namespaces = tc.setting
		r := (&doctorEnv{cfg: cfg, namespaces: tc.detect}).toolIsolation()
		if r.Status != tc.status || !strings.Contains(r.Detail, tc.detail) || (tc.status == checkWarn && !strings.Contains(r.Fix, "tools.namespaces: off")) {
			t.Errorf("%s: %+v, want %s mentioning %q", tc.setting, r, tc.status, tc.detail)
		}
	}
	// The real check where this test runs: this binary as the init.
	cfg := config.Default()
	r := (&doctorEnv{cfg: cfg, namespaces: detectNamespaces}).toolIsolation()
	t.Logf("here: %+v", r)
	if r.Status != checkOK && r.Status != checkWarn {
		t.Errorf("toolIsolation = %+v", r)
	}
}

// No flag of lemo serve takes a secret: a flag's value is on the daemon's
// command line, which every user of the machine can read in /proc.
func TestNoFlagTakesASecret(t *testing.T) {
	for _, k := range config.Keys() {
		if k.Flag == "" {
			continue
		}
		if name := strings.ToUpper(k.Path + " " + k.Flag); strings.Contains(name, "KEY") || strings.Contains(name, "TOKEN") || strings.Contains(name, "SECRET") || strings.Contains(name, "PASSWORD") {
			t.Errorf("--%s sets %s, a secret: command lines are readable by every user", k.Flag, k.Path)
		}
	}
}

func TestProviderAdvice(t *testing.T) {
	for _, tc := range []struct {
		name    string
		results []checkResult
		usable  []string
		fix     bool
	}{
		{"none configured", nil, nil, true},
		{"none reachable", []checkResult{{Check: "provider ollama", Status: checkFail}}, nil, true},
		{"no model listed", []checkResult{{Check: "provider ollama", Status: checkWarn}}, nil, true},
		{"one of two", []checkResult{{Check: "provider ollama", Status: checkFail}, {Check: "provider fake", Status: checkOK}}, []string{"fake"}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			usable, fix := providerAdvice(tc.results)
			if !slices.Equal(usable, tc.usable) || (fix != "") != tc.fix {
				t.Fatalf("providerAdvice = %v, %q; want %v, fix given: %v", usable, fix, tc.usable, tc.fix)
			}
			if tc.fix && !strings.Contains(fix, "LEMO_FAKE_ENABLED=true") {
				t.Fatalf("the fix does not point to the demo models: %q", fix)
			}
		})
	}
}

// The store's size is what its files take on disk, not their preallocated
// length.
func TestStoreFilesReadableReportsDiskUsage(t *testing.T) {
	dir := t.TempDir()
	if err := os.MkdirAll(filepath.Join(dir, "store"), 0o700); err != nil {
		t.Fatal(err)
	}
	f, err := os.Create(filepath.Join(dir, "store", "000001.vlog"))
	if err != nil {
		t.Fatal(err)
	}
	if err := f.Truncate(2 << 30); err != nil { // sparse, as Badger's preallocation
		t.Fatal(err)
	}
	f.Close()
	r := storeFilesReadable(dir, 1)
	if r.Status != checkOK || !strings.Contains(r.Detail, "(0 MiB on disk)") {
		t.Fatalf("storeFilesReadable = %+v, want 0 MiB on disk", r)
	}
}
