package openai

import (
	"encoding/json"
	"fmt"
	"slices"

	goopenai "github.com/sashabaranov/go-openai"
)

// schemaName is the name the answer's schema is given in response_format.
const schemaName = "prchat_answer"

// responseFormat returns the response_format that asks for JSON matching
// schema. The schema is made fit for OpenAI's strict mode, which rejects
// some keywords (minLength, maxLength, ...): they are dropped, since chat
// validates the answer against the full schema anyway. Strict is set only
// when every object of the schema lists all its properties as required and
// allows no others, as strict mode demands.
func responseFormat(schema json.RawMessage) (*goopenai.ChatCompletionResponseFormat, error) {
	var doc any
	if err := json.Unmarshal(schema, &doc); err != nil {
		return nil, fmt.Errorf("answer schema: %w", err)
	}
	strict := true
	doc = fitSchema(doc, &strict)
	raw, err := json.Marshal(doc)
	if err != nil {
		return nil, fmt.Errorf("answer schema: %w", err)
	}
	return &goopenai.ChatCompletionResponseFormat{
		Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
		JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{
			Name:   schemaName,
			Schema: json.RawMessage(raw),
			Strict: strict,
		},
	}, nil
}

// unsupportedKeywords are the JSON Schema keywords that strict structured
// outputs refuse.
var unsupportedKeywords = []string{"$schema", "$id", "minLength", "maxLength", "format", "patternProperties",
	"unevaluatedProperties", "propertyNames", "minProperties", "maxProperties"}

// fitSchema returns a copy of the schema node v without the keywords
// strict mode refuses, and clears *strict when an object does not require
// all its properties or allows others.
func fitSchema(v any, strict *bool) any {
	switch n := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(n))
		for k, val := range n {
			if slices.Contains(unsupportedKeywords, k) {
				continue
			}
			switch k {
			case "properties", "$defs", "definitions":
				// Maps of names to schemas: fit each schema, keep the names.
				if m, ok := val.(map[string]any); ok {
					fitted := make(map[string]any, len(m))
					for name, s := range m {
						fitted[name] = fitSchema(s, strict)
					}
					out[k] = fitted
					continue
				}
			}
			out[k] = fitSchema(val, strict)
		}
		if props, ok := out["properties"].(map[string]any); ok {
			if ap, ok := out["additionalProperties"].(bool); !ok || ap {
				*strict = false
			}
			req, _ := out["required"].([]any)
			for name := range props {
				if !slices.Contains(req, any(name)) {
					*strict = false
				}
			}
		}
		return out
	case []any:
		out := make([]any, len(n))
		for i, e := range n {
			out[i] = fitSchema(e, strict)
		}
		return out
	}
	return v
}
