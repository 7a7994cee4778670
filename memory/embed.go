package memory

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"lemo/api"
	"lemo/excerpt"
	"lemo/persistence"
)

// Semantic recall (optional: Options.Embedder). A background embedder
// gives every indexed record of an event (each passage of a long one) a
// vector, and Recall fuses the records nearest to its query's vector with
// the lexical results (fuse, rank.go's weights apply to the fused
// relevance). Facts are embedded too, each on its own (they are not
// events): a fact recorded while the embedder runs is queued, and at start
// the facts without a vector (no code) are found.
//
// The embedder's cursor is durable: each Task's embedding watermark
// (persistence.EmbedWatermarkKey, the last seq whose records have vectors)
// is committed with the vectors of a batch, so after a restart the
// embedder resumes where it stopped (catch-up compares it with the index
// watermark of every Task). Batches are bounded (Options.EmbedBatch
// texts). A provider that fails is tried again after a backoff (1 s
// doubling to 5 min), with its error logged and counted (EmbeddingStatus);
// it never fails a Cycle:
// Recall then uses the lexical index alone and says so in the log.

// Embedder turns texts into vectors (one per text, in order, all of the
// same dimensions). The daemon binds it to the provider and model of
// memory.embeddings.model.
type Embedder interface {
	Embed(ctx context.Context, texts []string) ([][]float32, error)
}

// EmbedderFunc adapts a function to Embedder.
type EmbedderFunc func(ctx context.Context, texts []string) ([][]float32, error)

// Embed calls f.
func (f EmbedderFunc) Embed(ctx context.Context, texts []string) ([][]float32, error) {
	return f(ctx, texts)
}

// Defaults of semantic recall.
const (
	defaultEmbedBatch   = 16
	maxEmbedBatch       = 256
	defaultMinSimilar   = 0.5
	defaultMinMargin    = 0.4
	defaultEmbedTimeout = 10 * time.Second
	defaultQueryTimeout = 2 * time.Second
	// embedTextBytes bounds the text of one record sent to be embedded
	// (passages are at most passageBytes + passageOverlap).
	embedTextBytes = 2 << 10
	// semanticWeight is the most relevance a record found by its vector
	// alone reaches (a cosine of 1): half a perfect lexical match, so the
	// words' evidence leads (fuse in rank.go).
	semanticWeight = 0.5
)

// EmbeddingStatus reports the embedder's progress and health.
type EmbeddingStatus struct {
	// Vectors is the number of records with a vector.
	Vectors int
	// Behind is the number of Tasks with records not embedded yet, and
	// of facts not embedded yet.
	Behind int
	// Failures counts failed embedding calls (batches and queries);
	// LastError is the latest one's message.
	Failures  int64
	LastError string
	// LexicalOnly counts recalls that used the lexical index alone
	// because the query could not be embedded.
	LexicalOnly int64
}

// dirtyTask is a Task with records to embed: those up to seq (0: all its
// index holds), appended since marked (an append is marked before it
// commits; until then the index watermark is below seq).
type dirtyTask struct {
	owner  string
	seq    uint64
	marked time.Time
}

// dirtyFact is a fact to embed (facts are not events: each is embedded on
// its own, its code's presence says it was).
type dirtyFact struct {
	owner string
	doc   embedDoc
}

// factDoc is what a fact's vector is made from and says.
func factDoc(f *Fact) embedDoc {
	text := f.indexText()
	return embedDoc{ref: persistence.FactRef(f.Task, f.ID), text: text,
		meta: vecMeta{kind: KindFact, time: f.Time.UnixMilli(), hash: contentHash(text), textBytes: uint32(len(text)), source: f.source()}}
}

// markFact notes a fact to embed.
func (e *embedState) markFact(owner string, d embedDoc) {
	e.mu.Lock()
	e.facts[string(d.ref)] = dirtyFact{owner: owner, doc: d}
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// pendingCommit is how long the embedder waits for an append it was told
// of to commit; an append that failed is forgotten then (a later one, or
// the next start's catch-up, finds the Task's records).
const pendingCommit = time.Minute

// embedState is the embedder's state in the Memory.
type embedState struct {
	emb   Embedder
	model string
	vecs  *vecIndex
	// dropModel is the model the stored vectors were made with when it is
	// not model: the embedder drops them first.
	dropModel string

	mu sync.Mutex
	// dirty: the Tasks with records to embed; facts: the facts to embed,
	// by ref.
	dirty   map[string]dirtyTask
	facts   map[string]dirtyFact
	lastErr string
	// queryFailures counts the recall queries that failed in a row; none
	// is sent to the provider before queryRetry.
	queryFailures int
	queryRetry    time.Time

	failures    atomic.Int64
	lexicalOnly atomic.Int64
	// queryFailing: the latest query could not be embedded (the log says
	// so once per outage, the counter every time).
	queryFailing atomic.Bool
	kick         chan struct{}
	done         chan struct{}
	// codes is closed once the stored codes are loaded (or could not
	// be): a recall before it would search part of them.
	codes chan struct{}
}

// EmbeddingStatus returns the embedder's progress; ok is false when
// semantic recall is off.
func (m *Memory) EmbeddingStatus() (EmbeddingStatus, bool) {
	e := m.emb
	if e == nil {
		return EmbeddingStatus{}, false
	}
	e.mu.Lock()
	defer e.mu.Unlock()
	return EmbeddingStatus{Vectors: e.vecs.len(), Behind: len(e.dirty) + len(e.facts), Failures: e.failures.Load(), LastError: e.lastErr,
		LexicalOnly: e.lexicalOnly.Load()}, true
}

func (e *embedState) fail(err error) {
	e.failures.Add(1)
	e.mu.Lock()
	e.lastErr = err.Error()
	e.mu.Unlock()
}

// markDirty notes that task (of owner) has records to embed, up to seq.
func (e *embedState) markDirty(owner, task string, seq uint64, now time.Time) {
	e.mu.Lock()
	// The latest append's seq wins (0, from a scan, is what the index
	// held then: any later mark covers it).
	if d, ok := e.dirty[task]; !ok || seq > d.seq {
		e.dirty[task] = dirtyTask{owner: owner, seq: seq, marked: now}
	}
	e.mu.Unlock()
	select {
	case e.kick <- struct{}{}:
	default:
	}
}

// startEmbedder checks the embedding model against the store's, loads the
// codes and finds the Tasks behind, then embeds in the background until
// Close.
func (m *Memory) startEmbedder() error {
	e := m.emb
	var have []byte
	err := m.store.View(func(v *persistence.Snapshot) error {
		var err error
		have, err = v.GetCopy(persistence.EmbedModelKey())
		return err
	})
	if err != nil && !errors.Is(err, persistence.ErrNotFound) {
		return fmt.Errorf("memory: read the embedding model: %w", err)
	}
	switch {
	case err == nil && string(have) != e.model:
		// The embedder drops the old vectors first (in the background: a
		// large store takes a while), then records the new model.
		e.dropModel = string(have)
	case err != nil:
		if err := m.setEmbedModel(); err != nil {
			return err
		}
	}
	go m.runEmbedder()
	return nil
}

func (m *Memory) setEmbedModel() error {
	if err := m.store.UpdateIndex([]persistence.KV{{Key: persistence.EmbedModelKey(), Value: []byte(m.emb.model)}}); err != nil {
		return fmt.Errorf("memory: write the embedding model: %w", err)
	}
	return nil
}

// changeModel drops the vectors of the model the store's were made with
// and records the new one (a crash in between drops them again).
func (m *Memory) changeModel() error {
	e := m.emb
	m.log.Info().Str("was", e.dropModel).Str("model", e.model).Msg("memory: the embedding model changed: embedding every record again")
	if err := m.dropVectors(); err != nil {
		return fmt.Errorf("memory: drop the vectors of %q: %w", e.dropModel, err)
	}
	return m.setEmbedModel()
}

// dropVectors deletes every vector, code and embedding watermark.
func (m *Memory) dropVectors() error {
	owners, err := m.indexOwners()
	if err != nil {
		return err
	}
	var prefixes [][]byte
	for _, o := range owners {
		prefixes = append(prefixes, persistence.VectorCodePrefix(o), persistence.VectorPrefix(o))
	}
	prefixes = append(prefixes, persistence.EmbedWatermarkPrefix())
	for _, p := range prefixes {
		if err := m.deletePrefix(p, nil); err != nil {
			return err
		}
	}
	return nil
}

// deletePrefix deletes every key under prefix but except (nil: none), in
// batches of reindexBatch.
func (m *Memory) deletePrefix(prefix, except []byte) error {
	for {
		var batch []persistence.KV
		err := m.store.View(func(v *persistence.Snapshot) error {
			return v.Scan(prefix, persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
				if except != nil && string(k) == string(except) {
					return nil
				}
				batch = append(batch, persistence.KV{Key: append([]byte(nil), k...), Delete: true})
				if len(batch) == reindexBatch {
					return errBatchFull
				}
				return nil
			})
		})
		if err != nil && !errors.Is(err, errBatchFull) {
			return err
		}
		if len(batch) == 0 {
			return nil
		}
		if err := m.store.UpdateIndex(batch); err != nil {
			return err
		}
	}
}

// loadVectors reads every owner's codes into memory, calls loaded (recalls
// may search them from then on), and marks the facts and Tasks whose
// embedding lags.
func (m *Memory) loadVectors(loaded func()) error {
	e := m.emb
	owners, err := m.indexOwners()
	if err != nil {
		return err
	}
	return m.store.View(func(v *persistence.Snapshot) error {
		for _, o := range owners {
			pre := persistence.VectorCodePrefix(o)
			err := v.Scan(pre, persistence.ScanOptions{}, func(k, val []byte) error {
				dims, meta, code, err := decodeCode(val)
				if err != nil {
					return err
				}
				return e.vecs.add(o, string(k[len(pre):]), dims, meta, code)
			})
			if err != nil {
				return err
			}
		}
		loaded()
		for _, o := range owners {
			err := v.Scan(persistence.FactPrefix(o), persistence.ScanOptions{}, func(_, val []byte) error {
				var f Fact
				if err := json.Unmarshal(val, &f); err != nil {
					return fmt.Errorf("%w: fact: %v", errCorrupt, err)
				}
				d := factDoc(&f)
				has, err := v.Has(persistence.VectorCodeKey(o, d.ref))
				if err != nil || has {
					return err
				}
				e.mu.Lock()
				e.facts[string(d.ref)] = dirtyFact{owner: o, doc: d}
				e.mu.Unlock()
				return nil
			})
			if err != nil {
				return err
			}
		}
		pre := persistence.WatermarkPrefix()
		return v.Scan(pre, persistence.ScanOptions{}, func(k, val []byte) error {
			task := string(k[len(pre):])
			var done uint64
			err := v.Get(persistence.EmbedWatermarkKey(task), func(b []byte) error {
				done = persistence.ParseWatermark(b)
				return nil
			})
			if err != nil && !errors.Is(err, persistence.ErrNotFound) {
				return err
			}
			if done >= persistence.ParseWatermark(val) {
				return nil
			}
			meta, err := v.Meta(task)
			if errors.Is(err, persistence.ErrNotFound) {
				return nil
			}
			if err != nil {
				return err
			}
			e.mu.Lock()
			if _, ok := e.dirty[task]; !ok { // an append since marked it with its seq
				e.dirty[task] = dirtyTask{owner: meta.GetOwner()}
			}
			e.mu.Unlock()
			return nil
		})
	})
}

// runEmbedder embeds the records of dirty Tasks, batch by batch, until
// Close; after a failure it waits for the next interval.
func (m *Memory) runEmbedder() {
	e := m.emb
	defer close(e.done)
	codesOnce := sync.OnceFunc(func() { close(e.codes) })
	defer codesOnce()
	if err := m.waitLoaded(m.ctx); err != nil {
		return
	}
	if e.dropModel != "" {
		if err := m.changeModel(); err != nil {
			e.fail(err)
			m.log.Error().Err(err).Msg("memory: semantic recall is off until a restart")
			return
		}
	}
	err := m.loadVectors(codesOnce)
	codesOnce()
	if err != nil {
		e.fail(err)
		m.log.Error().Err(err).Msg("memory: cannot load the embeddings; semantic recall is off until a restart")
		return
	}
	e.mu.Lock()
	behind := len(e.dirty) // appends mark Tasks dirty meanwhile (markDirty)
	e.mu.Unlock()
	m.log.Info().Int("vectors", e.vecs.len()).Int("tasks_behind", behind).Msg("memory: semantic recall on")
	tick := time.NewTicker(m.opt.IndexInterval)
	defer tick.Stop()
	failures := 0
	var retry time.Time // after a failure, no call before this
	for {
		var waiting bool
		var err error
		if time.Now().After(retry) {
			waiting, err = m.embedDirty(m.ctx)
		}
		switch {
		case err != nil && m.ctx.Err() == nil:
			e.fail(err)
			failures++
			wait := embedBackoff(failures)
			retry = time.Now().Add(wait)
			m.log.Warn().Err(err).Int("failures", failures).Dur("retry_in", wait).
				Msg("memory: embedding failed; recall uses the lexical index for the records without vectors")
		case err == nil && !retry.IsZero() && time.Now().After(retry):
			m.log.Info().Int("failures", failures).Msg("memory: embedding works again")
			failures, retry = 0, time.Time{}
		}
		var soon <-chan time.Time
		switch {
		case waiting && err == nil:
			soon = time.After(commitPoll) // an append about to commit
		case !retry.IsZero():
			soon = time.After(time.Until(retry) + time.Millisecond)
		}
		select {
		case <-m.stop:
			return
		case <-e.kick:
		case <-tick.C:
		case <-soon:
		}
	}
}

// embedBackoff is how long the embedder waits after its nth failure in a
// row: a second, doubled with each failure, at most maxEmbedBackoff.
func embedBackoff(n int) time.Duration {
	d := time.Second
	for i := 1; i < n && d < maxEmbedBackoff; i++ {
		d *= 2
	}
	return min(d, maxEmbedBackoff)
}

// maxEmbedBackoff bounds the wait between embedding attempts.
const maxEmbedBackoff = 5 * time.Minute

// commitPoll is how soon the embedder looks again at a Task whose append
// it was told of before the append committed.
const commitPoll = 20 * time.Millisecond

// embedDirty embeds the records of every dirty Task; waiting says some
// were told of before their append committed.
func (m *Memory) embedDirty(ctx context.Context) (waiting bool, err error) {
	e := m.emb
	e.mu.Lock()
	tasks := make([]string, 0, len(e.dirty))
	for t := range e.dirty {
		tasks = append(tasks, t)
	}
	e.mu.Unlock()
	sort.Strings(tasks)
	for _, task := range tasks {
		if err := ctx.Err(); err != nil {
			return waiting, err
		}
		e.mu.Lock()
		d := e.dirty[task]
		delete(e.dirty, task) // a record appended from now marks it again
		e.mu.Unlock()
		reached, err := m.embedTask(ctx, d.owner, task)
		if err != nil {
			e.markDirty(d.owner, task, d.seq, d.marked)
			return waiting, fmt.Errorf("task %s: %w", task, err)
		}
		if reached < d.seq && m.opt.Now().Sub(d.marked) < pendingCommit {
			e.mu.Lock()
			if _, ok := e.dirty[task]; !ok {
				e.dirty[task] = d // not committed yet
			}
			e.mu.Unlock()
			waiting = true
		}
	}
	return waiting, m.embedFacts(ctx)
}

// embedFacts embeds the facts recorded since the last pass (or found
// without a vector at start), a batch of one owner's at a time.
func (m *Memory) embedFacts(ctx context.Context) error {
	e := m.emb
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		e.mu.Lock()
		var owner string
		var batch []dirtyFact
		for _, f := range e.facts {
			if owner == "" {
				owner = f.owner
			}
			if f.owner == owner && len(batch) < m.opt.EmbedBatch {
				batch = append(batch, f)
			}
		}
		for _, f := range batch {
			delete(e.facts, string(f.doc.ref))
		}
		e.mu.Unlock()
		if len(batch) == 0 {
			return nil
		}
		docs := make([]embedDoc, len(batch))
		for i, f := range batch {
			docs[i] = f.doc
		}
		if err := m.embedCommit(ctx, owner, docs); err != nil {
			e.mu.Lock()
			for _, f := range batch {
				if _, ok := e.facts[string(f.doc.ref)]; !ok {
					e.facts[string(f.doc.ref)] = f
				}
			}
			e.mu.Unlock()
			return fmt.Errorf("facts of %s: %w", owner, err)
		}
	}
}

// embedDoc is one record (or passage) to embed.
type embedDoc struct {
	ref  []byte
	text string
	meta vecMeta
}

// embedTask embeds the Task's records beyond its embedding watermark, up
// to its index watermark, in batches of Options.EmbedBatch texts, each
// committed with the watermark it reaches. It returns the index
// watermark it reached.
func (m *Memory) embedTask(ctx context.Context, owner, task string) (uint64, error) {
	var from, to uint64
	err := m.store.View(func(v *persistence.Snapshot) error {
		for _, x := range []struct {
			key []byte
			dst *uint64
		}{{persistence.EmbedWatermarkKey(task), &from}, {persistence.WatermarkKey(task), &to}} {
			err := v.Get(x.key, func(b []byte) error { *x.dst = persistence.ParseWatermark(b); return nil })
			if err != nil && !errors.Is(err, persistence.ErrNotFound) {
				return err
			}
		}
		return nil
	})
	if err != nil || from >= to {
		return to, err
	}
	// Windows of embedWindow events bound what one pass holds in memory.
	tools := make(map[string]string)
	for cur := from; cur < to; {
		end := min(cur+embedWindow, to)
		docs, err := m.embedDocs(owner, task, cur+1, end, tools)
		if err != nil {
			return 0, err
		}
		// Batches: a batch commits the watermark just below the record
		// that follows it; the last one reaches the window's end.
		batch := m.opt.EmbedBatch
		for len(docs) > batch {
			_, seq, _, _, _, _ := parseDocRef(string(docs[batch].ref))
			if err := m.embedCommit(ctx, owner, docs[:batch], embedMark(task, seq-1)); err != nil {
				return 0, err
			}
			docs = docs[batch:]
		}
		if err := m.embedCommit(ctx, owner, docs, embedMark(task, end)); err != nil {
			return 0, err
		}
		cur = end
	}
	return to, nil
}

// embedWindow is how many events embedTask reads at a time.
const embedWindow = 256

// embedDocs returns the records (passages of long ones) of the Task's
// events from..to to embed; tools gathers the names of the calls seen.
func (m *Memory) embedDocs(owner, task string, from, to uint64, tools map[string]string) ([]embedDoc, error) {
	var docs []embedDoc
	err := m.store.View(func(v *persistence.Snapshot) error {
		return v.Events(task, from, to, func(ev *api.Event) error {
			if c := ev.GetToolCallRecorded(); c != nil {
				tools[c.GetCallId()] = c.GetTool()
			}
			kind, text, _, source, untrusted, ok := recordText(ev, tools)
			if !ok || owner == "" {
				return nil
			}
			base := persistence.EventRef(task, ev.GetSeq())
			meta := vecMeta{kind: kind, untrusted: untrusted, time: ev.GetTime().AsTime().UnixMilli(), hash: contentHash(text),
				textBytes: uint32(len(text)), source: source}
			spans := passageSpans(text)
			if spans == nil {
				docs = append(docs, embedDoc{ref: base, text: text, meta: meta})
			}
			for _, s := range spans {
				docs = append(docs, embedDoc{ref: passageRef(base, s[0], s[1]), text: text[s[0]:s[1]], meta: meta})
			}
			return nil
		})
	})
	return docs, err
}

// embedMark is the record of a Task's embedding watermark.
func embedMark(task string, upTo uint64) persistence.KV {
	return persistence.KV{Key: persistence.EmbedWatermarkKey(task), Value: persistence.WatermarkValue(upTo)}
}

// embedCommit embeds docs and commits their vectors and codes with extra
// (a Task's embedding watermark) in one commit, then adds the codes to
// memory.
func (m *Memory) embedCommit(ctx context.Context, owner string, docs []embedDoc, extra ...persistence.KV) error {
	e := m.emb
	kvs := make([]persistence.KV, 0, 2*len(docs)+len(extra))
	type added struct {
		ref  string
		dims int
		meta vecMeta
		code []uint64
	}
	var adds []added
	if len(docs) > 0 {
		texts := make([]string, len(docs))
		for i, d := range docs {
			texts[i] = d.text
			if len(texts[i]) > embedTextBytes {
				texts[i] = excerpt.Head(texts[i], embedTextBytes)
			}
		}
		cctx, cancel := context.WithTimeout(ctx, m.opt.EmbedTimeout)
		vecs, err := e.emb.Embed(cctx, texts)
		cancel()
		if err != nil {
			return fmt.Errorf("embed %d records: %w", len(texts), err)
		}
		if len(vecs) != len(texts) {
			return fmt.Errorf("embed %d records: the provider returned %d vectors", len(texts), len(vecs))
		}
		for i, raw := range vecs {
			if len(raw) == 0 || len(raw) > MaxEmbeddingDims {
				return fmt.Errorf("embed: a vector of %d dimensions (accepted: 1 to %d)", len(raw), MaxEmbeddingDims)
			}
			u := unit(raw)
			if u == nil {
				continue // a zero vector says nothing: the record stays lexical
			}
			code := signCode(u)
			ref := docs[i].ref
			kvs = append(kvs,
				persistence.KV{Key: persistence.VectorKey(owner, ref), Value: encodeVector(u)},
				persistence.KV{Key: persistence.VectorCodeKey(owner, ref), Value: encodeCode(len(u), &docs[i].meta, code)})
			adds = append(adds, added{string(ref), len(u), docs[i].meta, code})
		}
		if d := e.vecs.dimsOr(len(vecs[0])); len(vecs[0]) != d {
			return fmt.Errorf("%w: the provider returned %d, the stored vectors have %d (was memory.embeddings.model changed without a restart?)", ErrEmbeddingDims, len(vecs[0]), d)
		}
	}
	kvs = append(kvs, extra...)
	if len(kvs) == 0 {
		return nil
	}
	if err := m.store.UpdateIndex(kvs); err != nil {
		return err
	}
	for _, a := range adds {
		if err := e.vecs.add(owner, a.ref, a.dims, a.meta, a.code); err != nil {
			return err
		}
	}
	// Recall results cached for the owner's Tasks did not see these; a
	// Task's own records (its recall never holds them) leave its result
	// valid, as in Postings. A fact's vector counts for every Task.
	byTask := make(map[string]int)
	for _, a := range adds {
		task, _, _, _, _, _ := parseDocRef(a.ref)
		byTask[task]++
	}
	for task, n := range byTask {
		m.recalls.added(owner, task, n)
	}
	return nil
}

// dimsOr returns the index's dimensions, or d when it holds none yet.
func (x *vecIndex) dimsOr(d int) int {
	x.mu.RLock()
	defer x.mu.RUnlock()
	if x.dims == 0 {
		return d
	}
	return x.dims
}

// embedQuery returns the unit vector of a recall's query, or nil (with
// the failure logged and counted) when it cannot be had: recall then uses
// the lexical index alone.
func (m *Memory) embedQuery(ctx context.Context, text string) []float32 {
	e := m.emb
	if e == nil {
		return nil
	}
	cctx, cancel := context.WithTimeout(ctx, m.opt.EmbedQueryTimeout)
	defer cancel()
	// After a start the stored codes load in the background; a recall
	// waits for them (within its query timeout) rather than search part
	// of them.
	waited := false
	select {
	case <-e.codes:
	default:
		waited = true
		select {
		case <-e.codes:
		case <-cctx.Done():
			if ctx.Err() == nil {
				e.lexicalOnly.Add(1)
			}
			return nil
		}
	}
	if e.vecs.len() == 0 {
		return nil
	}
	now := m.opt.Now()
	e.mu.Lock()
	skip := now.Before(e.queryRetry)
	e.mu.Unlock()
	if skip {
		// The provider failed the last query: Cycles do not wait for it
		// again before the backoff ends.
		e.lexicalOnly.Add(1)
		return nil
	}
	vecs, err := e.emb.Embed(cctx, []string{excerpt.Head(text, embedTextBytes)})
	if err == nil && (len(vecs) != 1 || len(vecs[0]) != e.vecs.dimsOr(len(vecs[0]))) {
		err = fmt.Errorf("%w: the query's vector does not match the stored ones", ErrEmbeddingDims)
	}
	var u []float32
	if err == nil {
		if u = unit(vecs[0]); u == nil {
			err = errors.New("the query's vector is zero")
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return nil // the Cycle was cancelled: not the provider's failure
		}
		if waited && cctx.Err() != nil {
			// The wait for the codes took the time the provider needed:
			// lexical this once, and not counted against the provider.
			e.lexicalOnly.Add(1)
			return nil
		}
		e.fail(err)
		n := e.lexicalOnly.Add(1)
		e.mu.Lock()
		e.queryFailures++
		e.queryRetry = now.Add(embedBackoff(e.queryFailures))
		e.mu.Unlock()
		if !e.queryFailing.Swap(true) {
			m.log.Warn().Err(err).Int64("lexical_only", n).
				Msg("memory: could not embed the recall query; recall uses the lexical index alone until it can (counted in lemo_memory_recall_lexical_only_total)")
		}
		return nil
	}
	if e.queryFailing.Swap(false) {
		e.mu.Lock()
		e.queryFailures, e.queryRetry = 0, time.Time{}
		e.mu.Unlock()
		m.log.Info().Msg("memory: recall queries are embedded again")
	}
	return u
}
