package mcpspec

import (
	"slices"
	"testing"
)

func TestProblems(t *testing.T) {
	for _, tc := range []struct {
		name string
		s    Server
		keys []string // the keys of the problems, in order
	}{
		{"a stdio server", Server{Command: "npx", Args: []string{"-y", "x"}, Env: []string{"KEY", "A=b"}}, nil},
		{"an HTTP server", Server{URL: "https://mcp.example/", Headers: map[string]string{"Authorization": "x"}}, nil},
		{"neither", Server{}, []string{"command"}},
		{"both", Server{Command: "x", URL: "http://h"}, []string{"url"}},
		{"a url with a command's keys", Server{URL: "ftp://h", Cwd: "/tmp"}, []string{"url", "url"}},
		{"a relative command and folder", Server{Command: "bin/x", Cwd: "here"}, []string{"command", "cwd"}},
		{"LEMO_ and a bad name in env", Server{Command: "x", Env: []string{"LEMO_TOKEN", "A B=c"}}, []string{"env[0]", "env[1]"}},
		{"headers for a command", Server{Command: "x", Headers: map[string]string{"a": "b"}}, []string{"headers"}},
		{"unknown modes", Server{Command: "x", Retain: "all", Approval: "never"}, []string{"retain", "approval"}},
		{"small bounds", Server{Command: "x", RetainBytes: 10, MaxOutputBytes: 10, MaxMessageBytes: 1024, Timeout: -1}, []string{"timeout", "retain_bytes", "max_output_bytes", "max_message_bytes"}},
		{"an empty tool name", Server{Command: "x", Tools: []string{"echo", ""}}, []string{"tools[1]"}},
	} {
		var keys []string
		tc.s.Problems(func(key, _ string, _ ...any) { keys = append(keys, key) })
		if !slices.Equal(keys, tc.keys) {
			t.Errorf("%s: problems at %v, want %v", tc.name, keys, tc.keys)
		}
	}
}
