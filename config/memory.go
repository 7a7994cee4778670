package config

import (
	"strings"
	"time"
)

// Memory configures the memory's recall.
type Memory struct {
	RecallReuseCycles int        `yaml:"recall_reuse_cycles" env:"LEMO_MEMORY_RECALL_REUSE_CYCLES" help:"Cycles in a row (0 to 64) a Task whose recall query is unchanged reuses its recall after other Tasks of its owner added records, before it searches again; 0: only while they added none"`
	Embeddings        Embeddings `yaml:"embeddings"`
}

// maxRecallReuse bounds memory.recall_reuse_cycles.
const maxRecallReuse = 64

// validate reports the problems of the memory's settings.
func (m *Memory) validate(add func(where, format string, args ...any)) {
	if m.RecallReuseCycles < 0 || m.RecallReuseCycles > maxRecallReuse {
		add("memory.recall_reuse_cycles", "%d: want 0 to %d", m.RecallReuseCycles, maxRecallReuse)
	}
	m.Embeddings.validate(add)
}

// Embeddings configures the optional semantic recall: records get vectors
// from an embedding model in the background, and recall fuses the records
// nearest to its query with the lexical results.
type Embeddings struct {
	Model         string        `yaml:"model" env:"LEMO_MEMORY_EMBEDDINGS_MODEL" help:"provider/model that embeds records for semantic recall (Ollama /api/embed or OpenAI-compatible /embeddings, for example ollama/nomic-embed-text); empty: lexical recall only"`
	Batch         int           `yaml:"batch" env:"LEMO_MEMORY_EMBEDDINGS_BATCH" help:"records embedded per provider call, 1 to 256"`
	Timeout       time.Duration `yaml:"timeout" env:"LEMO_MEMORY_EMBEDDINGS_TIMEOUT" help:"longest one call of the background embedder may take (it retries later)"`
	QueryTimeout  time.Duration `yaml:"query_timeout" env:"LEMO_MEMORY_EMBEDDINGS_QUERY_TIMEOUT" help:"longest a Cycle waits for its recall query's embedding; after a failure recall uses the lexical index alone, without calling, for a backoff of 1s doubling to 5m"`
	MinSimilarity float64       `yaml:"min_similarity" env:"LEMO_MEMORY_EMBEDDINGS_MIN_SIMILARITY" help:"least cosine similarity (over 0, at most 1) a record found by its vector needs to be recalled; depends on the model"`
	MinMargin     float64       `yaml:"min_margin" env:"LEMO_MEMORY_EMBEDDINGS_MIN_MARGIN" help:"how far above the query's mean similarity to the owner's records (0 to under 1) a record found by its vector must be to be recalled, where that is above min_similarity; 0 turns it off; depends on the model"`
}

// validate reports the problems of the embeddings' settings.
func (e *Embeddings) validate(add func(where, format string, args ...any)) {
	if e.Model != "" {
		if i := strings.IndexByte(e.Model, '/'); i <= 0 || i == len(e.Model)-1 {
			add("memory.embeddings.model", "%q: want provider/model, for example ollama/nomic-embed-text", e.Model)
		}
	}
	if e.Batch < 1 || e.Batch > 256 {
		add("memory.embeddings.batch", "%d: want 1 to 256", e.Batch)
	}
	if e.Timeout <= 0 {
		add("memory.embeddings.timeout", "%s: want a positive duration", e.Timeout)
	}
	if e.QueryTimeout <= 0 {
		add("memory.embeddings.query_timeout", "%s: want a positive duration", e.QueryTimeout)
	}
	if e.MinSimilarity <= 0 || e.MinSimilarity > 1 {
		add("memory.embeddings.min_similarity", "%g: want more than 0, at most 1", e.MinSimilarity)
	}
	if e.MinMargin < 0 || e.MinMargin >= 1 {
		add("memory.embeddings.min_margin", "%g: want 0 (off) to under 1", e.MinMargin)
	}
}
