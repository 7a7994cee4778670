package ollama

import (
	"context"
	"errors"
	"reflect"
	"testing"

	"lemo/providers"
	"lemo/providers/fake"
	"lemo/providers/retry"
)

func TestEmbed(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOllama})
	p := newProvider(t, Config{BaseURL: s.URL(), Retry: retry.Policy{MaxAttempts: 1}})
	ctx := context.Background()
	texts := []string{"the north depot", "eleven trucks"}
	vecs, err := p.Embed(ctx, "nomic-embed-text", texts)
	if err != nil {
		t.Fatal(err)
	}
	if len(vecs) != 2 || !reflect.DeepEqual(vecs[0], fake.Embedding(texts[0])) || !reflect.DeepEqual(vecs[1], fake.Embedding(texts[1])) {
		t.Fatalf("Embed = %v", vecs)
	}
	reqs := s.Requests()
	if last := reqs[len(reqs)-1]; last.Path != "/api/embed" || last.JSON()["model"] != "nomic-embed-text" || len(last.JSON()["input"].([]any)) != 2 {
		t.Fatalf("request %s %s", last.Path, last.Body)
	}

	for _, c := range []struct {
		name  string
		model string
		texts []string
		class providers.Class
	}{
		{"no texts", "m", nil, providers.ClassBadRequest},
		{"no model", "", []string{"x"}, providers.ClassBadRequest},
		{"too many texts", "m", make([]string, providers.MaxEmbedTexts+1), providers.ClassBadRequest},
		{"rate limited", "m", []string{"x", "ERR 429"}, providers.ClassRateLimit},
		{"unknown model", "m", []string{"ERR 404"}, providers.ClassModelNotFound},
		{"server error", "m", []string{"ERR 500"}, providers.ClassTransient},
	} {
		t.Run(c.name, func(t *testing.T) {
			_, err := p.Embed(ctx, c.model, c.texts)
			var pe *providers.Error
			if !errors.As(err, &pe) || pe.Class != c.class {
				t.Fatalf("Embed = %v, want class %v", err, c.class)
			}
		})
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := p.Embed(cctx, "m", []string{"x"}); providers.ClassOf(err) != providers.ClassCancelled {
		t.Fatalf("cancelled Embed = %v", err)
	}
}
