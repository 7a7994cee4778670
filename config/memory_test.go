package config

import (
	"strings"
	"testing"
	"time"
)

func TestEmbeddingsValidation(t *testing.T) {
	tests := []struct {
		name string
		set  func(e *Embeddings)
		want string // "" for no problem
	}{
		{"defaults: off", func(e *Embeddings) {}, ""},
		{"a model", func(e *Embeddings) { e.Model = "ollama/nomic-embed-text" }, ""},
		{"model without provider", func(e *Embeddings) { e.Model = "nomic-embed-text" }, "memory.embeddings.model: \"nomic-embed-text\": want provider/model"},
		{"model without name", func(e *Embeddings) { e.Model = "ollama/" }, "memory.embeddings.model"},
		{"batch 0", func(e *Embeddings) { e.Batch = 0 }, "memory.embeddings.batch: 0: want 1 to 256"},
		{"batch 257", func(e *Embeddings) { e.Batch = 257 }, "memory.embeddings.batch"},
		{"no timeout", func(e *Embeddings) { e.Timeout = 0 }, "memory.embeddings.timeout"},
		{"no query timeout", func(e *Embeddings) { e.QueryTimeout = -1 }, "memory.embeddings.query_timeout"},
		{"similarity over 1", func(e *Embeddings) { e.MinSimilarity = 1.5 }, "memory.embeddings.min_similarity: 1.5: want more than 0, at most 1"},
		{"similarity 0", func(e *Embeddings) { e.MinSimilarity = 0 }, "memory.embeddings.min_similarity"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c.Memory.Embeddings)
			errs := c.Validate()
			if tt.want == "" {
				if len(errs) != 0 {
					t.Fatalf("problems: %v", errs)
				}
				return
			}
			if len(errs) != 1 || !strings.Contains(errs[0].Error(), tt.want) {
				t.Fatalf("problems %v, want one with %q", errs, tt.want)
			}
		})
	}
	c := Default()
	if errs := c.ApplyEnv([]string{"LEMO_MEMORY_EMBEDDINGS_MODEL=openai/text-embedding-3-small", "LEMO_MEMORY_EMBEDDINGS_TIMEOUT=3s",
		"LEMO_MEMORY_EMBEDDINGS_MIN_SIMILARITY=0.35"}); len(errs) != 0 {
		t.Fatal(errs)
	}
	if e := c.Memory.Embeddings; e.Model != "openai/text-embedding-3-small" || e.Timeout != 3*time.Second || e.MinSimilarity != 0.35 {
		t.Fatalf("from the environment: %+v", e)
	}
	if errs := c.ApplyEnv([]string{"LEMO_MEMORY_EMBEDDINGS_MIN_SIMILARITY=high"}); len(errs) != 1 || !strings.Contains(errs[0].Error(), `"high" is not a number`) {
		t.Fatalf("a similarity that is not a number: %v", errs)
	}
}
