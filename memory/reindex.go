package memory

import (
	"encoding/json"
	"errors"
	"fmt"

	"lemo/persistence"
)

// Formats of the memory this code can open. The format names how terms
// are made (tokenize.go): an index built by another tokenizer would match
// wrongly, without an error, so a store of an older format is re-indexed
// from what it holds (history and facts) when it is opened.
var olderFormats = map[string]bool{
	// lemo-memory-1 folded plurals only; lemo-memory-2 stems with Snowball
	// English and indexes every record whole.
	"lemo-memory-1": true,
	// lemo-memory-3 indexes long records as passages (passage.go).
	"lemo-memory-2": true,
	// lemo-memory-4 folds agent nouns into their verbs' stems ("owner"
	// → "own", tokenize.go agentStem).
	"lemo-memory-3": true,
}

// dropIndex deletes every index record (segments, pending documents,
// watermarks and markers) and indexes the facts again, leaving history to
// catchUp. The format marker is left as it was: it is rewritten once the
// index is whole again, so a crash in between starts the rebuild over.
func (m *Memory) dropIndex() (facts int, err error) {
	for _, p := range [][]byte{persistence.IndexPrefix(), persistence.WatermarkPrefix(), persistence.UnindexedPrefix(), persistence.MarkersKey(), persistence.EmbedWatermarkPrefix()} {
		if err := m.deletePrefix(p, persistence.IndexFormatKey()); err != nil {
			return 0, fmt.Errorf("delete the old index: %w", err)
		}
	}
	var batch []persistence.KV
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		err := m.store.UpdateIndex(batch)
		batch = batch[:0]
		return err
	}
	err = m.store.View(func(v *persistence.Snapshot) error {
		return v.Scan(factsPrefix, persistence.ScanOptions{}, func(k, val []byte) error {
			if !isFactKey(k) {
				return nil
			}
			var f Fact
			if err := json.Unmarshal(val, &f); err != nil {
				return fmt.Errorf("%w: fact %q: %v", errCorrupt, k, err)
			}
			ref := persistence.FactRef(f.Task, f.ID)
			d := analyze(docInfo{ref: string(ref), kind: KindFact, time: f.Time.UnixMilli(), source: f.source()}, f.indexText(), false)
			batch = append(batch, persistence.KV{Key: persistence.PendingKey(f.Owner, ref), Value: d.encode()})
			facts++
			if len(batch) == reindexBatch {
				return flush()
			}
			return nil
		})
	})
	if err == nil {
		err = flush()
	}
	if err != nil {
		return facts, fmt.Errorf("index the facts again: %w", err)
	}
	return facts, nil
}

// reindexBatch is how many records one commit of a re-index writes.
const reindexBatch = 1000

var errBatchFull = errors.New("batch full")

// factsPrefix is the prefix of every owner's facts and supersession
// records ("k/").
var factsPrefix = []byte{'k', '/'}

// isFactKey tells a fact ("k/<owner>/f/<id>") from a supersession record.
func isFactKey(k []byte) bool {
	for i := 2; i < len(k); i++ {
		if k[i] == '/' {
			return i+2 < len(k) && k[i+1] == 'f' && k[i+2] == '/'
		}
	}
	return false
}
