package config

import (
	"strings"
	"testing"
	"time"
)

func TestMemoryValidation(t *testing.T) {
	tests := []struct {
		name string
		set  func(m *Memory)
		want string // "" for no problem
	}{
		{"defaults: reuse 4 Cycles, embeddings off", func(m *Memory) {}, ""},
		{"exact reuse", func(m *Memory) { m.RecallReuseCycles = 0 }, ""},
		{"reuse 64", func(m *Memory) { m.RecallReuseCycles = 64 }, ""},
		{"reuse 65", func(m *Memory) { m.RecallReuseCycles = 65 }, "memory.recall_reuse_cycles: 65: want 0 to 64"},
		{"reuse -1", func(m *Memory) { m.RecallReuseCycles = -1 }, "memory.recall_reuse_cycles: -1"},
		{"a model", func(m *Memory) { m.Embeddings.Model = "ollama/nomic-embed-text" }, ""},
		{"model without provider", func(m *Memory) { m.Embeddings.Model = "nomic-embed-text" }, "memory.embeddings.model: \"nomic-embed-text\": want provider/model"},
		{"model without name", func(m *Memory) { m.Embeddings.Model = "ollama/" }, "memory.embeddings.model"},
		{"batch 0", func(m *Memory) { m.Embeddings.Batch = 0 }, "memory.embeddings.batch: 0: want 1 to 256"},
		{"batch 257", func(m *Memory) { m.Embeddings.Batch = 257 }, "memory.embeddings.batch"},
		{"no timeout", func(m *Memory) { m.Embeddings.Timeout = 0 }, "memory.embeddings.timeout"},
		{"no query timeout", func(m *Memory) { m.Embeddings.QueryTimeout = -1 }, "memory.embeddings.query_timeout"},
		{"similarity over 1", func(m *Memory) { m.Embeddings.MinSimilarity = 1.5 }, "memory.embeddings.min_similarity: 1.5: want more than 0, at most 1"},
		{"similarity 0", func(m *Memory) { m.Embeddings.MinSimilarity = 0 }, "memory.embeddings.min_similarity"},
		{"margin negative", func(m *Memory) { m.Embeddings.MinMargin = -0.1 }, "memory.embeddings.min_margin: -0.1: want 0 (off) to under 1"},
		{"margin 1", func(m *Memory) { m.Embeddings.MinMargin = 1 }, "memory.embeddings.min_margin: 1: want 0 (off) to under 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.set(&c.Memory)
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
	if c.Memory.RecallReuseCycles != 4 {
		t.Fatalf("default memory.recall_reuse_cycles %d, want 4", c.Memory.RecallReuseCycles)
	}
	if errs := c.ApplyEnv([]string{"LEMO_MEMORY_RECALL_REUSE_CYCLES=0"}); len(errs) != 0 || c.Memory.RecallReuseCycles != 0 {
		t.Fatalf("from the environment: %v, %d", errs, c.Memory.RecallReuseCycles)
	}
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
