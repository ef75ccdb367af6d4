package anthropic

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// StructuredOutputTool is the tool the Claude Code CLI adds for
// --json-schema; the model answers by calling it with the answer as input.
const StructuredOutputTool = "StructuredOutput"

// Reply is what the fake answers to one Messages API request: a message
// of Content blocks, an HTTP error (Status), or nothing at all (Hang).
type Reply struct {
	// Content is the message's blocks in order: text (TextBlock) and
	// tool_use (ToolUseBlock) blocks.
	Content []Block
	// StopReason defaults to "tool_use" when Content has a tool_use block,
	// else "end_turn".
	StopReason string
	// Usage is reported in message_start (input) and message_delta
	// (output). Zero fields default to 100 input and 20 output tokens.
	Usage Usage

	// Status, when not 0 or 200, makes the reply an HTTP error with an
	// Anthropic error body of ErrorType (default from the status:
	// invalid_request_error, authentication_error, rate_limit_error,
	// api_error, overloaded_error) and Message.
	Status    int
	ErrorType string
	Message   string
	// StreamError, when set, ends a streaming reply after message_start
	// with an error event (overloaded_error) carrying this message.
	StreamError string

	// Delay waits before the reply starts (the request's context and
	// Close cut it short).
	Delay time.Duration
	// Hang never answers: the request waits until the client goes away or
	// the server is closed.
	Hang bool
}

// Usage is the token usage a reply reports.
type Usage struct {
	InputTokens              int64 `json:"input_tokens"`
	OutputTokens             int64 `json:"output_tokens"`
	CacheCreationInputTokens int64 `json:"cache_creation_input_tokens"`
	CacheReadInputTokens     int64 `json:"cache_read_input_tokens"`
}

// Text returns a reply that says s and ends the turn.
func Text(s string) Reply { return Reply{Content: []Block{TextBlock(s)}} }

// ToolUse returns a reply that calls tool name with input (marshalled to
// JSON).
func ToolUse(name string, input any) Reply {
	return Reply{Content: []Block{ToolUseBlock("", name, input)}}
}

// Structured returns a reply that answers with v through the structured
// output tool (StructuredOutputTool) that --json-schema adds.
func Structured(v any) Reply { return ToolUse(StructuredOutputTool, v) }

// Error returns a reply that fails with HTTP status and message.
func Error(status int, message string) Reply { return Reply{Status: status, Message: message} }

// Hang returns a reply that never comes.
func Hang() Reply { return Reply{Hang: true} }

// TextBlock returns a text block.
func TextBlock(s string) Block { return Block{Type: "text", Text: s} }

// ToolUseBlock returns a tool_use block calling tool name with input
// (marshalled to JSON; a json.RawMessage or []byte is used as it is). An
// empty id is replaced by a fresh one when the reply is sent.
func ToolUseBlock(id, name string, input any) Block {
	var raw json.RawMessage
	switch v := input.(type) {
	case json.RawMessage:
		raw = v
	case []byte:
		raw = v
	case nil:
		raw = json.RawMessage(`{}`)
	default:
		b, err := json.Marshal(v)
		if err != nil {
			panic(fmt.Sprintf("anthropic.ToolUseBlock: marshal the input of %s: %v", name, err))
		}
		raw = b
	}
	return Block{Type: "tool_use", ID: id, Name: name, Input: raw}
}

// stopReason returns the reply's stop reason.
func (r Reply) stopReason() string {
	if r.StopReason != "" {
		return r.StopReason
	}
	for _, b := range r.Content {
		if b.Type == "tool_use" {
			return "tool_use"
		}
	}
	return "end_turn"
}

// usage returns the reply's usage with the defaults filled in.
func (r Reply) usage() Usage {
	u := r.Usage
	if u == (Usage{}) {
		u.InputTokens, u.OutputTokens = 100, 20
	}
	return u
}

// errorType returns the Anthropic error type of an error reply.
func (r Reply) errorType() string {
	if r.ErrorType != "" {
		return r.ErrorType
	}
	switch r.Status {
	case http.StatusBadRequest:
		return "invalid_request_error"
	case http.StatusUnauthorized:
		return "authentication_error"
	case http.StatusForbidden:
		return "permission_error"
	case http.StatusNotFound:
		return "not_found_error"
	case http.StatusTooManyRequests:
		return "rate_limit_error"
	case 529:
		return "overloaded_error"
	}
	return "api_error"
}

// isError reports whether the reply is an HTTP error.
func (r Reply) isError() bool { return r.Status != 0 && r.Status != http.StatusOK }

// errorBody is the Anthropic error body.
func errorBody(typ, message string) map[string]any {
	return map[string]any{
		"type":  "error",
		"error": map[string]string{"type": typ, "message": message},
	}
}
