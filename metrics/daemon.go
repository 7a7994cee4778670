package metrics

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bucket bounds (seconds) for model calls, tool calls and appends.
var (
	cycleBuckets  = []float64{0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300}
	toolBuckets   = []float64{0.001, 0.01, 0.1, 0.5, 1, 5, 10, 30, 60, 300, 1800}
	appendBuckets = []float64{0.0005, 0.001, 0.002, 0.005, 0.0075, 0.01, 0.015, 0.02, 0.025, 0.05, 0.1, 0.25, 1}
	batchBuckets  = []float64{1, 2, 4, 8, 16, 32, 64, 128, 256}
)

// providerClasses are the cycle outcomes that are provider errors.
var providerClasses = map[string]bool{
	"transient": true, "rate_limit": true, "quota": true, "auth": true,
	"model_not_found": true, "context_overflow": true, "bad_request": true,
}

// Daemon collects the daemon's own measurements. It implements
// actors.Observer, and its Commit method is the store's OnCommit.
type Daemon struct {
	cycles         *prometheus.CounterVec
	cycleSeconds   *prometheus.HistogramVec
	toolCalls      *prometheus.CounterVec
	toolSeconds    *prometheus.HistogramVec
	providerErrors *prometheus.CounterVec
	restarts       *prometheus.CounterVec
	decisions      *prometheus.CounterVec
	appendSeconds  *prometheus.HistogramVec
	batchSize      *prometheus.HistogramVec
	appended       *prometheus.CounterVec
	// MCP servers' tool calls (MCPCall).
	mcpCalls, mcpFailures *prometheus.CounterVec
	// Failed listings of MCP servers' tools (MCPListFailed).
	mcpListFails *prometheus.CounterVec
	ackSeconds   *prometheus.HistogramVec
	// Spend charged to Tasks' budgets (Spent).
	tokens, cost *prometheus.CounterVec
}

// NewDaemon registers the daemon's families on r.
func NewDaemon(r *Registry) *Daemon {
	return &Daemon{
		cycles:         r.NewCounter("lemo_cycles_total", "Model calls (Cycles) by provider and outcome.", "provider", "outcome"),
		cycleSeconds:   r.NewHistogram("lemo_cycle_duration_seconds", "Duration of model calls by provider.", cycleBuckets, "provider"),
		toolCalls:      r.NewCounter("lemo_tool_calls_total", "Tool calls by tool and outcome.", "tool", "outcome"),
		toolSeconds:    r.NewHistogram("lemo_tool_call_duration_seconds", "Duration of tool calls by tool.", toolBuckets, "tool"),
		providerErrors: r.NewCounter("lemo_provider_errors_total", "Failed model calls by provider and error class.", "provider", "class"),
		restarts:       r.NewCounter("lemo_actor_restarts_total", "Task actor crashes by supervision decision (restart or stop).", "directive"),
		decisions:      r.NewCounter("lemo_supervision_decisions_total", "Supervision decisions about actors that failed, by level (cycle, tool, session, task, child_task) and directive (restart, stop).", "level", "directive"),
		appendSeconds:  r.NewHistogram("lemo_append_latency_seconds", "Time from an append's submission to its durable acknowledgement (oldest of each commit).", appendBuckets),
		batchSize:      r.NewHistogram("lemo_append_batch_size", "Appends acknowledged by one commit.", batchBuckets),
		appended:       r.NewCounter("lemo_events_appended_total", "Events durably appended."),
		mcpCalls:       r.NewCounter("lemo_mcp_calls_total", "Calls of MCP servers' tools by server and outcome (ok, tool_error, error, unknown, timeout, cancelled, invalid, unavailable).", "server", "outcome"),
		mcpFailures:    r.NewCounter("lemo_mcp_failures_total", "Calls of MCP servers' tools that failed (every outcome but ok), by server.", "server"),
		mcpListFails:   r.NewCounter("lemo_mcp_list_failures_total", "Failed listings of an MCP server's tools (at the daemon's start and each background retry while it is not up), by server.", "server"),
		ackSeconds:     r.NewHistogram("lemo_append_ack_seconds", "Time from each append's submission to its durable acknowledgement.", appendBuckets),
		tokens:         r.NewCounter("lemo_model_tokens_total", "Tokens charged to Tasks' budgets by provider and model; estimated=true where no usage was reported and the reservation (or a tool's estimate) stands.", "provider", "model", "estimated"),
		cost:           r.NewCounter("lemo_model_cost_usd_total", "Cost in US dollars charged to Tasks' budgets by provider and model (models with a known price); estimated as for lemo_model_tokens_total.", "provider", "model", "estimated"),
	}
}

// CycleDone implements actors.Observer.
func (d *Daemon) CycleDone(provider, model, outcome string, took time.Duration) {
	d.cycles.WithLabelValues(provider, outcome).Inc()
	d.cycleSeconds.WithLabelValues(provider).Observe(took.Seconds())
	if providerClasses[outcome] {
		d.providerErrors.WithLabelValues(provider, outcome).Inc()
	}
}

// ToolDone implements actors.Observer.
func (d *Daemon) ToolDone(tool, outcome string, took time.Duration) {
	d.toolCalls.WithLabelValues(tool, outcome).Inc()
	d.toolSeconds.WithLabelValues(tool).Observe(took.Seconds())
}

// Supervised implements actors.Observer. A decision about a Task's actor
// (a root or a child Task) also counts in lemo_actor_restarts_total.
func (d *Daemon) Supervised(level, directive string) {
	d.decisions.WithLabelValues(level, directive).Inc()
	if level == "task" || level == "child_task" {
		d.restarts.WithLabelValues(directive).Inc()
	}
}

// Commit records one commit of the store (persistence.Options.OnCommit).
func (d *Daemon) Commit(appends, events int, wait time.Duration) {
	d.appendSeconds.WithLabelValues().Observe(wait.Seconds())
	d.batchSize.WithLabelValues().Observe(float64(appends))
	d.appended.WithLabelValues().Add(float64(events))
}

// MCPCall counts one call of an MCP server's tool (mcp.Observer).
func (d *Daemon) MCPCall(server, outcome string) {
	d.mcpCalls.WithLabelValues(server, outcome).Inc()
	if outcome != "ok" {
		d.mcpFailures.WithLabelValues(server).Inc()
	}
}

// MCPListFailed counts one failed listing of an MCP server's tools
// (mcp.Observer).
func (d *Daemon) MCPListFailed(server string) { d.mcpListFails.WithLabelValues(server).Inc() }

// Ack records one acknowledged append (persistence.Options.OnAck).
func (d *Daemon) Ack(wait time.Duration) { d.ackSeconds.WithLabelValues().Observe(wait.Seconds()) }

// Spent implements actors.SpendObserver.
func (d *Daemon) Spent(provider, model string, tokens, costNanoUSD uint64, estimated bool) {
	e := "false"
	if estimated {
		e = "true"
	}
	d.tokens.WithLabelValues(provider, model, e).Add(float64(tokens))
	if costNanoUSD > 0 {
		d.cost.WithLabelValues(provider, model, e).Add(float64(costNanoUSD) / 1e9)
	}
}
