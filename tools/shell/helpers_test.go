package shell

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"go.uber.org/goleak"
	"golang.org/x/sys/unix"

	"lemo/actors/live"
	"lemo/internal/testwait"
	"lemo/tools"
	"lemo/tools/internal/proc"
	"lemo/tools/isolation"
)

// envSubreaper makes the test binary a child subreaper (set by
// TestCancelledRunsAsSubreaper when it re-runs the binary).
const envSubreaper = "SHELLTEST_SUBREAPER"

func TestMain(m *testing.M) {
	if len(os.Args) > 1 && os.Args[1] == isolation.InitArg {
		os.Exit(isolation.Main(os.Args[2:]))
	}
	if os.Getenv(envDaemon) != "" {
		runDaemonHelper(os.Getenv(envDaemon))
		return
	}
	if os.Getenv(envSubreaper) == "1" {
		if err := unix.Prctl(unix.PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0); err != nil {
			fmt.Fprintln(os.Stderr, "prctl(PR_SET_CHILD_SUBREAPER):", err)
			os.Exit(2)
		}
	}
	goleak.VerifyTestMain(m)
}

// envDaemon makes the test binary act as a daemon running one command
// (TestShellDiesWithDaemon): it prints the shell's pid and waits to be
// killed.
const envDaemon = "SHELLTEST_DAEMON_COMMAND"

func runDaemonHelper(command string) {
	tool, err := New(Config{Environ: os.Environ()})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	in, _ := json.Marshal(obj{"command": command})
	ws, _ := os.Getwd()
	_, err = tool.Execute(context.Background(), tools.Call{Workspace: ws, Input: in}, func(s json.RawMessage) error {
		var st state
		_ = json.Unmarshal(s, &st)
		if st.Phase == PhaseStarted {
			fmt.Printf("pid %d\n", st.PID)
		}
		return nil
	})
	fmt.Fprintln(os.Stderr, "the command ended:", err)
	os.Exit(3)
}

func randomHex() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}

// testConfig is a config for tests: short grace periods, the given marker
// in the children's environment, PATH from this process.
func testConfig(marker string) Config {
	return Config{
		KillGrace:     500 * time.Millisecond,
		StateInterval: 20 * time.Millisecond,
		Environ:       []string{"PATH=" + os.Getenv("PATH"), "SHELLTEST_MARKER=" + marker},
	}
}

type harness struct {
	t    testing.TB
	tool *Tool
	rt   *tools.Registered
	ws   string
	// live keeps the calls' live outputs, as the daemon does; last is the
	// last call's.
	live  *live.Accountant
	mu    sync.Mutex
	calls int
	last  *live.Result
}

func newHarness(t testing.TB, cfg Config) *harness {
	t.Helper()
	tool, err := New(cfg)
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	reg := tools.NewRegistry()
	if err := reg.Register(tool); err != nil {
		t.Fatalf("Register: %v", err)
	}
	rt, _ := reg.Get(Name)
	acct, err := live.New(filepath.Join(t.TempDir(), "live"), live.Limits{CallBytes: 4 << 20, SpillBytes: 6 << 20})
	if err != nil {
		t.Fatal(err)
	}
	return &harness{t: t, tool: tool, rt: rt, ws: t.TempDir(), live: acct}
}

// run executes input like the runtime does: validated input, every state
// update validated, output and retained part validated. onState sees each
// decoded update.
func (h *harness) run(ctx context.Context, input any, onState func(state)) (*Result, error) {
	h.t.Helper()
	in, err := json.Marshal(input)
	if err != nil {
		h.t.Fatal(err)
	}
	if err := h.rt.ValidateInput(in); err != nil {
		h.t.Fatalf("input %s: %v", in, err)
	}
	emit := func(s json.RawMessage) error {
		if err := h.rt.ValidateState(s); err != nil {
			h.t.Errorf("state update %s: %v", s, err)
			return err
		}
		if onState != nil {
			var st state
			if err := json.Unmarshal(s, &st); err != nil {
				h.t.Error(err)
			}
			onState(st)
		}
		return nil
	}
	h.mu.Lock()
	h.calls++
	callID := fmt.Sprintf("c%d", h.calls)
	lv := h.live.Open("t", callID)
	h.last = lv
	h.mu.Unlock()
	out, err := h.tool.Execute(ctx, tools.Call{TaskID: "t", CallID: callID, Workspace: h.ws, Input: in, Live: lv}, emit)
	if err != nil {
		return nil, err
	}
	if err := h.rt.ValidateOutput(out); err != nil {
		h.t.Fatalf("output does not match the result schema: %v\n%.2000s", err, out)
	}
	kept := h.tool.Retain(out, in)
	if kept == nil {
		h.t.Fatalf("Retain kept nothing of a %d-byte output", len(out))
	}
	if len(kept) > h.tool.cfg.RetainBytes {
		h.t.Fatalf("Retain kept %d bytes, over RetainBytes %d", len(kept), h.tool.cfg.RetainBytes)
	}
	if err := h.rt.ValidateOutput(kept); err != nil {
		h.t.Fatalf("retained part does not match the result schema: %v\n%s", err, kept)
	}
	if len(out) > 12*(h.tool.cfg.ModelHeadBytes+h.tool.cfg.ModelTailBytes)+4096 {
		h.t.Fatalf("the result is %d bytes: it holds more than the model's view", len(out))
	}
	var r Result
	if err := json.Unmarshal(out, &r); err != nil {
		h.t.Fatal(err)
	}
	return &r, nil
}

func (h *harness) must(input any) *Result {
	h.t.Helper()
	r, err := h.run(context.Background(), input, nil)
	if err != nil {
		h.t.Fatalf("run %v: %v", input, err)
	}
	return r
}

// leftovers lists processes that belong to the given groups (in any
// state), carry the marker in their environment or command line, or are
// zombie children of this process.
func leftovers(t testing.TB, pgids map[int]bool, marker string) []proc.Proc {
	t.Helper()
	self := os.Getpid()
	ps, err := proc.Processes(func(s proc.Stat) bool {
		return pgids[s.Pgrp] || proc.Mentions(s.Pid, marker) || (s.State == 'Z' && s.PPid == self)
	})
	if err != nil {
		t.Fatal(err)
	}
	return ps
}

// eventually polls f until it returns nil or the deadline passes.
func eventually(t testing.TB, d time.Duration, f func() error) {
	t.Helper()
	testwait.Until(t, d, "the condition", f)
}

// noLeftovers waits until no process of the groups or with the marker
// remains.
func noLeftovers(t testing.TB, pgids map[int]bool, marker string) {
	t.Helper()
	eventually(t, 10*time.Second, func() error {
		if l := leftovers(t, pgids, marker); len(l) > 0 {
			return fmt.Errorf("%d processes left, e.g. %+v", len(l), l[0])
		}
		return nil
	})
}

// states collects state updates safely.
type states struct {
	mu  sync.Mutex
	all []state
}

func (s *states) add(st state) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.all = append(s.all, st)
}

func (s *states) list() []state {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]state{}, s.all...)
}
