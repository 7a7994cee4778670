package main

import (
	"context"
	"fmt"
	"strings"

	"github.com/rs/zerolog"

	"lemo/actors/live"
	"lemo/config"
	"lemo/memory"
	"lemo/persistence"
	"lemo/providers"
	"lemo/tools"
	"lemo/tools/memorytool"
	"lemo/tools/tasks"
)

// memoryTools are the tools over the memory and the store: memory.record,
// memory.search, tasks.list, tasks.read and tasks.read_block, and the
// agent tree's tasks.spawn, tasks.wait, tasks.send and tasks.wait_message.
// tasks.read_block reads the live results of lv.
func memoryTools(mem *memory.Memory, store *persistence.Store, lv *live.Accountant) []tools.Tool {
	out := memorytool.New(mem, memorytool.Config{})
	out = append(out, tasks.New(store, tasks.Config{Live: liveText(lv)})...)
	return append(out, tasks.NewTree(store)...)
}

// liveText finds a held live result in lv.
func liveText(lv *live.Accountant) func(task, callID string) (tasks.LiveText, bool) {
	return func(task, callID string) (tasks.LiveText, bool) {
		r, ok := lv.Lookup(task, callID)
		if !ok {
			return nil, false
		}
		return r, true
	}
}

// memoryOptions are the memory's options of cfg: recall's reuse, and
// semantic recall through the provider of memory.embeddings.model when it
// is set.
func memoryOptions(cfg *config.Config, provs *providers.Registry, log zerolog.Logger) (memory.Options, error) {
	opt := memory.Options{Log: log, RecallReuse: cfg.Memory.RecallReuseCycles}
	e := cfg.Memory.Embeddings
	if e.Model == "" {
		return opt, nil
	}
	prov, name, err := providers.SplitModelID(e.Model)
	if err != nil {
		return opt, fmt.Errorf("memory.embeddings.model: %w", err)
	}
	p, ok := provs.Provider(prov)
	if !ok {
		return opt, fmt.Errorf("memory.embeddings.model %q: no provider %q is configured (configured: %s)", e.Model, prov, strings.Join(provs.Names(), ", "))
	}
	emb, ok := p.(providers.Embedder)
	if !ok {
		return opt, fmt.Errorf("memory.embeddings.model %q: provider %q has no embeddings (Ollama and OpenAI-compatible providers do)", e.Model, prov)
	}
	opt.Embedder = memory.EmbedderFunc(func(ctx context.Context, texts []string) ([][]float32, error) {
		return emb.Embed(ctx, name, texts)
	})
	opt.EmbedModel, opt.EmbedBatch, opt.MinSimilarity = e.Model, e.Batch, e.MinSimilarity
	opt.MinSimilarityMargin = e.MinMargin
	if e.MinMargin == 0 {
		opt.MinSimilarityMargin = -1 // off (memory's zero is its default)
	}
	opt.EmbedTimeout, opt.EmbedQueryTimeout = e.Timeout, e.QueryTimeout
	return opt, nil
}
