package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/rs/zerolog"

	"lemo/actors"
	"lemo/actors/live"
	"lemo/actors/services"
	"lemo/actors/taskstate"
	"lemo/config"
	"lemo/logging"
	"lemo/memory"
	"lemo/persistence"
	"lemo/providers"
	"lemo/tools"
	"lemo/tools/isolation"
)

// configFile returns the configuration file to read: --config, else
// LEMO_CONFIG, else ./lemo.yaml when it exists; "" for none.
func configFile(configPath string) string {
	if configPath == "" {
		configPath = os.Getenv("LEMO_CONFIG")
	}
	if configPath == "" {
		if _, err := os.Stat("lemo.yaml"); err == nil {
			configPath = "lemo.yaml"
		}
	}
	return configPath
}

// loadConfig builds the configuration: defaults, then the file (see
// configFile), then the environment, then the flags that were set; every
// problem is reported at once.
func loadConfig(fs *flag.FlagSet, configPath string, environ []string, flagKeys map[string]string) (*config.Config, error) {
	cfg := config.Default()
	var problems []error
	configPath = configFile(configPath)
	if configPath != "" {
		problems = append(problems, cfg.LoadFile(configPath)...)
	}
	problems = append(problems, cfg.ApplyEnv(environ)...)
	fs.Visit(func(f *flag.Flag) {
		if key, ok := flagKeys[f.Name]; ok {
			if err := cfg.Set(key, f.Value.String()); err != nil {
				problems = append(problems, config.Problem{Where: "--" + f.Name, What: err.Error()})
			}
		}
	})
	cfg.Data = config.DataFolder(cfg.Data, environ)
	problems = append(problems, cfg.Validate()...)
	if len(problems) > 0 {
		return nil, &exitError{code: 2, err: config.Join(problems)}
	}
	return cfg, nil
}

// configFlags declares --config and the flags of the configuration keys
// on fs; it returns --config and the key of each flag.
func configFlags(fs *flag.FlagSet) (configPath *string, flagKeys map[string]string) {
	configPath = fs.String("config", "", "configuration file (default: $LEMO_CONFIG, else ./lemo.yaml if present)")
	flagKeys = map[string]string{}
	for _, k := range config.Keys() {
		if k.Flag != "" {
			fs.String(k.Flag, "", fmt.Sprintf("%s (%s; default %q)", k.Help, k.Path, k.Default))
			flagKeys[k.Flag] = k.Path
		}
	}
	return configPath, flagKeys
}

func serve(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	// First: no process the daemon starts may read its environment,
	// memory or descriptors.
	if err := isolation.Harden(); err != nil {
		return err
	}
	// SIGHUP re-reads the configuration; caught from here on (Go's default
	// would end the process).
	hup := make(chan os.Signal, 1)
	signal.Notify(hup, syscall.SIGHUP)
	defer signal.Stop(hup)
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	fs.SetOutput(stderr)
	configPath, flagKeys := configFlags(fs)
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return nil
		}
		return usageError("%v", err)
	}
	if fs.NArg() > 0 {
		return usageError("serve takes no arguments, got %q", fs.Args())
	}
	cfg, err := loadConfig(fs, *configPath, os.Environ(), flagKeys)
	if err != nil {
		return err
	}
	// The logger passes every level; zerolog's global level filters, so
	// that SIGHUP can change it (setLogLevel).
	out := stderr
	if cfg.Log.Output == config.LogStdout {
		out = stdout
	}
	log, err := logging.New(out, "trace", cfg.Log.Format)
	if err == nil {
		err = setLogLevel(cfg.Log.Level)
	}
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	reload := func() (*config.Config, error) { return loadConfig(fs, *configPath, os.Environ(), flagKeys) }
	return runDaemon(ctx, cfg, log, hup, reload)
}

// runDaemon runs the daemon until ctx ends, then stops it cleanly: running
// Tasks are durably paused as interrupted. Each signal on hup re-reads the
// configuration with reload and applies what can change live.
func runDaemon(ctx context.Context, cfg *config.Config, log zerolog.Logger, hup <-chan os.Signal, reload func() (*config.Config, error)) error {
	dd, err := persistence.OpenDataDir(cfg.Data)
	if err != nil {
		return err
	}
	defer dd.Close()
	// Before recovery records what the calls that were running did: stop
	// what a daemon killed outright left running on this data folder.
	runTag, err := isolation.RunTag(dd.Path())
	if err != nil {
		return fmt.Errorf("run tag of %s: %w", dd.Path(), err)
	}
	var stopped []actors.StoppedProcess
	for _, l := range isolation.StopLeftovers(runTag, cfg.Tasks.ToolGrace) {
		log.Warn().Int("pid", l.Pid).Str("command", l.Command).Str("task", l.TaskID).Str("call", l.CallID).Msg("stopped a tool process left running by the previous daemon")
		stopped = append(stopped, actors.StoppedProcess{TaskID: l.TaskID, CallID: l.CallID, Pid: l.Pid, Command: l.Command})
	}
	o := newOps()
	o.floor.Store(int64(cfg.Storage.MinFreeMiB) << 20)
	if cfg.HTTP.Listen != "" {
		if err := o.serve(cfg.HTTP.Listen, cfg.HTTP.Pprof, log); err != nil {
			return fmt.Errorf("http.listen: %w (is another program using it?)", err)
		}
		defer o.close(log)
	}
	store, err := persistence.Open(dd, persistence.Options{Log: log, MinFreeBytes: int64(cfg.Storage.MinFreeMiB) << 20, OnCommit: o.daemon.Commit, OnAck: o.daemon.Ack})
	if err != nil {
		return err
	}
	defer store.Close()
	o.store.Store(store)
	provs, err := buildProviders(cfg, log)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	memOpt, err := memoryOptions(cfg, provs, log.With().Str("component", "memory").Logger())
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	mem, err := memory.Open(context.Background(), store, memOpt)
	if err != nil {
		return err
	}
	defer mem.Close()
	o.mem.Store(mem)
	svcs := services.New(services.Options{})
	procs := toolProcs{runTag: runTag, namespaces: toolNamespaces(cfg, log), data: dd.Path()}
	reg, err := buildTools(cfg, log, svcs, procs)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	// MCP servers: stopped, with their processes, after the Tasks (a
	// deferred Close covers the early returns; Close is idempotent).
	mcpm, err := startMCP(ctx, cfg, reg, procs, o.daemon, log)
	if err != nil {
		return &exitError{code: 2, err: err}
	}
	defer mcpm.Close()
	// Live results spill into <data>/live, outside every workspace; what an
	// earlier run left there is removed.
	lv, err := live.New(dd.Join("live"), liveLimits(cfg))
	if err != nil {
		return err
	}
	lv.SetSpaceCheck(store.CheckSpace) // spill files never eat the store's floor
	o.live.Store(lv)
	for _, t := range memoryTools(mem, store, lv) {
		if err := reg.Register(t); err != nil {
			return err
		}
	}
	warnUnknownApprovalTools(cfg, reg, log)
	if err := checkInitialTools(cfg, reg, log); err != nil {
		return &exitError{code: 2, err: err}
	}
	d, err := actors.Start(context.Background(), actors.Deps{Store: store, Providers: provs, Tools: reg, Memory: mem, Observer: o.daemon, Log: log, Live: lv, Pricer: newPricer(cfg, provs)}, actorOptions(cfg, dd, stopped))
	if err != nil {
		return err
	}
	remote, err := startRemoteAPI(cfg, dd, d, provs, reg, svcs, log)
	if err != nil {
		_ = d.Stop(context.Background())
		return err
	}
	o.gw.Store(remote.gw)
	o.ready.Store(true)
	log.Info().Str("data", dd.Path()).Str("listen", remote.gw.Addr()).Strs("providers", provs.Names()).Int("tools", len(reg.List())).Msg("lemo is serving; Ctrl-C stops it")
	// Which providers can run a Task, said once at startup without
	// holding it up; it is stopped and waited for at stop.
	actx, stopAnnounce := context.WithCancel(ctx)
	announced := make(chan struct{})
	go func() {
		defer close(announced)
		announceProviders(actx, provs, log)
	}()
	defer func() { stopAnnounce(); <-announced }()
	r := newReloader(cfg, reload, store, d, o, log)
	for ctx.Err() == nil {
		select {
		case <-ctx.Done():
		case <-hup:
			r.reload()
		}
	}
	o.ready.Store(false)
	log.Info().Msg("stopping: pausing running tasks")
	remote.stop()
	o.gw.Store(nil)
	stopCtx, cancel := context.WithTimeout(context.Background(), cfg.Tasks.ShutdownTimeout+5*time.Second)
	defer cancel()
	if err := d.Stop(stopCtx); err != nil {
		log.Error().Err(err).Msg("stop")
		return err
	}
	mcpm.Close()
	o.close(log)
	_ = mem.Close()
	if err := store.Close(); err != nil {
		return fmt.Errorf("close store: %w", err)
	}
	log.Info().Msg("stopped")
	return nil
}

// toolNamespaces is where tool processes run: in namespaces of their own
// when tools.namespaces is auto and the kernel allows it here (tried once),
// else nil; the log says which and why.
func toolNamespaces(cfg *config.Config, log zerolog.Logger) *isolation.Namespaces {
	if cfg.Tools.Namespaces == "off" {
		log.Info().Str("key", "tools.namespaces").Msg("tool processes run without namespaces of their own (tools.namespaces is off)")
		return nil
	}
	ns, err := detectNamespaces()
	if err != nil {
		log.Warn().Err(err).Msg("tool processes run without namespaces of their own: they can see the daemon's other processes, and processes they start in another session can outlive a daemon killed outright")
		return nil
	}
	log.Info().Str("namespaces", ns.String()).Msg("tool processes run in namespaces of their own")
	return ns
}

// detectNamespaces tries namespaces for tool processes with this binary
// as their init.
func detectNamespaces() (*isolation.Namespaces, error) {
	self, err := os.Executable()
	if err != nil {
		return nil, fmt.Errorf("the daemon's executable: %w", err)
	}
	return isolation.Detect(self)
}

func actorOptions(cfg *config.Config, dd *persistence.DataDir, stopped []actors.StoppedProcess) actors.Options {
	return actors.Options{
		Stopped:           stopped,
		Instructions:      cfg.Tasks.Instructions,
		Think:             cfg.Tasks.Think,
		MaxCycles:         cfg.Tasks.MaxCycles,
		MaxParallelTools:  cfg.Tasks.MaxParallelTools,
		ToolGrace:         cfg.Tasks.ToolGrace,
		IdleTimeout:       cfg.Tasks.IdleTimeout,
		HoldFor:           holdFor(cfg.Tasks.ReadHold),
		PausedLiveTimeout: cfg.Live.PausedTimeout,
		ShutdownTimeout:   cfg.Tasks.ShutdownTimeout,
		WorkspaceRoot:     dd.Join("workspaces"),
		DataDir:           dd.Path(),
		WorkspaceGrants:   workspaceGrants(cfg),
		MaxRequestBytes:   cfg.Tasks.MaxRequestBytes,
		Approval:          approvalPolicy(cfg),
		ApprovalTimeout:   cfg.Approvals.Timeout,
		// Never nil: tool discovery is always on (tools.initial).
		InitialTools:       append([]string{}, cfg.Tools.Initial...),
		MaxDepth:           cfg.Tasks.MaxDepth,
		MaxChildren:        cfg.Tasks.MaxChildren,
		MaxRunningChildren: cfg.Tasks.MaxRunningChildren,
		Budget:             budgetOptions(cfg),
	}
}

// liveLimits are the bounds of the live keys.
func liveLimits(cfg *config.Config) live.Limits {
	mib := func(n int) int64 { return int64(n) << 20 }
	l := cfg.Live
	return live.Limits{CallBytes: mib(l.CallMiB), TaskBytes: mib(l.TaskMiB), TotalBytes: mib(l.TotalMiB), SpillBytes: mib(l.SpillMiB), SpillTotalBytes: mib(l.SpillTotalMiB)}
}

// workspaceGrants are the workspaces.grants keys as the daemon takes them.
func workspaceGrants(cfg *config.Config) []actors.WorkspaceGrant {
	var out []actors.WorkspaceGrant
	for _, g := range cfg.Workspaces.Parsed() {
		out = append(out, actors.WorkspaceGrant{Owner: g.Owner, Root: g.Root})
	}
	return out
}

// approvalPolicy is the daemon-wide approval policy of the approvals keys;
// nil when they hold no rule.
func approvalPolicy(cfg *config.Config) actors.ApprovalPolicy {
	var rules []actors.PolicyRule
	for _, l := range []struct {
		rule     string
		patterns []string
	}{{"deny", cfg.Approvals.Deny}, {"ask", cfg.Approvals.Ask}, {"allow", cfg.Approvals.Allow}} {
		for _, p := range l.patterns {
			rules = append(rules, actors.PolicyRule{Tool: p, Rule: l.rule})
		}
	}
	if len(rules) == 0 {
		return nil
	}
	return actors.RulePolicy(rules, cfg.Approvals.Timeout)
}

// warnUnknownApprovalTools logs the approvals rules that name a tool the
// daemon does not offer (a typo, or a tool that is disabled): they match
// nothing.
func warnUnknownApprovalTools(cfg *config.Config, reg *tools.Registry, log zerolog.Logger) {
	for key, patterns := range map[string][]string{"approvals.allow": cfg.Approvals.Allow, "approvals.ask": cfg.Approvals.Ask, "approvals.deny": cfg.Approvals.Deny} {
		for _, p := range patterns {
			if pd, ok := reg.PendingFor(p); ok {
				log.Warn().Str("key", key).Str("tool", p).Str("state", pd.State).Msg("an approvals rule names a tool of an MCP server that has not listed its tools yet; it applies once they are listed")
				continue
			}
			if _, ok := reg.Get(p); !ok && !tools.IsPattern(p) {
				log.Warn().Str("key", key).Str("tool", p).Msg("an approvals rule names a tool that is not offered; it matches nothing")
			}
		}
	}
}

// checkInitialTools refuses a tools.initial that names a tool the daemon
// does not offer, with the closest names. Under the default list a missing
// tool is one that config disabled (tools.shell.enabled): that is logged.
func checkInitialTools(cfg *config.Config, reg *tools.Registry, log zerolog.Logger) error {
	var names []string
	for _, r := range reg.List() {
		names = append(names, r.Tool.Name())
	}
	isDefault := slices.Equal(cfg.Tools.Initial, config.DefaultInitialTools())
	var problems []error
	for i, p := range cfg.Tools.Initial {
		if tools.IsPattern(p) {
			continue
		}
		if _, ok := reg.Get(p); ok {
			continue
		}
		if pd, ok := reg.PendingFor(p); ok {
			// Offered once the server lists its tools: Tasks created
			// before then start without it and can load it.
			log.Warn().Str("key", "tools.initial").Str("tool", p).Str("state", pd.State).Msg("a tool of the initial set is of an MCP server that has not listed its tools yet; Tasks start without it until then")
			continue
		}
		if isDefault {
			log.Info().Str("key", "tools.initial").Str("tool", p).Msg("a tool of the default initial set is not offered (disabled in config); Tasks start without it")
			continue
		}
		what := fmt.Sprintf("%q is not a tool this daemon offers", p)
		if close := taskstate.CloseNames(p, names, 3); len(close) > 0 {
			what += fmt.Sprintf(" (did you mean %s?)", strings.Join(close, ", "))
		}
		problems = append(problems, config.Problem{Where: fmt.Sprintf("tools.initial[%d]", i), What: what + "; lemo tools lists them"})
	}
	return config.Join(problems)
}

// announceProviders logs which providers can run Tasks and, when none can,
// what to do: the demo models, lemo models, Ollama or a key.
func announceProviders(ctx context.Context, provs *providers.Registry, log zerolog.Logger) {
	e := &doctorEnv{timeout: 10 * time.Second}
	results := e.checkProviders(ctx, provs)
	if ctx.Err() != nil {
		return
	}
	for _, r := range results {
		ev := log.Info()
		msg := "provider usable"
		if r.Status != checkOK {
			ev, msg = log.Warn(), "provider not usable"
			if r.Fix != "" {
				ev = ev.Str("fix", r.Fix)
			}
		}
		ev.Str("provider", strings.TrimPrefix(r.Check, "provider ")).Str("detail", r.Detail).Msg(msg)
	}
	if usable, fix := providerAdvice(results); len(usable) == 0 {
		log.Warn().Str("fix", fix).Msg("no model provider is usable: no Task can run")
	}
}

// holdFor is actors.Options.HoldFor for tasks.read_hold, where 0 means
// never (the option's 0 is its default).
func holdFor(d time.Duration) time.Duration {
	if d == 0 {
		return -1
	}
	return d
}
