package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"lemo/persistence"
)

// Fact is an explicit memory record with its provenance. Facts are
// immutable: a correction is a new fact that names the one it supersedes.
type Fact struct {
	ID    string `json:"id"`
	Owner string `json:"owner"`
	// Task and Call are the source: the Task and tool call that recorded it.
	Task string `json:"task"`
	Call string `json:"call"`
	// Method says how it was recorded ("memory.record", or another tool).
	Method  string `json:"method"`
	Content string `json:"content"`
	// Source says where the fact came from (a command, a document, a
	// person), as the recorder gave it; empty when not given.
	Source     string    `json:"source,omitempty"`
	Supersedes string    `json:"supersedes,omitempty"`
	Time       time.Time `json:"time"`
}

// source is how a fact's provenance reads in search hits and recall.
func (f *Fact) source() string {
	s := fmt.Sprintf("fact %s recorded by %s in call %s", f.ID, f.Method, f.Call)
	if f.Source != "" {
		s += ", source: " + f.Source
	}
	if f.Supersedes != "" {
		s += ", superseding fact " + f.Supersedes
	}
	return s
}

// indexText is what the index holds of a fact: its content and its source,
// so a search for where a fact came from finds it.
func (f *Fact) indexText() string {
	if f.Source == "" {
		return f.Content
	}
	return f.Content + "\n(source: " + f.Source + ")"
}

// MaxFactSourceBytes bounds a fact's source.
const MaxFactSourceBytes = 512

// FactInput is a fact a tool asks to record.
type FactInput struct {
	Content string
	// Supersedes names an earlier fact this one replaces, if any.
	Supersedes string
	// Method says how the fact was recorded (for example "memory.record");
	// empty reads "tool".
	Method string
	// Source says where the fact came from (a command, a document, a
	// person); optional.
	Source string
}

// RecordFact stores a fact recorded by tool call callID of Task taskID
// (owned by owner) and indexes it, in one commit. It returns the fact's id.
// The Task must exist; a superseded fact must exist and belong to owner.
func (m *Memory) RecordFact(ctx context.Context, owner, taskID, callID string, in FactInput) (string, error) {
	if m.closed() {
		return "", ErrClosed
	}
	content := strings.TrimSpace(in.Content)
	method := strings.TrimSpace(in.Method)
	source := strings.Join(strings.Fields(in.Source), " ")
	if method == "" {
		method = "tool"
	}
	switch {
	case persistence.ValidOwner(owner) != nil:
		return "", fmt.Errorf("%w: owner %q", ErrInvalid, owner)
	case persistence.ValidTaskID(taskID) != nil:
		return "", fmt.Errorf("%w: task id %q", ErrInvalid, taskID)
	case callID == "":
		return "", fmt.Errorf("%w: a fact needs the id of the call that records it", ErrInvalid)
	case content == "":
		return "", fmt.Errorf("%w: the fact's content is empty", ErrInvalid)
	case len(content) > m.opt.MaxFactBytes:
		return "", fmt.Errorf("%w: the fact's content has %d bytes, the limit is %d: record a shorter fact (or several)", ErrInvalid, len(content), m.opt.MaxFactBytes)
	case !utf8.ValidString(content):
		return "", fmt.Errorf("%w: the fact's content is not valid UTF-8", ErrInvalid)
	case len(source) > MaxFactSourceBytes:
		return "", fmt.Errorf("%w: the fact's source has %d bytes, the limit is %d: name where it came from briefly", ErrInvalid, len(source), MaxFactSourceBytes)
	case !utf8.ValidString(source):
		return "", fmt.Errorf("%w: the fact's source is not valid UTF-8", ErrInvalid)
	case len(method) > 64:
		return "", fmt.Errorf("%w: method %q is longer than 64 bytes", ErrInvalid, method)
	}
	if in.Supersedes != "" {
		err := m.store.View(func(v *persistence.Snapshot) error {
			_, err := readFact(v, owner, in.Supersedes)
			return err
		})
		if errors.Is(err, persistence.ErrNotFound) || errors.Is(err, persistence.ErrInvalid) {
			return "", fmt.Errorf("%w: %q (a fact can only supersede an existing fact of its owner)", ErrFactNotFound, in.Supersedes)
		}
		if err != nil {
			return "", fmt.Errorf("memory: record fact: %w", err)
		}
	}
	now := m.opt.Now()
	f := &Fact{ID: persistence.NewTaskID(now), Owner: owner, Task: taskID, Call: callID, Method: method,
		Content: content, Source: source, Supersedes: in.Supersedes, Time: now.UTC()}
	rec, err := json.Marshal(f)
	if err != nil {
		return "", fmt.Errorf("memory: encode fact: %w", err)
	}
	ref := persistence.FactRef(taskID, f.ID)
	d := analyze(docInfo{ref: string(ref), kind: KindFact, time: now.UnixMilli(), source: f.source()}, f.indexText(), false)
	extra := []persistence.KV{
		{Key: persistence.FactKey(owner, f.ID), Value: rec},
		{Key: persistence.PendingKey(owner, ref), Value: d.encode()},
	}
	if f.Supersedes != "" {
		extra = append(extra, persistence.KV{Key: persistence.SupersededKey(owner, f.Supersedes, f.ID)})
	}
	if _, err := m.store.Append(ctx, persistence.Append{TaskID: taskID, Extra: extra}); err != nil {
		return "", fmt.Errorf("memory: record fact: %w", err)
	}
	m.track.add(owner, string(extra[1].Key), d, now)
	m.recalls.added(owner, taskID, 1)
	m.signal()
	if m.emb != nil {
		m.emb.markFact(owner, factDoc(f))
	}
	return f.ID, nil
}

// Fact returns one of owner's facts, or an error wrapping
// persistence.ErrNotFound.
func (m *Memory) Fact(owner, id string) (*Fact, error) {
	var f *Fact
	err := m.store.View(func(v *persistence.Snapshot) error {
		var err error
		f, err = readFact(v, owner, id)
		return err
	})
	return f, err
}

func readFact(v *persistence.Snapshot, owner, id string) (*Fact, error) {
	if persistence.ValidTaskID(id) != nil || persistence.ValidOwner(owner) != nil {
		return nil, fmt.Errorf("fact %q: %w", id, persistence.ErrNotFound)
	}
	f := new(Fact)
	err := v.Get(persistence.FactKey(owner, id), func(val []byte) error { return json.Unmarshal(val, f) })
	if err != nil {
		return nil, fmt.Errorf("fact %s: %w", id, err)
	}
	return f, nil
}
