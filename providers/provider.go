package providers

import (
	"context"
	"encoding/json"
	"fmt"
)

// Provider is a model vendor.
type Provider interface {
	// Name is the provider's registry name, the part of a model id before
	// the first "/" (for example "ollama").
	Name() string
	// Models lists the models the provider offers now, with their
	// capabilities. A provider that cannot be reached returns an error that
	// names it, never an empty list.
	Models(ctx context.Context) ([]ModelInfo, error)
	// Model returns the model called name (the id without the provider
	// prefix). An unknown name is an *Error of class ClassModelNotFound.
	Model(ctx context.Context, name string) (Model, error)
}

// Model is one model of a Provider.
type Model interface {
	// Info describes the model's capabilities.
	Info() ModelInfo
	// Stream runs one chat completion. emit is called on the caller's
	// goroutine-safe path for every text or reasoning fragment as it arrives
	// and must not block for long. Stream returns the complete answer only
	// when the provider signalled the end of the stream; a stream that ends
	// early is an error. Cancelling ctx stops the request promptly and
	// returns an *Error of class ClassCancelled.
	Stream(ctx context.Context, req *Request, emit func(Delta)) (*Response, error)
}

// ModelInfo describes a model.
type ModelInfo struct {
	// ID is the full model id, "provider/name".
	ID string `json:"id"`
	// Provider and Name are the two parts of ID.
	Provider string `json:"provider"`
	Name     string `json:"name"`
	// Window is the context window in tokens that Lemo uses for this model
	// (for Ollama the num_ctx it sends); 0 means unknown.
	Window int `json:"window"`
	// Tools says the model can call tools; Reasoning that it can reason
	// (thinking) before answering.
	Tools     bool `json:"tools"`
	Reasoning bool `json:"reasoning"`
	// Price is the price the provider publishes for the model, nil when
	// it publishes none.
	Price *Price `json:"price,omitempty"`
}

// Price is a model's price in US dollars per million tokens.
type Price struct {
	Input       float64 `json:"input"`
	Output      float64 `json:"output"`
	CachedInput float64 `json:"cached_input"`
}

// Role is a message's author.
type Role string

// Roles of chat messages.
const (
	RoleUser      Role = "user"
	RoleAssistant Role = "assistant"
	RoleTool      Role = "tool"
)

// Message is one message of a conversation.
type Message struct {
	Role    Role
	Content string
	// Reasoning is the assistant's reasoning text, if any.
	Reasoning string
	// ToolCalls are the assistant's tool calls.
	ToolCalls []ToolCall
	// ToolCallID and ToolName identify the call a RoleTool message answers.
	ToolCallID string
	ToolName   string
	// ProviderMetadata is opaque provider data returned with an assistant
	// message that must be passed back unchanged (OpenRouter's
	// reasoning_details), as JSON. Providers ignore metadata they do not own.
	ProviderMetadata json.RawMessage
}

// ToolCall is one tool invocation requested by the model.
type ToolCall struct {
	// ID is the id the conversation uses for the call: Lemo's call id when
	// Lemo sends history, the provider's id in a Response.
	ID string
	// Name is the function name as the model sees it.
	Name string
	// Arguments is the JSON text of the arguments.
	Arguments json.RawMessage
}

// ToolSpec offers a tool to the model.
type ToolSpec struct {
	// Name is the function name the model sees (no dots).
	Name        string
	Description string
	// Parameters is the JSON Schema of the arguments.
	Parameters json.RawMessage
}

// Request is the input of one chat completion.
type Request struct {
	// System holds the instructions.
	System   string
	Messages []Message
	Tools    []ToolSpec
	// Think asks a reasoning-capable model to reason. Models without the
	// capability ignore it.
	Think bool
	// MaxOutputTokens caps the answer (max_tokens, Ollama's num_predict);
	// 0 sends no cap. A Task with a budget sends the output it reserved.
	MaxOutputTokens int
}

// DeltaKind says what a Delta carries.
type DeltaKind int

// Kinds of streamed fragments.
const (
	DeltaText DeltaKind = iota + 1
	DeltaReasoning
	// DeltaNotice is a passing notice about the call, not part of the
	// answer: a rate-limited call waiting to be retried (retry.Policy.Do).
	DeltaNotice
)

// Delta is a streamed fragment of the answer.
type Delta struct {
	Kind DeltaKind
	Text string
}

// Usage is the provider-reported token usage of one call.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
	// CachedPromptTokens are the prompt tokens read from the provider's
	// cache (part of PromptTokens), when it reports them.
	CachedPromptTokens int
}

// Response is a complete answer.
type Response struct {
	Text      string
	Reasoning string
	ToolCalls []ToolCall
	Usage     Usage
	// FinishReason is the provider's reason for stopping ("stop",
	// "tool_calls", "length", ...).
	FinishReason string
	// ProviderMetadata: see Message.ProviderMetadata.
	ProviderMetadata json.RawMessage
}

// Embedder is implemented by providers that turn texts into vectors
// (Ollama's /api/embed, OpenAI-compatible /embeddings). Memory's optional
// semantic recall uses it (memory.embeddings.model).
type Embedder interface {
	// Embed returns one vector per text, in order, made by the model
	// called model (the id without the provider prefix). All vectors of
	// one model have the same dimensions. Failures are *Error values
	// classified like chat failures; cancelling ctx returns one of class
	// ClassCancelled.
	Embed(ctx context.Context, model string, texts []string) ([][]float32, error)
}

// Bounds of an embedding call.
const (
	// MaxEmbedTexts bounds the texts of one Embed call.
	MaxEmbedTexts = 256
	// MaxEmbedResponseBytes bounds an embedding response.
	MaxEmbedResponseBytes = 64 << 20
)

// CheckEmbedRequest validates an Embed call's arguments.
func CheckEmbedRequest(provider, model string, texts []string) error {
	switch {
	case model == "":
		return &Error{Provider: provider, Class: ClassBadRequest, Message: "embed: no model named"}
	case len(texts) == 0 || len(texts) > MaxEmbedTexts:
		return &Error{Provider: provider, Class: ClassBadRequest, Message: fmt.Sprintf("embed: %d texts (accepted: 1 to %d)", len(texts), MaxEmbedTexts)}
	}
	return nil
}

// CheckEmbeddings checks a provider's answer to an Embed call of n texts:
// n vectors of one non-zero dimension.
func CheckEmbeddings(provider string, vecs [][]float32, n int) error {
	if len(vecs) != n {
		return &Error{Provider: provider, Class: ClassTransient, Message: fmt.Sprintf("embed: %d vectors for %d texts", len(vecs), n)}
	}
	for i, v := range vecs {
		if len(v) == 0 || len(v) != len(vecs[0]) {
			return &Error{Provider: provider, Class: ClassTransient, Message: fmt.Sprintf("embed: vector %d has %d dimensions, vector 0 %d", i, len(v), len(vecs[0]))}
		}
	}
	return nil
}
