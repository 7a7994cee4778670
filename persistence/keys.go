package persistence

import (
	"encoding/binary"
	"fmt"

	"google.golang.org/protobuf/proto"

	"lemo/api"
)

// Key layout (all keys are byte strings; numbers are big-endian so a prefix
// scan reads in order):
//
//	f                                  store format marker
//	e/<task>/<seq:8>                   event (api.Event, protobuf, without the task and seq its key names)
//	m/<task>                           Task metadata (api.TaskMeta)
//	s/<status:1>/<task>                status index (empty value)
//	o/<owner>/<task>                   owner index (empty value)
//	a/<owner>/<approval id>            pending approval (its ApprovalRequested event)
//	c/<parent>/<child>                 children index: the child's links, limits and spend (children.go)
//
// Task ids and owners contain no '/', so "e/<task>/" is a prefix of exactly
// one Task's events. Other packages' records (memory, indexes) use their own
// first byte; see the files that define them.
const (
	prefixEvent    = 'e'
	prefixMeta     = 'm'
	prefixStatus   = 's'
	prefixOwner    = 'o'
	prefixApproval = 'a'
	prefixChild    = 'c'
)

var formatKey = []byte("f")

func eventPrefix(task string) []byte {
	k := make([]byte, 0, len(task)+3)
	k = append(k, prefixEvent, '/')
	k = append(k, task...)
	return append(k, '/')
}

func eventKey(task string, seq uint64) []byte {
	k := eventPrefix(task)
	return binary.BigEndian.AppendUint64(k, seq)
}

func seqFromEventKey(k []byte) uint64 {
	return binary.BigEndian.Uint64(k[len(k)-8:])
}

func metaKey(task string) []byte {
	return append([]byte{prefixMeta, '/'}, task...)
}

func statusPrefix(st api.TaskStatus) []byte {
	return []byte{prefixStatus, '/', byte(st), '/'}
}

func statusKey(st api.TaskStatus, task string) []byte {
	return append(statusPrefix(st), task...)
}

func ownerPrefix(owner string) []byte {
	k := append([]byte{prefixOwner, '/'}, owner...)
	return append(k, '/')
}

func ownerKey(owner, task string) []byte {
	return append(ownerPrefix(owner), task...)
}

func approvalPrefix(owner string) []byte {
	k := []byte{prefixApproval, '/'}
	if owner == "" {
		return k
	}
	k = append(k, owner...)
	return append(k, '/')
}

func approvalKey(owner, id string) []byte {
	return append(approvalPrefix(owner), id...)
}

func childPrefix(parent string) []byte {
	k := make([]byte, 0, len(parent)+3+26)
	k = append(k, prefixChild, '/')
	k = append(k, parent...)
	return append(k, '/')
}

func childKey(parent, child string) []byte {
	return append(childPrefix(parent), child...)
}

// encodeEvent encodes ev as its record under eventKey: the key names the
// Task and the seq, so the value leaves them out (a step's events are
// about a third smaller). Records written before kept them; decodeEvent
// reads both.
func encodeEvent(ev *api.Event) ([]byte, error) {
	return proto.MarshalOptions{Deterministic: true}.Marshal(&api.Event{Time: ev.GetTime(), Body: ev.Body})
}

// decodeEvent decodes the record of task's event seq. An id or seq the
// record names must be its key's.
func decodeEvent(task string, seq uint64, raw []byte) (*api.Event, error) {
	ev := new(api.Event)
	if err := proto.Unmarshal(raw, ev); err != nil {
		return nil, fmt.Errorf("decode task %s seq %d: %w", task, seq, err)
	}
	if (ev.TaskId != "" && ev.TaskId != task) || (ev.Seq != 0 && ev.Seq != seq) {
		return nil, fmt.Errorf("decode task %s seq %d: the record names task %q seq %d", task, seq, ev.TaskId, ev.Seq)
	}
	ev.TaskId, ev.Seq = task, seq
	return ev, nil
}
