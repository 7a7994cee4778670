package memory

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"time"

	"lemo/api"
	"lemo/persistence"
)

// maxBuildDocs bounds the pending documents built into one segment (the
// final commit deletes them all, in one transaction).
const maxBuildDocs = 2048

// owners returns the owners that have pending documents or segments.
func (m *Memory) owners() []string {
	set := make(map[string]bool)
	for _, o := range m.track.ownerNames() {
		set[o] = true
	}
	m.mu.Lock()
	for o := range m.segOwners {
		set[o] = true
	}
	m.mu.Unlock()
	out := make([]string, 0, len(set))
	for o := range set {
		out = append(out, o)
	}
	sort.Strings(out)
	return out
}

// indexOwners returns the owners that have index records in the store.
func (m *Memory) indexOwners() ([]string, error) {
	var out []string
	err := m.store.View(func(v *persistence.Snapshot) error {
		return v.Children(persistence.IndexPrefix(), func(name string) error {
			out = append(out, name)
			return nil
		})
	})
	return out, err
}

// maintain builds pending documents into segments (all of them when force
// is set, else batches of SegmentDocs and documents waiting for two
// intervals) and merges segments tier by tier.
func (m *Memory) maintain(ctx context.Context, force bool) error {
	m.buildMu.Lock()
	defer m.buildMu.Unlock()
	for _, owner := range m.owners() {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := m.buildPending(ctx, owner, force); err != nil {
			return fmt.Errorf("owner %s: build: %w", owner, err)
		}
		if m.merged[owner] {
			continue // no segment built since the last look
		}
		if err := m.mergeTiers(ctx, owner); err != nil {
			return fmt.Errorf("owner %s: merge: %w", owner, err)
		}
		m.merged[owner] = true
	}
	return nil
}

func (m *Memory) buildPending(ctx context.Context, owner string, force bool) error {
	if first, ok := m.seen[owner]; ok && !force && tooSoonToBuild(m.track.count(owner), m.opt.SegmentDocs, m.opt.Now().Sub(first), m.opt.IndexInterval) {
		return nil
	}
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var docs []*pdoc
		err := m.view(func(v *persistence.Snapshot) error {
			var err error
			docs, err = m.pendingDocs(v, owner, maxBuildDocs)
			return err
		})
		if err != nil {
			return err
		}
		if len(docs) == 0 {
			delete(m.seen, owner)
			return nil
		}
		if !force && len(docs) < m.opt.SegmentDocs {
			now := m.opt.Now()
			first, ok := m.seen[owner]
			if !ok {
				m.seen[owner] = now
				return nil
			}
			if tooSoonToBuild(len(docs), m.opt.SegmentDocs, now.Sub(first), m.opt.IndexInterval) {
				return nil
			}
		}
		if err := m.build(owner, docs); err != nil {
			return err
		}
		delete(m.seen, owner)
		if len(docs) < maxBuildDocs {
			return nil
		}
	}
}

// tooSoonToBuild says, from the tracker alone, that an owner's pending
// documents make no segment yet: tracked keys (at least as many as the
// committed documents) fewer than segmentDocs, the first of them seen
// less than two intervals ago (waited). buildPending reads the documents
// only once it may build: every append wakes the indexer, and reading
// them all to find too few was 4% of a lone Task's CPU a step.
func tooSoonToBuild(tracked, segmentDocs int, waited, interval time.Duration) bool {
	return tracked < segmentDocs && waited < 2*interval
}

// build writes docs as a new segment and, in the commit that makes it
// live, deletes them from the pending documents.
func (m *Memory) build(owner string, docs []*pdoc) error {
	seg := m.nextSeg
	m.nextSeg++
	w := newSegWriter(owner, seg, m.store.UpdateIndex)
	inverted := make(map[string][]uint32) // term -> documents, in order
	tfs := make(map[string][]uint32)      // term -> frequencies, parallel
	for i, d := range docs {
		task, _, _, _, _, _ := parseDocRef(d.ref)
		row := docRow{ref: d.ref, source: d.source, hash: d.hash, textBytes: d.textBytes, untrusted: d.untrusted}
		if err := w.addDoc(d.kind, d.norm, d.time, &row); err != nil {
			return err
		}
		w.hdr.sumLen += uint64(d.length)
		for _, t := range d.terms {
			inverted[t.term] = append(inverted[t.term], uint32(i))
			tfs[t.term] = append(tfs[t.term], t.tf)
		}
		tt := taskTerm(task)
		inverted[tt] = append(inverted[tt], uint32(i))
		tfs[tt] = append(tfs[tt], 1)
	}
	terms := make([]string, 0, len(inverted))
	for t := range inverted {
		terms = append(terms, t)
	}
	sort.Strings(terms)
	for _, t := range terms {
		w.beginTerm(t)
		ds, fs := inverted[t], tfs[t]
		for i := range ds {
			if err := w.addPosting(ds[i], fs[i]); err != nil {
				return err
			}
		}
		if err := w.endTerm(); err != nil {
			return err
		}
	}
	hdr, err := w.finish()
	if err != nil {
		return err
	}
	final := make([]persistence.KV, 0, len(docs)+1)
	final = append(final, hdr)
	keys := make([]string, len(docs))
	for i, d := range docs {
		key := persistence.PendingKey(owner, []byte(d.ref))
		keys[i] = string(key)
		final = append(final, persistence.KV{Key: key, Delete: true})
	}
	// The commit and the tracker's change are one step for queries: no
	// snapshot sees the documents both pending and in the segment.
	m.viewMu.Lock()
	defer m.viewMu.Unlock()
	if err := m.store.UpdateIndex(final); err != nil {
		return err
	}
	m.track.drop(owner, keys...)
	m.mu.Lock()
	m.segOwners[owner] = true
	m.mu.Unlock()
	delete(m.merged, owner) // its tiers may need a merge now
	return nil
}

// tier is a segment's size class: segments of one tier are merged together.
func (m *Memory) tier(docs uint32) int {
	t := 0
	for lim := uint64(m.opt.SegmentDocs) * uint64(m.opt.MergeFactor); uint64(docs) >= lim; lim *= uint64(m.opt.MergeFactor) {
		t++
	}
	return t
}

func (m *Memory) mergeTiers(ctx context.Context, owner string) error {
	for {
		if err := ctx.Err(); err != nil {
			return err
		}
		var segs []*segment
		err := m.store.View(func(v *persistence.Snapshot) error {
			var err error
			segs, err = m.liveSegments(v, owner)
			return err
		})
		if err != nil {
			return err
		}
		byTier := make(map[int][]*segment)
		pick := -1
		for _, s := range segs {
			t := m.tier(s.hdr.docs)
			byTier[t] = append(byTier[t], s)
			if len(byTier[t]) >= m.opt.MergeFactor && (pick < 0 || t < pick) {
				pick = t
			}
		}
		if pick < 0 {
			return nil
		}
		if err := m.merge(ctx, owner, byTier[pick][:m.opt.MergeFactor]); err != nil {
			return err
		}
	}
}

// termCursor walks the entries of one input segment's term blocks.
type termCursor struct {
	seg     *segment
	offset  uint32
	block   uint32
	terms   []string
	entries []entry
	i       int
}

func (c *termCursor) load(src blockSource) error {
	c.terms, c.entries, c.i = c.terms[:0], c.entries[:0], 0
	for c.block < uint32(len(c.seg.hdr.firstTerms)) && len(c.terms) == 0 {
		blk, err := src.get(c.seg.owner, persistence.BlockTerms, c.seg.hdr.seg, c.block)
		if err != nil {
			return err
		}
		c.block++
		err = eachEntry(blk, func(term string, e entry) error {
			c.terms = append(c.terms, term)
			c.entries = append(c.entries, e)
			return nil
		})
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *termCursor) done() bool { return c.i >= len(c.terms) }

func (c *termCursor) next(src blockSource) error {
	c.i++
	if c.i >= len(c.terms) {
		return c.load(src)
	}
	return nil
}

// merge writes the documents of inputs (oldest first) as one new segment
// and, in the commit that makes it live, removes the inputs' headers; their
// blocks are deleted after.
func (m *Memory) merge(ctx context.Context, owner string, inputs []*segment) error {
	seg := m.nextSeg
	m.nextSeg++
	w := newSegWriter(owner, seg, m.store.UpdateIndex)
	var merged columns
	err := m.store.View(func(v *persistence.Snapshot) error {
		src := blockSource{v: v, cache: m.cache}
		raw := blockSource{v: v, cache: nil}
		cursors := make([]*termCursor, 0, len(inputs))
		var offset uint32
		for _, in := range inputs {
			cols, err := in.loadColumns(src)
			if err != nil {
				return err
			}
			for b := uint32(0); b < in.hdr.docBlocks; b++ {
				blk, err := raw.get(owner, persistence.BlockDocs, in.hdr.seg, b)
				if err != nil {
					return err
				}
				rows, err := decodeDocRows(blk)
				if err != nil {
					return err
				}
				for i := range rows {
					d := b*docBlockDocs + uint32(i)
					if err := w.addDoc(Kind(cols.kinds[d]), cols.norms[d], cols.times[d], &rows[i]); err != nil {
						return err
					}
				}
			}
			w.hdr.sumLen += in.hdr.sumLen
			merged.kinds = append(merged.kinds, cols.kinds...)
			merged.norms = append(merged.norms, cols.norms...)
			merged.times = append(merged.times, cols.times...)
			c := &termCursor{seg: in, offset: offset}
			if err := c.load(raw); err != nil {
				return err
			}
			cursors = append(cursors, c)
			offset += in.hdr.docs
		}
		if w.hdr.docs != offset {
			return fmt.Errorf("%w: merge read %d documents of %d", errCorrupt, w.hdr.docs, offset)
		}
		for {
			if err := ctx.Err(); err != nil {
				return err
			}
			min := ""
			found := false
			for _, c := range cursors {
				if !c.done() && (!found || c.terms[c.i] < min) {
					min, found = c.terms[c.i], true
				}
			}
			if !found {
				return nil
			}
			w.beginTerm(min)
			var perr error
			for _, c := range cursors {
				if c.done() || c.terms[c.i] != min {
					continue
				}
				off := c.offset
				err := c.seg.postings(raw, c.entries[c.i], func(doc, tf uint32) {
					if perr == nil {
						perr = w.addPosting(doc+off, tf)
					}
				})
				if err == nil {
					err = perr
				}
				if err != nil {
					return err
				}
				if err := c.next(raw); err != nil {
					return err
				}
			}
			if err := w.endTerm(); err != nil {
				return err
			}
		}
	})
	if err != nil {
		return err
	}
	hdr, err := w.finish()
	if err != nil {
		return err
	}
	final := []persistence.KV{hdr}
	for _, in := range inputs {
		final = append(final, persistence.KV{Key: persistence.SegmentKey(owner, in.hdr.seg), Delete: true})
	}
	if err := m.store.UpdateIndex(final); err != nil {
		return err
	}
	h := w.hdr
	m.mu.Lock()
	for _, in := range inputs {
		delete(m.segs, segID(owner, in.hdr.seg))
	}
	m.segs[segID(owner, seg)] = &segment{owner: owner, hdr: &h, cols: &merged}
	m.mu.Unlock()
	for _, in := range inputs {
		if err := m.dropBlocks(owner, in.hdr.seg); err != nil {
			return err
		}
	}
	return nil
}

var blockFamilies = []byte{persistence.BlockTerms, persistence.BlockColumns, persistence.BlockDocs, persistence.BlockOverflow}

// dropBlocks deletes the blocks of a segment that is no longer live.
func (m *Memory) dropBlocks(owner string, seg uint64) error {
	for _, fam := range blockFamilies {
		var keys [][]byte
		err := m.store.View(func(v *persistence.Snapshot) error {
			return v.Scan(persistence.BlockPrefix(owner, fam, seg), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
				keys = append(keys, append([]byte(nil), k...))
				return nil
			})
		})
		if err != nil {
			return err
		}
		if err := m.deleteKeys(keys); err != nil {
			return err
		}
	}
	return nil
}

func (m *Memory) deleteKeys(keys [][]byte) error {
	for len(keys) > 0 {
		n := min(len(keys), 4096)
		kvs := make([]persistence.KV, n)
		for i := range kvs {
			kvs[i] = persistence.KV{Key: keys[i], Delete: true}
		}
		if err := m.store.UpdateIndex(kvs); err != nil {
			return err
		}
		keys = keys[n:]
	}
	return nil
}

// cleanup deletes the blocks of segments that never became live (a build
// or merge interrupted before its header commit) or were replaced (a merge
// interrupted before it deleted its inputs), and sets the next segment
// number above every one in use.
func (m *Memory) cleanup() error {
	m.buildMu.Lock()
	defer m.buildMu.Unlock()
	owners, err := m.indexOwners()
	if err != nil {
		return err
	}
	for _, owner := range owners {
		live := make(map[uint64]bool)
		var orphans [][]byte
		err := m.store.View(func(v *persistence.Snapshot) error {
			err := v.Scan(persistence.SegmentPrefix(owner), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
				s := persistence.SegmentFromKey(k)
				live[s] = true
				m.nextSeg = max(m.nextSeg, s+1)
				m.mu.Lock()
				m.segOwners[owner] = true
				m.mu.Unlock()
				return nil
			})
			if err != nil {
				return err
			}
			for _, fam := range blockFamilies {
				err := v.Scan(persistence.BlockFamilyPrefix(owner, fam), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
					s, ok := persistence.BlockSegment(owner, fam, k)
					if !ok {
						return nil
					}
					m.nextSeg = max(m.nextSeg, s+1)
					if !live[s] {
						orphans = append(orphans, append([]byte(nil), k...))
					}
					return nil
				})
				if err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		if len(orphans) > 0 {
			m.log.Info().Str("owner", owner).Int("blocks", len(orphans)).Msg("memory: removing blocks of interrupted index builds")
		}
		if err := m.deleteKeys(orphans); err != nil {
			return err
		}
	}
	return nil
}

// catchUp indexes the events that were written while the store ran
// without the memory: those of every Task whose index watermark is below
// its last seq. The store marks such Tasks (persistence.UnindexedKey) in
// the transaction that appends their events, so only the marked Tasks
// are read; a store written before markers existed is compared Task by
// Task once, then persistence.MarkersKey says it need not be again. It
// returns the number of events read.
func (m *Memory) catchUp(ctx context.Context) (int, error) {
	var todo []behind
	var cleared []persistence.KV // markers of Tasks found not behind
	full := false
	err := m.store.View(func(v *persistence.Snapshot) error {
		has, err := v.Has(persistence.MarkersKey())
		if err != nil {
			return err
		}
		full = !has
		check := func(meta *api.TaskMeta) error {
			var wm uint64
			err := v.Get(persistence.WatermarkKey(meta.GetTaskId()), func(val []byte) error {
				wm = persistence.ParseWatermark(val)
				return nil
			})
			if err != nil && !errors.Is(err, persistence.ErrNotFound) {
				return err
			}
			if wm < meta.GetLastSeq() {
				todo = append(todo, behind{meta.GetTaskId(), meta.GetOwner(), wm + 1, meta.GetLastSeq()})
			} else if !full {
				cleared = append(cleared, persistence.KV{Key: persistence.UnindexedKey(meta.GetTaskId()), Delete: true})
			}
			return nil
		}
		if full {
			return v.EachMeta(check)
		}
		pre := persistence.UnindexedPrefix()
		return v.Scan(pre, persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
			task := string(k[len(pre):])
			meta, err := v.Meta(task)
			if errors.Is(err, persistence.ErrNotFound) {
				cleared = append(cleared, persistence.KV{Key: persistence.UnindexedKey(task), Delete: true})
				return nil
			}
			if err != nil {
				return err
			}
			return check(meta)
		})
	})
	if err != nil {
		return 0, err
	}
	n, err := m.indexBehind(ctx, todo)
	if err != nil {
		return n, err
	}
	if full {
		// Markers of Tasks the full comparison found not behind (left by
		// appends since this version) are cleared with the others below.
		err = m.store.View(func(v *persistence.Snapshot) error {
			return v.Scan(persistence.UnindexedPrefix(), persistence.ScanOptions{KeysOnly: true}, func(k, _ []byte) error {
				cleared = append(cleared, persistence.KV{Key: append([]byte(nil), k...), Delete: true})
				return nil
			})
		})
		if err != nil {
			return n, err
		}
		cleared = append(cleared, persistence.KV{Key: persistence.MarkersKey(), Value: []byte{}})
	}
	if len(cleared) > 0 {
		if err := m.store.UpdateIndex(cleared); err != nil {
			return n, err
		}
	}
	return n, nil
}

// behind is a Task whose events from..to the index does not hold.
type behind struct {
	task, owner string
	from, to    uint64
}

// indexBehind indexes the events of each Task in todo, with the deletion of
// its unindexed marker in the commit of its last batch.
func (m *Memory) indexBehind(ctx context.Context, todo []behind) (int, error) {
	n := 0
	for _, b := range todo {
		var batch []*api.Event
		size := 0
		flush := func(also []persistence.KV) error {
			if len(batch) == 0 && len(also) == 0 {
				return nil
			}
			kvs := append(IndexEvents(b.owner, batch), also...)
			_, err := m.store.Append(ctx, persistence.Append{TaskID: b.task, Extra: kvs})
			n += len(batch)
			batch, size = nil, 0
			return err
		}
		err := m.store.Events(b.task, b.from, b.to, func(ev *api.Event) error {
			batch = append(batch, ev)
			size += eventTextSize(ev)
			if size >= commitBytes || len(batch) >= 512 {
				return flush(nil)
			}
			return nil
		})
		if err == nil {
			err = flush([]persistence.KV{{Key: persistence.UnindexedKey(b.task), Delete: true}})
		}
		if err != nil {
			return n, fmt.Errorf("task %s: %w", b.task, err)
		}
	}
	return n, nil
}

func eventTextSize(ev *api.Event) int {
	_, text, _, _, _, ok := recordText(ev, nil)
	if !ok {
		return 16
	}
	return len(text) + 16
}
