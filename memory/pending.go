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
// read (rebuilt when the confirmed documents change).
type ownerPending struct {
	entries     map[string]*pendEntry
	unconfirmed int
	gen         uint64 // changes of the confirmed documents
	set         *pendingSet
	setGen      uint64
}

func newTracker() *tracker { return &tracker{owners: make(map[string]*ownerPending)} }

func (t *tracker) owner(owner string) *ownerPending {
	op := t.owners[owner]
	if op == nil {
		op = &ownerPending{entries: make(map[string]*pendEntry)}
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
			e.doc = doc
			op.unconfirmed--
			op.gen++
		}
		return
	}
	op.entries[key] = &pendEntry{key: key, doc: doc, added: now}
	if doc == nil {
		op.unconfirmed++
	} else {
		op.gen++
	}
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
			e.doc = doc
			op.unconfirmed--
			op.gen++
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
		} else {
			op.gen++
		}
	}
	if len(op.entries) == 0 {
		delete(t.owners, owner)
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
	}
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
// documents and, for each term, which of them hold it (immutable).
type pendingSet struct {
	docs   []*pdoc
	byTerm map[string][]pendPosting
	sumLen uint64
}

type pendPosting struct {
	doc int32
	tf  uint32
}

func newPendingSet(docs []*pdoc) *pendingSet {
	s := &pendingSet{docs: docs, byTerm: make(map[string][]pendPosting)}
	for i, d := range docs {
		s.sumLen += uint64(d.length)
		for _, t := range d.terms {
			s.byTerm[t.term] = append(s.byTerm[t.term], pendPosting{int32(i), t.tf})
		}
	}
	return s
}

// pendingSet returns owner's pending documents as of v, through the
// tracker's cached set when nothing changed. The caller holds viewMu
// (read) around v.
func (m *Memory) pendingSet(v *persistence.Snapshot, owner string) (*pendingSet, error) {
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
			b, err := v.GetCopy([]byte(e.key))
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
