// Package config holds the daemon's configuration: its types and defaults,
// the YAML file (lemo.yaml), the LEMO_* environment and command-line
// flags, and strict validation that reports every problem at once with its
// field path.
//
// Every key is declared once, on its struct field: `yaml` names it in the
// file, `env` names its variable, `help` describes it. The README's
// configuration table is generated from these declarations (Table), so the
// two cannot drift.
//
// Lifecycle:
//  1. Default returns the built-in values.
//  2. LoadFile merges a YAML file over them; unknown keys are errors that name
//     the key and the accepted ones.
//  3. ApplyEnv merges LEMO_* variables (and the conventional provider key
//     variables); an unknown LEMO_* variable is an error.
//  4. cmd/lemo applies its flags.
//  5. Validate checks everything and returns all problems together.
//
// Example:
//
//	cfg := config.Default()
//	errs := cfg.LoadFile("lemo.yaml")
//	errs = append(errs, cfg.ApplyEnv(os.Environ())...)
//	errs = append(errs, cfg.Validate()...)
//	if len(errs) > 0 { return config.Join(errs) }
package config
