package main

import (
	"context"
	"strings"
	"testing"

	"github.com/rs/zerolog"

	"lemo/config"
	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/ollama"
)

func TestMemoryOptions(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama})
	reg := providers.NewRegistry()
	ol, err := ollama.New(ollama.Config{BaseURL: s.URL()})
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range []providers.Provider{ol, fake.NewScripted("fake", fake.NewScriptedModel("m", 1000, nil))} {
		if err := reg.Register(p); err != nil {
			t.Fatal(err)
		}
	}
	for _, c := range []struct {
		model, err string
	}{
		{"", ""},
		{"ollama/nomic-embed-text", ""},
		{"openrouter/x", `no provider "openrouter" is configured`},
		{"fake/m", `provider "fake" has no embeddings`},
	} {
		cfg := config.Default()
		cfg.Memory.Embeddings.Model = c.model
		opt, err := memoryOptions(cfg, reg, zerolog.Nop())
		if c.err != "" {
			if err == nil || !strings.Contains(err.Error(), c.err) || !strings.Contains(err.Error(), "memory.embeddings.model") {
				t.Errorf("%q: %v, want an error naming the key and %q", c.model, err, c.err)
			}
			continue
		}
		if err != nil {
			t.Fatalf("%q: %v", c.model, err)
		}
		if c.model == "" {
			if opt.Embedder != nil {
				t.Error("semantic recall on without a model")
			}
			continue
		}
		if opt.EmbedModel != c.model || opt.EmbedBatch != 16 || opt.MinSimilarity != 0.5 || opt.MinSimilarityMargin != 0.4 {
			t.Errorf("options %+v", opt)
		}
		vecs, err := opt.Embedder.Embed(context.Background(), []string{"the north depot"})
		if err != nil || len(vecs) != 1 || len(vecs[0]) != fake.EmbeddingDims {
			t.Fatalf("Embed through the options: %v, %v", vecs, err)
		}
		reqs := s.Requests()
		if last := reqs[len(reqs)-1]; last.JSON()["model"] != "nomic-embed-text" {
			t.Fatalf("embedded with %v, want the model's name without its provider", last.JSON()["model"])
		}
	}
}
