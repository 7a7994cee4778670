package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"lemo/config"
	"lemo/tools"
)

func TestAppendDelegateTools(t *testing.T) {
	cfg := config.Default()
	cfg.Data = t.TempDir()
	got, err := appendDelegateTools(nil, cfg, nil, toolProcs{}, zerolog.Nop())
	if err != nil || len(got) != 0 {
		t.Fatalf("disabled: %v, %v", got, err)
	}
	cfg.Delegate = config.Delegate{Enabled: true, Binary: "/opt/pi/bin/pi", Args: []string{"--model", "x/y"}}
	got, err = appendDelegateTools([]tools.Tool{}, cfg, []string{"PATH=/bin", "LEMO_TOKEN=x"}, toolProcs{}, zerolog.Nop())
	if err != nil {
		t.Fatal(err)
	}
	reg := tools.NewRegistry()
	for _, tl := range got {
		if err := reg.Register(tl); err != nil {
			t.Fatal(err)
		}
	}
	if _, ok := reg.Get("delegate.run"); !ok {
		t.Fatal("delegate.run is not registered")
	}
	if _, ok := reg.Get("delegate.sessions"); !ok {
		t.Fatal("delegate.sessions is not registered")
	}
	fi, err := os.Stat(filepath.Join(cfg.Data, "delegate", "pi"))
	if err != nil || fi.Mode().Perm() != 0o700 {
		t.Fatalf("Lemo's delegate folder: %v, %v", fi, err)
	}
	cfg.Delegate = config.Delegate{Enabled: true, Kind: "codex", Args: []string{"--mode", "json"}}
	if _, err := appendDelegateTools(nil, cfg, nil, toolProcs{}, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "delegate.kind") {
		t.Fatalf("bad configuration: err = %v", err)
	}
	cfg.Delegate = config.Delegate{Enabled: true, Args: []string{"--session-dir", "/elsewhere"}}
	if _, err := appendDelegateTools(nil, cfg, nil, toolProcs{}, zerolog.Nop()); err == nil || !strings.Contains(err.Error(), "--session-dir") {
		t.Fatalf("reserved argument: err = %v", err)
	}
}
