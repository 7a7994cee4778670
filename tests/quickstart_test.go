package tests

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"lemo/providers/fake"
)

// quickBlock is a shell block of a quickstart page and what the test does
// with it: "serve" runs it in the background until the daemon serves,
// "expect TEXT" runs it to completion and wants TEXT in its output.
type quickBlock struct {
	directive, script string
}

var quickDirective = regexp.MustCompile("(?s)<!-- test: ([^>]*?) -->\\s*```sh\\n(.*?)```")

// quickBlocks reads the blocks a page marks for the test; blocks without
// a mark (installing software) are not run.
func quickBlocks(t *testing.T, page string) []quickBlock {
	t.Helper()
	b, err := os.ReadFile(page)
	if err != nil {
		t.Fatal(err)
	}
	var out []quickBlock
	for _, m := range quickDirective.FindAllStringSubmatch(string(b), -1) {
		out = append(out, quickBlock{directive: strings.TrimSpace(m[1]), script: m[2]})
	}
	return out
}

// Each quickstart page's commands, taken from the Markdown, run as
// written: in a fresh folder, with lemo on PATH and a fresh home (the
// default data folder is in it). Only the model services
// are stand-ins (the fake Ollama and OpenRouter servers), reached through
// the variables the pages name.
func TestQuickstarts(t *testing.T) {
	pages, err := filepath.Glob("../docs/quickstart-*.md")
	if err != nil || len(pages) < 4 {
		t.Fatalf("quickstart pages: %v, %v; want the demo, Ollama, provider and remote pages", pages, err)
	}
	for _, page := range pages {
		name := strings.TrimSuffix(strings.TrimPrefix(filepath.Base(page), "quickstart-"), ".md")
		t.Run(name, func(t *testing.T) {
			env := []string{"PATH=" + filepath.Dir(lemoBin) + ":" + os.Getenv("PATH"), "LEMO_LOG_FORMAT=json", "LEMO_OLLAMA_DISABLED=true"}
			switch name {
			case "ollama":
				srv := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama})
				env = []string{"PATH=" + filepath.Dir(lemoBin) + ":" + os.Getenv("PATH"), "LEMO_LOG_FORMAT=json", "OLLAMA_HOST=" + srv.URL()}
			case "provider":
				srv := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenRouter})
				env = append(env, "LEMO_OPENROUTER_BASE_URL="+srv.URL())
			}
			runQuickstart(t, page, cleanEnv(env...))
		})
	}
}

func runQuickstart(t *testing.T, page string, env []string) {
	dir := t.TempDir()
	env = withHome(env, t.TempDir())
	blocks := quickBlocks(t, page)
	expects := 0
	for _, b := range blocks {
		switch {
		case b.directive == "serve":
			cmd := exec.Command("sh", "-c", b.script)
			cmd.Dir, cmd.Env = dir, env
			cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
			out := &lockedBuffer{}
			cmd.Stdout, cmd.Stderr = out, out
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			// exited is closed once the daemon's shell has exited (waitErr
			// says how): both the wait for serving and the cleanup read it.
			exited := make(chan struct{})
			var waitErr error
			go func() { waitErr = cmd.Wait(); close(exited) }()
			t.Cleanup(func() {
				_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGINT)
				select {
				case <-exited:
				case <-time.After(30 * time.Second):
					_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
					<-exited
				}
			})
			eventually(t, 30*time.Second, func() error {
				select {
				case <-exited:
					t.Fatalf("%s: the daemon exited (%v):\n%s", page, waitErr, out.String())
				default:
				}
				if !strings.Contains(out.String(), "lemo is serving") {
					return errString("not serving yet:\n" + out.String())
				}
				return nil
			})
		case strings.HasPrefix(b.directive, "expect "):
			expects++
			want := strings.TrimPrefix(b.directive, "expect ")
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			cmd := exec.CommandContext(ctx, "sh", "-c", b.script)
			cmd.Dir, cmd.Env = dir, env
			out, err := cmd.CombinedOutput()
			cancel()
			if err != nil || !strings.Contains(string(out), want) {
				t.Fatalf("%s: the block\n%s\nfailed (%v) or lacks %q:\n%s", page, b.script, err, want, out)
			}
		default:
			t.Fatalf("%s: unknown test directive %q", page, b.directive)
		}
	}
	if expects == 0 {
		t.Fatalf("%s: no block the test checks", page)
	}
}
