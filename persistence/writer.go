package persistence

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/dgraph-io/badger/v4"
	"google.golang.org/protobuf/proto"

	"lemo/api"
	"lemo/internal/failpoint"
)

// FailCommit is the failpoint at the writer's commit (see package
// failpoint). Its argument is the []Append the transaction holds; an error
// makes the commit fail before it reaches Badger, so nothing of it lands,
// and every waiter of the transaction gets the error.
const FailCommit = "persistence.commit"

// KV is an extra key to write (or delete) in the same transaction as an
// append: index postings and other derived records.
type KV struct {
	Key    []byte
	Value  []byte
	Delete bool
}

// Append is one conditional append to a Task's log.
type Append struct {
	TaskID string
	// Events carry their TaskId, Seq and Time; their seqs must be contiguous
	// and the first must follow the stored last seq (1 for a new Task, whose
	// first event must be TaskCreated). The store does not modify them and
	// the caller must not modify them after calling Append.
	Events []*api.Event
	// Extra keys are committed atomically with the events. Unless they set
	// the Task's index watermark (WatermarkKey) to the last seq of Events,
	// the store adds the Task's UnindexedKey marker.
	Extra []KV
	// Reserve marks an append that may use the space the store keeps for
	// itself when the disk is full: the records that pause Tasks because
	// of it (or because the daemon stops). Others get ErrDiskFull then.
	Reserve bool
	// DayCheck, when set, makes the append conditional on its owner's
	// daily budget: before the append is planned, the store asks it with
	// the owner's spend recorded on the UTC day of the last event, that
	// day's raises, and what the append adds to that day; an error
	// refuses the append (nothing lands) and is what Append returns. The
	// check and the record of the spend are one step of the writer, so
	// concurrent appends of one owner never pass a limit together.
	DayCheck DayCheck
	// Also are appends to other Tasks committed in the same transaction:
	// all of them land or none does (a parent's record of a spawn and the
	// child's creation). Each is checked like an append of its own; any
	// failure fails the whole. They may not name a.TaskID nor nest.
	Also []Append
}

// Append commits a to the log and returns the Task's metadata after it. It
// returns only after the commit (with its fsync) finished: a nil error is a
// durable acknowledgement. ctx bounds only the wait to enter the queue; once
// queued the append completes or fails on its own. On ErrSeqConflict nothing
// was written.
func (s *Store) Append(ctx context.Context, a Append) (*api.TaskMeta, error) {
	if s.w == nil {
		return nil, fmt.Errorf("%w: store is read-only", ErrClosed)
	}
	req, err := prepare(a)
	if err != nil {
		return nil, err
	}
	return s.w.submit(ctx, req)
}

type request struct {
	queued time.Time
	task   string
	events []*api.Event
	raw    [][]byte
	extra  []KV
	size   int
	done   chan result
	// reserve: Append.Reserve.
	reserve bool
	// also are the linked appends of Append.Also, committed with this one.
	also []*request
	// dayCheck: Append.DayCheck.
	dayCheck DayCheck
}

type result struct {
	meta *api.TaskMeta
	err  error
}

// prepare validates and encodes an append on the caller's goroutine, so that
// the single writer goroutine only commits.
func prepare(a Append) (*request, error) {
	if err := ValidTaskID(a.TaskID); err != nil {
		return nil, err
	}
	if len(a.Events) == 0 && len(a.Extra) == 0 {
		return nil, fmt.Errorf("%w: empty append for task %s", ErrInvalid, a.TaskID)
	}
	req := &request{queued: time.Now(), task: a.TaskID, events: a.Events, extra: a.Extra, raw: make([][]byte, len(a.Events)), done: make(chan result, 1), reserve: a.Reserve, dayCheck: a.DayCheck}
	for i, ev := range a.Events {
		if ev.GetTaskId() != a.TaskID {
			return nil, fmt.Errorf("%w: event for task %q in an append to %q", ErrInvalid, ev.GetTaskId(), a.TaskID)
		}
		if i > 0 && ev.GetSeq() != a.Events[i-1].GetSeq()+1 {
			return nil, fmt.Errorf("%w: task %s: seqs %d and %d are not contiguous", ErrInvalid, a.TaskID, a.Events[i-1].GetSeq(), ev.GetSeq())
		}
		if ev.Body == nil {
			return nil, fmt.Errorf("%w: task %s seq %d: event without a body", ErrInvalid, a.TaskID, ev.GetSeq())
		}
		b, err := encodeEvent(ev)
		if err != nil {
			return nil, fmt.Errorf("%w: task %s seq %d: encode: %v", ErrInvalid, a.TaskID, ev.GetSeq(), err)
		}
		if len(b) > MaxEventBytes {
			return nil, fmt.Errorf("%w: task %s seq %d: event of %d bytes exceeds %d", ErrTooLarge, a.TaskID, ev.GetSeq(), len(b), MaxEventBytes)
		}
		req.raw[i] = b
		req.size += len(b)
	}
	for _, kv := range a.Extra {
		if len(kv.Key) == 0 {
			return nil, fmt.Errorf("%w: task %s: extra key is empty", ErrInvalid, a.TaskID)
		}
		if len(kv.Value) >= valueThreshold {
			return nil, fmt.Errorf("%w: task %s: extra value of %d bytes, the limit is %d", ErrTooLarge, a.TaskID, len(kv.Value), valueThreshold-1)
		}
		req.size += len(kv.Key) + len(kv.Value)
	}
	if n := len(a.Events); n > 0 && !coversEvents(a.TaskID, a.Events[n-1].GetSeq(), a.Extra) {
		marker := KV{Key: UnindexedKey(a.TaskID), Value: []byte{}}
		req.extra = append(append(make([]KV, 0, len(a.Extra)+1), a.Extra...), marker)
		req.size += len(marker.Key)
	}
	seen := map[string]bool{a.TaskID: true}
	for _, o := range a.Also {
		if len(o.Also) > 0 {
			return nil, fmt.Errorf("%w: task %s: a linked append has linked appends of its own", ErrInvalid, a.TaskID)
		}
		if seen[o.TaskID] {
			return nil, fmt.Errorf("%w: task %s: two appends of task %s in one commit", ErrInvalid, a.TaskID, o.TaskID)
		}
		seen[o.TaskID] = true
		o.Reserve = a.Reserve
		r, err := prepare(o)
		if err != nil {
			return nil, err
		}
		req.also = append(req.also, r)
		req.size += r.size
	}
	return req, nil
}

// writer is the single group-commit goroutine. It stages a batch into a
// transaction and commits it asynchronously, up to maxInflight commits at
// once; the appends that arrive meanwhile wait in its queue for the next
// batch. Requests are answered only from the commit's callback,
// which Badger calls once the commit is durable; the callback hands the
// outcome back to this goroutine, which alone owns the caches.
type writer struct {
	db       *badger.DB
	in       chan *request
	maxBatch int
	cache    *metaCache
	// submitted is read by other goroutines (Store.SubmittedThrough).
	submitted *submittedSeqs
	// busy counts, per Task, the commits in flight that hold an append of
	// it. An append is never planned against a commit in flight, which may
	// still fail: the writer waits for its outcome first.
	busy     map[string]int
	inflight int
	done     chan commitDone
	// next is the transaction of the next batch, begun once the last
	// commit was handed to Badger (finish); nil: begin one when needed.
	next     *badger.Txn
	statuses *statusCounts
	onCommit func(appends, events int, wait time.Duration)
	onAck    func(wait time.Duration)

	// splits counts transactions committed early because a batch did not
	// fit in one (observed by tests).
	splits atomic.Int64
	// guard refuses batches the disk cannot take (nil: no check).
	guard *diskGuard
	// days caches committed owners' daily records (day.go) by key.
	days map[string]dayValue
	// raises caches what operators raised owners' daily budgets by, by
	// owner and day, as read when raisesAt was raised's count (day.go).
	raises   map[string]dayValue
	raisesAt uint64
	// raised counts the raises RaiseDay committed (it writes them itself).
	raised atomic.Uint64

	mu      sync.Mutex // guards closed against submit
	closed  bool
	stopped chan struct{}
}

func newWriter(db *badger.DB, opt Options, statuses *statusCounts) *writer {
	w := &writer{
		statuses:  statuses,
		onCommit:  opt.OnCommit,
		onAck:     opt.OnAck,
		db:        db,
		in:        make(chan *request, 1024),
		maxBatch:  opt.MaxBatch,
		cache:     newMetaCache(opt.MetaCacheSize),
		busy:      make(map[string]int),
		submitted: newSubmittedSeqs(maxSubmittedTasks),
		days:      make(map[string]dayValue),
		raises:    make(map[string]dayValue),
		done:      make(chan commitDone, maxInflight),
		stopped:   make(chan struct{}),
	}
	if w.maxBatch <= 0 {
		w.maxBatch = 256
	}
	go w.run()
	return w
}

func (w *writer) submit(ctx context.Context, req *request) (*api.TaskMeta, error) {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil, ErrClosed
	}
	// Holding mu while sending keeps close from closing the channel under
	// us; the writer drains the channel concurrently, so this never blocks
	// for long.
	select {
	case w.in <- req:
		w.mu.Unlock()
	case <-ctx.Done():
		w.mu.Unlock()
		return nil, ctx.Err()
	}
	r := <-req.done
	return r.meta, r.err
}

func (w *writer) close() {
	w.mu.Lock()
	if !w.closed {
		w.closed = true
		close(w.in)
	}
	w.mu.Unlock()
	<-w.stopped
}

// maxInflight bounds the commits in flight at once. One is fastest on the
// project's machines: while a commit syncs, the appends that arrive queue
// up and go into the next commit together (32 events a commit with 64
// Tasks appending), where committing them as they come, up to 4 at once,
// made more, smaller commits (19 events) and fewer events a second
// (BenchmarkAppend64Tasks: 21,000-22,600 events/s against 15,000-16,300;
// BenchmarkAppend64TasksIndexed in memory/: 7,100-8,700 against 6,200).
//
// finish begins the next batch's transaction, which waits for the commit
// in flight (newTxn): more than one in flight needs that changed.
const maxInflight = 1

// commitDone is a commit's outcome, handed back to the writer goroutine.
type commitDone struct {
	group []staged
	err   error
}

func (w *writer) run() {
	defer close(w.stopped)
	defer func() {
		if w.next != nil {
			w.next.Discard()
		}
	}()
	in := w.in
	for in != nil || w.inflight > 0 {
		if w.inflight >= maxInflight {
			w.complete(<-w.done)
			continue
		}
		select {
		case d := <-w.done:
			w.complete(d)
		case req, ok := <-in:
			if !ok {
				in = nil // closing: finish what is in flight
				continue
			}
			batch := []*request{req}
		fill:
			for len(batch) < w.maxBatch {
				select {
				case r, ok := <-in:
					if !ok {
						in = nil
						break fill
					}
					batch = append(batch, r)
				default:
					break fill
				}
			}
			w.commit(batch)
		}
	}
}

// complete answers the requests of a finished commit.
func (w *writer) complete(d commitDone) {
	w.inflight--
	if d.err == nil && len(d.group) > 0 {
		events := 0
		oldest := d.group[0].req.queued
		for _, st := range d.group {
			events += len(st.req.events)
			w.statuses.move(st.prev, st.meta)
			if st.req.queued.Before(oldest) {
				oldest = st.req.queued
			}
		}
		if w.onCommit != nil {
			w.onCommit(len(d.group), events, time.Since(oldest))
		}
	}
	if d.err != nil {
		clear(w.days) // what the failed commit staged is not what is stored
	} else {
		for _, st := range d.group {
			for _, dw := range st.days {
				if _, ok := w.days[dw.key]; !ok && len(w.days) >= maxDayCache {
					clear(w.days)
				}
				w.days[dw.key] = dw.v
			}
		}
	}
	now := time.Now()
	for _, st := range d.group {
		task := st.req.task
		if w.busy[task]--; w.busy[task] <= 0 {
			delete(w.busy, task)
		}
		if d.err != nil {
			w.cache.drop(task)
			st.req.done <- result{err: fmt.Errorf("commit: %w", d.err)}
			continue
		}
		w.cache.put(task, st.meta, st.saved)
		if w.onAck != nil {
			w.onAck(now.Sub(st.req.queued))
		}
		st.req.done <- result{meta: st.meta}
	}
}

// await waits until no commit in flight holds an append of task, answering
// the commits that finish meanwhile.
func (w *writer) await(task string) {
	for w.busy[task] > 0 {
		w.complete(<-w.done)
	}
}

// staged is one request's planned effect: the metadata before and after
// it, the seq at which the Task's metadata record stands after it (see
// saveMeta), and the owners' daily records it writes.
type staged struct {
	req        *request
	prev, meta *api.TaskMeta
	saved      uint64
	days       []dayWrite
}

// maxDayCache bounds the writer's cache of daily records.
const maxDayCache = 4096

// commit writes a batch in as few transactions as Badger allows and answers
// every request. A request that does not fit with the others goes into the
// next transaction; one that does not fit alone fails with ErrTooLarge.
func (w *writer) commit(batch []*request) {
	if batch = w.admit(batch); len(batch) == 0 {
		return
	}
	var group []staged
	txn := w.newTxn()
	for _, req := range batch {
		sts, err := w.planUnit(req, group)
		if err == nil {
			err = stageAll(txn, sts)
		}
		if err == nil {
			group = append(group, sts...)
			continue
		}
		if sts == nil { // planning failed: nothing was staged
			req.done <- result{err: err}
			continue
		}
		// Staging failed part-way: the transaction holds part of req. Drop
		// it, commit the group without req, and give req a transaction of
		// its own.
		txn.Discard()
		w.splits.Add(1)
		w.commitGroup(group)
		group = nil
		txn = w.newTxn()
		if !errors.Is(err, badger.ErrTxnTooBig) {
			req.done <- result{err: fmt.Errorf("stage: %w", err)}
			continue
		}
		sts, err = w.planUnit(req, nil)
		if err == nil {
			err = stageAll(txn, sts)
		}
		if err != nil {
			txn.Discard()
			txn = w.newTxn()
			if errors.Is(err, badger.ErrTxnTooBig) {
				err = fmt.Errorf("%w: task %s: one append of %d bytes exceeds a transaction", ErrTooLarge, req.task, req.size)
			}
			req.done <- result{err: err}
			continue
		}
		group = append(group, sts...)
	}
	w.finish(txn, group)
}

// planUnit plans req and its linked appends against group: all of them, or
// none (nil and the first error).
func (w *writer) planUnit(req *request, group []staged) ([]staged, error) {
	st, err := w.plan(req, group)
	if err != nil {
		return nil, err
	}
	sts := []staged{st}
	for _, o := range req.also {
		ost, err := w.plan(o, append(group[:len(group):len(group)], sts...))
		if err != nil {
			return nil, err
		}
		sts = append(sts, ost)
	}
	return sts, nil
}

// stageAll stages planned requests into txn.
func stageAll(txn *badger.Txn, sts []staged) error {
	for _, st := range sts {
		if err := stage(txn, st); err != nil {
			return err
		}
	}
	return nil
}

// plan checks req against the metadata it continues: the last one staged
// for its Task in group, else the committed one. A commit in flight for the
// Task is waited for first: planning against its staged metadata would, if
// it failed, put a later part of a split batch on top of events that never
// landed.
func (w *writer) plan(req *request, group []staged) (staged, error) {
	var prev *api.TaskMeta
	var saved uint64
	found := false
	for i := len(group) - 1; i >= 0; i-- {
		if group[i].req.task == req.task {
			prev, saved, found = group[i].meta, group[i].saved, true
			break
		}
	}
	if !found {
		w.await(req.task)
		var err error
		if prev, saved, err = w.loadMeta(req.task); err != nil {
			return staged{}, err
		}
	}
	meta, deltas, err := checkAndFold(req, prev)
	if err != nil {
		return staged{}, err
	}
	days, err := w.planDays(req, meta.GetOwner(), deltas, group)
	if err != nil {
		return staged{}, err
	}
	if len(req.events) > 0 && saveMeta(prev, meta, saved) {
		saved = meta.GetLastSeq()
	}
	return staged{req: req, prev: prev, meta: meta, saved: saved, days: days}, nil
}

// commitGroup commits group in a fresh transaction.
func (w *writer) commitGroup(group []staged) {
	if len(group) == 0 {
		return
	}
	txn := w.newTxn()
	kept := group[:0:0]
	for _, st := range group {
		if err := stage(txn, st); err != nil {
			// It fitted before, together with more; this cannot happen
			// short of the store failing.
			st.req.done <- result{err: fmt.Errorf("stage: %w", err)}
			continue
		}
		kept = append(kept, st)
	}
	w.finish(txn, kept)
}

// finish starts the commit of txn; complete answers its requests once it
// is durable.
func (w *writer) finish(txn *badger.Txn, group []staged) {
	if len(group) == 0 {
		txn.Discard()
		return
	}
	for _, st := range group {
		w.busy[st.req.task]++
		if n := len(st.req.events); n > 0 {
			w.submitted.mark(st.req.task, st.req.events[n-1].GetSeq())
		}
	}
	w.inflight++
	g := append([]staged(nil), group...)
	if failpoint.Armed() {
		if err := failpoint.Eval(FailCommit, commitAppends(g)); err != nil {
			txn.Discard()
			// As Badger's callback would: from another goroutine, the
			// writer receives it like any outcome.
			go func() { w.done <- commitDone{group: g, err: err} }()
			return
		}
	}
	txn.CommitWith(func(err error) { w.done <- commitDone{group: g, err: err} })
	w.next = w.db.NewTransaction(true)
}

// newTxn returns the transaction finish began for the next batch, or a new
// one.
//
// Badger begins a transaction only once every commit before it is marked
// done, which its watermark goroutine does after the commit's callback.
// Begun after the callback had answered the appends, the next batch waited
// for that goroutine to be scheduled again behind the Tasks the answers
// woke: 5-14 ms, in most of the commits slower than 10 ms at T = 50 on two
// busy cores. Begun
// right after the commit is handed to Badger (finish), the wait is
// registered first and the watermark goroutine wakes the writer itself.
// With one commit in flight (maxInflight) the writer has nothing else to
// do meanwhile. The writer's transactions only write, so one begun before
// other writers' commits (the memory's) neither misses nor conflicts with
// them; while it waits for a batch it only holds back Badger's discard of
// the versions those commits replace.
func (w *writer) newTxn() *badger.Txn {
	if t := w.next; t != nil {
		w.next = nil
		return t
	}
	return w.db.NewTransaction(true)
}

// commitAppends is a transaction's appends, for FailCommit.
func commitAppends(group []staged) []Append {
	out := make([]Append, len(group))
	for i, st := range group {
		out[i] = Append{TaskID: st.req.task, Events: st.req.events, Extra: st.req.extra}
	}
	return out
}

// loadMeta returns the committed metadata of task, nil when it has none,
// and the seq at which its record was written.
func (w *writer) loadMeta(task string) (*api.TaskMeta, uint64, error) {
	if e, ok := w.cache.get(task); ok {
		return e.meta, e.saved, nil
	}
	var m *api.TaskMeta
	var saved uint64
	err := w.db.View(func(txn *badger.Txn) error {
		var err error
		m, saved, err = getMetaAt(txn, task)
		return err
	})
	if errors.Is(err, ErrNotFound) {
		return nil, 0, nil
	}
	if err != nil {
		return nil, 0, fmt.Errorf("read meta of task %s: %w", task, err)
	}
	w.cache.put(task, m, saved)
	return m, saved, nil
}

// checkAndFold checks that req continues prev and returns the metadata
// after it, and what it changes of its owner's spend by day.
func checkAndFold(req *request, prev *api.TaskMeta) (*api.TaskMeta, []dayDelta, error) {
	if len(req.events) == 0 {
		if prev == nil {
			return nil, nil, fmt.Errorf("%w: task %s", ErrNotFound, req.task)
		}
		return prev, nil, nil
	}
	want := uint64(1)
	if prev != nil {
		want = prev.GetLastSeq() + 1
	}
	first := req.events[0]
	if first.GetSeq() != want {
		return nil, nil, fmt.Errorf("%w: task %s: append at seq %d, log continues at %d", ErrSeqConflict, req.task, first.GetSeq(), want)
	}
	if want == 1 && first.GetTaskCreated() == nil {
		return nil, nil, fmt.Errorf("%w: task %s: first event must be task_created", ErrInvalid, req.task)
	}
	meta := prev
	var deltas []dayDelta
	for i, ev := range req.events {
		if ev.GetTaskCreated() != nil && ev.GetSeq() != 1 {
			return nil, nil, fmt.Errorf("%w: task %s: task_created at seq %d", ErrInvalid, req.task, ev.GetSeq())
		}
		before := markSpend(meta.GetBudget())
		if i == 0 {
			meta = api.FoldMeta(prev, ev) // one copy of the meta for the append
		} else {
			api.FoldMetaInto(meta, ev)
		}
		if day, tokens, cost := spendChange(before, meta.GetBudget(), ev); day != "" {
			key := string(dayKey(meta.GetOwner(), day))
			if n := len(deltas); n > 0 && deltas[n-1].key == key {
				deltas[n-1].tokens += tokens
				deltas[n-1].cost += cost
			} else {
				deltas = append(deltas, dayDelta{key: key, day: day, tokens: tokens, cost: cost})
			}
		}
	}
	return meta, deltas, nil
}

// stage writes one planned request into txn.
func stage(txn *badger.Txn, st staged) error {
	req, prev, meta := st.req, st.prev, st.meta
	for i, ev := range req.events {
		if err := txn.Set(eventKey(req.task, ev.GetSeq()), req.raw[i]); err != nil {
			return err
		}
	}
	if len(req.events) > 0 {
		if st.saved == meta.GetLastSeq() { // plan chose to rewrite the record (saveMeta)
			mb, err := proto.MarshalOptions{Deterministic: true}.Marshal(meta)
			if err != nil {
				return err
			}
			if err := txn.Set(metaKey(req.task), mb); err != nil {
				return err
			}
		}
		if prev == nil || prev.GetStatus() != meta.GetStatus() {
			if prev != nil {
				if err := txn.Delete(statusKey(prev.GetStatus(), req.task)); err != nil {
					return err
				}
			}
			if err := txn.Set(statusKey(meta.GetStatus(), req.task), nil); err != nil {
				return err
			}
		}
		if prev == nil {
			if err := txn.Set(ownerKey(meta.GetOwner(), req.task), nil); err != nil {
				return err
			}
		}
		// A child's creation commits its entry in its parent's children
		// index (a spawn: in the same transaction as the parent's record
		// of it), and every change of its links, limits or spend rewrites
		// it with the metadata.
		if p := meta.GetParentId(); p != "" {
			v := encodeTreeValue(meta)
			if prev == nil || !bytes.Equal(v, encodeTreeValue(prev)) {
				if err := txn.Set(childKey(p, req.task), v); err != nil {
					return err
				}
			}
		}
		for _, ev := range req.events {
			var err error
			switch b := ev.Body.(type) {
			case *api.Event_ApprovalRequested:
				// The pending approval's record names its Task: it
				// keeps the whole event.
				var whole []byte
				whole, err = proto.MarshalOptions{Deterministic: true}.Marshal(ev)
				if err == nil {
					err = txn.Set(approvalKey(meta.GetOwner(), b.ApprovalRequested.GetApprovalId()), whole)
				}
			case *api.Event_ApprovalResolved:
				err = txn.Delete(approvalKey(meta.GetOwner(), b.ApprovalResolved.GetApprovalId()))
			}
			if err != nil {
				return err
			}
		}
	}
	for _, d := range st.days {
		if err := txn.Set([]byte(d.key), d.v.encode()); err != nil {
			return err
		}
	}
	for _, kv := range req.extra {
		var err error
		if kv.Delete {
			err = txn.Delete(kv.Key)
		} else {
			err = txn.Set(kv.Key, kv.Value)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// metaCache keeps recently written Task metadata for the writer, so that a
// conditional append needs no read. It is bounded: when full it is cleared
// and refilled lazily from the store.
type metaCache struct {
	max int
	m   map[string]cachedMeta
}

// cachedMeta is a Task's metadata and the seq at which its record was
// written.
type cachedMeta struct {
	meta  *api.TaskMeta
	saved uint64
}

func newMetaCache(max int) *metaCache {
	if max <= 0 {
		max = 4096
	}
	return &metaCache{max: max, m: make(map[string]cachedMeta)}
}

func (c *metaCache) get(task string) (cachedMeta, bool) {
	e, ok := c.m[task]
	return e, ok
}

func (c *metaCache) put(task string, m *api.TaskMeta, saved uint64) {
	if _, ok := c.m[task]; !ok && len(c.m) >= c.max {
		clear(c.m)
	}
	c.m[task] = cachedMeta{meta: m, saved: saved}
}

func (c *metaCache) drop(task string) { delete(c.m, task) }
