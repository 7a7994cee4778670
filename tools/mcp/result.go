package mcp

import (
	"encoding/json"
	"strings"

	gomcp "github.com/modelcontextprotocol/go-sdk/mcp"

	"lemo/excerpt"
	"lemo/tools/delegate"
)

// Output is what a call of an MCP tool returns to the Task: the server's
// text and structured content, cleaned and bounded, and its other content
// (images, audio, resources) as metadata with sizes, never their bytes.
type Output struct {
	Server string `json:"server"`
	Tool   string `json:"tool"`
	// IsError: the server reported the call as failed (its text says why).
	IsError bool `json:"is_error,omitempty"`
	// Text joins the text content, cleaned and cut to the bound (head and
	// tail around a marker); TextBytes is its size before.
	Text      string `json:"text"`
	TextBytes int    `json:"text_bytes"`
	Truncated bool   `json:"truncated,omitempty"`
	// Structured is the structured content when it fits the bound;
	// StructuredBytes is its size, StructuredOmitted says it did not fit.
	Structured        json.RawMessage `json:"structured,omitempty"`
	StructuredBytes   int             `json:"structured_bytes,omitempty"`
	StructuredOmitted bool            `json:"structured_omitted,omitempty"`
	// Content lists the other content; ContentOmitted counts the items
	// beyond maxItems.
	Content        []Item `json:"content,omitempty"`
	ContentOmitted int    `json:"content_omitted,omitempty"`
}

// Item is one non-text content item of a result, described, not carried.
type Item struct {
	Type     string `json:"type"`
	MIMEType string `json:"mime_type,omitempty"`
	URI      string `json:"uri,omitempty"`
	Name     string `json:"name,omitempty"`
	// Bytes is the size of its data (decoded), or of a linked resource
	// when the server says it; -1 when unknown.
	Bytes int64 `json:"bytes"`
}

// maxItems bounds the content items listed; maxField bounds each string
// of an item.
const (
	maxItems = 64
	maxField = 256
)

// resultSchema is the JSON Schema of Output.
var resultSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "server": {"type": "string"},
    "tool": {"type": "string"},
    "is_error": {"type": "boolean"},
    "text": {"type": "string"},
    "text_bytes": {"type": "integer", "minimum": 0},
    "truncated": {"type": "boolean"},
    "structured": {},
    "structured_bytes": {"type": "integer", "minimum": 0},
    "structured_omitted": {"type": "boolean"},
    "content": {"type": "array", "items": {
      "type": "object",
      "properties": {
        "type": {"type": "string"}, "mime_type": {"type": "string"}, "uri": {"type": "string"},
        "name": {"type": "string"}, "bytes": {"type": "integer"}
      },
      "required": ["type", "bytes"]
    }},
    "content_omitted": {"type": "integer", "minimum": 0}
  },
  "required": ["server", "tool", "text", "text_bytes"]
}`)

// stateSchema is the JSON Schema of the live state a call emits: the
// server's progress notifications.
var stateSchema = json.RawMessage(`{
  "type": "object",
  "properties": {
    "progress": {"type": "number"},
    "total": {"type": "number"},
    "message": {"type": "string"}
  },
  "required": ["progress"]
}`)

// Progress is one live state update: an MCP progress notification.
type Progress struct {
	Progress float64 `json:"progress"`
	Total    float64 `json:"total,omitempty"`
	Message  string  `json:"message,omitempty"`
}

// mapResult turns a server's result into an Output whose text and
// structured content each hold at most max bytes.
func mapResult(server, tool string, r *gomcp.CallToolResult, max int) Output {
	out := Output{Server: server, Tool: tool, IsError: r.IsError}
	var texts []string
	size := 0
	for _, c := range r.Content {
		var it Item
		switch c := c.(type) {
		case *gomcp.TextContent:
			// Keep collecting only while the joined text can still matter:
			// Bound keeps head and tail, so the sizes of the rest count.
			texts = append(texts, c.Text)
			size += len(c.Text)
			continue
		case *gomcp.ImageContent:
			it = Item{Type: "image", MIMEType: c.MIMEType, Bytes: int64(len(c.Data))}
		case *gomcp.AudioContent:
			it = Item{Type: "audio", MIMEType: c.MIMEType, Bytes: int64(len(c.Data))}
		case *gomcp.ResourceLink:
			it = Item{Type: "resource_link", MIMEType: c.MIMEType, URI: c.URI, Name: c.Name, Bytes: -1}
			if c.Size != nil {
				it.Bytes = *c.Size
			}
		case *gomcp.EmbeddedResource:
			it = Item{Type: "resource", Bytes: -1}
			if res := c.Resource; res != nil {
				it.URI, it.MIMEType = res.URI, res.MIMEType
				it.Bytes = int64(len(res.Text) + len(res.Blob))
			}
		default:
			it = Item{Type: "unknown", Bytes: -1}
		}
		if len(out.Content) >= maxItems {
			out.ContentOmitted++
			continue
		}
		it.Type, it.MIMEType = delegate.Short(it.Type, maxField), delegate.Short(it.MIMEType, maxField)
		it.URI, it.Name = delegate.Short(it.URI, maxField), delegate.Short(it.Name, maxField)
		out.Content = append(out.Content, it)
	}
	joined := strings.Join(texts, "\n")
	out.TextBytes = len(joined)
	out.Text, out.Truncated = delegate.Bound(joined, max)
	if r.StructuredContent != nil {
		if b, err := json.Marshal(r.StructuredContent); err == nil {
			out.StructuredBytes = len(b)
			if len(b) <= max {
				out.Structured = b
			} else {
				out.StructuredOmitted = true
			}
		}
	}
	return out
}

// Retain modes: what of a result is kept in the Task's history.
const (
	RetainExcerpt = "excerpt" // the text cut to RetainBytes, small structured content, the metadata
	RetainFull    = "full"    // the whole (bounded) output
	RetainNone    = "none"    // nothing: it reads as unavailable after a restart
)

// retain selects what of output is persisted under mode, within limit
// bytes of text and structured content for RetainExcerpt.
func retain(mode string, limit int, output json.RawMessage) json.RawMessage {
	switch mode {
	case RetainNone:
		return nil
	case RetainFull:
		return output
	}
	var o Output
	if err := json.Unmarshal(output, &o); err != nil {
		return nil
	}
	if len(o.Text) > limit {
		o.Text = excerpt.Fit(o.Text, limit)
		o.Truncated = true
	}
	if len(o.Structured) > limit {
		o.Structured, o.StructuredOmitted = nil, true
	}
	b, err := json.Marshal(o)
	if err != nil {
		return nil
	}
	return b
}
