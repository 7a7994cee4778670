package openaicompat

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"reflect"
	"testing"

	"lemo/providers"
	"lemo/providers/fake"
)

func TestEmbed(t *testing.T) {
	s := fake.StartServer(t, fake.Options{Flavor: fake.FlavorOpenAI, APIKey: "k"})
	p := newPlain(t, fake.ProviderParams{BaseURL: s.URL(), APIKey: "k"})
	ctx := context.Background()
	texts := []string{"the north depot", "eleven trucks", "a third text"}
	vecs, err := p.Embed(ctx, "text-embedding-3-small", texts)
	if err != nil {
		t.Fatal(err)
	}
	for i := range texts {
		if !reflect.DeepEqual(vecs[i], fake.Embedding(texts[i])) {
			t.Fatalf("vector %d = %v", i, vecs[i])
		}
	}
	reqs := s.Requests()
	last := reqs[len(reqs)-1]
	if last.Path != "/v1/embeddings" || last.JSON()["encoding_format"] != "float" || last.Header.Get("Authorization") != "Bearer k" {
		t.Fatalf("request %s %s %v", last.Path, last.Body, last.Header)
	}
	for _, c := range []struct {
		texts []string
		class providers.Class
	}{
		{[]string{"ERR 429"}, providers.ClassRateLimit},
		{[]string{"x", "ERR 401"}, providers.ClassAuth},
		{nil, providers.ClassBadRequest},
	} {
		_, err := p.Embed(ctx, "m", c.texts)
		var pe *providers.Error
		if !errors.As(err, &pe) || pe.Class != c.class {
			t.Fatalf("Embed(%q) = %v, want class %v", c.texts, err, c.class)
		}
	}
}

// The items of an answer are placed by their index; an answer that does
// not give one vector per text is an error.
func TestEmbedAnswers(t *testing.T) {
	for _, c := range []struct {
		name, body string
		want       [][]float32
	}{
		{"reordered", `{"data":[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2]}]}`, [][]float32{{1, 2}, {3, 4}}},
		{"one missing", `{"data":[{"index":0,"embedding":[1,2]}]}`, nil},
		{"index twice", `{"data":[{"index":0,"embedding":[1,2]},{"index":0,"embedding":[1,2]}]}`, nil},
		{"index out of range", `{"data":[{"index":0,"embedding":[1,2]},{"index":2,"embedding":[1,2]}]}`, nil},
		{"dimensions differ", `{"data":[{"index":0,"embedding":[1,2]},{"index":1,"embedding":[1]}]}`, nil},
		{"not JSON", `<html>`, nil},
	} {
		t.Run(c.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(c.body))
			}))
			defer srv.Close()
			p := newPlain(t, fake.ProviderParams{BaseURL: srv.URL})
			got, err := p.Embed(context.Background(), "m", []string{"a", "b"})
			if c.want == nil {
				if providers.ClassOf(err) != providers.ClassTransient {
					t.Fatalf("Embed = %v, %v; want a transient error", got, err)
				}
				return
			}
			if err != nil || !reflect.DeepEqual(got, c.want) {
				t.Fatalf("Embed = %v, %v; want %v", got, err, c.want)
			}
		})
	}
}

// FuzzDecodeEmbeddings: any answer decodes to n vectors of one non-zero
// dimension or to an error, never a panic.
func FuzzDecodeEmbeddings(f *testing.F) {
	f.Add([]byte(`{"data":[{"index":1,"embedding":[3,4]},{"index":0,"embedding":[1,2]}]}`), 2)
	f.Add([]byte(`{"data":[{"index":0,"embedding":[]}]}`), 1)
	f.Add([]byte(`{"data":null}`), 0)
	f.Add([]byte(`{"data":[{"index":-1}]}`), 1)
	f.Fuzz(func(t *testing.T, raw []byte, n int) {
		if n < 0 || n > 64 {
			return
		}
		vecs, err := decodeEmbeddings("p", raw, n)
		if err != nil {
			if providers.ClassOf(err) != providers.ClassTransient {
				t.Fatalf("error %v is not transient", err)
			}
			return
		}
		if len(vecs) != n {
			t.Fatalf("%d vectors for %d texts", len(vecs), n)
		}
		for _, v := range vecs {
			if len(v) == 0 || len(v) != len(vecs[0]) {
				t.Fatalf("vectors %v", vecs)
			}
		}
	})
}
