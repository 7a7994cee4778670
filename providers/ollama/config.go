package ollama

import (
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/rs/zerolog"

	"lemo/providers"
	"lemo/providers/openaicompat"
	"lemo/providers/retry"
)

// Conventional environment variables, read by cmd/lemo (never by this
// package).
const (
	EnvHost   = "OLLAMA_HOST"
	EnvAPIKey = "OLLAMA_API_KEY"
)

// Defaults.
const (
	DefaultName    = "ollama"
	DefaultBaseURL = "http://127.0.0.1:11434"
	// CloudBaseURL is Ollama Cloud's direct API (use with APIKey).
	CloudBaseURL = "https://ollama.com"
	// DefaultNumCtxCap caps the num_ctx sent for every model.
	DefaultNumCtxCap = 32768
	// DefaultTimeout bounds connecting and waiting for response headers,
	// which includes loading a local model into memory.
	DefaultTimeout  = 5 * time.Minute
	DefaultCacheTTL = 5 * time.Minute
	// MaxLineBytes is the default and largest NDJSON line limit (8 MB,
	// the api client's own).
	MaxLineBytes = 8 << 20
	// MaxResponseBytes and MaxToolCalls bound what one answer may
	// accumulate.
	MaxResponseBytes = 64 << 20
	MaxToolCalls     = 1024
)

// Config configures an Ollama provider (local daemon or Ollama Cloud).
type Config struct {
	// Name is the registry name (default "ollama"); register Ollama Cloud
	// under another, e.g. "ollama-cloud".
	Name string
	// BaseURL is the server root (default DefaultBaseURL; CloudBaseURL for
	// Ollama Cloud). ParseHost turns an OLLAMA_HOST value into one.
	BaseURL string
	// APIKey, when set, is sent as "Authorization: Bearer <key>" (Ollama
	// Cloud). It is never logged nor put in errors.
	APIKey string
	// Timeout bounds connecting and waiting for response headers (0 means
	// DefaultTimeout); IdleTimeout bounds the gaps of a stream.
	Timeout time.Duration
	// IdleTimeout bounds the gap between two reads of a stream: a stream
	// that sends nothing for this long fails as transient (0 means
	// providers.DefaultIdleTimeout).
	IdleTimeout time.Duration
	// Models, when not empty, is the allow-list of model names.
	Models []string
	// CacheTTL is how long discovery results are kept (0 means
	// DefaultCacheTTL, negative disables the cache).
	CacheTTL time.Duration
	// NumCtxCap caps the context window: Lemo sends num_ctx =
	// min(model window, NumCtxCap) on every chat (0 means
	// DefaultNumCtxCap).
	NumCtxCap int
	// MaxLineBytes caps one NDJSON line (0 and the maximum is
	// MaxLineBytes).
	MaxLineBytes int
	// Retry is the retry policy.
	Retry retry.Policy
	// HTTPClient, when set, supplies the transport (tests); its requests
	// still go through the wrapper that rewrites the host and adds auth.
	HTTPClient *http.Client
	// Log receives retries (warn); the zero Logger logs nothing.
	Log zerolog.Logger
}

// Validate reports every problem of c, naming the field.
func (c Config) Validate() error {
	const p = "ollama: Config."
	var errs []error
	if c.Name != "" && strings.Contains(c.Name, "/") {
		errs = append(errs, fmt.Errorf("%sName: %q is not accepted: want a registry name without '/'", p, c.Name))
	}
	if c.BaseURL != "" {
		if err := openaicompat.ValidateBaseURL(c.BaseURL); err != nil {
			errs = append(errs, fmt.Errorf("%sBaseURL: %w", p, err))
		}
	}
	if c.Timeout < 0 {
		errs = append(errs, fmt.Errorf("%sTimeout: want 0 (default %v) or a positive duration", p, DefaultTimeout))
	}
	if c.IdleTimeout < 0 {
		errs = append(errs, fmt.Errorf("%sIdleTimeout: want 0 (default %v) or a positive duration", p, providers.DefaultIdleTimeout))
	}
	if c.NumCtxCap < 0 || (c.NumCtxCap > 0 && c.NumCtxCap < 2048) {
		errs = append(errs, fmt.Errorf("%sNumCtxCap: %d is not accepted: want 0 (default %d) or at least 2048 tokens", p, c.NumCtxCap, DefaultNumCtxCap))
	}
	if c.MaxLineBytes < 0 || c.MaxLineBytes > MaxLineBytes {
		errs = append(errs, fmt.Errorf("%sMaxLineBytes: %d is not accepted: want 0 (default) up to %d", p, c.MaxLineBytes, MaxLineBytes))
	}
	for i, m := range c.Models {
		if strings.TrimSpace(m) == "" {
			errs = append(errs, fmt.Errorf("%sModels[%d]: empty model name", p, i))
		}
	}
	if err := c.Retry.Validate(p + "Retry."); err != nil {
		errs = append(errs, err)
	}
	return errors.Join(errs...)
}

// ParseHost turns an OLLAMA_HOST value into a base URL the way the ollama
// CLI does: a missing scheme means http (https for ollama.com), a missing
// port means 11434 for a bare host.
func ParseHost(s string) (string, error) {
	s = strings.TrimSpace(s)
	if s == "" {
		return DefaultBaseURL, nil
	}
	if !strings.Contains(s, "://") {
		host := strings.TrimRight(s, "/")
		if host == "ollama.com" {
			return CloudBaseURL, nil
		}
		if _, _, err := net.SplitHostPort(host); err != nil {
			host = net.JoinHostPort(strings.Trim(host, "[]"), "11434")
		}
		s = "http://" + host
	}
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", fmt.Errorf("ollama: %s=%q is not accepted: want host[:port] or http(s)://host[:port]", EnvHost, s)
	}
	return strings.TrimRight(u.String(), "/"), nil
}
