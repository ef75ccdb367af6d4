package chatcompletions

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"time"
)

// Request is a request the server got, decoded.
type Request struct {
	// Header holds the request's HTTP headers (Authorization among them).
	Header http.Header
	// Body is the raw JSON body.
	Body []byte
	// Status is the HTTP status the server answered with.
	Status int

	Model          string
	Stream         bool
	IncludeUsage   bool // stream_options.include_usage
	Messages       []Message
	Tools          []Tool
	ToolChoice     json.RawMessage // as sent, or nil
	ResponseFormat *ResponseFormat // nil when the request has none
}

// Message is one message of a request.
type Message struct {
	Role       string // system, developer, user, assistant or tool
	Content    string // the text (text parts joined)
	Name       string
	ToolCalls  []ToolCall // an assistant's tool calls
	ToolCallID string     // the call a tool message answers
}

// ToolCall is a tool call of the model: in a Reply, what the model calls;
// in a Request, what an assistant message called.
type ToolCall struct {
	// ID is the call's id; the server makes one up when a Reply leaves it
	// empty.
	ID   string
	Name string
	// Arguments is the JSON object of arguments, as text.
	Arguments string
}

// Tool is a function tool a request offers the model.
type Tool struct {
	Name        string
	Description string
	Parameters  json.RawMessage
}

// ResponseFormat is a request's response_format.
type ResponseFormat struct {
	Type string // text, json_object or json_schema
	// Name, Strict and Schema are those of json_schema.
	Name   string
	Strict bool
	Schema json.RawMessage
}

// LastUser returns the content of the request's last user message, or "".
func (r Request) LastUser() string {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role == "user" {
			return r.Messages[i].Content
		}
	}
	return ""
}

// ToolResult returns the content of the tool message that answers the call
// with id, and whether there is one.
func (r Request) ToolResult(id string) (string, bool) {
	for _, m := range r.Messages {
		if m.Role == "tool" && m.ToolCallID == id {
			return m.Content, true
		}
	}
	return "", false
}

// ToolResults returns the contents of the request's tool messages after
// its last assistant message with tool calls, in order: the results of the
// tools the model called last.
func (r Request) ToolResults() []string {
	var out []string
	for i := len(r.Messages) - 1; i >= 0 && r.Messages[i].Role == "tool"; i-- {
		out = append([]string{r.Messages[i].Content}, out...)
	}
	return out
}

// Contains reports whether any message of the request contains s.
func (r Request) Contains(s string) bool {
	for _, m := range r.Messages {
		if strings.Contains(m.Content, s) {
			return true
		}
	}
	return false
}

// Reply is what the server answers one request with. The zero Reply is an
// empty assistant message.
type Reply struct {
	// Content is the assistant's text.
	Content string
	// JSON, when set, is marshalled into Content.
	JSON any
	// ToolCalls are the tools the model calls.
	ToolCalls []ToolCall
	// FinishReason defaults to "tool_calls" when there are tool calls, else
	// "stop".
	FinishReason string
	// Usage is the reply's token usage; nil estimates it (a token per four
	// bytes of request body and of output). NoUsage sends none at all.
	Usage   *Usage
	NoUsage bool

	// Status, when 400 or more, makes the reply an API error with Message
	// (default: the status text), Code and Param in the error object, and
	// the Retry-After header RetryAfter (seconds or an HTTP date) if set.
	Status     int
	Message    string
	Code       string
	Param      string
	RetryAfter string

	// Hang makes a streamed reply send its first chunk (the assistant's
	// role) and then nothing, and a non-streamed one send nothing, until
	// the client goes away or the server closes.
	Hang bool
	// CutShort makes a streamed reply end (the connection closes) after
	// its content and tool calls, without a finish reason or [DONE].
	CutShort bool
	// ChunkSize is how many bytes of content or arguments a streamed chunk
	// carries; default DefaultChunkSize.
	ChunkSize int
	// Delay is a pause after each streamed chunk.
	Delay time.Duration
}

// Usage is a reply's token usage.
type Usage struct {
	PromptTokens     int
	CompletionTokens int
}

func (u Usage) wire() map[string]any {
	return map[string]any{
		"prompt_tokens": u.PromptTokens, "completion_tokens": u.CompletionTokens,
		"total_tokens": u.PromptTokens + u.CompletionTokens,
	}
}

// Text returns a reply whose content is s.
func Text(s string) Reply { return Reply{Content: s} }

// Answer returns a reply whose content is v as JSON.
func Answer(v any) Reply { return Reply{JSON: v} }

// Call returns a reply that calls the tool name with args (marshalled to
// JSON; a string is sent as it is).
func Call(name string, args any) Reply {
	return Reply{ToolCalls: []ToolCall{NewToolCall(name, args)}}
}

// NewToolCall returns a call of the tool name with args (marshalled to
// JSON; a string is sent as it is) and no id.
func NewToolCall(name string, args any) ToolCall {
	s, ok := args.(string)
	if !ok {
		raw, err := json.Marshal(args)
		if err != nil {
			panic(fmt.Sprintf("chatcompletions: marshal the arguments of %s: %v", name, err))
		}
		s = string(raw)
	}
	return ToolCall{Name: name, Arguments: s}
}

// Error returns an API error reply with status and message.
func Error(status int, message string) Reply { return Reply{Status: status, Message: message} }

// RateLimited returns an HTTP 429 reply that asks the client to wait
// retryAfter (whole seconds) before it retries.
func RateLimited(retryAfter time.Duration) Reply {
	return Reply{
		Status: http.StatusTooManyRequests, Message: "Rate limit reached. Please try again later.",
		Code: "rate_limit_exceeded", RetryAfter: strconv.Itoa(int(retryAfter.Seconds())),
	}
}

// Hang returns a reply that never comes (see Reply.Hang).
func Hang() Reply { return Reply{Hang: true} }
