package config

import (
	"errors"
	"fmt"
	"os"
	"reflect"
	"sort"
	"strconv"
	"strings"
	"time"

	"go.yaml.in/yaml/v3"

	"lemo/internal/didyoumean"
)

// Problem is one configuration error, located by its field path
// ("tasks.max_cycles"), variable or flag.
type Problem struct {
	Where string
	What  string
}

func (p Problem) Error() string { return p.Where + ": " + p.What }

// Join turns problems into one error listing all of them; nil when none.
func Join(problems []error) error {
	if len(problems) == 0 {
		return nil
	}
	var b strings.Builder
	fmt.Fprintf(&b, "invalid configuration (%d problem", len(problems))
	if len(problems) > 1 {
		b.WriteString("s")
	}
	b.WriteString("):")
	for _, p := range problems {
		b.WriteString("\n  - ")
		b.WriteString(p.Error())
	}
	return errors.New(b.String())
}

// LoadFile merges the YAML file at path over c. A missing file, invalid
// YAML, unknown keys and values of the wrong type are problems; all of them
// are reported.
func (c *Config) LoadFile(path string) []error {
	data, err := os.ReadFile(path)
	if err != nil {
		return []error{Problem{Where: path, What: err.Error()}}
	}
	return c.LoadYAML(path, data)
}

// LoadYAML is LoadFile for bytes; name locates problems.
func (c *Config) LoadYAML(name string, data []byte) []error {
	var root yaml.Node
	if err := yaml.Unmarshal(data, &root); err != nil {
		return []error{Problem{Where: name, What: "not valid YAML: " + err.Error()}}
	}
	if len(root.Content) == 0 {
		return nil // an empty file
	}
	doc := root.Content[0]
	var problems []error
	typed := map[int]bool{}
	walkNode(doc, reflect.TypeOf(*c), "", name, &problems, typed)
	// Decoding ignores unknown keys, so the known ones still apply and
	// Validate can report their problems in the same run.
	if err := doc.Decode(c); err != nil {
		// Only the type errors walkNode did not already report with
		// their key paths (values inside lists and maps).
		if what := typeErrors(err, typed); what != "" {
			problems = append(problems, Problem{Where: name, What: what})
		}
	}
	return problems
}

// walkNode reports unknown keys and non-mapping values where a section is
// expected, with their paths and lines.
func walkNode(n *yaml.Node, t reflect.Type, path, file string, problems *[]error, typed map[int]bool) {
	if t.Kind() == reflect.Map && t.Elem().Kind() == reflect.Struct {
		// Named sections of the same keys (mcp.servers.<name>).
		if n.Kind != yaml.MappingNode {
			if n.Tag != "!!null" {
				*problems = append(*problems, Problem{Where: where(file, path, n), What: "want named sections of keys (" + strings.Join(keysOf(t.Elem()), ", ") + ")"})
			}
			return
		}
		for i := 0; i+1 < len(n.Content); i += 2 {
			walkNode(n.Content[i+1], t.Elem(), join(path, n.Content[i].Value), file, problems, typed)
		}
		return
	}
	if t.Kind() != reflect.Struct {
		return
	}
	if n.Kind != yaml.MappingNode {
		if n.Tag == "!!null" {
			return
		}
		*problems = append(*problems, Problem{Where: where(file, path, n), What: "want a section of keys (" + strings.Join(keysOf(t), ", ") + ")"})
		return
	}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		f, ok := fieldByYAML(t, k.Value)
		p := join(path, k.Value)
		if !ok {
			*problems = append(*problems, Problem{Where: where(file, p, k), What: "unknown key; accepted here: " + strings.Join(keysOf(t), ", ")})
			continue
		}
		if f.Type.Kind() != reflect.Struct && v.Kind == yaml.ScalarNode && v.Tag != "!!null" {
			// A value of the wrong type, reported with its key path (the
			// decoder's own message names only the line).
			if err := v.Decode(reflect.New(f.Type).Interface()); err != nil {
				*problems = append(*problems, Problem{Where: where(file, p, v), What: "want " + typeWord(f.Type) + ", got " + strconv.Quote(v.Value)})
				typed[v.Line] = true
				continue
			}
		}
		walkNode(v, f.Type, p, file, problems, typed)
	}
}

// typeWord names a configuration value's type as people read it.
func typeWord(t reflect.Type) string {
	if t == reflect.TypeOf(time.Duration(0)) {
		return "a duration such as 30s or 5m"
	}
	switch t.Kind() {
	case reflect.Bool:
		return "true or false"
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return "a whole number"
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return "a whole number of at least 0"
	case reflect.Float32, reflect.Float64:
		return "a number"
	case reflect.String:
		return "a string"
	case reflect.Slice:
		return "a list"
	case reflect.Map:
		return "a section of keys"
	case reflect.Pointer:
		return typeWord(t.Elem())
	}
	return t.String()
}

func where(file, path string, n *yaml.Node) string {
	if path == "" {
		path = "(top level)"
	}
	return fmt.Sprintf("%s:%d: %s", file, n.Line, path)
}

// typeErrors is the decoder's message without the lines already reported
// (skip).
func typeErrors(err error, skip map[int]bool) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return err.Error()
	}
	var out []string
	for _, e := range te.Errors {
		var line int
		if _, serr := fmt.Sscanf(e, "line %d:", &line); serr == nil && skip[line] {
			continue
		}
		out = append(out, e)
	}
	return strings.Join(out, "; ")
}

func join(path, key string) string {
	if path == "" {
		return key
	}
	return path + "." + key
}

func fieldByYAML(t reflect.Type, key string) (reflect.StructField, bool) {
	for i := 0; i < t.NumField(); i++ {
		f := t.Field(i)
		if yamlName(f) == key {
			return f, true
		}
	}
	return reflect.StructField{}, false
}

func yamlName(f reflect.StructField) string {
	name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
	return name
}

func keysOf(t reflect.Type) []string {
	var out []string
	for i := 0; i < t.NumField(); i++ {
		if n := yamlName(t.Field(i)); n != "" && n != "-" {
			out = append(out, n)
		}
	}
	return out
}

// Key is one configuration key as the README's table lists it.
type Key struct {
	Path    string // file key, "tasks.max_cycles"
	Env     string // variable, "LEMO_TASKS_MAX_CYCLES"
	Flag    string // flag of lemo serve, "" when none
	Default string
	Help    string
	field   []int
}

// Keys returns every leaf key with its variable and default, in
// declaration order.
func Keys() []Key {
	var out []Key
	def := reflect.ValueOf(Default()).Elem()
	var walk func(t reflect.Type, path, envPrefix string, index []int)
	walk = func(t reflect.Type, path, envPrefix string, index []int) {
		for i := 0; i < t.NumField(); i++ {
			f := t.Field(i)
			name := yamlName(f)
			if name == "" || name == "-" {
				continue
			}
			idx := append(append([]int(nil), index...), i)
			p := join(path, name)
			env := f.Tag.Get("env")
			if env != "" && !strings.HasPrefix(env, "LEMO_") {
				env = envPrefix + "_" + env
			}
			if f.Type.Kind() == reflect.Map && f.Type.Elem().Kind() == reflect.Struct {
				// Named sections: their keys are file-only, listed with
				// <name> and the zero value's defaults.
				zero := reflect.New(f.Type.Elem()).Elem()
				et := f.Type.Elem()
				for j := 0; j < et.NumField(); j++ {
					ef := et.Field(j)
					if n := yamlName(ef); n != "" && n != "-" {
						out = append(out, Key{Path: p + ".<name>." + n, Default: format(zero.Field(j)), Help: ef.Tag.Get("help")})
					}
				}
				continue
			}
			if f.Type.Kind() == reflect.Struct && f.Type != reflect.TypeOf(time.Duration(0)) {
				prefix := envPrefix
				if env != "" {
					prefix = env
				}
				walk(f.Type, p, prefix, idx)
				continue
			}
			out = append(out, Key{Path: p, Env: env, Flag: f.Tag.Get("flag"), Default: format(def.FieldByIndex(idx)), Help: f.Tag.Get("help"), field: idx})
		}
	}
	walk(reflect.TypeOf(Config{}), "", "LEMO", nil)
	return out
}

func format(v reflect.Value) string {
	switch x := v.Interface().(type) {
	case time.Duration:
		if x == 0 {
			return "0"
		}
		return x.String()
	case []string:
		return strings.Join(x, ",")
	case string:
		return x
	case *bool:
		if x == nil {
			return ""
		}
		return fmt.Sprint(*x)
	case map[string]string:
		return ""
	default:
		return fmt.Sprint(x)
	}
}

// Conventional variables read besides LEMO_* ones: each sets a key.
var conventional = map[string]string{
	"OLLAMA_HOST":        "providers.ollama.base_url",
	"OLLAMA_API_KEY":     "providers.ollama_cloud.api_key",
	"OPENROUTER_API_KEY": "providers.openrouter.api_key",
	"NVIDIA_API_KEY":     "providers.nvidia.api_key",
	"OPENCODE_API_KEY":   "providers.zen.api_key",
}

// Conventional returns the conventional provider variables and the keys
// they set, sorted by variable.
func Conventional() [][2]string {
	var out [][2]string
	for v, k := range conventional {
		out = append(out, [2]string{v, k})
	}
	sort.Slice(out, func(i, j int) bool { return out[i][0] < out[j][0] })
	return out
}

// clientVariables are LEMO_* variables read by client commands, not by the
// daemon's configuration; ApplyEnv accepts them without using them.
var clientVariables = map[string]bool{"LEMO_ADDR": true, "LEMO_TOKEN": true, "LEMO_CONFIG": true,
	"LEMO_CLIENT_LISTEN": true, "LEMO_CLIENT_ADVERTISE": true}

// ApplyEnv merges variables (as os.Environ returns them) over c: the
// conventional provider variables first, then LEMO_* ones. An unknown
// LEMO_* variable or a malformed value is a problem.
func (c *Config) ApplyEnv(environ []string) []error {
	keys := Keys()
	byEnv := make(map[string]Key, len(keys))
	byPath := make(map[string]Key, len(keys))
	for _, k := range keys {
		if k.field == nil {
			continue // file-only
		}
		byEnv[k.Env] = k
		byPath[k.Path] = k
	}
	vars := make(map[string]string)
	for _, kv := range environ {
		name, value, _ := strings.Cut(kv, "=")
		vars[name] = value
	}
	var problems []error
	v := reflect.ValueOf(c).Elem()
	for _, cv := range Conventional() {
		value, ok := vars[cv[0]]
		if !ok || value == "" {
			continue
		}
		if cv[0] == "OLLAMA_HOST" {
			value = ollamaHost(value)
		}
		if err := set(v.FieldByIndex(byPath[cv[1]].field), value); err != nil {
			problems = append(problems, Problem{Where: cv[0], What: err.Error()})
		}
	}
	var names []string
	for name := range vars {
		if strings.HasPrefix(name, "LEMO_") {
			names = append(names, name)
		}
	}
	sort.Strings(names)
	for _, name := range names {
		k, ok := byEnv[name]
		if !ok {
			if !clientVariables[name] {
				what := "unknown LEMO_ variable; see the configuration table in the README for the accepted ones"
				if near := closest(name, envNames(keys)); near != "" {
					what = "unknown LEMO_ variable; did you mean " + near + "? (the configuration table in the README lists the accepted ones)"
				}
				problems = append(problems, Problem{Where: name, What: what})
			}
			continue
		}
		if err := set(v.FieldByIndex(k.field), vars[name]); err != nil {
			problems = append(problems, Problem{Where: name, What: err.Error()})
		}
	}
	return problems
}

// ollamaHost turns OLLAMA_HOST's forms ("host:port", "ollama.com",
// "http://...") into a base URL, as Ollama's own client reads it.
func ollamaHost(v string) string {
	if strings.Contains(v, "://") {
		return v
	}
	host, port, hasPort := strings.Cut(v, ":")
	if host == "ollama.com" && !hasPort {
		return "https://ollama.com"
	}
	if host == "" {
		host = "127.0.0.1"
	}
	if !hasPort {
		port = "11434"
	}
	return "http://" + host + ":" + port
}

// Set assigns a key by its file path ("tasks.max_cycles") from text, as a
// flag does.
func (c *Config) Set(path, value string) error {
	for _, k := range Keys() {
		if k.Path == path && k.field != nil {
			return set(reflect.ValueOf(c).Elem().FieldByIndex(k.field), value)
		}
	}
	return fmt.Errorf("unknown key %q", path)
}

func set(f reflect.Value, value string) error {
	switch f.Interface().(type) {
	case time.Duration:
		d, err := time.ParseDuration(value)
		if err != nil {
			return fmt.Errorf("%q is not a duration (for example 30s, 5m, 1h30m)", value)
		}
		f.SetInt(int64(d))
	case string:
		f.SetString(value)
	case bool:
		b, err := strconv.ParseBool(value)
		if err != nil {
			return fmt.Errorf("%q is not a boolean (true or false)", value)
		}
		f.SetBool(b)
	case int:
		n, err := strconv.Atoi(value)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", value)
		}
		f.SetInt(int64(n))
	case float64:
		x, err := strconv.ParseFloat(value, 64)
		if err != nil {
			return fmt.Errorf("%q is not a number", value)
		}
		f.SetFloat(x)
	case int64:
		n, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return fmt.Errorf("%q is not a whole number", value)
		}
		f.SetInt(n)
	case []string:
		var out []string
		for _, p := range strings.Split(value, ",") {
			if p = strings.TrimSpace(p); p != "" {
				out = append(out, p)
			}
		}
		f.Set(reflect.ValueOf(out))
	default:
		return fmt.Errorf("unsupported type %s", f.Type())
	}
	return nil
}

// Table renders the keys as the README's Markdown table.
func Table() string {
	var b strings.Builder
	b.WriteString("| file key | variable | flag | default | meaning |\n| --- | --- | --- | --- | --- |\n")
	for _, k := range Keys() {
		flag := ""
		if k.Flag != "" {
			flag = "`--" + k.Flag + "`"
		}
		def := k.Default
		if def != "" {
			def = "`" + def + "`"
		}
		env := ""
		if k.Env != "" {
			env = "`" + k.Env + "`"
		}
		fmt.Fprintf(&b, "| `%s` | %s | %s | %s | %s |\n", k.Path, env, flag, def, k.Help)
	}
	for _, cv := range Conventional() {
		fmt.Fprintf(&b, "| `%s` | `%s` | | | conventional variable, read too |\n", cv[1], cv[0])
	}
	return b.String()
}

func envNames(keys []Key) []string {
	names := make([]string, 0, len(keys)+len(clientVariables))
	for _, k := range keys {
		if k.Env != "" {
			names = append(names, k.Env)
		}
	}
	for n := range clientVariables {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// closest returns the candidate nearest to name (by edit distance) when it
// is near enough to be a typo (at most a third of name's length apart),
// else "".
func closest(name string, candidates []string) string {
	best, bestD := "", len(name)/3+1
	for _, c := range candidates {
		if d := didyoumean.Distance(name, c); d < bestD {
			best, bestD = c, d
		}
	}
	return best
}
