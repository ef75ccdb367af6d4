package anthropic

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"time"
)

// Request is one request the fake received, with the body of a Messages API
// call decoded.
type Request struct {
	// N is the request's number, 1 for the first the server received.
	N int
	// Received is when the request arrived.
	Received time.Time
	Method   string
	// Path is the URL path, Query its query (the CLI adds beta=true).
	Path   string
	Query  url.Values
	Header http.Header
	// SessionID is the x-claude-code-session-id header: the Claude Code
	// session the request belongs to.
	SessionID string
	// Body is the raw request body.
	Body []byte

	// The decoded Messages API request (zero for other endpoints).
	Model     string
	MaxTokens int
	Stream    bool
	// System is the system prompt as blocks (a string system prompt becomes
	// one text block).
	System []Block
	// Messages is the history the client sent, oldest first, including any
	// role "system" entries the Claude Code CLI adds.
	Messages []Message
	Tools    []Tool
}

// Message is one entry of a request's history.
type Message struct {
	Role string
	// Content is the message's blocks; a string content becomes one text
	// block.
	Content []Block
}

// UnmarshalJSON decodes a message whose content is a string or an array of
// blocks.
func (m *Message) UnmarshalJSON(data []byte) error {
	var raw struct {
		Role    string          `json:"role"`
		Content json.RawMessage `json:"content"`
	}
	if err := json.Unmarshal(data, &raw); err != nil {
		return err
	}
	blocks, err := decodeBlocks(raw.Content)
	if err != nil {
		return fmt.Errorf("message of role %q: %w", raw.Role, err)
	}
	m.Role, m.Content = raw.Role, blocks
	return nil
}

// MarshalJSON encodes the message as the Messages API does.
func (m Message) MarshalJSON() ([]byte, error) {
	return json.Marshal(struct {
		Role    string  `json:"role"`
		Content []Block `json:"content"`
	}{m.Role, m.Content})
}

// Text returns the message's text blocks joined by newlines, without
// <system-reminder> blocks.
func (m Message) Text() string {
	var parts []string
	for _, b := range m.Content {
		if b.Type == "text" && !b.IsReminder() {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// ToolResults returns the message's tool_result blocks.
func (m Message) ToolResults() []Block {
	var out []Block
	for _, b := range m.Content {
		if b.Type == "tool_result" {
			out = append(out, b)
		}
	}
	return out
}

// Block is one content block: text, tool_use, tool_result, thinking, or
// any other type (kept in Raw).
type Block struct {
	Type string `json:"type"`
	// Text of a text block (and of a thinking block, in Thinking).
	Text     string `json:"text,omitempty"`
	Thinking string `json:"thinking,omitempty"`
	// ID, Name and Input of a tool_use block.
	ID    string          `json:"id,omitempty"`
	Name  string          `json:"name,omitempty"`
	Input json.RawMessage `json:"input,omitempty"`
	// ToolUseID, Content and IsError of a tool_result block. Content is a
	// string or an array of blocks; ResultText reads either.
	ToolUseID string          `json:"tool_use_id,omitempty"`
	Content   json.RawMessage `json:"content,omitempty"`
	IsError   bool            `json:"is_error,omitempty"`
	// Raw is the block as it was received (empty for blocks made by the
	// constructors of this package).
	Raw json.RawMessage `json:"-"`
}

// UnmarshalJSON decodes a block and keeps its raw form.
func (b *Block) UnmarshalJSON(data []byte) error {
	type plain Block
	var p plain
	if err := json.Unmarshal(data, &p); err != nil {
		return err
	}
	*b = Block(p)
	b.Raw = append(json.RawMessage(nil), data...)
	return nil
}

// IsReminder reports whether b is a text block holding a
// <system-reminder> the Claude Code CLI adds to user messages.
func (b Block) IsReminder() bool {
	return b.Type == "text" && strings.HasPrefix(strings.TrimSpace(b.Text), "<system-reminder>")
}

// ResultText returns the text of a tool_result block's content, whether it
// is a string or an array of text blocks.
func (b Block) ResultText() string {
	if len(b.Content) == 0 {
		return ""
	}
	var s string
	if err := json.Unmarshal(b.Content, &s); err == nil {
		return s
	}
	blocks, err := decodeBlocks(b.Content)
	if err != nil {
		return string(b.Content)
	}
	var parts []string
	for _, c := range blocks {
		if c.Type == "text" {
			parts = append(parts, c.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// decodeBlocks decodes content that is a string, an array of blocks, or
// absent.
func decodeBlocks(raw json.RawMessage) ([]Block, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || bytes.Equal(raw, []byte("null")) {
		return nil, nil
	}
	if raw[0] == '"' {
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return []Block{{Type: "text", Text: s}}, nil
	}
	var blocks []Block
	if err := json.Unmarshal(raw, &blocks); err != nil {
		return nil, err
	}
	return blocks, nil
}

// Tool is a tool the client offered the model.
type Tool struct {
	Name        string          `json:"name"`
	Description string          `json:"description,omitempty"`
	InputSchema json.RawMessage `json:"input_schema,omitempty"`
}

// decode fills the Messages API fields of r from its body.
func (r *Request) decode() error {
	var body struct {
		Model     string          `json:"model"`
		MaxTokens int             `json:"max_tokens"`
		Stream    bool            `json:"stream"`
		System    json.RawMessage `json:"system"`
		Messages  []Message       `json:"messages"`
		Tools     []Tool          `json:"tools"`
	}
	if err := json.Unmarshal(r.Body, &body); err != nil {
		return fmt.Errorf("decode the request body: %w", err)
	}
	system, err := decodeBlocks(body.System)
	if err != nil {
		return fmt.Errorf("decode the system prompt: %w", err)
	}
	r.Model, r.MaxTokens, r.Stream = body.Model, body.MaxTokens, body.Stream
	r.System, r.Messages, r.Tools = system, body.Messages, body.Tools
	return nil
}

// Tool returns the tool named name that the request offered, if any.
func (r Request) Tool(name string) (Tool, bool) {
	for _, t := range r.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// ToolNames returns the names of the tools the request offered, in order.
func (r Request) ToolNames() []string {
	names := make([]string, len(r.Tools))
	for i, t := range r.Tools {
		names[i] = t.Name
	}
	return names
}

// SystemText returns the system prompt's text blocks joined by newlines.
func (r Request) SystemText() string {
	var parts []string
	for _, b := range r.System {
		if b.Type == "text" {
			parts = append(parts, b.Text)
		}
	}
	return strings.Join(parts, "\n")
}

// Prompts returns the text of the user messages that are prompts (not
// tool results), without <system-reminder> blocks, oldest first: what the
// user said in the session so far, the current prompt last.
func (r Request) Prompts() []string {
	var out []string
	for _, m := range r.Messages {
		if m.Role != "user" {
			continue
		}
		if t := m.Text(); t != "" {
			out = append(out, t)
		}
	}
	return out
}

// Last returns the last message of the history that is not a role
// "system" entry, or a zero Message when there is none.
func (r Request) Last() Message {
	for i := len(r.Messages) - 1; i >= 0; i-- {
		if r.Messages[i].Role != "system" {
			return r.Messages[i]
		}
	}
	return Message{}
}

// ToolResults returns the tool_result blocks of the last message: the
// results of the tools the model asked for in its previous reply, if this
// request continues a tool call. Empty when the request starts a new turn
// with a prompt.
func (r Request) ToolResults() []Block {
	last := r.Last()
	if last.Role != "user" {
		return nil
	}
	return last.ToolResults()
}

// Contains reports whether any text, tool input or tool result of the
// history contains s.
func (r Request) Contains(s string) bool {
	for _, m := range r.Messages {
		for _, b := range m.Content {
			if strings.Contains(b.Text, s) || strings.Contains(string(b.Input), s) ||
				(b.Type == "tool_result" && strings.Contains(b.ResultText(), s)) {
				return true
			}
		}
	}
	return false
}
