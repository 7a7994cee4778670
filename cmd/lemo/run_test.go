package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"

	"lemo/api"
	"lemo/client"
)

// While the daemon is down, lemo run says so once, then at each doubling
// of the attempts, and once when the stream is back.
func TestInterruptionsAreCounted(t *testing.T) {
	var b bytes.Buffer
	n := &interruptions{w: &b}
	for range 9 {
		n.notice("subscribe: the lemo daemon is not running")
	}
	n.delivered()
	n.delivered()
	got := strings.Split(strings.TrimSpace(b.String()), "\n")
	want := []string{
		"lemo: stream interrupted (subscribe: the lemo daemon is not running); resuming",
		"lemo: still resuming after 2 attempts (subscribe: the lemo daemon is not running)",
		"lemo: still resuming after 4 attempts (subscribe: the lemo daemon is not running)",
		"lemo: still resuming after 8 attempts (subscribe: the lemo daemon is not running)",
		"lemo: stream resumed after 9 attempt(s)",
	}
	if !slices.Equal(got, want) {
		t.Fatalf("lines:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

func TestParseTools(t *testing.T) {
	for _, tc := range []struct {
		in         string
		list       []string
		restricted bool
	}{
		{"", nil, false},
		{"none", nil, true},
		{" none ", nil, true},
		{"files.read, shell.run", []string{"files.read", "shell.run"}, true},
		{"files.read,,", []string{"files.read"}, true},
	} {
		list, restricted := parseTools(tc.in)
		if !slices.Equal(list, tc.list) || restricted != tc.restricted {
			t.Errorf("parseTools(%q) = %q, %v; want %q, %v", tc.in, list, restricted, tc.list, tc.restricted)
		}
	}
}

// lemo run's workspace: the current folder against a local daemon (only
// as a default the daemon may refuse), relative folders resolved against
// it, absolute ones cleaned; against a daemon reached by address a folder
// of its own unless an absolute folder is named.
func TestChooseWorkspace(t *testing.T) {
	const cwd = "/home/ann/src/lemo"
	for _, c := range []struct {
		name    string
		flag    string
		private bool
		local   bool
		want    workspaceChoice
		wantErr string
	}{
		{name: "local default", local: true, want: workspaceChoice{path: cwd, implicit: true}},
		{name: "local dot", flag: ".", local: true, want: workspaceChoice{path: cwd}},
		{name: "local relative", flag: "docs/../cmd", local: true, want: workspaceChoice{path: cwd + "/cmd"}},
		{name: "local parent", flag: "..", local: true, want: workspaceChoice{path: "/home/ann/src"}},
		{name: "local absolute", flag: "/srv/x/", local: true, want: workspaceChoice{path: "/srv/x"}},
		{name: "local private", private: true, local: true, want: workspaceChoice{}},
		{name: "remote default", want: workspaceChoice{}},
		{name: "remote absolute", flag: "/srv/x", want: workspaceChoice{path: "/srv/x"}},
		{name: "remote private", private: true, want: workspaceChoice{}},
		{name: "remote relative", flag: "docs", wantErr: "a relative folder needs a local daemon"},
		{name: "both", flag: "/srv/x", private: true, local: true, wantErr: "both given"},
	} {
		t.Run(c.name, func(t *testing.T) {
			got, err := chooseWorkspace(c.flag, c.private, c.local, cwd)
			if c.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), c.wantErr) {
					t.Fatalf("chooseWorkspace(%q) = %+v, %v; want an error with %q", c.flag, got, err, c.wantErr)
				}
				return
			}
			if err != nil || got != c.want {
				t.Fatalf("chooseWorkspace(%q, private=%v, local=%v) = %+v, %v; want %+v", c.flag, c.private, c.local, got, err, c.want)
			}
		})
	}
}

// A workspace the daemon refuses is an error, the current folder (the
// default) too: it names the folder, keeps the daemon's reason and code,
// and says the ways out; other errors pass as they are.
func TestWorkspaceRefused(t *testing.T) {
	denied := &client.Error{Code: api.ErrorCode_ERROR_CODE_PERMISSION_DENIED, Message: "workspace /home/ann/x: not inside a folder workspaces.grants grants to ann"}
	err := workspaceRefused(denied, workspaceChoice{path: "/home/ann/x", implicit: true})
	for _, want := range []string{"current folder (/home/ann/x)", "not inside a folder workspaces.grants grants", "--private-workspace", "-w", "grant this one"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("refused current folder: %q lacks %q", err, want)
		}
	}
	if code := errorCode(err); code != "permission_denied" {
		t.Errorf("refused current folder: code %q, want permission_denied", code)
	}
	err = workspaceRefused(denied, workspaceChoice{path: "/srv/x"})
	if !strings.Contains(err.Error(), "--private-workspace") || strings.Contains(err.Error(), "current folder") || errorCode(err) != "permission_denied" {
		t.Errorf("refused --workspace: %q (%s)", err, errorCode(err))
	}
	other := &client.Error{Code: api.ErrorCode_ERROR_CODE_INVALID, Message: "bad model"}
	if got := workspaceRefused(other, workspaceChoice{path: "/srv/x", implicit: true}); got != error(other) {
		t.Errorf("another error: %v, want it unchanged", got)
	}
	if got := workspaceRefused(denied, workspaceChoice{}); got != error(denied) {
		t.Errorf("no workspace asked for: %v, want the error unchanged", got)
	}
}
