package main

import (
	"fmt"
	"path/filepath"

	"github.com/rs/zerolog"

	"lemo/config"
	"lemo/tools"
	"lemo/tools/delegate"
)

// appendDelegateTools adds the delegate tools (delegate.run and
// delegate.sessions) to all when the configuration enables them. Lemo's
// private delegate folder is <data>/delegate; the agent's environment is
// built from environ (os.Environ()) by the delegate package's allow-list.
func appendDelegateTools(all []tools.Tool, cfg *config.Config, environ []string, procs toolProcs, log zerolog.Logger) ([]tools.Tool, error) {
	d := cfg.Delegate
	if !d.Enabled {
		return all, nil
	}
	if ps := d.Problems(); len(ps) > 0 {
		return nil, config.Join(ps)
	}
	data, err := filepath.Abs(cfg.Data)
	if err != nil {
		return nil, fmt.Errorf("delegate: data folder %s: %w", cfg.Data, err)
	}
	dt, err := delegate.New(delegate.Config{
		Kind:           d.Kind,
		Binary:         d.Binary,
		Args:           d.Args,
		Dir:            filepath.Join(data, "delegate"),
		Environ:        environ,
		RunTag:         procs.runTag,
		Namespaces:     procs.in(filepath.Join(data, "delegate")),
		PassEnv:        d.PassEnv,
		SetEnv:         d.SetEnv,
		Approval:       d.Approval,
		StartTimeout:   d.StartTimeout,
		CommandTimeout: d.CommandTimeout,
		RunTimeout:     d.RunTimeout,
		MaxRunTimeout:  d.MaxRunTimeout,
		ExitGrace:      d.ExitGrace,
		KillGrace:      d.KillGrace,
		MaxLineBytes:   d.MaxLineBytes,
		Log:            log.With().Str("tool", "delegate").Logger(),
	})
	if err != nil {
		return nil, err
	}
	return append(all, dt.List()...), nil
}

// delegateCatalog is the delegate's session discovery for the operator
// surfaces (lemo sessions, the console), found through the registered
// delegate.sessions tool; nil when the delegate is not configured.
func delegateCatalog(reg *tools.Registry) *delegate.Catalog {
	r, ok := reg.Get(delegate.SessionsName)
	if !ok {
		return nil
	}
	st, ok := r.Tool.(*delegate.SessionsTool)
	if !ok {
		return nil
	}
	return st.Catalog()
}
