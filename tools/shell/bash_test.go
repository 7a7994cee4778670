package shell

import (
	"context"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// The differential tests run bash on generated command lines and compare
// what it runs with what the policy allowed. No command exists: PATH is an
// empty folder, so bash hands every external command to
// command_not_found_handle (defined through BASH_ENV), which records its
// argv instead of running anything. The generator's pieces contain no
// slash, no "cd" and no "..": builtins can only write inside the test's
// temporary folder.

// bashPolicy allows two commands; every other name is refused.
var bashPolicy = Policy{Allow: []string{"zzok", "zzok2 sub", "echo", "true"}, Default: Ask}

// bashCommands are the simple commands the generator starts from.
var bashCommands = []string{
	"zzok", "zzok a b", "zzbad", "zzok2 sub", "zzok2 other", "echo hi", "true", "zz''bad", "zz\\bad", `"zzbad"`,
	"zzok zzbad", "zzok2 'sub'", "X=1 zzok", "PATH=x zzok", "echo 'a;zzbad'", `echo "a;zzbad"`, "zzok \\; zzbad",
	"zzok ';' zzbad", "zzok # ; zzbad", "zzok '#'; zzbad", "$X zzok", "zz$X", "zzo? x", "zzok 2>&1", "zzok >/dev/null",
	"zzok > out", "zzok >> out", "zzok < out", "echo $'zzbad'", "eval zzbad", "eval 'zzok; zzbad'", "bash -c zzbad",
	"sh -c 'zzok; zzbad'", "zzok2 sub; zzbad",
}

// bashTemplates combine command lines (each %s is one).
var bashTemplates = []string{
	"%s; %s", "%s && %s", "%s || %s", "%s | %s", "%s & %s", "%s\n%s", "( %s )", "{ %s; }", "echo $(%s)", `echo "$(%s)"`,
	"echo `%s`", `zzok "$( %s )"`, "echo ${x:-$(%s)}", `echo "${x:-"$(%s)"}"`, "echo $(( $(%s) ))", "if %s; then %s; fi",
	"if %s; then :; else %s; fi", "case x in x) %s;; esac", "echo $(case x in x) %s;; esac)", "f() { %s; }; f",
	"%s > /dev/null", "%s 2>&1", "%s > out", "! %s", "cat <<EOF\n$(%s)\nEOF", "cat <<'EOF'\n$(%s)\nEOF",
	"cat <<EOF\n`%s`\nEOF", "cat <<-EOF\n\t$(%s)\n\tEOF", "cat <<A; %s\nx\nA", "zzok <<<$(%s)", "zzok '%s'",
	`zzok "%s"`, "zzok $(echo '%s')", "echo a\\\n; %s", "for i in 1; do %s; done", "for PATH in x; do %s; done",
	"[[ -n $(%s) ]]", "(( $(%s) ))", "x=$(%s)", "export x=$(%s)", "local x=$(%s)", "echo <(%s)", "zzok >(%s)",
	"time %s", "%s #", "# %s\n%s", "zzok \\\n%s", "echo '\n'; %s", `echo "\"; %s; \""`, "echo `echo \\`%s\\``",
}

// genBash builds a command line of nesting up to depth from next, which
// picks an index below n.
func genBash(next func(n int) int, depth int) string {
	if depth == 0 || next(3) == 0 {
		return bashCommands[next(len(bashCommands))]
	}
	t := bashTemplates[next(len(bashTemplates))]
	args := make([]any, strings.Count(t, "%s"))
	for i := range args {
		args[i] = genBash(next, depth-1)
	}
	return fmt.Sprintf(t, args...)
}

// bashRunner runs command lines in bash and reports the external commands
// it ran.
type bashRunner struct {
	bash, dir, env, log string
}

func newBashRunner(t testing.TB) *bashRunner {
	t.Helper()
	bash, err := exec.LookPath("bash")
	if err != nil {
		t.Skip("bash is not installed")
	}
	dir := t.TempDir()
	r := &bashRunner{bash: bash, dir: dir, env: filepath.Join(dir, "env.sh"), log: filepath.Join(dir, "runs")}
	prelude := `command_not_found_handle() { local IFS=$'\x1f'; printf '%s\x1e' "$*" >> "$LEMO_RUNS"; return 0; }` + "\n"
	if err := os.WriteFile(r.env, []byte(prelude), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "empty"), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(dir, "work"), 0o700); err != nil {
		t.Fatal(err)
	}
	return r
}

// runs returns the argv of every external command bash ran for cmd; ok is
// false when bash did not finish in time.
func (r *bashRunner) runs(t testing.TB, cmd string) (argvs [][]string, ok bool) {
	t.Helper()
	_ = os.Remove(r.log)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c := exec.CommandContext(ctx, r.bash, "-c", cmd)
	c.Dir = filepath.Join(r.dir, "work")
	c.Env = []string{"PATH=" + filepath.Join(r.dir, "empty"), "BASH_ENV=" + r.env, "LEMO_RUNS=" + r.log, "HOME=" + c.Dir}
	_ = c.Run() // a syntax error or a failing command is an outcome like any other
	if ctx.Err() != nil {
		return nil, false
	}
	b, err := os.ReadFile(r.log)
	if err != nil && !os.IsNotExist(err) {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSuffix(string(b), "\x1e"), "\x1e") {
		if line != "" {
			argvs = append(argvs, strings.Split(line, "\x1f"))
		}
	}
	return argvs, true
}

// checkAgainstBash fails when the policy allows cmd and bash runs a command
// that no allow rule covers.
func checkAgainstBash(t testing.TB, r *rules, br *bashRunner, cmd string) {
	t.Helper()
	v := r.check(cmd)
	if v.Decision != Allow {
		return
	}
	argvs, ok := br.runs(t, cmd)
	if !ok {
		return
	}
	for _, argv := range argvs {
		covered := false
		for _, rl := range r.allow {
			if len(argv) >= len(rl.words) && strings.Join(argv[:len(rl.words)], " ") == rl.text {
				covered = true
			}
		}
		if !covered {
			t.Fatalf("check(%q) = allow (%s), but bash runs %q, which no allow rule covers", cmd, v.Reason, argv)
		}
	}
}

// TestPolicyAgainstBash runs a bounded, deterministic random corpus (seeded,
// so every run checks the same command lines) through the policy and
// bash.
func TestPolicyAgainstBash(t *testing.T) {
	br := newBashRunner(t)
	r := compileRules(bashPolicy)
	n := 1000
	if testing.Short() {
		n = 100
	}
	rng := rand.New(rand.NewPCG(21, 8))
	allowed := 0
	for range n {
		cmd := genBash(rng.IntN, 3)
		if r.check(cmd).Decision == Allow {
			allowed++
		}
		checkAgainstBash(t, r, br, cmd)
	}
	// The corpus must exercise the allow path, or the test proves nothing.
	if allowed < n/10 {
		t.Fatalf("only %d of %d generated command lines were allowed", allowed, n)
	}
	t.Logf("%d command lines, %d allowed and run through bash", n, allowed)
}

// FuzzPolicyAgainstBash lets the fuzzer choose the generator's pieces.
func FuzzPolicyAgainstBash(f *testing.F) {
	f.Add([]byte{0})
	f.Add([]byte{1, 18, 2, 0, 1})
	f.Add([]byte{1, 24, 1, 2, 1, 9, 0, 2})
	f.Add([]byte{1, 29, 1, 3, 0, 0, 7, 1, 1, 40})
	br := newBashRunner(f)
	r := compileRules(bashPolicy)
	f.Fuzz(func(t *testing.T, choices []byte) {
		i := 0
		next := func(n int) int {
			if i >= len(choices) {
				return 0
			}
			i++
			return int(choices[i-1]) % n
		}
		checkAgainstBash(t, r, br, genBash(next, 4))
	})
}
