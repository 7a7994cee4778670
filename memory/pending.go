package memory

import (
	"errors"
	"fmt"
	"sort"
	"sync"
	"time"

	"lemo/persistence"
)

// Pending documents are found through a tracker, not by scanning their key
// range: every segment build deletes the documents it holds, and Badger
// keeps deletion markers until compaction reaches the last level, so after
// a few hundred thousand documents a scan of the (nearly empty) range would
// step over as many markers on every query.
//
// The tracker holds every key that may be a committed pending document:
//   - Open loads all of them (one scan, before the daemon runs);
//   - Postings adds the keys it returns, before their append commits;
//   - RecordFact adds a fact's key after its commit;
//   - a reconciliation scan in the background (Options.ReconcileInterval)
//     adds any committed key the tracker lacks.
//
// A query reads the tracker's entries against its snapshot: a key not yet
// seen committed is looked up (found: decoded once and kept; still absent
// after pendingGrace: its append failed, and the entry is dropped). A
// build's final commit and the removal of its documents from the tracker
// happen together under Memory.viewMu, which every query holds for its
// whole snapshot, so a query counts each document once: as pending before
// the build, in the segment after it. A document committed after a query's
// snapshot began may be counted by that query: it is committed, only later
// than the snapshot.
const pendingGrace = time.Minute

type pendEntry struct {
	key string
	// doc is set once the key was seen committed.
	doc   *pdoc
	added time.Time
}

type tracker struct {
	mu     sync.Mutex
	owners map[string]*ownerPending
}

// ownerPending is one owner's tracked keys and, cached, the set queries
// read (extended by the documents confirmed since, made anew when a build
// removed some).
type ownerPending struct {
	entries     map[string]*pendEntry
	unconfirmed int
	// waiting are the unconfirmed entries (keys to look up).
	waiting map[string]*pendEntry
	gen     uint64 // changes of the confirmed documents
	set     *pendingSet
	setGen  uint64
	// added are the documents confirmed since set was made, and dropped
	// tells that a confirmed document left since: the set is then made
	// anew, else it is extended (see Memory.pendingSet).
	added   []*pdoc
	dropped bool
}

func newTracker() *tracker { return &tracker{owners: make(map[string]*ownerPending)} }

func (t *tracker) owner(owner string) *ownerPending {
	op := t.owners[owner]
	if op == nil {
		op = &ownerPending{entries: make(map[string]*pendEntry), waiting: make(map[string]*pendEntry)}
		t.owners[owner] = op
	}
	return op
}

// add registers key of owner; doc is nil when it is not known committed.
// An entry already there is kept (and confirmed when doc is given).
func (t *tracker) add(owner, key string, doc *pdoc, now time.Time) {
	t.mu.Lock()
	defer t.mu.Unlock()
	op := t.owner(owner)
	if e := op.entries[key]; e != nil {
		if e.doc == nil && doc != nil {
			op.confirmed(e, doc)
		}
		return
	}
	e := &pendEntry{key: key, doc: doc, added: now}
	op.entries[key] = e
	if doc == nil {
		op.unconfirmed++
		op.waiting[key] = e
	} else {
		op.gen++
		op.added = append(op.added, doc)
	}
}

// confirmed records that unconfirmed entry e is committed with doc.
func (op *ownerPending) confirmed(e *pendEntry, doc *pdoc) {
	e.doc = doc
	op.unconfirmed--
	delete(op.waiting, e.key)
	op.gen++
	op.added = append(op.added, doc)
}

// entries returns copies of owner's entries: all of them in key order
// when limit is 0, else at most limit of them in no particular order.
func (t *tracker) entries(owner string, limit int) []pendEntry {
	t.mu.Lock()
	var es map[string]*pendEntry
	if op := t.owners[owner]; op != nil {
		es = op.entries
	}
	n := len(es)
	if limit > 0 {
		n = min(n, limit)
	}
	out := make([]pendEntry, 0, n)
	for _, e := range es {
		if len(out) == n {
			break
		}
		out = append(out, *e)
	}
	t.mu.Unlock()
	if limit == 0 {
		sort.Slice(out, func(i, j int) bool { return out[i].key < out[j].key })
	}
	return out
}

func (t *tracker) ownerNames() []string {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]string, 0, len(t.owners))
	for o, op := range t.owners {
		if len(op.entries) > 0 {
			out = append(out, o)
		}
	}
	sort.Strings(out)
	return out
}

func (t *tracker) confirm(owner, key string, doc *pdoc) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op := t.owners[owner]; op != nil {
		if e := op.entries[key]; e != nil && e.doc == nil {
			op.confirmed(e, doc)
		}
	}
}

func (t *tracker) drop(owner string, keys ...string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	op := t.owners[owner]
	if op == nil {
		return
	}
	for _, k := range keys {
		e := op.entries[k]
		if e == nil {
			continue
		}
		delete(op.entries, k)
		if e.doc == nil {
			op.unconfirmed--
			delete(op.waiting, k)
		} else {
			op.gen++
			op.dropped = true
		}
	}
	if len(op.entries) == 0 {
		delete(t.owners, owner)
	}
}

// dropWaiting drops those of keys that are still unconfirmed.
func (t *tracker) dropWaiting(owner string, keys ...string) {
	t.mu.Lock()
	op := t.owners[owner]
	var still []string
	if op != nil {
		for _, k := range keys {
			if op.waiting[k] != nil {
				still = append(still, k)
			}
		}
	}
	t.mu.Unlock()
	if len(still) > 0 {
		t.drop(owner, still...)
	}
}

// cachedSet returns owner's cached pending set when it is current and no
// key waits to be looked up, with the generation it answers for.
func (t *tracker) cachedSet(owner string) (*pendingSet, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	op := t.owners[owner]
	if op == nil {
		return &pendingSet{}, 0, true
	}
	if op.unconfirmed == 0 && op.set != nil && op.setGen == op.gen {
		return op.set, op.gen, true
	}
	return nil, op.gen, false
}

// storeSet caches set as owner's set of generation gen, unless the
// documents changed since.
func (t *tracker) storeSet(owner string, set *pendingSet, gen uint64) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op := t.owners[owner]; op != nil && op.gen == gen {
		op.set, op.setGen = set, gen
		op.added, op.dropped = nil, false
	}
}

// waitingKeys returns owner's unconfirmed entries (copies).
func (t *tracker) waitingKeys(owner string) []pendEntry {
	t.mu.Lock()
	defer t.mu.Unlock()
	op := t.owners[owner]
	if op == nil {
		return nil
	}
	out := make([]pendEntry, 0, len(op.waiting))
	for _, e := range op.waiting {
		out = append(out, *e)
	}
	return out
}

// extendable returns owner's last set and the documents confirmed since,
// with the generation they make, when no confirmed document left since
// that set was made.
func (t *tracker) extendable(owner string) (*pendingSet, []*pdoc, uint64, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	op := t.owners[owner]
	if op == nil || op.set == nil || op.dropped {
		return nil, nil, 0, false
	}
	return op.set, append([]*pdoc(nil), op.added...), op.gen, true
}

// count returns how many keys of owner the tracker holds: at least as
// many as its committed pending documents.
func (t *tracker) count(owner string) int {
	t.mu.Lock()
	defer t.mu.Unlock()
	if op := t.owners[owner]; op != nil {
		return len(op.entries)
	}
	return 0
}

func (t *tracker) size() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	n := 0
	for _, op := range t.owners {
		n += len(op.entries)
	}
	return n
}

// pendingSet is an owner's pending documents as queries score them: the
// documents and, for each term, which of them hold it, in layers (each
// immutable): documents confirmed since the last set are a new layer on
// top of it rather than a rebuild of the whole set; past maxPendLayers the
// layers are merged into one.
type pendingSet struct {
	layers []*pendLayer
	n      int
	sumLen uint64
}

type pendLayer struct {
	docs   []*pdoc
	byTerm map[string][]pendPosting
}

// maxPendLayers bounds a set's layers (a query reads each).
const maxPendLayers = 16

type pendPosting struct {
	doc int32
	tf  uint32
}

func newPendLayer(docs []*pdoc) *pendLayer {
	l := &pendLayer{docs: docs, byTerm: make(map[string][]pendPosting)}
	for i, d := range docs {
		for _, t := range d.terms {
			l.byTerm[t.term] = append(l.byTerm[t.term], pendPosting{int32(i), t.tf})
		}
	}
	return l
}

func newPendingSet(docs []*pdoc) *pendingSet {
	s := &pendingSet{}
	return s.plus(docs)
}

// plus returns the set with docs added (s is not changed).
func (s *pendingSet) plus(docs []*pdoc) *pendingSet {
	if len(docs) == 0 {
		return s
	}
	out := &pendingSet{n: s.n + len(docs), sumLen: s.sumLen}
	for _, d := range docs {
		out.sumLen += uint64(d.length)
	}
	if len(s.layers) >= maxPendLayers {
		all := make([]*pdoc, 0, out.n)
		for _, l := range s.layers {
			all = append(all, l.docs...)
		}
		out.layers = []*pendLayer{newPendLayer(append(all, docs...))}
		return out
	}
	out.layers = append(append(make([]*pendLayer, 0, len(s.layers)+1), s.layers...), newPendLayer(docs))
	return out
}

// df returns how many of the documents hold term.
func (s *pendingSet) df(term string) int {
	n := 0
	for _, l := range s.layers {
		n += len(l.byTerm[term])
	}
	return n
}

// pendingSet returns owner's pending documents as of v: the tracker's
// cached set when nothing changed, the last set extended with the
// documents confirmed since when none left, else a set made anew. The
// caller holds viewMu (read) around v.
func (m *Memory) pendingSet(v *persistence.Snapshot, owner string) (*pendingSet, error) {
	if set, _, ok := m.track.cachedSet(owner); ok {
		return set, nil
	}
	if err := m.confirmWaiting(v, owner); err != nil {
		return nil, err
	}
	if base, added, gen, ok := m.track.extendable(owner); ok {
		set := base.plus(added)
		m.track.storeSet(owner, set, gen)
		return set, nil
	}
	set, gen, ok := m.track.cachedSet(owner)
	if ok {
		return set, nil
	}
	docs, err := m.pendingDocs(v, owner, 0)
	if err != nil {
		return nil, err
	}
	set = newPendingSet(docs)
	// The set of the generation read before the look-ups may miss what
	// they confirmed: cache it only if nothing changed meanwhile.
	if _, now, _ := m.track.cachedSet(owner); now == gen {
		m.track.storeSet(owner, set, gen)
	}
	return set, nil
}

// mayBeIn reports whether the pending document of ref may be in a
// snapshot opened before this call: false when ref is an event whose
// commit the store had not started then (see Store.SubmittedThrough), so
// looking it up would find nothing. At T = 50 most unconfirmed keys at a
// recall belong to appends still waiting for their commit, and each
// missed lookup searched every level of the store.
func (m *Memory) mayBeIn(ref string) bool {
	return mayBeIn(ref, m.store.SubmittedThrough)
}

func mayBeIn(ref string, submitted func(task string) (uint64, bool)) bool {
	task, seq, fact, _, _, ok := parseDocRef(ref) // a passage's record's
	if !ok || fact != "" {
		return true
	}
	through, known := submitted(task)
	return !known || seq <= through
}

// confirmWaiting looks up owner's unconfirmed keys in v: a committed one
// is confirmed, one still absent after pendingGrace is dropped (its
// append failed), as pendingDocs does.
func (m *Memory) confirmWaiting(v *persistence.Snapshot, owner string) error {
	prefix := len(persistence.PendingPrefix(owner))
	now := m.opt.Now()
	var gone []string
	for _, e := range m.track.waitingKeys(owner) {
		var b []byte
		err := persistence.ErrNotFound
		if m.mayBeIn(e.key[prefix:]) {
			b, err = v.GetCopy([]byte(e.key))
		}
		if errors.Is(err, persistence.ErrNotFound) {
			if now.Sub(e.added) > pendingGrace {
				gone = append(gone, e.key)
			}
			continue
		}
		if err != nil {
			return err
		}
		d, err := decodePending(e.key[prefix:], b)
		if err != nil {
			return err
		}
		m.track.confirm(owner, e.key, d)
	}
	if len(gone) > 0 {
		m.track.dropWaiting(owner, gone...)
	}
	return nil
}

// pendingDocs returns owner's pending documents as of v: all of them in
// ref order when limit is 0, else at most limit of them (a build's batch)
// in no particular order. The caller holds viewMu (read) around v.
func (m *Memory) pendingDocs(v *persistence.Snapshot, owner string, limit int) ([]*pdoc, error) {
	prefix := len(persistence.PendingPrefix(owner))
	now := m.opt.Now()
	var out []*pdoc
	var gone []string
	for _, e := range m.track.entries(owner, limit) {
		switch {
		case e.doc != nil:
			out = append(out, e.doc)
		default:
			var b []byte
			err := persistence.ErrNotFound
			if m.mayBeIn(e.key[prefix:]) {
				b, err = v.GetCopy([]byte(e.key))
			}
			if errors.Is(err, persistence.ErrNotFound) {
				if now.Sub(e.added) > pendingGrace {
					gone = append(gone, e.key)
				}
				continue
			}
			if err != nil {
				return nil, err
			}
			d, err := decodePending(e.key[prefix:], b)
			if err != nil {
				return nil, err
			}
			m.track.confirm(owner, e.key, d)
			out = append(out, d)
		}
	}
	if len(gone) > 0 {
		m.track.drop(owner, gone...)
	}
	return out, nil
}

// loadPending adds every pending document of the store to the tracker:
// with their documents when confirmed (at Open), as keys to look up
// otherwise (a reconciliation while the daemon runs, whose scan may be
// older than a build that since removed some of them: those are absent
// from later snapshots and dropped after the grace period). It returns how
// many keys the tracker did not have.
func (m *Memory) loadPending(confirmed bool) (int, error) {
	type found struct {
		owner, key string
		doc        *pdoc
	}
	var all []found
	err := m.store.View(func(v *persistence.Snapshot) error {
		var owners []string
		if err := v.Children(persistence.IndexPrefix(), func(o string) error {
			owners = append(owners, o)
			return nil
		}); err != nil {
			return err
		}
		for _, o := range owners {
			prefix := persistence.PendingPrefix(o)
			err := v.Scan(prefix, persistence.ScanOptions{KeysOnly: !confirmed}, func(k, val []byte) error {
				f := found{owner: o, key: string(k)}
				if confirmed {
					d, err := decodePending(string(k[len(prefix):]), val)
					if err != nil {
						return err
					}
					f.doc = d
				}
				all = append(all, f)
				return nil
			})
			if err != nil {
				return fmt.Errorf("owner %s: %w", o, err)
			}
		}
		return nil
	})
	if err != nil {
		return 0, err
	}
	now := m.opt.Now()
	before := m.track.size()
	for _, f := range all {
		m.track.add(f.owner, f.key, f.doc, now)
	}
	return m.track.size() - before, nil
}
