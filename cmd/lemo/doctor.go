package main

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"lemo/actors/gateway"
	"lemo/actors/taskstate"
	"lemo/client"
	"lemo/config"
	"lemo/persistence"
	"lemo/providers"
	"lemo/tools/isolation"
)

// Outcomes of a doctor check.
const (
	checkOK   = "ok"
	checkInfo = "info"
	checkWarn = "warn"
	checkFail = "FAIL"
)

// checkResult is one finding of lemo doctor: what was checked, how it
// went, what was seen and, when something is wrong, how to fix it.
type checkResult struct {
	Check  string `json:"check"`
	Status string `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix,omitempty"`
}

// doctorEnv is what the checks need besides the configuration; tests
// replace its parts.
type doctorEnv struct {
	cfg        *config.Config
	configFile string
	// timeout bounds each network check and each delegate binary run.
	timeout  time.Duration
	environ  []string
	lookPath func(string) (string, error)
	// namespaces tries namespaces for tool processes (detectNamespaces);
	// nil skips the check.
	namespaces func() (*isolation.Namespaces, error)
}

// doctor implements lemo doctor.
func doctor(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	fs := flag.NewFlagSet("doctor", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath, flagKeys := configFlags(fs)
	asJSON := fs.Bool("json", false, "print the findings as JSON")
	timeout := fs.Duration("timeout", 10*time.Second, "how long each network check may take")
	fs.Usage = func() {
		fmt.Fprint(stderr, `Usage: lemo doctor [--config FILE] [--data DIR] [flags]

Check what lemo serve needs, with the configuration it would read: the
data folder (permissions, free space, the store: opened read-only when no
daemon runs, else its files are checked and the running daemon is asked
over the remote API), the token files, TLS, each configured provider
(reachable, authenticated, models listed), the delegate's agent binary
and each MCP server (started, its tools listed, stopped).
It prints what is wrong and how to fix it, and exits 1 when something would
stop the daemon from working.

Flags:
`)
		fs.PrintDefaults()
	}
	if err := parseFlags(fs, args); err != nil {
		return helpOK(err)
	}
	if fs.NArg() > 0 {
		return usageError("doctor takes no arguments, got %q", fs.Args())
	}
	var results []checkResult
	cfg, err := loadConfig(fs, *configPath, os.Environ(), flagKeys)
	if err != nil {
		results = append(results, checkResult{Check: "config", Status: checkFail, Detail: err.Error(),
			Fix: "correct these keys (the README's configuration table lists every key, its variable and flag)"})
	} else {
		env := &doctorEnv{cfg: cfg, configFile: configFile(*configPath), timeout: *timeout, environ: os.Environ(), lookPath: exec.LookPath, namespaces: detectNamespaces}
		results = env.run(ctx)
	}
	failed := printResults(stdout, results, *asJSON)
	if failed > 0 {
		return &exitError{code: 1, err: fmt.Errorf("doctor found %d problem(s)", failed)}
	}
	return nil
}

// run performs every check in order.
func (e *doctorEnv) run(ctx context.Context) []checkResult {
	src := "built-in defaults (no configuration file)"
	if e.configFile != "" {
		src = e.configFile
	}
	out := []checkResult{{Check: "config", Status: checkOK, Detail: "valid: " + src}}
	out = append(out, e.dataFolder()...)
	out = append(out, e.daemonAndStore(ctx)...)
	out = append(out, e.tokens()...)
	out = append(out, e.tls()...)
	out = append(out, e.providers(ctx)...)
	out = append(out, e.delegate(ctx)...)
	if e.namespaces != nil {
		out = append(out, e.toolIsolation())
	}
	out = append(out, e.mcpServers(ctx)...)
	return out
}

// toolIsolation says whether tool processes would run in namespaces of
// their own (tools.namespaces).
func (e *doctorEnv) toolIsolation() checkResult {
	const check = "tool isolation"
	if e.cfg.Tools.Namespaces == "off" {
		return checkResult{Check: check, Status: checkInfo, Detail: "tools.namespaces is off: tool processes can see the daemon's other processes, and what they start in another session can outlive a daemon killed outright (the next start stops it)"}
	}
	ns, err := e.namespaces()
	if err != nil {
		return checkResult{Check: check, Status: checkWarn, Detail: "tool processes would run without namespaces of their own: " + err.Error(),
			Fix: "allow unprivileged user namespaces (sysctl user.max_user_namespaces above 0; on Ubuntu kernel.apparmor_restrict_unprivileged_userns=0), or set tools.namespaces: off"}
	}
	return checkResult{Check: check, Status: checkOK, Detail: "tool processes run in " + ns.String() + " of their own"}
}

// printResults writes the findings and returns how many failed.
func printResults(w io.Writer, results []checkResult, asJSON bool) int {
	failed, warned := 0, 0
	for _, r := range results {
		switch r.Status {
		case checkFail:
			failed++
		case checkWarn:
			warned++
		}
	}
	if asJSON {
		b, _ := json.MarshalIndent(results, "", "  ")
		fmt.Fprintln(w, string(b))
		return failed
	}
	for _, r := range results {
		fmt.Fprintf(w, "%-5s %-18s %s\n", r.Status, r.Check, strings.ReplaceAll(r.Detail, "\n", "\n                         "))
		if r.Fix != "" {
			fmt.Fprintf(w, "%-5s %-18s fix: %s\n", "", "", r.Fix)
		}
	}
	switch {
	case failed == 0 && warned == 0:
		fmt.Fprintln(w, "\nno problems found")
	default:
		fmt.Fprintf(w, "\n%d problem(s), %d warning(s)\n", failed, warned)
	}
	return failed
}

// dataAbs is the data folder's absolute path.
func (e *doctorEnv) dataAbs() string {
	abs, err := filepath.Abs(e.cfg.Data)
	if err != nil {
		return e.cfg.Data
	}
	return abs
}

// dataFolder checks that the data folder is a folder this user can use,
// private to it, and that its filesystem has room.
func (e *doctorEnv) dataFolder() []checkResult {
	dir := e.dataAbs()
	var out []checkResult
	fi, err := os.Stat(dir)
	switch {
	case errors.Is(err, os.ErrNotExist):
		out = append(out, checkResult{Check: "data folder", Status: checkInfo, Detail: dir + " does not exist yet: lemo serve creates it (mode 0700)"})
	case err != nil:
		out = append(out, checkResult{Check: "data folder", Status: checkFail, Detail: err.Error(),
			Fix: "run lemo doctor as the daemon's user, or give that user access to " + dir})
	case !fi.IsDir():
		out = append(out, checkResult{Check: "data folder", Status: checkFail, Detail: dir + " is not a folder", Fix: "set data (--data, LEMO_DATA) to a folder"})
	default:
		out = append(out, folderAccess(dir, fi)...)
	}
	return append(out, e.freeSpace(dir))
}

// folderAccess checks an existing data folder's mode, owner, access and
// format marker.
func folderAccess(dir string, fi os.FileInfo) []checkResult {
	var out []checkResult
	r := checkResult{Check: "data folder", Status: checkOK, Detail: fmt.Sprintf("%s (mode %04o)", dir, fi.Mode().Perm())}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok && int(st.Uid) != os.Getuid() && os.Getuid() != 0 {
		r.Status, r.Detail = checkWarn, fmt.Sprintf("%s belongs to uid %d, you are uid %d", dir, st.Uid, os.Getuid())
		r.Fix = "run lemo doctor (and lemo serve) as the folder's owner"
	}
	if err := syscall.Access(dir, 7 /* R_OK|W_OK|X_OK */); err != nil {
		r.Status, r.Detail = checkFail, fmt.Sprintf("%s is not readable and writable by you: %v", dir, err)
		r.Fix = "run as the daemon's user, or chown/chmod the folder for it"
	} else if fi.Mode().Perm()&0o077 != 0 && r.Status == checkOK {
		r.Status, r.Detail = checkWarn, fmt.Sprintf("%s has mode %04o: other users can list it", dir, fi.Mode().Perm())
		r.Fix = "chmod 700 " + dir
	}
	out = append(out, r)
	marker, err := os.ReadFile(filepath.Join(dir, "FORMAT"))
	switch {
	case errors.Is(err, os.ErrNotExist):
		entries, _ := os.ReadDir(dir)
		if len(entries) > 0 && !(len(entries) == 1 && entries[0].Name() == "lock") {
			out = append(out, checkResult{Check: "data folder", Status: checkFail, Detail: dir + " has files but no FORMAT marker: it is not a Lemo data folder, and lemo serve refuses it",
				Fix: "choose an empty or new folder for data"})
		}
	case err != nil:
		out = append(out, checkResult{Check: "data folder", Status: checkFail, Detail: "read FORMAT: " + err.Error(), Fix: "give the daemon's user read access to " + dir})
	case !strings.HasPrefix(string(marker), "lemo data folder"):
		out = append(out, checkResult{Check: "data folder", Status: checkFail, Detail: fmt.Sprintf("FORMAT is %q: not a Lemo data folder", strings.TrimSpace(string(marker))), Fix: "choose an empty or new folder for data"})
	}
	return out
}

// freeSpace compares the free space of dir's filesystem (or of its nearest
// existing parent) with the floor.
func (e *doctorEnv) freeSpace(dir string) checkResult {
	p := dir
	for {
		if _, err := os.Stat(p); err == nil || filepath.Dir(p) == p {
			break
		}
		p = filepath.Dir(p)
	}
	var st syscall.Statfs_t
	if err := syscall.Statfs(p, &st); err != nil {
		return checkResult{Check: "free space", Status: checkWarn, Detail: fmt.Sprintf("statfs %s: %v", p, err)}
	}
	free := int64(st.Bavail) * int64(st.Bsize)
	floor := int64(e.cfg.Storage.MinFreeMiB) << 20
	detail := fmt.Sprintf("%d MiB free on the filesystem of %s; storage.min_free_mib is %d", free>>20, p, e.cfg.Storage.MinFreeMiB)
	switch {
	case floor == 0:
		return checkResult{Check: "free space", Status: checkWarn, Detail: detail + ": the guard is off, and Badger crashes when the disk fills",
			Fix: "set storage.min_free_mib (default 512)"}
	case free < floor:
		return checkResult{Check: "free space", Status: checkFail, Detail: detail + ": below the floor, the daemon refuses new Tasks",
			Fix: "free space on that filesystem (or move data to a larger one), or lower storage.min_free_mib"}
	case free < 2*floor:
		return checkResult{Check: "free space", Status: checkWarn, Detail: detail + ": less than twice the floor", Fix: "free space on that filesystem"}
	}
	return checkResult{Check: "free space", Status: checkOK, Detail: detail}
}

// daemonAndStore checks the store: when a daemon runs, it holds the store's
// lock, so the store's files are checked for reading and the daemon is asked
// over the remote API (and /readyz when http.listen names a port); when
// none runs, the store is opened read-only.
func (e *doctorEnv) daemonAndStore(ctx context.Context) []checkResult {
	dir := e.dataAbs()
	if _, err := os.Stat(filepath.Join(dir, "FORMAT")); err != nil {
		return []checkResult{{Check: "store", Status: checkInfo, Detail: "no store yet: lemo serve creates it"}}
	}
	l, err := client.FindLocal(dir)
	var nr *client.NotRunningError
	switch {
	case errors.As(err, &nr):
		out := []checkResult{{Check: "daemon", Status: checkInfo, Detail: "not running (" + nr.Reason + ")"}}
		return append(out, openStoreReadOnly(dir))
	case err != nil:
		return []checkResult{{Check: "daemon", Status: checkFail, Detail: err.Error(), Fix: "stop lemo serve, remove daemon.json from the data folder, start it again"}}
	}
	out := []checkResult{{Check: "daemon", Status: checkOK, Detail: fmt.Sprintf("running: pid %d, remote API at %s, version %s (API %d)", l.PID, l.Address, l.Version, l.APIVersion)}}
	out = append(out, storeFilesReadable(dir, l.PID))
	out = append(out, e.remoteAPI(ctx, l))
	if r, ok := e.readiness(ctx); ok {
		out = append(out, r)
	}
	return out
}

// storeFilesReadable opens every file of the store for reading, without
// taking its lock.
func storeFilesReadable(dir string, pid int) checkResult {
	store := filepath.Join(dir, "store")
	files, size := 0, int64(0)
	var bad []string
	err := filepath.WalkDir(store, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			bad = append(bad, err.Error())
			return nil
		}
		if d.IsDir() {
			return nil
		}
		files++
		f, err := os.Open(p)
		if err != nil {
			bad = append(bad, err.Error())
			return nil
		}
		if fi, err := f.Stat(); err == nil {
			size += diskUsage(fi)
		}
		var b [1]byte
		if _, err := f.Read(b[:]); err != nil && !errors.Is(err, io.EOF) {
			bad = append(bad, p+": "+err.Error())
		}
		_ = f.Close()
		return nil
	})
	if err != nil {
		bad = append(bad, err.Error())
	}
	if len(bad) > 0 {
		return checkResult{Check: "store", Status: checkFail, Detail: "files of the store cannot be read: " + strings.Join(bad, "; "),
			Fix: "run lemo doctor as the daemon's user; the store's files must belong to it"}
	}
	return checkResult{Check: "store", Status: checkOK, Detail: fmt.Sprintf("held by the running daemon (pid %d), so not opened: its %d files are readable (%d MiB on disk)", pid, files, size>>20)}
}

// diskUsage is the space a file takes on disk: Badger preallocates its
// files (a fresh store is 2 GiB apparent), so their length says little.
func diskUsage(fi os.FileInfo) int64 {
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// openStoreReadOnly opens the store of a data folder no daemon uses,
// read-only, and counts its Tasks.
func openStoreReadOnly(dir string) checkResult {
	dd, err := persistence.OpenDataDir(dir)
	if err != nil {
		if errors.Is(err, persistence.ErrLocked) {
			return checkResult{Check: "store", Status: checkWarn, Detail: "the data folder is locked: a daemon started while doctor ran", Fix: "run lemo doctor again"}
		}
		return checkResult{Check: "store", Status: checkFail, Detail: err.Error(), Fix: "give the daemon's user access to the data folder"}
	}
	defer dd.Close()
	if _, err := os.Stat(dd.Join("store")); errors.Is(err, os.ErrNotExist) {
		return checkResult{Check: "store", Status: checkInfo, Detail: "no store yet: lemo serve creates it"}
	}
	st, err := persistence.Open(dd, persistence.Options{Log: zerolog.Nop(), ReadOnly: true, MemTableSize: 8 << 20, BlockCacheSize: 8 << 20})
	if errors.Is(err, persistence.ErrNeedsRecovery) {
		return checkResult{Check: "store", Status: checkWarn, Detail: "was not closed cleanly (its daemon was killed or crashed), so it cannot be opened read-only",
			Fix: "start lemo serve: it recovers the store (nothing acknowledged is lost) and pauses the Tasks that were running"}
	}
	if err != nil {
		return checkResult{Check: "store", Status: checkFail, Detail: "cannot be opened read-only: " + err.Error(),
			Fix: "start lemo serve, which recovers a store that was not closed cleanly; if it refuses too, restore the data folder from a backup"}
	}
	defer st.Close()
	counts := st.StatusCounts()
	var parts []string
	total := int64(0)
	for s, n := range counts {
		parts = append(parts, fmt.Sprintf("%d %s", n, taskstate.StatusName(s)))
		total += n
	}
	sort.Strings(parts)
	detail := fmt.Sprintf("opens read-only: %d Tasks", total)
	if len(parts) > 0 {
		detail += " (" + strings.Join(parts, ", ") + ")"
	}
	return checkResult{Check: "store", Status: checkOK, Detail: fmt.Sprintf("%s, %d MiB on disk", detail, st.Size()>>20)}
}

// remoteAPI asks the running daemon for one Task with the data folder's
// token.
func (e *doctorEnv) remoteAPI(ctx context.Context, l *client.Local) checkResult {
	if l.TLS {
		return checkResult{Check: "remote API", Status: checkInfo, Detail: "the daemon serves TLS: not asked (use a client command with --tls-cert, --tls-key and --tls-ca)"}
	}
	if l.TokenErr != nil {
		return checkResult{Check: "remote API", Status: checkWarn, Detail: l.TokenErr.Error(), Fix: "run lemo doctor as the daemon's user"}
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	c, err := client.Connect(ctx, client.Options{Addr: l.Address, Token: l.Token, Name: "lemo-doctor", Timeout: e.timeout})
	if err != nil {
		fix := "check that the daemon runs and that nothing blocks " + l.Address
		if errors.Is(err, client.ErrUnauthenticated) {
			fix = "the token file does not match the daemon's token (auth.token?): restart the daemon to rewrite it"
		}
		return checkResult{Check: "remote API", Status: checkFail, Detail: err.Error(), Fix: fix}
	}
	defer c.Close()
	if _, _, err := c.ListTasks(ctx, "", 1); err != nil {
		return checkResult{Check: "remote API", Status: checkFail, Detail: "list Tasks: " + err.Error(), Fix: "see the daemon's log"}
	}
	return checkResult{Check: "remote API", Status: checkOK, Detail: fmt.Sprintf("%s answers with the data folder's token (daemon %s)", l.Address, c.Welcome().GetDaemonVersion())}
}

// readiness asks /readyz when http.listen names a fixed port.
func (e *doctorEnv) readiness(ctx context.Context) (checkResult, bool) {
	addr := e.cfg.HTTP.Listen
	if addr == "" {
		return checkResult{}, false
	}
	host, port, err := net.SplitHostPort(addr)
	if err != nil || port == "0" {
		return checkResult{}, false
	}
	if host == "" || host == "0.0.0.0" || host == "::" {
		host = "127.0.0.1"
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	url := "http://" + net.JoinHostPort(host, port) + "/readyz"
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return checkResult{Check: "readiness", Status: checkFail, Detail: err.Error(), Fix: "the daemon runs but its http.listen does not answer: see its log"}, true
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return checkResult{Check: "readiness", Status: checkWarn, Detail: fmt.Sprintf("%s answers %s: starting (recovery) or stopping", url, resp.Status)}, true
	}
	return checkResult{Check: "readiness", Status: checkOK, Detail: url + " answers ready"}, true
}

// tokens checks the token file in the data folder and auth.tokens_file.
func (e *doctorEnv) tokens() []checkResult {
	var out []checkResult
	path := filepath.Join(e.dataAbs(), "token")
	fi, err := os.Stat(path)
	switch {
	case errors.Is(err, os.ErrNotExist):
		out = append(out, checkResult{Check: "token file", Status: checkInfo, Detail: path + " does not exist yet: lemo serve writes it (mode 0600)"})
	case err != nil:
		out = append(out, checkResult{Check: "token file", Status: checkFail, Detail: err.Error(), Fix: "run as the daemon's user"})
	case fi.Mode().Perm()&0o077 != 0:
		fix := "chmod 600 " + path
		detail := fmt.Sprintf("%s has mode %04o: other users can read the operator token", path, fi.Mode().Perm())
		if e.cfg.Auth.Token == "" {
			detail += ", and lemo serve refuses to start with it"
		}
		out = append(out, checkResult{Check: "token file", Status: checkFail, Detail: detail, Fix: fix})
	default:
		out = append(out, checkResult{Check: "token file", Status: checkOK, Detail: fmt.Sprintf("%s (mode %04o)", path, fi.Mode().Perm())})
	}
	if f := e.cfg.Auth.TokensFile; f != "" {
		toks, err := gateway.ParseTokensFile(f, e.cfg.Auth.Owner)
		if err != nil {
			out = append(out, checkResult{Check: "tokens file", Status: checkFail, Detail: err.Error(), Fix: "fix auth.tokens_file: one \"owner token\" per line, mode 0600"})
		} else {
			out = append(out, checkResult{Check: "tokens file", Status: checkOK, Detail: fmt.Sprintf("%s: %d tokens", f, len(toks))})
		}
	}
	return out
}

// tls checks the certificate and key, and their expiry.
func (e *doctorEnv) tls() []checkResult {
	c := e.cfg.TLS
	if c.Cert == "" {
		return nil
	}
	if _, _, err := tlsConfigs(c); err != nil {
		return []checkResult{{Check: "tls", Status: checkFail, Detail: err.Error(), Fix: "set tls.cert and tls.key to a matching PEM certificate and key (and tls.client_ca to a PEM CA)"}}
	}
	pair, _ := tls.LoadX509KeyPair(c.Cert, c.Key)
	leaf, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return []checkResult{{Check: "tls", Status: checkFail, Detail: err.Error()}}
	}
	left := time.Until(leaf.NotAfter)
	switch {
	case left <= 0:
		return []checkResult{{Check: "tls", Status: checkFail, Detail: fmt.Sprintf("%s expired on %s", c.Cert, leaf.NotAfter.Format(time.DateOnly)), Fix: "renew the certificate"}}
	case left < 30*24*time.Hour:
		return []checkResult{{Check: "tls", Status: checkWarn, Detail: fmt.Sprintf("%s expires on %s", c.Cert, leaf.NotAfter.Format(time.DateOnly)), Fix: "renew the certificate"}}
	}
	return []checkResult{{Check: "tls", Status: checkOK, Detail: fmt.Sprintf("%s valid until %s", c.Cert, leaf.NotAfter.Format(time.DateOnly))}}
}

// providers asks each configured provider for its models, concurrently.
func (e *doctorEnv) providers(ctx context.Context) []checkResult {
	reg, err := buildProviders(e.cfg, zerolog.Nop())
	if err != nil {
		return []checkResult{{Check: "providers", Status: checkFail, Detail: err.Error(), Fix: "correct the providers.* keys"}}
	}
	names := reg.Names()
	if len(names) == 0 {
		return []checkResult{{Check: "providers", Status: checkFail, Detail: "no provider is configured: no Task can run", Fix: noProviderFix}}
	}
	return e.checkProviders(ctx, reg)
}

// checkProviders asks every provider of reg for its models, concurrently.
func (e *doctorEnv) checkProviders(ctx context.Context, reg *providers.Registry) []checkResult {
	names := reg.Names()
	out := make([]checkResult, len(names))
	var wg sync.WaitGroup
	for i, n := range names {
		p, _ := reg.Provider(n)
		wg.Add(1)
		go func() {
			defer wg.Done()
			out[i] = e.provider(ctx, n, p)
		}()
	}
	wg.Wait()
	return out
}

// noProviderFix is what to do when no provider can run a Task.
const noProviderFix = "try the built-in demo models: start the daemon with LEMO_FAKE_ENABLED=true, then lemo run --model fake/echo hello " +
	"(lemo models lists every model); for a local model run Ollama (ollama serve; ollama pull qwen3); " +
	"for a hosted one set a provider's API key (OPENROUTER_API_KEY, NVIDIA_API_KEY, OPENCODE_API_KEY, OLLAMA_API_KEY) or providers.openai.base_url"

// providerAdvice returns, from the providers' checks, the providers that
// can run Tasks and, when none can, what to do about it.
func providerAdvice(results []checkResult) (usable []string, fix string) {
	for _, r := range results {
		if r.Status == checkOK {
			usable = append(usable, strings.TrimPrefix(r.Check, "provider "))
		}
	}
	if len(usable) == 0 {
		fix = noProviderFix
	}
	return usable, fix
}

func (e *doctorEnv) provider(ctx context.Context, name string, p providers.Provider) (r checkResult) {
	r.Check = "provider " + name
	defer func() {
		if v := recover(); v != nil {
			r.Status, r.Detail = checkFail, fmt.Sprintf("panic while listing models: %v", v)
		}
	}()
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	start := time.Now()
	ms, err := p.Models(ctx)
	section, variable := providers.ConfigSection(name)
	if err != nil {
		why := err.Error()
		var pe *providers.Error
		if errors.As(err, &pe) && pe.Err != nil && !strings.Contains(why, pe.Err.Error()) {
			why += " (" + pe.Err.Error() + ")"
		}
		r.Status, r.Detail = checkFail, why
		switch providers.ClassOf(err) {
		case providers.ClassAuth:
			r.Detail = "authentication refused: " + why
			r.Fix = "check the API key (" + variable + ", or " + section + ".api_key)"
		case providers.ClassQuota:
			r.Fix = "the account's credits or quota are exhausted"
		case providers.ClassCancelled:
			r.Detail = fmt.Sprintf("no answer within %s: %s", e.timeout, why)
			r.Fix = "check that it runs and is reachable (" + section + ".base_url), or disable it with " + section + ".disabled"
		default:
			r.Detail = "unreachable or failing: " + why
			r.Fix = "check that it runs and is reachable (" + section + ".base_url), or disable it with " + section + ".disabled"
		}
		if section == "" {
			r.Fix = ""
		}
		return r
	}
	if len(ms) == 0 {
		r.Status, r.Detail = checkWarn, "reachable and authenticated, but it lists no model"
		if section != "" {
			r.Fix = "pull or enable a model, or widen " + section + ".models"
		}
		return r
	}
	ids := make([]string, 0, 3)
	for _, m := range ms[:min(3, len(ms))] {
		ids = append(ids, m.ID)
	}
	more := ""
	if len(ms) > 3 {
		more = ", ..."
	}
	r.Status, r.Detail = checkOK, fmt.Sprintf("reachable, authenticated, %d models (%s%s) in %s", len(ms), strings.Join(ids, ", "), more, time.Since(start).Round(time.Millisecond))
	return r
}

// delegate finds the delegate's agent binary and asks it for its version.
func (e *doctorEnv) delegate(ctx context.Context) []checkResult {
	d := e.cfg.Delegate
	if !d.Enabled {
		return nil
	}
	kind := d.Kind
	if kind == "" {
		kind = "pi"
	}
	bin := d.Binary
	if bin == "" {
		bin = kind
	}
	install := map[string]string{"pi": "npm install -g @mariozechner/pi-coding-agent", "omp": "npm install -g @oh-my-pi/pi-coding-agent"}[kind]
	path, err := e.lookPath(bin)
	if err != nil {
		return []checkResult{{Check: "delegate", Status: checkFail, Detail: fmt.Sprintf("the %s agent %q is not found: %v", kind, bin, err),
			Fix: "install it (" + install + ") or set delegate.binary to its absolute path; delegate.enabled: false turns the delegate off"}}
	}
	ctx, cancel := context.WithTimeout(ctx, e.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "--version")
	cmd.Env = e.environ
	b, err := cmd.CombinedOutput()
	text := strings.TrimSpace(string(b))
	if i := strings.IndexByte(text, '\n'); i >= 0 {
		text = text[:i]
	}
	if err != nil {
		return []checkResult{{Check: "delegate", Status: checkWarn, Detail: fmt.Sprintf("%s --version failed: %v %s", path, err, text),
			Fix: "check that the agent runs for the daemon's user (pi needs Node, omp needs Bun on PATH)"}}
	}
	return []checkResult{{Check: "delegate", Status: checkOK, Detail: fmt.Sprintf("%s %s (%s)", kind, text, path)}}
}
