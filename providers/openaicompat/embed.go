package openaicompat

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"

	"lemo/providers"
	"lemo/providers/retry"
)

var _ providers.Embedder = (*Provider)(nil)

// embedRequest is the body of POST /embeddings.
type embedRequest struct {
	Model string   `json:"model"`
	Input []string `json:"input"`
	// EncodingFormat asks for JSON numbers (not base64).
	EncodingFormat string `json:"encoding_format"`
}

// embedResponse is its answer: one item per input, each naming the input
// it embeds by index (servers may reorder them).
type embedResponse struct {
	Data []struct {
		Index     int       `json:"index"`
		Embedding []float32 `json:"embedding"`
	} `json:"data"`
}

// Embed returns the vectors of texts made by the model called model
// (POST /embeddings with every text in one request).
func (p *Provider) Embed(ctx context.Context, model string, texts []string) ([][]float32, error) {
	if err := providers.CheckEmbedRequest(p.opts.Name, model, texts); err != nil {
		return nil, err
	}
	body, err := json.Marshal(embedRequest{Model: model, Input: texts, EncodingFormat: "float"})
	if err != nil {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassBadRequest, Message: "encode embedding request", Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, p.base+"/embeddings", bytes.NewReader(body))
	if err != nil {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassBadRequest, Message: "build embedding request", Err: err}
	}
	p.setHeaders(req.Header)
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Accept", "application/json")
	resp, err := p.client.Do(req)
	if err != nil {
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.opts.Name, ctx.Err())
		}
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassTransient, Message: retry.CleanMessage("embedding failed: "+cause(err), p.opts.APIKey), Err: err}
	}
	defer resp.Body.Close()
	raw, err := io.ReadAll(io.LimitReader(resp.Body, providers.MaxEmbedResponseBytes+1))
	if err != nil {
		if ctx.Err() != nil {
			return nil, providers.Cancelled(p.opts.Name, ctx.Err())
		}
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassTransient, Message: "reading the embeddings failed", Err: err}
	}
	if resp.StatusCode >= 400 {
		e := p.httpError(resp, raw)
		e.Message = fmt.Sprintf("embedding with %q: %s", model, e.Message)
		return nil, e
	}
	if len(raw) > providers.MaxEmbedResponseBytes {
		return nil, &providers.Error{Provider: p.opts.Name, Class: providers.ClassTransient, Message: fmt.Sprintf("the embeddings exceed %d bytes", providers.MaxEmbedResponseBytes)}
	}
	return decodeEmbeddings(p.opts.Name, raw, len(texts))
}

// decodeEmbeddings decodes an answer to n texts: one vector per text, of
// one dimension, placed by its index.
func decodeEmbeddings(provider string, raw []byte, n int) ([][]float32, error) {
	var out embedResponse
	if err := json.Unmarshal(raw, &out); err != nil {
		return nil, &providers.Error{Provider: provider, Class: providers.ClassTransient, Message: "decoding the embeddings failed", Err: err}
	}
	if len(out.Data) != n {
		return nil, &providers.Error{Provider: provider, Class: providers.ClassTransient, Message: fmt.Sprintf("embed: %d vectors for %d texts", len(out.Data), n)}
	}
	vecs := make([][]float32, n)
	for _, d := range out.Data {
		if d.Index < 0 || d.Index >= n || vecs[d.Index] != nil {
			return nil, &providers.Error{Provider: provider, Class: providers.ClassTransient, Message: fmt.Sprintf("embed: an item of index %d for %d texts", d.Index, n)}
		}
		vecs[d.Index] = d.Embedding
	}
	if err := providers.CheckEmbeddings(provider, vecs, n); err != nil {
		return nil, err
	}
	return vecs, nil
}
