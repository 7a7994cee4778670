package fake

import (
	"encoding/json"
	"hash/fnv"
	"math"
	"net/http"
	"strings"
)

// Embeddings: Ollama's POST /api/embed and the OpenAI-compatible POST
// /embeddings. Both take "input" as one string or an array of strings and
// answer one vector per input, in order. A vector is Embedding(text): the
// text's lower-cased words hashed into EmbeddingDims dimensions and
// normalised, so texts that share words are near (deterministic, no
// model). An input containing "ERR <status>" answers with that status and
// the flavour's error body.

// EmbeddingDims is the dimensions of the fakes' vectors.
const EmbeddingDims = 64

// Embedding returns the fakes' vector of text.
func Embedding(text string) []float32 {
	v := make([]float32, EmbeddingDims)
	for _, w := range strings.FieldsFunc(strings.ToLower(text), func(r rune) bool {
		return !(r >= 'a' && r <= 'z' || r >= '0' && r <= '9')
	}) {
		h := fnv.New32a()
		_, _ = h.Write([]byte(w))
		v[h.Sum32()%EmbeddingDims]++
	}
	var s float64
	for _, x := range v {
		s += float64(x) * float64(x)
	}
	if s > 0 {
		for i := range v {
			v[i] = float32(float64(v[i]) / math.Sqrt(s))
		}
	}
	return v
}

// embedRequest is the body both protocols share.
type embedRequest struct {
	Model string          `json:"model"`
	Input json.RawMessage `json:"input"`
}

// inputs decodes "input": a string or an array of strings.
func (r *embedRequest) inputs() ([]string, bool) {
	var one string
	if json.Unmarshal(r.Input, &one) == nil {
		return []string{one}, true
	}
	var many []string
	if json.Unmarshal(r.Input, &many) == nil {
		return many, true
	}
	return nil, false
}

// embedError returns the scenario of an input asking for an error.
func embedError(texts []string) (Scenario, bool) {
	for _, t := range texts {
		if sc := keywordScenario(lastMessage{role: "user", content: t}); sc.Status != 0 {
			return sc, true
		}
	}
	return Scenario{}, false
}

func (s *Server) ollamaEmbed(w http.ResponseWriter, body []byte) {
	var req embedRequest
	if err := json.Unmarshal(body, &req); err != nil {
		writeError(w, Scenario{Status: http.StatusBadRequest}, ollamaErr(err.Error()), ollamaJSON)
		return
	}
	texts, ok := req.inputs()
	if !ok {
		writeError(w, Scenario{Status: http.StatusBadRequest}, ollamaErr("invalid input type"), ollamaJSON)
		return
	}
	if sc, bad := embedError(texts); bad {
		b, ct := ollamaErrorBody(sc, req.Model)
		writeError(w, sc, b, ct)
		return
	}
	vecs := make([][]float32, len(texts))
	n := 0
	for i, t := range texts {
		vecs[i] = Embedding(t)
		n += len(strings.Fields(t))
	}
	writeJSON(w, map[string]any{"model": req.Model, "embeddings": vecs, "total_duration": 1000, "load_duration": 100, "prompt_eval_count": n})
}

func (s *Server) openaiEmbed(w http.ResponseWriter, body []byte) {
	var req embedRequest
	if err := json.Unmarshal(body, &req); err != nil {
		s.writeFlavorError(w, Scenario{Status: http.StatusBadRequest, Message: err.Error()}, "")
		return
	}
	texts, ok := req.inputs()
	if !ok || len(texts) == 0 {
		s.writeFlavorError(w, Scenario{Status: http.StatusBadRequest, Message: "'input' must be a string or an array of strings"}, req.Model)
		return
	}
	if sc, bad := embedError(texts); bad {
		s.writeFlavorError(w, sc, req.Model)
		return
	}
	data := make([]map[string]any, len(texts))
	n := 0
	for i, t := range texts {
		data[i] = map[string]any{"object": "embedding", "index": i, "embedding": Embedding(t)}
		n += len(strings.Fields(t))
	}
	writeJSON(w, map[string]any{"object": "list", "data": data, "model": req.Model, "usage": map[string]int{"prompt_tokens": n, "total_tokens": n}})
}
