package responses

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"strings"
)

// Request is one request the fake received on /v1/responses, decoded.
type Request struct {
	// Header is the request's HTTP header.
	Header http.Header
	// Body is the raw JSON body.
	Body json.RawMessage

	Model        string
	Instructions string
	Stream       bool
	// Input is the history the client sent, in order.
	Input []Item
	// Tools are the tools the client offered.
	Tools []Tool
	// Format is the requested output format (text.format), e.g. a
	// json_schema with the schema the answer must match; nil if none.
	Format json.RawMessage
	// Metadata is the decoded x-codex-turn-metadata header (zero if absent).
	Metadata TurnMetadata
}

// Item is one input item of a request: a message, a tool call the model
// made earlier, or a tool's output.
type Item struct {
	// Type is the item type: message, function_call, function_call_output,
	// custom_tool_call, custom_tool_call_output, reasoning, ...
	Type string
	// Role of a message: developer, system, user or assistant.
	Role string
	// Text of a message: its text parts joined by newlines.
	Text string
	// Name, CallID, Arguments and Input of a tool call.
	Name      string
	CallID    string
	Arguments string
	Input     string
	// Output of a tool call's output item, as text.
	Output string
	// Raw is the item as sent.
	Raw json.RawMessage
}

// Tool is a tool a request offered.
type Tool struct {
	Type string // function, custom, web_search, ...
	Name string
	Raw  json.RawMessage
}

// TurnMetadata is the x-codex-turn-metadata header the codex CLI sends with
// each request.
type TurnMetadata struct {
	SessionID string `json:"session_id"`
	ThreadID  string `json:"thread_id"`
	TurnID    string `json:"turn_id"`
	// HistoryInitialization is how the thread's history started: new,
	// cold_resume or cold_fork.
	HistoryInitialization string `json:"history_initialization"`
	SandboxMode           string `json:"sandbox_mode"`
	Model                 string `json:"model"`
	// Raw is the header's value.
	Raw string `json:"-"`
}

// Texts returns the text of the request's messages of a role ("" for all),
// in order.
func (r Request) Texts(role string) []string {
	var out []string
	for _, it := range r.Input {
		if it.Type == "message" && (role == "" || it.Role == role) {
			out = append(out, it.Text)
		}
	}
	return out
}

// Contains reports whether any message, tool call or tool output of the
// request's history contains s.
func (r Request) Contains(s string) bool {
	for _, it := range r.Input {
		for _, v := range []string{it.Text, it.Arguments, it.Input, it.Output} {
			if strings.Contains(v, s) {
				return true
			}
		}
	}
	return false
}

// LastUserText returns the text of the request's last user message.
func (r Request) LastUserText() string {
	for i := len(r.Input) - 1; i >= 0; i-- {
		if it := r.Input[i]; it.Type == "message" && it.Role == "user" {
			return it.Text
		}
	}
	return ""
}

// ToolOutputs returns the outputs of the tool calls in the request's
// history, by call id.
func (r Request) ToolOutputs() map[string]string {
	out := map[string]string{}
	for _, it := range r.Input {
		if strings.HasSuffix(it.Type, "_output") {
			out[it.CallID] = it.Output
		}
	}
	return out
}

// Schema returns the JSON schema of a json_schema output format, or nil.
func (r Request) Schema() json.RawMessage {
	var f struct {
		Type   string          `json:"type"`
		Schema json.RawMessage `json:"schema"`
	}
	if json.Unmarshal(r.Format, &f) != nil || f.Type != "json_schema" {
		return nil
	}
	return f.Schema
}

// maxBody bounds a request body the fake reads (codex sends the whole
// history each time).
const maxBody = 64 << 20

func decodeRequest(r *http.Request) (Request, error) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		return Request{}, fmt.Errorf("read the request body: %w", err)
	}
	var raw struct {
		Model        string            `json:"model"`
		Instructions string            `json:"instructions"`
		Stream       bool              `json:"stream"`
		Input        []json.RawMessage `json:"input"`
		Tools        []json.RawMessage `json:"tools"`
		Text         struct {
			Format json.RawMessage `json:"format"`
		} `json:"text"`
	}
	if err := json.Unmarshal(body, &raw); err != nil {
		return Request{}, fmt.Errorf("decode the request body: %w", err)
	}
	req := Request{
		Header:       r.Header.Clone(),
		Body:         body,
		Model:        raw.Model,
		Instructions: raw.Instructions,
		Stream:       raw.Stream,
		Format:       raw.Text.Format,
	}
	for _, in := range raw.Input {
		it, err := decodeItem(in)
		if err != nil {
			return Request{}, err
		}
		req.Input = append(req.Input, it)
	}
	for _, t := range raw.Tools {
		var tool Tool
		if err := json.Unmarshal(t, &tool); err != nil {
			return Request{}, fmt.Errorf("decode a tool: %w", err)
		}
		tool.Raw = t
		req.Tools = append(req.Tools, tool)
	}
	if h := r.Header.Get("x-codex-turn-metadata"); h != "" {
		if err := json.Unmarshal([]byte(h), &req.Metadata); err != nil {
			return Request{}, fmt.Errorf("decode x-codex-turn-metadata: %w", err)
		}
		req.Metadata.Raw = h
	}
	return req, nil
}

func decodeItem(in json.RawMessage) (Item, error) {
	var raw struct {
		Type      string          `json:"type"`
		Role      string          `json:"role"`
		Content   json.RawMessage `json:"content"`
		Name      string          `json:"name"`
		CallID    string          `json:"call_id"`
		Arguments string          `json:"arguments"`
		Input     string          `json:"input"`
		Output    json.RawMessage `json:"output"`
	}
	if err := json.Unmarshal(in, &raw); err != nil {
		return Item{}, fmt.Errorf("decode an input item: %w", err)
	}
	it := Item{
		Type: raw.Type, Role: raw.Role, Name: raw.Name, CallID: raw.CallID,
		Arguments: raw.Arguments, Input: raw.Input, Raw: in,
	}
	if it.Type == "" && it.Role != "" {
		it.Type = "message"
	}
	it.Text = contentText(raw.Content)
	it.Output = contentText(raw.Output)
	return it, nil
}

// contentText returns the text of a content value: a string, or an array
// of parts whose text fields are joined by newlines.
func contentText(raw json.RawMessage) string {
	if len(raw) == 0 {
		return ""
	}
	var s string
	if json.Unmarshal(raw, &s) == nil {
		return s
	}
	var parts []struct {
		Text string `json:"text"`
	}
	if json.Unmarshal(raw, &parts) == nil {
		texts := make([]string, 0, len(parts))
		for _, p := range parts {
			if p.Text != "" {
				texts = append(texts, p.Text)
			}
		}
		return strings.Join(texts, "\n")
	}
	var obj struct {
		Content json.RawMessage `json:"content"`
		Output  string          `json:"output"`
	}
	if json.Unmarshal(raw, &obj) == nil {
		if obj.Output != "" {
			return obj.Output
		}
		return contentText(obj.Content)
	}
	return string(raw)
}
