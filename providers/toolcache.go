package providers

import (
	"bytes"
	"encoding/json"
	"sync"
)

// toolSetsKept bounds the tool sets a ToolCache keeps: a daemon offers few
// distinct sets (one per allow-list in use), and a set falls out once
// toolSetsKept others were used after it.
const toolSetsKept = 16

// ToolCache keeps the wire encoding of the tool sets a provider was asked
// to offer, so that a request encodes its tool schemas (most of its bytes
// after a few turns, and the same on every call of a Task) once per tool
// set instead of on every call. A set is found by comparing the specs
// themselves (names, descriptions and schemas byte for byte), so a tool
// whose schema changed is encoded again. The zero value is ready; it is
// safe for concurrent use.
type ToolCache struct {
	mu   sync.Mutex
	sets []toolSet // most recently used first
}

type toolSet struct {
	specs   []ToolSpec
	encoded json.RawMessage
}

// Encoded returns encode(tools), from the cache when the same set was
// encoded before. An encoding error is returned and not kept. The result
// is shared: callers must not change it.
func (c *ToolCache) Encoded(tools []ToolSpec, encode func([]ToolSpec) (json.RawMessage, error)) (json.RawMessage, error) {
	c.mu.Lock()
	for i, s := range c.sets {
		if sameSpecs(s.specs, tools) {
			copy(c.sets[1:i+1], c.sets[:i])
			c.sets[0] = s
			c.mu.Unlock()
			return s.encoded, nil
		}
	}
	c.mu.Unlock()
	enc, err := encode(tools)
	if err != nil {
		return nil, err
	}
	kept := make([]ToolSpec, len(tools))
	for i, t := range tools {
		kept[i] = ToolSpec{Name: t.Name, Description: t.Description, Parameters: bytes.Clone(t.Parameters)}
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range c.sets {
		if sameSpecs(s.specs, tools) {
			return s.encoded, nil // encoded meanwhile by another call
		}
	}
	if len(c.sets) < toolSetsKept {
		c.sets = append(c.sets, toolSet{})
	}
	copy(c.sets[1:], c.sets[:len(c.sets)-1])
	c.sets[0] = toolSet{specs: kept, encoded: enc}
	return enc, nil
}

func sameSpecs(a, b []ToolSpec) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i].Name != b[i].Name || a[i].Description != b[i].Description || !bytes.Equal(a[i].Parameters, b[i].Parameters) {
			return false
		}
	}
	return true
}

// AppendField returns the JSON object obj with the field "name": value
// added at its end (value is JSON text, added as it is). obj must end with
// '}'; an empty object gets the field alone.
func AppendField(obj []byte, name string, value json.RawMessage) []byte {
	end := bytes.LastIndexByte(obj, '}')
	if end < 0 {
		return obj
	}
	out := make([]byte, 0, len(obj)+len(name)+len(value)+4)
	out = append(out, obj[:end]...)
	if len(bytes.TrimSpace(obj[:end])) > 1 {
		out = append(out, ',')
	}
	out = append(out, '"')
	out = append(out, name...)
	out = append(out, '"', ':')
	out = append(out, value...)
	return append(out, obj[end:]...)
}
