package memory

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/rs/zerolog"

	"lemo/api"
	"lemo/persistence"
	"lemo/prompt"
)

// Errors returned by the memory.
var (
	// ErrInvalid: a fact or a query is malformed; the message says what is
	// accepted.
	ErrInvalid = errors.New("memory: invalid")
	// ErrFactNotFound: a superseded fact does not exist (or belongs to
	// another owner).
	ErrFactNotFound = errors.New("memory: fact not found")
	// ErrClosed: the memory is closed.
	ErrClosed = errors.New("memory: closed")
)

// textCacheBytes bounds the cache of decoded record texts.
const textCacheBytes = 8 << 20

// rowCacheBytes bounds the decoded document table blocks kept (about
// 15 KB a block of 128 rows).
const rowCacheBytes = 8 << 20

// formatValue is the memory format this code reads and writes (see
// olderFormats for those it re-indexes).
const formatValue = "lemo-memory-4"

// Options tune the memory; zero values take the documented defaults.
type Options struct {
	Log zerolog.Logger
	// Now is the clock; nil means time.Now.
	Now func() time.Time
	// RecallTokens bounds a Cycle's recalled evidence in estimated tokens
	// (default and maximum prompt.RecallBudget, 8,000).
	RecallTokens int
	// RecallItems, when positive, bounds the number of recalled items; by
	// default only RecallTokens does (a ceiling, not a target: recall
	// returns nothing when nothing is relevant).
	RecallItems int
	// MinRelevance is the recall threshold: the least normalised score (0
	// to 1) an item needs to be recalled (default 0.2, calibrated on the
	// recall evaluation: see docs/memory.md).
	MinRelevance float64
	// MaxFactBytes bounds a fact's content (default 8 KiB).
	MaxFactBytes int
	// SegmentDocs is the number of pending documents that triggers a
	// segment build (default 256).
	SegmentDocs int
	// MergeFactor is how many segments of one size tier are merged into
	// one (default 8).
	MergeFactor int
	// IndexInterval is how often the background indexer looks for work
	// (default 1s); pending documents older than 2 intervals are always
	// built into a segment.
	IndexInterval time.Duration
	// CacheBytes bounds the cache of segment blocks (default 32 MiB).
	CacheBytes int
	// RecallReuse is how many Cycles in a row an unchanged recall query
	// may reuse its result after other Tasks of the owner added records
	// (recallcache.go); 0, the default here, reuses only while they added
	// none. lemo serve sets memory.recall_reuse_cycles (default 4).
	RecallReuse int
	// ReconcileInterval is how often the indexer scans for committed
	// pending documents the tracker missed (default 5m; see pending.go).
	ReconcileInterval time.Duration

	// Embedder, when set, turns on semantic recall: records get vectors in
	// the background and recall fuses the nearest ones with the lexical
	// results (embed.go). EmbedModel names the model (when it changes,
	// every record is embedded again).
	Embedder   Embedder
	EmbedModel string
	// EmbedBatch bounds the texts of one embedding call (default 16, at
	// most 256).
	EmbedBatch int
	// EmbedTimeout bounds one embedding call of the embedder (default
	// 10s).
	EmbedTimeout time.Duration
	// EmbedQueryTimeout bounds embedding a recall's query, which a Cycle
	// waits for (default 2s); after a failure, recalls use the lexical
	// index alone for a backoff (1s doubling to 5m) without calling.
	EmbedQueryTimeout time.Duration
	// MinSimilarity is the least cosine similarity a record found by its
	// vector needs to be recalled (default 0.5; not calibrated: see
	// docs/memory.md).
	MinSimilarity float64
	// MinSimilarityMargin raises the floor for a query to its baseline
	// (its mean similarity to the owner's records, estimated from their
	// sign codes) plus this margin, when that is above MinSimilarity and
	// the owner has at least 64 records (similarityFloor in vectors.go).
	// Default 0.4, calibrated with a real sentence model on the recall
	// evaluation (docs/memory.md); negative turns it off.
	MinSimilarityMargin float64

	// manual disables the background indexer (tests build with Flush).
	manual bool
}

func (o *Options) defaults() {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.RecallTokens <= 0 || o.RecallTokens > prompt.RecallBudget {
		o.RecallTokens = prompt.RecallBudget
	}
	if o.MinRelevance <= 0 {
		o.MinRelevance = 0.2
	}
	if o.MaxFactBytes <= 0 {
		o.MaxFactBytes = 8 << 10
	}
	if o.SegmentDocs <= 0 {
		o.SegmentDocs = 256
	}
	if o.MergeFactor < 2 {
		o.MergeFactor = 8
	}
	if o.IndexInterval <= 0 {
		o.IndexInterval = time.Second
	}
	if o.CacheBytes <= 0 {
		o.CacheBytes = 32 << 20
	}
	o.RecallReuse = max(o.RecallReuse, 0)
	if o.ReconcileInterval <= 0 {
		o.ReconcileInterval = 5 * time.Minute
	}
	if o.EmbedBatch <= 0 {
		o.EmbedBatch = defaultEmbedBatch
	}
	o.EmbedBatch = min(o.EmbedBatch, maxEmbedBatch)
	if o.EmbedTimeout <= 0 {
		o.EmbedTimeout = defaultEmbedTimeout
	}
	if o.EmbedQueryTimeout <= 0 {
		o.EmbedQueryTimeout = defaultQueryTimeout
	}
	if o.MinSimilarity <= 0 {
		o.MinSimilarity = defaultMinSimilar
	}
	switch {
	case o.MinSimilarityMargin == 0:
		o.MinSimilarityMargin = defaultMinMargin
	case o.MinSimilarityMargin < 0:
		o.MinSimilarityMargin = 0
	}
}

// Memory is the daemon's memory over its store: the search index, facts
// and recall. It is safe for concurrent use.
type Memory struct {
	store *persistence.Store
	opt   Options
	log   zerolog.Logger
	cache *blockCache
	// texts caches the decoded text of recently recalled records (events
	// and facts are immutable); recalls reuses a Task's unchanged recall.
	texts *blockCache
	// rows caches decoded document table blocks (see segment.row).
	rows    *lru[[]parsedRow]
	recalls *recallCache
	// recallsComputed counts recalls that searched (not reused).
	recallsComputed atomic.Int64

	track *tracker
	// emb is semantic recall's state; nil when it is off.
	emb *embedState

	mu        sync.Mutex
	segs      map[string]*segment // live segments by owner/seg, with their columns
	segOwners map[string]bool     // owners that have segments

	// viewMu orders queries' snapshots against builds' final commits
	// (queries read, builds write; see pending.go).
	viewMu sync.RWMutex
	// buildMu serialises index maintenance (builds, merges, cleanup).
	buildMu sync.Mutex
	nextSeg uint64
	seen    map[string]time.Time // owner -> when pending documents were first seen
	// merged holds the owners whose live segments were found to need no
	// merge and have had no segment built since (buildMu): maintenance
	// looks at their segments again only after a build. Merges are
	// decided by the segments' sizes alone, and only builds and merges
	// (both under buildMu) change the segments.
	merged map[string]bool

	kick chan struct{}
	// loaded is closed when load has run; loadErr is its error, which
	// queries and builds return from then on.
	loaded  chan struct{}
	loadErr error
	// stop is closed by Close; ctx is cancelled with it, ending a build
	// or merge in progress; done is closed when the indexer returned.
	stop      chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	done      chan struct{}
	closeOnce sync.Once
}

// Open opens the memory of store: it checks the memory format, indexes
// history that was written without the memory (the index is then never
// behind the log), and starts the background indexer, whose first step
// (load) removes what an interrupted index build left behind and loads the
// pending documents; queries wait for that step. Call it before the daemon
// starts appending, and Close it before closing the store.
func Open(ctx context.Context, store *persistence.Store, opt Options) (*Memory, error) {
	if store == nil {
		return nil, fmt.Errorf("%w: Open needs a store", ErrInvalid)
	}
	opt.defaults()
	m := &Memory{
		store:     store,
		opt:       opt,
		log:       opt.Log,
		cache:     newBlockCache(opt.CacheBytes),
		texts:     newBlockCache(textCacheBytes),
		rows:      newLRU(rowCacheBytes, rowsCost),
		recalls:   newRecallCache(),
		track:     newTracker(),
		segs:      make(map[string]*segment),
		segOwners: make(map[string]bool),
		seen:      make(map[string]time.Time),
		merged:    make(map[string]bool),
		kick:      make(chan struct{}, 1),
		loaded:    make(chan struct{}),
		stop:      make(chan struct{}),
		done:      make(chan struct{}),
	}
	m.ctx, m.cancel = context.WithCancel(context.Background())
	fail := func(err error) (*Memory, error) {
		m.cancel()
		return nil, err
	}
	old, err := m.checkFormat()
	if err != nil {
		return fail(err)
	}
	if old != "" {
		m.log.Info().Str("format", old).Str("new_format", formatValue).Msg("memory: the index was built by an older lemo: building it again from history and facts")
		facts, err := m.dropIndex()
		if err != nil {
			return fail(fmt.Errorf("memory: re-index a store of format %q: %w", old, err))
		}
		m.log.Info().Int("facts", facts).Msg("memory: facts indexed again; indexing history")
	}
	n, err := m.catchUp(ctx)
	if err != nil {
		return fail(fmt.Errorf("memory: index history written without the memory: %w", err))
	}
	if n > 0 {
		m.log.Info().Int("events", n).Msg("memory: indexed history that was written without the memory")
	}
	if old != "" {
		if err := m.store.UpdateIndex([]persistence.KV{{Key: persistence.IndexFormatKey(), Value: []byte(formatValue)}}); err != nil {
			return fail(fmt.Errorf("memory: write format: %w", err))
		}
	}
	go m.run()
	if opt.Embedder != nil {
		m.emb = &embedState{emb: opt.Embedder, model: opt.EmbedModel, vecs: newVecIndex(), dirty: make(map[string]dirtyTask), facts: make(map[string]dirtyFact),
			kick: make(chan struct{}, 1), done: make(chan struct{}), codes: make(chan struct{})}
		if err := m.startEmbedder(); err != nil {
			m.emb = nil
			_ = m.Close()
			return nil, err
		}
	}
	return m, nil
}

// load is the indexer's first step: it removes what interrupted index
// builds left and loads the pending documents. Both read whole key ranges
// (slow in a large store whose deletions Badger has not compacted yet), so
// they run here rather than in Open; queries and index maintenance wait
// for them (waitLoaded).
func (m *Memory) load() error {
	if err := m.cleanup(); err != nil {
		return fmt.Errorf("memory: clean up interrupted index builds: %w", err)
	}
	if _, err := m.loadPending(true); err != nil {
		return fmt.Errorf("memory: load pending documents: %w", err)
	}
	return nil
}

// waitLoaded returns once load has run (with its error), ctx ends or the
// memory is closed.
func (m *Memory) waitLoaded(ctx context.Context) error {
	select {
	case <-m.loaded:
		return m.loadErr
	default:
	}
	select {
	case <-m.loaded:
		return m.loadErr
	case <-ctx.Done():
		return ctx.Err()
	case <-m.stop:
		return ErrClosed
	}
}

// checkFormat writes the format marker of a new memory and checks an
// existing one; old is the store's format when it is one this code
// re-indexes.
func (m *Memory) checkFormat() (old string, err error) {
	var have []byte
	err = m.store.View(func(v *persistence.Snapshot) error {
		var err error
		have, err = v.GetCopy(persistence.IndexFormatKey())
		return err
	})
	switch {
	case errors.Is(err, persistence.ErrNotFound):
		return "", m.store.UpdateIndex([]persistence.KV{{Key: persistence.IndexFormatKey(), Value: []byte(formatValue)}})
	case err != nil:
		return "", fmt.Errorf("memory: read format: %w", err)
	case olderFormats[string(have)]:
		return string(have), nil
	case string(have) != formatValue:
		return "", fmt.Errorf("memory: the store's memory has format %q, this lemo reads %q", have, formatValue)
	}
	return "", nil
}

// Close stops the background indexer and waits for it. Pending documents
// stay pending (searchable) and are built into segments after the next
// Open. It is safe to call more than once.
func (m *Memory) Close() error {
	m.closeOnce.Do(func() {
		close(m.stop)
		m.cancel()
		<-m.done
		if m.emb != nil {
			<-m.emb.done
		}
	})
	return nil
}

func (m *Memory) closed() bool {
	select {
	case <-m.stop:
		return true
	default:
		return false
	}
}

// signal wakes the indexer without blocking.
func (m *Memory) signal() {
	select {
	case m.kick <- struct{}{}:
	default:
	}
}

// run is the background indexer: it builds pending documents into
// segments and merges segments, until Close.
func (m *Memory) run() {
	defer close(m.done)
	ctx := m.ctx
	if err := m.load(); err != nil {
		m.loadErr = err
		close(m.loaded)
		m.log.Error().Err(err).Msg("memory: the index cannot be used until this is fixed; search and recall fail with this error")
		<-m.stop
		return
	}
	close(m.loaded)
	tick := time.NewTicker(m.opt.IndexInterval)
	defer tick.Stop()
	reconcile := time.NewTicker(m.opt.ReconcileInterval)
	defer reconcile.Stop()
	for {
		// The cache of segments is pruned at the tick, not at every
		// append's kick: its scan of every owner's segment keys was 2.6%
		// of a lone Task's CPU a step.
		prune := false
		select {
		case <-m.stop:
			return
		case <-m.kick:
		case <-tick.C:
			prune = true
		case <-reconcile.C:
			if n, err := m.loadPending(false); err != nil {
				m.log.Warn().Err(err).Msg("memory: reconciliation scan failed")
			} else if n > 0 {
				m.recalls.reset() // records no generation counted
				m.log.Warn().Int("documents", n).Msg("memory: reconciliation found pending documents the tracker missed")
			}
		}
		if m.opt.manual {
			continue
		}
		if err := m.maintain(ctx, false); err != nil && ctx.Err() == nil {
			m.log.Warn().Err(err).Msg("memory: index maintenance failed; retrying later")
		}
		if prune {
			m.pruneCaches()
		}
	}
}

// Flush builds every pending document into a segment and merges segments
// as the merge policy asks, now. The background indexer does the same on
// its own; Flush makes it happen before it returns (tests, benchmarks,
// tools that want a compact index).
func (m *Memory) Flush(ctx context.Context) error {
	if m.closed() {
		return ErrClosed
	}
	if err := m.waitLoaded(ctx); err != nil {
		return err
	}
	if err := m.maintain(ctx, true); err != nil {
		return err
	}
	m.pruneCaches()
	return nil
}

// Postings implements actors.Memory: the pending index documents of the
// indexable events among events, and the Task's index watermark, to be
// committed with the events. It does no I/O: besides computing them it
// registers the documents' keys with the pending tracker (a map insert, see
// pending.go) and wakes the indexer without blocking.
func (m *Memory) Postings(owner string, events []*api.Event) []persistence.KV {
	kvs := IndexEvents(owner, events)
	if endsTask(events) {
		// Its cached recall has no next Cycle to serve (a dropped cache
		// entry is all a failed append costs).
		m.recalls.forget(events[0].GetTaskId())
	}
	if len(kvs) > 1 {
		now := m.opt.Now()
		for _, kv := range kvs[:len(kvs)-1] {
			m.track.add(owner, string(kv.Key), nil, now)
		}
		m.recalls.added(owner, events[0].GetTaskId(), len(kvs)-1)
		m.signal()
		if m.emb != nil {
			m.emb.markDirty(owner, events[0].GetTaskId(), events[len(events)-1].GetSeq(), m.opt.Now())
		}
	}
	return kvs
}

// endsTask reports whether events leave their Task ended: the last status
// they record is finished, failed or cancelled.
func endsTask(events []*api.Event) bool {
	for i := len(events) - 1; i >= 0; i-- {
		if sc := events[i].GetStatusChanged(); sc != nil {
			return api.StatusEnded(sc.GetStatus())
		}
	}
	return false
}

// IndexEvents returns the index records of events of one Task of owner:
// a pending document for each indexable event (user and assistant
// messages, retained tool results, tool failures and failures; one for
// each passage of a long one, see passage.go) and the
// Task's index watermark (the last seq of events). It is a pure function.
// Writers use Postings, which also tells the memory about the documents;
// records of IndexEvents committed otherwise are found by the next
// reconciliation scan or Open.
func IndexEvents(owner string, events []*api.Event) []persistence.KV {
	if len(events) == 0 {
		return nil
	}
	var tools map[string]string
	for _, ev := range events {
		if c := ev.GetToolCallRecorded(); c != nil {
			if tools == nil {
				tools = make(map[string]string)
			}
			tools[c.GetCallId()] = c.GetTool()
		}
	}
	var kvs []persistence.KV
	task := events[0].GetTaskId()
	if owner != "" {
		for _, ev := range events {
			kind, text, json, source, untrusted, ok := recordText(ev, tools)
			if !ok {
				continue
			}
			for _, d := range analyzeRecord(docInfo{
				ref:       string(persistence.EventRef(task, ev.GetSeq())),
				kind:      kind,
				untrusted: untrusted,
				time:      ev.GetTime().AsTime().UnixMilli(),
				source:    source,
			}, text, json) {
				kvs = append(kvs, persistence.KV{Key: persistence.PendingKey(owner, []byte(d.ref)), Value: d.encode()})
			}
		}
	}
	last := events[len(events)-1].GetSeq()
	return append(kvs, persistence.KV{Key: persistence.WatermarkKey(task), Value: persistence.WatermarkValue(last)})
}
