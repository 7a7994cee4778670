package tools

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"

	"github.com/santhosh-tekuri/jsonschema/v6"
	"golang.org/x/text/language"
	"golang.org/x/text/message"
)

var printer = message.NewPrinter(language.English)

// Schema is a compiled JSON Schema.
type Schema struct {
	s *jsonschema.Schema
}

// noLoader refuses every $ref that leaves the schema document: tool
// schemas are self-contained and compiling one must never read files or the
// network.
type noLoader struct{}

func (noLoader) Load(url string) (any, error) {
	return nil, fmt.Errorf("tools: schema reference %q: only references inside the schema are allowed", url)
}

// CompileSchema compiles a JSON Schema document (draft 2020-12 unless the
// document says otherwise).
func CompileSchema(name string, doc json.RawMessage) (*Schema, error) {
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return nil, fmt.Errorf("tools: schema %s is not JSON: %w", name, err)
	}
	c := jsonschema.NewCompiler()
	c.UseLoader(noLoader{})
	url := "mem:///" + strings.ReplaceAll(name, " ", "_") + ".json"
	if err := c.AddResource(url, v); err != nil {
		return nil, fmt.Errorf("tools: schema %s: %w", name, err)
	}
	s, err := c.Compile(url)
	if err != nil {
		return nil, fmt.Errorf("tools: schema %s: %w", name, err)
	}
	return &Schema{s: s}, nil
}

// ValidationError is returned when a document does not match its schema.
// Its message names what was wrong and where.
type ValidationError struct {
	// What is "input", "state" or "output".
	What   string
	Detail string
}

func (e *ValidationError) Error() string {
	return fmt.Sprintf("invalid %s: %s", e.What, e.Detail)
}

// Validate checks doc against the schema. what names the document in the
// error ("input", "output", "state").
func (s *Schema) Validate(what string, doc json.RawMessage) error {
	if len(bytes.TrimSpace(doc)) == 0 {
		return &ValidationError{What: what, Detail: "empty document; want JSON"}
	}
	v, err := jsonschema.UnmarshalJSON(bytes.NewReader(doc))
	if err != nil {
		return &ValidationError{What: what, Detail: "not valid JSON: " + err.Error()}
	}
	if err := s.s.Validate(v); err != nil {
		var ve *jsonschema.ValidationError
		if errors.As(err, &ve) {
			return &ValidationError{What: what, Detail: flatten(ve)}
		}
		return &ValidationError{What: what, Detail: err.Error()}
	}
	return nil
}

// flatten renders the leaf causes of a validation error as
// "at /path: message" lines joined with "; ".
func flatten(ve *jsonschema.ValidationError) string {
	var parts []string
	var walk func(e *jsonschema.ValidationError)
	walk = func(e *jsonschema.ValidationError) {
		if len(e.Causes) == 0 {
			loc := "/" + strings.Join(e.InstanceLocation, "/")
			parts = append(parts, fmt.Sprintf("at %s: %s", loc, e.ErrorKind.LocalizedString(printer)))
			return
		}
		for _, c := range e.Causes {
			walk(c)
		}
	}
	walk(ve)
	if len(parts) > 8 {
		parts = append(parts[:8], fmt.Sprintf("and %d more", len(parts)-8))
	}
	return strings.Join(parts, "; ")
}
