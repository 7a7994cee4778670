package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/rs/zerolog"

	"lemo/actors/services"
	"lemo/config"
	"lemo/providers"
	"lemo/providers/nvidia"
	"lemo/providers/ollama"
	"lemo/providers/openai"
	"lemo/providers/openrouter"
	"lemo/providers/retry"
	"lemo/providers/zen"
	"lemo/tools"
	"lemo/tools/discovery"
	"lemo/tools/files"
	"lemo/tools/isolation"
	"lemo/tools/shell"
	"lemo/tools/system"
)

// buildProviders registers every configured provider: local Ollama unless
// disabled, the others once they have a key (the plain OpenAI-compatible
// one: a base URL), unless disabled.
func buildProviders(cfg *config.Config, log zerolog.Logger) (*providers.Registry, error) {
	reg := providers.NewRegistry()
	p := &cfg.Providers
	policy := func(c config.Provider) retry.Policy {
		return retry.Policy{MaxAttempts: c.MaxRetries, MaxRetryAfter: c.MaxRetryWait}
	}
	plog := func(name string) zerolog.Logger { return log.With().Str("provider", name).Logger() }
	var errs []error
	add := func(prov providers.Provider, err error) {
		if err != nil {
			errs = append(errs, err)
			return
		}
		if err := reg.Register(prov); err != nil {
			errs = append(errs, err)
		}
	}
	if c := p.Ollama; !c.Disabled {
		add(ollama.New(ollama.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, Timeout: c.Timeout, IdleTimeout: c.IdleTimeout, Models: c.Models, CacheTTL: c.CacheTTL, NumCtxCap: c.NumCtx, Retry: policy(c), Log: plog("ollama")}))
	}
	if c := p.OllamaCloud; !c.Disabled && c.APIKey != "" {
		base := c.BaseURL
		if base == "" {
			base = ollama.CloudBaseURL
		}
		add(ollama.New(ollama.Config{Name: "ollama-cloud", BaseURL: base, APIKey: c.APIKey, Timeout: c.Timeout, IdleTimeout: c.IdleTimeout, Models: c.Models, CacheTTL: c.CacheTTL, NumCtxCap: c.NumCtx, Retry: policy(c), Log: plog("ollama-cloud")}))
	}
	if c := p.OpenRouter; !c.Disabled && c.APIKey != "" {
		add(openrouter.New(openrouter.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, Timeout: c.Timeout, IdleTimeout: c.IdleTimeout, Models: c.Models, CacheTTL: c.CacheTTL, Retry: policy(c), Log: plog("openrouter")}))
	}
	if c := p.NVIDIA; !c.Disabled && c.APIKey != "" {
		add(nvidia.New(nvidia.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, Timeout: c.Timeout, IdleTimeout: c.IdleTimeout, Models: c.Models, CacheTTL: c.CacheTTL, Retry: policy(c), Log: plog("nvidia")}))
	}
	if c := p.Zen; !c.Disabled && c.APIKey != "" {
		add(zen.New(zen.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, Timeout: c.Timeout, IdleTimeout: c.IdleTimeout, Models: c.Models, CacheTTL: c.CacheTTL, Retry: policy(c), Log: plog("zen")}))
	}
	if c := p.OpenAI; !c.Disabled && c.BaseURL != "" {
		add(openai.New(openai.Config{BaseURL: c.BaseURL, APIKey: c.APIKey, Timeout: c.Timeout, IdleTimeout: c.IdleTimeout, Models: c.Models, CacheTTL: c.CacheTTL, Retry: policy(c), Log: plog("openai")}))
	}
	if p.Fake.Enabled {
		add(demoProvider(), nil)
	}
	if len(errs) > 0 {
		return nil, config.Join(errs)
	}
	return reg, nil
}

// toolProcs is how the tools start their processes.
type toolProcs struct {
	// runTag is the data folder's run tag (isolation.RunTag).
	runTag string
	// namespaces, when set, starts them in namespaces of their own.
	namespaces *isolation.Namespaces
	// data is the data folder, which namespaces hide from them (but for
	// their own workspace and folders).
	data string
}

// in is where a tool's processes run: namespaces (if any) that hide the
// data folder except keep.
func (p toolProcs) in(keep ...string) *isolation.Namespaces {
	if p.namespaces == nil {
		return nil
	}
	var hide []string
	if p.data != "" {
		d := p.data
		if r, err := filepath.EvalSymlinks(d); err == nil {
			d = r
		}
		hide = []string{d}
		for i, k := range keep {
			if r, err := filepath.EvalSymlinks(k); err == nil {
				keep[i] = r
			}
		}
	}
	return p.namespaces.With(hide, keep)
}

// buildTools registers the built-in tools; system reaches the Services of
// svcs.
func buildTools(cfg *config.Config, log zerolog.Logger, svcs *services.Registry, procs toolProcs) (*tools.Registry, error) {
	reg := tools.NewRegistry()
	fileTools, err := files.New(files.DefaultConfig())
	if err != nil {
		return nil, err
	}
	all := append(fileTools, system.New(svcs))
	all = append(all, discovery.New()...)
	if cfg.Providers.Fake.Enabled {
		all = append(all, tickTool{})
	}
	if s := cfg.Tools.Shell; s.Enabled {
		sh, err := shell.New(shell.Config{
			MaxTimeout: s.Timeout,
			Environ:    os.Environ(),
			RunTag:     procs.runTag,
			Namespaces: procs.in(),
			Policy:     shell.Policy{Allow: s.Allow, Ask: s.Ask, Deny: s.Deny, Default: shell.Decision(s.Approval)},
		})
		if err != nil {
			return nil, fmt.Errorf("tools.shell: %w", err)
		}
		all = append(all, sh)
	}
	if all, err = appendDelegateTools(all, cfg, os.Environ(), procs, log); err != nil {
		return nil, err
	}
	for _, t := range all {
		if err := reg.Register(t); err != nil {
			return nil, err
		}
	}
	return reg, nil
}
