package tasks

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"google.golang.org/protobuf/types/known/timestamppb"

	"lemo/api"
	"lemo/excerpt"
	"lemo/persistence"
	"lemo/tools"
)

// Tool names and the View that renders them.
const (
	NameList      = "tasks.list"
	NameRead      = "tasks.read"
	NameReadBlock = "tasks.read_block"
	View          = "tasks"
)

// Limits of the tools' outputs.
const (
	// MaxListTasks bounds a tasks.list page.
	MaxListTasks = 50
	// MaxReadRecords bounds a tasks.read page.
	MaxReadRecords = 100
	// MaxBlockBytes bounds one tasks.read_block range.
	MaxBlockBytes = 64 << 10
)

// ErrNotFound: no such Task or record, or one the caller may not see.
var ErrNotFound = errors.New("not found")

// Store is what the tasks tools read: *persistence.Store.
type Store interface {
	Meta(task string) (*api.TaskMeta, error)
	ListTasks(o persistence.ListOptions) ([]*api.TaskMeta, string, error)
	ReadEvents(task string, from uint64, limit int) ([]*api.Event, error)
}

// Config tunes the tools; zero values take the defaults.
type Config struct {
	// RecordBytes bounds the text of one record in a tasks.read page
	// (default 2,000 bytes); a longer one names its tasks.read_block handle.
	RecordBytes int
	// PageBytes bounds the texts of one tasks.read page (default 32 KiB).
	PageBytes int
	// BlockBytes is tasks.read_block's range when the call names none
	// (default 16 KiB, at most MaxBlockBytes).
	BlockBytes int
	// Live finds the live result of a call (its whole output, held while
	// its Task holds it), which tasks.read_block reads in place of the
	// retained record; nil reads records only.
	Live func(task, callID string) (LiveText, bool)
}

// LiveText is the text of a live result: *live.Result.
type LiveText interface {
	// Size is the text's length; an error once the result was released.
	Size() (int64, error)
	io.ReaderAt
}

func (c *Config) fill() {
	if c.RecordBytes <= 0 {
		c.RecordBytes = 2000
	}
	if c.PageBytes <= 0 {
		c.PageBytes = 32 << 10
	}
	if c.BlockBytes <= 0 || c.BlockBytes > MaxBlockBytes {
		c.BlockBytes = 16 << 10
	}
}

// New returns tasks.list, tasks.read and tasks.read_block over s.
func New(s Store, cfg Config) []tools.Tool {
	cfg.fill()
	r := &reader{s: s, cfg: cfg}
	return []tools.Tool{&List{r}, &Read{r}, &ReadBlock{r}}
}

// reader is what the three tools share: the store, scoped by owner.
type reader struct {
	s   Store
	cfg Config
}

// meta returns a Task's metadata if owner may see it; any other Task
// reads as not found.
func (r *reader) meta(owner, task string) (*api.TaskMeta, error) {
	if persistence.ValidTaskID(task) != nil {
		return nil, fmt.Errorf("task %q: %w", task, ErrNotFound)
	}
	m, err := r.s.Meta(task)
	if errors.Is(err, persistence.ErrNotFound) || (err == nil && m.GetOwner() != owner) {
		return nil, fmt.Errorf("task %s: %w", task, ErrNotFound)
	}
	return m, err
}

type obj = map[string]any

func schema(v obj) json.RawMessage {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err) // schemas are literals: a failure is a programming error
	}
	return b
}

var (
	taskID = obj{"type": "string", "pattern": "^[0-9A-Za-z_-]{1,64}$", "description": "A task id."}
	seqNum = obj{"type": "integer", "minimum": 1}
)

func statusName(s api.TaskStatus) string {
	return strings.ToLower(strings.TrimPrefix(s.String(), "TASK_STATUS_"))
}

func stamp(t *timestamppb.Timestamp) string {
	if t == nil {
		return ""
	}
	return t.AsTime().UTC().Format(time.RFC3339)
}

// List is tasks.list: the calling Task's owner's Tasks, newest first.
type List struct{ r *reader }

var _ tools.Tool = (*List)(nil)

func (*List) Name() string { return NameList }
func (*List) Description() string {
	return "List your tasks, newest first, a page at a time: id, title, status, model, times and size. " +
		"Pass the returned next cursor as before for the following page."
}
func (*List) InputSchema() json.RawMessage {
	return schema(obj{"type": "object", "additionalProperties": false, "properties": obj{
		"before": obj{"type": "string", "pattern": taskID["pattern"], "description": "Cursor: list tasks older than this task id (the previous page's next)."},
		"limit":  obj{"type": "integer", "minimum": 1, "maximum": MaxListTasks},
		"status": obj{"type": "string", "enum": []string{"created", "running", "awaiting_approval", "paused", "finished", "failed", "cancelled"},
			"description": "Only tasks with this status (the page may then hold fewer)."},
	}})
}
func (*List) StateSchema() json.RawMessage { return nil }
func (*List) ResultSchema() json.RawMessage {
	return schema(obj{"type": "object", "required": []string{"tasks"}, "properties": obj{
		"tasks": obj{"type": "array", "items": obj{"type": "object", "required": []string{"id", "status"}}},
		"next":  obj{"type": "string"},
	}})
}
func (*List) View() string { return View }

// Retain keeps the page: it is small and bounded.
func (*List) Retain(output, _ json.RawMessage) json.RawMessage { return output }

type listInput struct {
	Before string `json:"before"`
	Limit  int    `json:"limit"`
	Status string `json:"status"`
}

type taskInfo struct {
	ID      string `json:"id"`
	Title   string `json:"title,omitempty"`
	Status  string `json:"status"`
	Detail  string `json:"detail,omitempty"`
	Model   string `json:"model,omitempty"`
	Created string `json:"created,omitempty"`
	Updated string `json:"updated,omitempty"`
	LastSeq uint64 `json:"last_seq"`
	Cycles  uint32 `json:"cycles"`
	Current bool   `json:"current,omitempty"`
}

type listOutput struct {
	Tasks []taskInfo `json:"tasks"`
	Next  string     `json:"next,omitempty"`
}

// Execute lists a page.
func (l *List) Execute(ctx context.Context, call tools.Call, _ tools.Emit) (json.RawMessage, error) {
	var in listInput
	if err := json.Unmarshal(call.Input, &in); err != nil {
		return nil, fmt.Errorf("%s: input: %w", NameList, err)
	}
	if in.Limit <= 0 || in.Limit > MaxListTasks {
		in.Limit = 20
	}
	if err := persistence.ValidOwner(call.Owner); err != nil {
		return nil, fmt.Errorf("%s: %w", NameList, err)
	}
	metas, next, err := l.r.s.ListTasks(persistence.ListOptions{Owner: call.Owner, Before: in.Before, Limit: in.Limit})
	if err != nil {
		return nil, fmt.Errorf("%s: %w", NameList, err)
	}
	out := listOutput{Tasks: []taskInfo{}, Next: next}
	for _, m := range metas {
		st := statusName(m.GetStatus())
		if in.Status != "" && st != in.Status {
			continue
		}
		out.Tasks = append(out.Tasks, taskInfo{ID: m.GetTaskId(), Title: m.GetTitle(), Status: st, Detail: excerpt.Short(m.GetStatusDetail(), 200),
			Model: m.GetModel(), Created: stamp(m.GetCreated()), Updated: stamp(m.GetUpdated()), LastSeq: m.GetLastSeq(),
			Cycles: m.GetCycles(), Current: m.GetTaskId() == call.TaskID})
	}
	return json.Marshal(out)
}
