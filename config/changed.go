package config

import "reflect"

// Changed returns the paths of the keys ("tasks.max_cycles") whose values
// differ between a and b, in declaration order. cmd/lemo uses it when it
// re-reads the configuration on SIGHUP; it never returns values, so secrets
// stay out of logs.
func Changed(a, b *Config) []string {
	va, vb := reflect.ValueOf(a).Elem(), reflect.ValueOf(b).Elem()
	var out []string
	for _, k := range Keys() {
		if k.field == nil {
			continue // a named section's key: compared below
		}
		if format(va.FieldByIndex(k.field)) != format(vb.FieldByIndex(k.field)) {
			out = append(out, k.Path)
		}
	}
	if !reflect.DeepEqual(a.MCP, b.MCP) {
		out = append(out, "mcp.servers")
	}
	return out
}
