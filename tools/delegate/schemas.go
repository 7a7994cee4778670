package delegate

// JSON Schemas of the delegate tools.

const runInputSchema = `{
  "type": "object",
  "properties": {
    "prompt": {"type": "string", "minLength": 1, "maxLength": 262144,
      "description": "The complete job for the agent: what to do, where, and how to know it is done."},
    "resume": {"type": "string", "pattern": "^[A-Za-z0-9][A-Za-z0-9_-]{0,127}$",
      "description": "Optional: the session_id of an earlier delegate session of this Task to continue."},
    "timeout_seconds": {"type": "integer", "minimum": 1, "maximum": 86400,
      "description": "Optional: the longest the run may take; the agent is then aborted."}
  },
  "required": ["prompt"],
  "additionalProperties": false
}`

const steerSchema = `{
  "type": "object",
  "properties": {
    "kind": {"enum": ["steer", "follow_up", "abort"],
      "description": "steer: deliver a message after the agent's current tool calls; follow_up: a message for when it would stop; abort: stop the current run."},
    "message": {"type": "string", "minLength": 1, "maxLength": 65536}
  },
  "required": ["kind"],
  "additionalProperties": false,
  "if": {"properties": {"kind": {"const": "abort"}}},
  "then": {"not": {"required": ["message"]}},
  "else": {"required": ["message"]}
}`

const usageSchema = `{
  "type": "object",
  "properties": {
    "input": {"type": "integer"}, "output": {"type": "integer"},
    "cache_read": {"type": "integer"}, "cache_write": {"type": "integer"},
    "total_tokens": {"type": "integer"}, "cost": {"type": "number"}
  },
  "required": ["input", "output", "cache_read", "cache_write", "total_tokens", "cost"]
}`

const stateSchema = `{
  "type": "object",
  "properties": {
    "phase": {"enum": ["starting", "running", "finishing", "ended"]},
    "invocation": {"type": "string"},
    "session_id": {"type": "string"},
    "resumed": {"type": "boolean"},
    "pid": {"type": "integer"},
    "elapsed_ms": {"type": "integer"},
    "events": {"type": "array", "maxItems": 64, "items": {
      "type": "object",
      "properties": {"type": {"type": "string"}, "text": {"type": "string", "maxLength": 8192}},
      "required": ["type"]
    }},
    "dropped_events": {"type": "integer"},
    "usage": ` + usageSchema + `
  },
  "required": ["phase", "invocation", "elapsed_ms", "events", "usage"]
}`

const resultSchema = `{
  "type": "object",
  "properties": {
    "invocation": {"type": "string"},
    "session_id": {"type": "string"},
    "resumed": {"type": "boolean"},
    "kind": {"enum": ["pi", "omp"]},
    "status": {"enum": ["finished", "aborted", "failed", "timed_out"]},
    "stop_reason": {"type": "string"},
    "error": {"type": "string"},
    "final_answer": {"type": "string"},
    "final_answer_truncated": {"type": "boolean"},
    "summary": {
      "type": "object",
      "properties": {
        "tools": {"type": "array", "maxItems": 20},
        "usage": ` + usageSchema + `
      },
      "required": ["turns", "tool_executions", "tools", "usage"]
    },
    "exit": {
      "type": "object",
      "properties": {
        "code": {"type": "integer"}, "signal": {"type": "string"},
        "term": {"type": "boolean"}, "kill": {"type": "boolean"},
        "stragglers": {"type": "integer"}, "stderr": {"type": "string"}
      },
      "required": ["code"]
    },
    "duration_ms": {"type": "integer"}
  },
  "required": ["invocation", "kind", "status", "final_answer", "summary", "duration_ms"]
}`

const sessionsInputSchema = `{"type": "object", "properties": {}, "additionalProperties": false}`

const sessionsResultSchema = `{
  "type": "object",
  "properties": {
    "sessions": {"type": "array", "maxItems": 50, "items": {
      "type": "object",
      "properties": {
        "session_id": {"type": "string"}, "created": {"type": "string"}, "modified": {"type": "string"},
        "bytes": {"type": "integer"}, "first_prompt": {"type": "string"}, "running": {"type": "boolean"}
      },
      "required": ["session_id", "modified", "running"]
    }},
    "omitted": {"type": "integer"}
  },
  "required": ["sessions"]
}`
