package config

import (
	"time"
)

// Config is the daemon's configuration.
type Config struct {
	// Data is the data folder: the store, workspaces, the token and
	// daemon.json; "" is the user's data home (see DataFolder).
	Data string `yaml:"data" env:"LEMO_DATA" flag:"data" help:"the data folder: the store, workspaces, token and daemon.json; empty: $XDG_DATA_HOME/lemo, else ~/.local/share/lemo (else ./lemo-data without a home)"`
	Log  Log    `yaml:"log"`
	// Listen is the remote API's address.
	Listen     string     `yaml:"listen" env:"LEMO_LISTEN" flag:"listen" help:"address of the remote API (loopback unless TLS is configured)"`
	TLS        TLS        `yaml:"tls"`
	Auth       Auth       `yaml:"auth"`
	Tasks      Tasks      `yaml:"tasks"`
	Models     Models     `yaml:"models"`
	Providers  Providers  `yaml:"providers"`
	Tools      Tools      `yaml:"tools"`
	Approvals  Approvals  `yaml:"approvals"`
	Delegate   Delegate   `yaml:"delegate"`
	Storage    Storage    `yaml:"storage"`
	Live       Live       `yaml:"live"`
	HTTP       HTTP       `yaml:"http"`
	Remote     Remote     `yaml:"remote"`
	Workspaces Workspaces `yaml:"workspaces"`
	// MCP: tools from MCP servers (tools/mcp).
	MCP     MCP     `yaml:"mcp"`
	Budgets Budgets `yaml:"budgets"`
	Pricing Pricing `yaml:"pricing"`
	// Memory: recall's reuse and its optional semantic part.
	Memory Memory `yaml:"memory"`
}

// Log configures logging.
type Log struct {
	Level  string `yaml:"level" env:"LEMO_LOG_LEVEL" flag:"log-level" help:"trace, debug, info, warn or error"`
	Format string `yaml:"format" env:"LEMO_LOG_FORMAT" help:"auto (console on a terminal, else JSON), console or json"`
	Output string `yaml:"output" env:"LEMO_LOG_OUTPUT" help:"where lemo serve writes its log: stderr or stdout"`
}

// Log outputs.
const (
	LogStderr = "stderr"
	LogStdout = "stdout"
)

// TLS configures the remote API's transport security.
type TLS struct {
	Cert     string `yaml:"cert" env:"LEMO_TLS_CERT" help:"server certificate (PEM); required to listen on a non-loopback address"`
	Key      string `yaml:"key" env:"LEMO_TLS_KEY" help:"server private key (PEM)"`
	ClientCA string `yaml:"client_ca" env:"LEMO_TLS_CLIENT_CA" help:"CA (PEM) that client certificates must chain to; empty: no client certificates"`
}

// Auth configures the tokens remote clients present. Each token stands for
// one owner, or for an operator who sees every owner's Tasks.
type Auth struct {
	Token      string `yaml:"token" env:"LEMO_AUTH_TOKEN" help:"the operator token; empty: generated at first start into the data folder (file token, mode 0600); never logged"`
	Owner      string `yaml:"owner" env:"LEMO_AUTH_OWNER" help:"owner of the Tasks created with an operator token"`
	TokensFile string `yaml:"tokens_file" env:"LEMO_AUTH_TOKENS_FILE" help:"file of more tokens, one \"owner token\" per line (owner * for an operator); must be mode 0600"`
}

// Tasks configures how Tasks run.
type Tasks struct {
	MaxCycles        int           `yaml:"max_cycles" env:"LEMO_TASKS_MAX_CYCLES" help:"model calls a Task may make without new input before it pauses"`
	MaxParallelTools int           `yaml:"max_parallel_tools" env:"LEMO_TASKS_MAX_PARALLEL_TOOLS" help:"tool calls of one Task that run at once"`
	ToolGrace        time.Duration `yaml:"tool_grace" env:"LEMO_TASKS_TOOL_GRACE" help:"how long a cancelled tool may take to stop before its outcome is recorded as unknown"`
	IdleTimeout      time.Duration `yaml:"idle_timeout" env:"LEMO_TASKS_IDLE_TIMEOUT" help:"an idle Task leaves memory after this long"`
	ReadHold         time.Duration `yaml:"read_hold" env:"LEMO_TASKS_READ_HOLD" help:"how long a Task may hold the record of a model answer while the read-only calls it asks for run, so that the step is one commit (0 to 10s; 0: never, every call's start is recorded before it runs)"`
	ShutdownTimeout  time.Duration `yaml:"shutdown_timeout" env:"LEMO_TASKS_SHUTDOWN_TIMEOUT" help:"how long a shutdown waits for running work to stop"`
	Instructions     string        `yaml:"instructions" env:"LEMO_TASKS_INSTRUCTIONS" help:"system instructions for every model call; empty: the built-in ones"`
	Think            bool          `yaml:"think" env:"LEMO_TASKS_THINK" help:"ask reasoning-capable models to reason"`
	MaxRequestBytes  int           `yaml:"max_request_bytes" env:"LEMO_TASKS_MAX_REQUEST_BYTES" help:"largest accepted user message"`
	// Agent trees (tasks.spawn).
	MaxDepth           int `yaml:"max_depth" env:"LEMO_TASKS_MAX_DEPTH" help:"deepest a child Task may be (a Task started by a person is depth 0)"`
	MaxChildren        int `yaml:"max_children" env:"LEMO_TASKS_MAX_CHILDREN" help:"child Tasks one Task may spawn"`
	MaxRunningChildren int `yaml:"max_running_children" env:"LEMO_TASKS_MAX_RUNNING_CHILDREN" help:"child Tasks that run at once daemon-wide; later spawns queue until one ends"`
}

// Models configures model selection.
type Models struct {
	Default string `yaml:"default" env:"LEMO_MODEL" help:"model used when a request names none (provider/model)"`
}

// Providers configures the model vendors. Local Ollama is used unless
// disabled; the others are used once they have an API key (the plain
// OpenAI-compatible provider: a base URL), unless disabled.
type Providers struct {
	Ollama      Provider `yaml:"ollama" env:"OLLAMA" help:"local Ollama"`
	OllamaCloud Provider `yaml:"ollama_cloud" env:"OLLAMA_CLOUD" help:"Ollama Cloud"`
	OpenRouter  Provider `yaml:"openrouter" env:"OPENROUTER" help:"OpenRouter"`
	NVIDIA      Provider `yaml:"nvidia" env:"NVIDIA" help:"NVIDIA NIM"`
	Zen         Provider `yaml:"zen" env:"ZEN" help:"OpenCode Zen"`
	OpenAI      Provider `yaml:"openai" env:"OPENAI" help:"an OpenAI-compatible server (set base_url)"`
	Fake        Fake     `yaml:"fake"`
}

// Provider configures one model vendor. The env tag of the enclosing field
// names the vendor in its variables (LEMO_<VENDOR>_BASE_URL, ...).
type Provider struct {
	Disabled bool          `yaml:"disabled" env:"DISABLED" help:"do not use this provider even when configured"`
	BaseURL  string        `yaml:"base_url" env:"BASE_URL" help:"API base URL; empty: the provider's usual address"`
	APIKey   string        `yaml:"api_key" env:"API_KEY" help:"API key; prefer the provider's conventional variable; never logged"`
	Timeout  time.Duration `yaml:"timeout" env:"TIMEOUT" help:"connect and response-header timeout"`
	// IdleTimeout gives up a stream that sends nothing for this long.
	IdleTimeout time.Duration `yaml:"idle_timeout" env:"IDLE_TIMEOUT" help:"a model stream that sends nothing for this long fails (transient, retried only before output)"`
	Models      []string      `yaml:"models" env:"MODELS" help:"allow-list of model names (comma-separated in the environment); empty: all"`
	CacheTTL    time.Duration `yaml:"cache_ttl" env:"CACHE_TTL" help:"how long a model listing is reused"`
	// NumCtx caps the context window Lemo requests (Ollama num_ctx); 0: the
	// model's own window.
	NumCtx       int           `yaml:"num_ctx" env:"NUM_CTX" help:"cap on the context window requested (Ollama num_ctx); 0: the model's window"`
	MaxRetries   int           `yaml:"max_retries" env:"MAX_RETRIES" help:"attempts for transient and rate-limit failures before any output"`
	MaxRetryWait time.Duration `yaml:"max_retry_wait" env:"MAX_RETRY_WAIT" help:"longest Retry-After honoured; longer fails at once"`
}

// Fake configures the scripted demo provider (no network).
type Fake struct {
	Enabled bool `yaml:"enabled" env:"LEMO_FAKE_ENABLED" help:"offer the scripted demo models fake/echo, fake/loop, fake/shell, ... (no network; see lemo models)"`
}

// Tools configures the built-in tools.
type Tools struct {
	Shell Shell `yaml:"shell"`
	// Namespaces: auto or off.
	Namespaces string `yaml:"namespaces" env:"LEMO_TOOLS_NAMESPACES" help:"run tool processes (shell, delegate) in PID and mount namespaces of their own, so that they see no other process and none outlives its call: auto (where the kernel allows; lemo doctor and the log say) or off"`
	// Initial is the tool set a Task starts with unless lemo run --tools
	// fixes it: tool names or patterns with "*".
	Initial []string `yaml:"initial" env:"LEMO_TOOLS_INITIAL" help:"tools a Task starts with unless lemo run --tools fixes its set: names or patterns (files.*; * for all); tools.search and tools.load are always added, and the Task loads others with them"`
}

// Shell configures the shell tool's approval policy and limits.
type Shell struct {
	Enabled  bool          `yaml:"enabled" env:"LEMO_SHELL_ENABLED" help:"offer the shell tool"`
	Approval string        `yaml:"approval" env:"LEMO_SHELL_APPROVAL" help:"what a command matching no rule needs: ask, allow or deny"`
	Allow    []string      `yaml:"allow" env:"LEMO_SHELL_ALLOW" help:"command patterns that run without approval"`
	Ask      []string      `yaml:"ask" env:"LEMO_SHELL_ASK" help:"command patterns that need approval"`
	Deny     []string      `yaml:"deny" env:"LEMO_SHELL_DENY" help:"command patterns that are refused (deny always wins)"`
	Timeout  time.Duration `yaml:"timeout" env:"LEMO_SHELL_TIMEOUT" help:"longest a command may run"`
}

// DefaultInitialTools is tools.initial's default: the discovery tools, a
// file reader and the shell, about 900 estimated tokens of schemas (every
// tool's would be about 5,400), so that a model with a 4,096-token window
// can start a Task. cmd/lemo's tests hold it to 1,000 tokens.
func DefaultInitialTools() []string {
	return []string{"tools.search", "tools.load", "files.read", "shell.run"}
}

// Default returns the built-in configuration.
func Default() *Config {
	ollama := Provider{Timeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, CacheTTL: time.Minute, NumCtx: 32768, MaxRetries: 3, MaxRetryWait: 30 * time.Second}
	remote := Provider{Timeout: 30 * time.Second, IdleTimeout: 2 * time.Minute, CacheTTL: 10 * time.Minute, MaxRetries: 3, MaxRetryWait: 30 * time.Second}
	return &Config{
		Storage: Storage{MinFreeMiB: 512},
		Live:    Live{CallMiB: 8, TaskMiB: 32, TotalMiB: 256, SpillMiB: 256, SpillTotalMiB: 2048, PausedTimeout: 30 * time.Minute},
		Log:     Log{Level: "info", Format: "auto", Output: LogStderr},
		Listen:  "127.0.0.1:7465",
		Auth:    Auth{Owner: "local"},
		Tasks: Tasks{
			MaxCycles:        50,
			MaxParallelTools: 4,
			ToolGrace:        10 * time.Second,
			IdleTimeout:      time.Minute,
			ReadHold:         100 * time.Millisecond,
			ShutdownTimeout:  30 * time.Second,
			Think:            true,
			MaxRequestBytes:  256 << 10,

			MaxDepth:           3,
			MaxChildren:        8,
			MaxRunningChildren: 32,
		},
		Providers: Providers{
			Ollama:      ollama,
			OllamaCloud: remote,
			OpenRouter:  remote,
			NVIDIA:      remote,
			Zen:         remote,
			OpenAI:      remote,
		},
		Tools: Tools{Shell: Shell{Enabled: true, Approval: "ask", Timeout: 2 * time.Minute}, Namespaces: "auto", Initial: DefaultInitialTools()},
		Remote: Remote{MaxConnections: 256, ConnectionReserve: 32, AuthTimeout: 5 * time.Second,
			MaxSessions: 1024, MaxSessionsPerToken: 128, MaxSubscriptions: 8192, MaxSubscriptionsPerToken: 1024},
		Budgets: Budgets{OutputTokens: 4096, UnreportedToolTokens: 16384},
		Pricing: Pricing{Free: []string{"ollama", "fake"}},
		Memory:  Memory{RecallReuseCycles: 4, Embeddings: Embeddings{Batch: 16, Timeout: 10 * time.Second, QueryTimeout: 2 * time.Second, MinSimilarity: 0.5, MinMargin: 0.4}},
	}
}
