package files

import (
	"context"
	"encoding/json"
	"fmt"
	"hash/maphash"
	"sync"

	"lemo/tools"
)

// View is the client View id of every files tool.
const View = "files"

// Tool names.
const (
	NameRead  = "files.read"
	NameWrite = "files.write"
	NameEdit  = "files.edit"
	NameList  = "files.list"
	NameFind  = "files.find"
	NameGrep  = "files.grep"
)

// fileSystem is the state shared by the tools New returns.
type fileSystem struct {
	cfg Config
	// walk forces the openat-per-component resolver (tests exercise both).
	walk bool
	// locks serialise writes and edits of one directory entry within this
	// process, so that two calls cannot both pass a revision check.
	locks [64]sync.Mutex
	seed  maphash.Seed
}

// New validates cfg and returns the files tools, in the order read, write,
// edit, list, find, grep.
func New(cfg Config) ([]tools.Tool, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	return newFileSystem(cfg).tools(), nil
}

func newFileSystem(cfg Config) *fileSystem {
	cfg.fill()
	return &fileSystem{cfg: cfg, seed: maphash.MakeSeed()}
}

func (f *fileSystem) tools() []tools.Tool {
	return []tools.Tool{f.readTool(), f.writeTool(), f.editTool(), f.listTool(), f.findTool(), f.grepTool()}
}

func (f *fileSystem) lock(dir fileID, name string) func() {
	var h maphash.Hash
	h.SetSeed(f.seed)
	fmt.Fprintf(&h, "%d:%d:%s", dir.dev, dir.ino, name)
	m := &f.locks[h.Sum64()%uint64(len(f.locks))]
	m.Lock()
	return m.Unlock
}

// op is one files tool: typed input I and output O, a run function and an
// optional shrink function used by Retain for large outputs.
type op[I, O any] struct {
	fs          *fileSystem
	name        string
	description string
	input       json.RawMessage
	result      json.RawMessage
	run         func(ctx context.Context, r *root, in *I) (*O, error)
	// shrink makes o fit in about budget bytes of JSON and records what it
	// left out; nil means the output is always retained whole.
	shrink func(o *O, budget int)
	// reads: every call only reads the workspace (tools.Reader).
	reads bool
}

var _ tools.Tool = (*op[readInput, readOutput])(nil)

func (o *op[I, O]) Name() string                  { return o.name }
func (o *op[I, O]) Description() string           { return o.description }
func (o *op[I, O]) InputSchema() json.RawMessage  { return o.input }
func (o *op[I, O]) StateSchema() json.RawMessage  { return nil }
func (o *op[I, O]) ResultSchema() json.RawMessage { return o.result }
func (o *op[I, O]) View() string                  { return View }

// UsesWorkspace: every files tool works in the workspace.
func (o *op[I, O]) UsesWorkspace() bool { return true }

// ReadOnly reports whether the tool only reads, whatever the input.
func (o *op[I, O]) ReadOnly(json.RawMessage) bool { return o.reads }

// Execute decodes the input, opens the workspace and runs the operation.
func (o *op[I, O]) Execute(ctx context.Context, call tools.Call, _ tools.Emit) (json.RawMessage, error) {
	in := new(I)
	if err := json.Unmarshal(call.Input, in); err != nil {
		return nil, fmt.Errorf("%s: input: %w", o.name, err)
	}
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	r, err := openRoot(call.Workspace, o.fs.walk)
	if err != nil {
		return nil, err
	}
	defer r.close()
	out, err := o.run(ctx, r, in)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err() // cancelled, not failed
		}
		return nil, err
	}
	return json.Marshal(out)
}

// Retain keeps outputs up to Config.RetainBytes whole and larger ones as a
// bounded excerpt that states what was left out.
func (o *op[I, O]) Retain(output, _ json.RawMessage) json.RawMessage {
	limit := o.fs.cfg.RetainBytes
	if len(output) <= limit {
		return output
	}
	if o.shrink == nil {
		return output
	}
	var out O
	if err := json.Unmarshal(output, &out); err != nil {
		return nil
	}
	// JSON escaping can make the encoding larger than the budget the shrink
	// function aimed for; tighten until it fits.
	for budget := limit - 512; budget > 0; budget = budget * 3 / 4 {
		o.shrink(&out, budget)
		b, err := json.Marshal(&out)
		if err != nil {
			return nil
		}
		if len(b) <= limit {
			return b
		}
	}
	return nil
}

// schema marshals a JSON Schema written as a Go value.
func schema(v map[string]any) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // schemas are literals: a failure is a programming error
	}
	return b
}

type obj = map[string]any

func object(required []string, props obj) obj {
	s := obj{"type": "object", "additionalProperties": false, "properties": props}
	if len(required) > 0 {
		s["required"] = required
	}
	return s
}

var (
	str          = obj{"type": "string"}
	boolean      = obj{"type": "boolean"}
	nonNegInt    = obj{"type": "integer", "minimum": 0}
	revisionProp = obj{"type": "string", "pattern": "^sha256:[0-9a-f]{64}$",
		"description": "The file's revision: sha256 of its whole content, as returned by files.read, files.write and files.edit."}
	excerptProp = obj{"type": "string", "description": "Present when this is a shortened copy kept in history: what was left out."}
)

func pathProp(desc string) obj {
	return obj{"type": "string", "maxLength": MaxPathBytes, "description": desc}
}
