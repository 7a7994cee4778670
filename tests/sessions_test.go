package tests

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// buildFakeAgent builds the delegate's fake coding agent (it speaks pi's
// RPC mode) into dir.
func buildFakeAgent(t *testing.T, dir string) string {
	t.Helper()
	bin := filepath.Join(dir, "fakeagent")
	out, err := exec.Command("go", "build", "-o", bin, "../tools/delegate/testdata/fakeagent").CombinedOutput()
	if err != nil {
		t.Fatalf("build the fake agent: %v\n%s", err, out)
	}
	return bin
}

// lemo sessions against lemo serve with the delegate tool driving the fake
// agent: Tasks of alice and bob each delegate once (real sessions and
// Lemo's records of them); a session in the agent's own folder exists
// too. An owner lists the sessions its Tasks created, without paths, and
// another owner's Task reads as unknown; the operator lists every session
// with where it is stored.
func TestSessionsCLI(t *testing.T) {
	dir := t.TempDir()
	agent := buildFakeAgent(t, dir)
	tokens := filepath.Join(dir, "tokens")
	if err := os.WriteFile(tokens, []byte("alice "+aliceToken+"\nbob "+bobToken+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	// The agent's own session folder: one bucket per working directory.
	agentDir := filepath.Join(dir, "pi-agent")
	bucket := filepath.Join(agentDir, "sessions", "--elsewhere--")
	if err := os.MkdirAll(bucket, 0o700); err != nil {
		t.Fatal(err)
	}
	const agentOnly = "agent-only-session-0001"
	if err := os.WriteFile(filepath.Join(bucket, "2026-01-01T00-00-00-000Z_"+agentOnly+".jsonl"), []byte(
		`{"type":"session","version":3,"id":"`+agentOnly+`","timestamp":"2026-01-01T00:00:00Z","cwd":"/elsewhere"}`+"\n"+
			`{"type":"message","id":"a1","message":{"role":"user","content":"started by hand"}}`+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(dir, "data")
	cfg := fmt.Sprintf("auth:\n  tokens_file: %s\ndelegate:\n  enabled: true\n  binary: %s\n  approval: \"off\"\n  set_env: [\"PI_CODING_AGENT_DIR=%s\"]\n", tokens, agent, agentDir)
	d := serveRemote(t, data, "--config", writeConfig(t, cfg))
	as := func(token string, args ...string) (string, int) {
		t.Helper()
		return lemo(t, cleanEnv("LEMO_DATA="+data, "LEMO_TOKEN="+token), args...)
	}

	// Each owner's Task delegates one prompt; alice's carries a terminal
	// escape, which must never reach a terminal.
	for who, req := range map[string]string{aliceToken: `delegate.run {"prompt":"alice \u001b[31mwants\u001b[0m this"}`, bobToken: `delegate.run {"prompt":"bob wants that"}`} {
		if out, code := as(who, "run", "--model", "fake/call", req); code != 0 || !strings.Contains(out, "result:") {
			t.Fatalf("lemo run %s: exit %d\n%s\n%s", req, code, out, d.logs())
		}
	}
	var sessions struct {
		Sessions []struct {
			SessionID   string `json:"session_id"`
			TaskID      string `json:"task_id"`
			Owner       string `json:"owner"`
			Source      string `json:"source"`
			FirstPrompt string `json:"first_prompt"`
			Path        string `json:"path"`
		}
		Warnings []string
	}
	out, code := as(aliceToken, "sessions", "--json")
	mustJSON(t, out, &sessions)
	if code != 0 || len(sessions.Sessions) != 1 || sessions.Sessions[0].Owner != "alice" || sessions.Sessions[0].Source != "lemo" ||
		sessions.Sessions[0].FirstPrompt != "alice wants this" || sessions.Sessions[0].Path != "" || sessions.Sessions[0].TaskID == "" {
		t.Fatalf("alice's lemo sessions --json: exit %d\n%s", code, out)
	}
	alice, aliceTask := sessions.Sessions[0].SessionID, sessions.Sessions[0].TaskID
	out, code = as(bobToken, "sessions", "--json")
	sessions.Sessions = nil
	mustJSON(t, out, &sessions)
	if code != 0 || len(sessions.Sessions) != 1 || sessions.Sessions[0].Owner != "bob" || sessions.Sessions[0].SessionID == alice {
		t.Fatalf("bob's lemo sessions --json: exit %d\n%s", code, out)
	}
	bob, bobTask := sessions.Sessions[0].SessionID, sessions.Sessions[0].TaskID

	// The table: alice sees her session and no paths.
	out, code = as(aliceToken, "sessions")
	if code != 0 || !strings.Contains(out, alice) || !strings.Contains(out, "alice wants this") || !strings.Contains(out, aliceTask) ||
		strings.Contains(out, bob) || strings.Contains(out, agentOnly) || strings.Contains(out, "PATH") || strings.Contains(out, data) || strings.Contains(out, "\x1b") {
		t.Fatalf("alice's lemo sessions: exit %d\n%s", code, out)
	}
	if out, code = as(aliceToken, "sessions", "--task", aliceTask); code != 0 || !strings.Contains(out, alice) {
		t.Fatalf("alice's lemo sessions --task (hers): exit %d\n%s", code, out)
	}
	if out, code = as(aliceToken, "sessions", "--task", bobTask); code == 0 || !strings.Contains(out, "unknown task "+bobTask) || strings.Contains(out, bob) {
		t.Fatalf("alice's lemo sessions --task (bob's): exit %d\n%s", code, out)
	}

	// The operator (the data folder's token) sees every session, the
	// agent's own too, and where each is stored.
	out, code = cli(t, data, "sessions")
	for _, want := range []string{"PATH", alice, bob, agentOnly, "started by hand", "bob wants that", filepath.Join(data, "delegate", "pi"), bucket} {
		if !strings.Contains(out, want) {
			t.Errorf("the operator's lemo sessions lacks %q", want)
		}
	}
	if code != 0 || t.Failed() {
		t.Fatalf("the operator's lemo sessions: exit %d\n%s", code, out)
	}
	out, code = cli(t, data, "sessions", "--json", "--task", bobTask)
	sessions.Sessions = nil
	mustJSON(t, out, &sessions)
	if code != 0 || len(sessions.Sessions) != 1 || sessions.Sessions[0].SessionID != bob || !strings.HasPrefix(sessions.Sessions[0].Path, filepath.Join(data, "delegate")) {
		t.Fatalf("the operator's lemo sessions --task (bob's): exit %d\n%s", code, out)
	}
}
