// Package chatcompletions is an in-process fake of the OpenAI chat
// completions API (POST /v1/chat/completions), for tests of clients such as
// prchat's openai backend. No model runs: every request is answered by the
// next scripted Reply.
//
//	s := chatcompletions.New(t)
//	s.Push(
//		chatcompletions.Call("search_code", map[string]any{"query": "parseConfig"}),
//		chatcompletions.Answer(map[string]any{"answer_markdown": "..."}),
//	)
//	// point the client at s.URL, run it, then look at s.Requests()
//
// Streamed replies are sent as the real API sends them: server-sent events
// of chat.completion.chunk objects ("data: {...}"), ending with
// "data: [DONE]". Content arrives in small pieces, and each tool call's id
// and name arrive in its first chunk with its arguments spread over the
// following ones, so that clients must put the fragments together by index.
// A request with stream_options.include_usage gets a last chunk with the
// token usage and no choices. Replies can also be API errors (429 with
// Retry-After, 500, 401, ...) and hangs (a stream that stops sending).
//
// The server records every request it gets (headers, model, messages, tools,
// response_format, raw body) for assertions. It can play an endpoint that
// rejects response_format json_schema (RejectJSONSchema) or one that wants
// an API key (RequireKey).
package chatcompletions

import (
	"bytes"
	"cmp"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/fakeapi"
)

// Path is the path the server answers, under its host.
const Path = "/v1/chat/completions"

// DefaultChunkSize is how many bytes of content or arguments one streamed
// chunk carries unless a Reply says otherwise.
const DefaultChunkSize = 8

// maxBody bounds a request body the server reads.
const maxBody = 32 << 20

// Server is a fake chat completions endpoint. Its methods are safe for
// concurrent use. Its Push, Handle, Pending and Requests (every request
// received, including the ones it refused) come from the script core,
// fakeapi.Script.
type Server struct {
	// URL is the API's base URL (http://127.0.0.1:port/v1), what a client
	// takes as its base URL.
	URL string

	*fakeapi.Script[Request, Reply]
	http *fakeapi.Server

	mu           sync.Mutex
	apiKey       string
	rejectSchema bool
	nextID       int
}

// New starts a fake endpoint on a loopback port; it is closed when tb's
// test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := NewServer()
	tb.Cleanup(s.Close)
	return s
}

// NewServer starts a fake endpoint on a loopback port for a caller that
// closes it itself (New closes it when the test ends).
func NewServer() *Server {
	s := &Server{Script: &fakeapi.Script[Request, Reply]{}}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, s.serveCompletions)
	s.http = fakeapi.NewServer(mux)
	s.URL = s.http.Base + "/v1"
	return s
}

// Close ends hanging replies and shuts the server down. It is safe to call
// twice.
func (s *Server) Close() { s.http.Close() }

// RequireKey makes the server refuse (HTTP 401, without taking a reply)
// every request whose Authorization header is not "Bearer key". An empty
// key accepts any request, the default.
func (s *Server) RequireKey(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.apiKey = key
}

// RejectJSONSchema makes the server refuse (HTTP 400 naming
// response_format, without taking a reply) every request that asks for a
// json_schema response format, as some OpenAI-compatible endpoints do.
// false, the default, accepts it.
func (s *Server) RejectJSONSchema(reject bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.rejectSchema = reject
}

// serveCompletions answers one request.
func (s *Server) serveCompletions(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(io.LimitReader(r.Body, maxBody))
	if err != nil {
		writeError(w, http.StatusBadRequest, "", "cannot read the request body: "+err.Error(), "invalid_request_error", nil)
		return
	}
	req, perr := parseRequest(body)
	req.Header = r.Header.Clone()
	req.Body = body

	var reply Reply
	if refused := s.refusal(req, perr); refused != nil {
		reply = *refused
		req.Status = reply.Status
		s.Record(req)
	} else {
		n, next, ok := s.Take(req)
		if !ok {
			next = Reply{Status: http.StatusBadRequest, Message: "chatcompletions fake: no reply scripted"}
		}
		reply = next
		s.Amend(n, func(r *Request) { r.Status = cmp.Or(reply.Status, http.StatusOK) })
	}
	s.write(w, r, req, reply)
}

// refusal returns the reply refusing req, or nil when req reaches the
// model.
func (s *Server) refusal(req Request, perr error) *Reply {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch {
	case perr != nil:
		return &Reply{Status: http.StatusBadRequest, Message: perr.Error()}
	case s.apiKey != "" && req.Header.Get("Authorization") != "Bearer "+s.apiKey:
		return &Reply{Status: http.StatusUnauthorized, Message: "Incorrect API key provided.", Code: "invalid_api_key"}
	case s.rejectSchema && req.ResponseFormat != nil && req.ResponseFormat.Type == "json_schema":
		return &Reply{
			Status:  http.StatusBadRequest,
			Message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
			Param:   "response_format",
		}
	}
	return nil
}

// write sends reply as the answer to req.
func (s *Server) write(w http.ResponseWriter, r *http.Request, req Request, reply Reply) {
	if reply.Status >= 400 {
		if reply.RetryAfter != "" {
			w.Header().Set("Retry-After", reply.RetryAfter)
		}
		typ := "invalid_request_error"
		switch {
		case reply.Status == http.StatusTooManyRequests:
			typ = "rate_limit_error"
		case reply.Status >= 500:
			typ = "server_error"
		}
		var param *string
		if reply.Param != "" {
			param = &reply.Param
		}
		writeError(w, reply.Status, reply.Code, cmp.Or(reply.Message, http.StatusText(reply.Status)), typ, param)
		return
	}
	content := reply.Content
	if reply.JSON != nil {
		raw, err := json.Marshal(reply.JSON)
		if err != nil {
			writeError(w, http.StatusInternalServerError, "", "chatcompletions fake: marshal Reply.JSON: "+err.Error(), "server_error", nil)
			return
		}
		content = string(raw)
	}
	calls := slices.Clone(reply.ToolCalls)
	s.mu.Lock()
	for i := range calls {
		if calls[i].ID == "" {
			s.nextID++
			calls[i].ID = fmt.Sprintf("call_%d", s.nextID)
		}
	}
	s.mu.Unlock()
	finish := reply.FinishReason
	if finish == "" {
		finish = "stop"
		if len(calls) > 0 {
			finish = "tool_calls"
		}
	}
	usage := reply.Usage
	if usage == nil {
		out := len(content)
		for _, c := range calls {
			out += len(c.Name) + len(c.Arguments)
		}
		usage = &Usage{PromptTokens: max(1, len(req.Body)/4), CompletionTokens: max(1, out/4)}
	}
	if reply.NoUsage {
		usage = nil
	}
	if req.Stream {
		s.stream(w, r, req, reply, content, calls, finish, usage)
		return
	}
	if reply.Hang {
		s.http.Wait(r, 0, true)
		return
	}
	msg := map[string]any{"role": "assistant", "content": content}
	if len(calls) > 0 {
		var tc []map[string]any
		for _, c := range calls {
			tc = append(tc, map[string]any{"id": c.ID, "type": "function",
				"function": map[string]any{"name": c.Name, "arguments": c.Arguments}})
		}
		msg["tool_calls"] = tc
		if content == "" {
			msg["content"] = nil
		}
	}
	resp := map[string]any{
		"id": "chatcmpl-fake", "object": "chat.completion", "created": time.Now().Unix(), "model": req.Model,
		"choices": []any{map[string]any{"index": 0, "message": msg, "finish_reason": finish}},
	}
	if usage != nil {
		resp["usage"] = usage.wire()
	}
	fakeapi.WriteJSON(w, http.StatusOK, resp)
}

// stream sends a reply as server-sent events.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, reply Reply, content string, calls []ToolCall, finish string, usage *Usage) {
	events := fakeapi.StartEvents(w)
	size := cmp.Or(reply.ChunkSize, DefaultChunkSize)
	send := func(v any) bool {
		if events.Send("", v) != nil {
			return false
		}
		return reply.Delay <= 0 || s.http.Wait(r, reply.Delay, false)
	}
	chunk := func(delta map[string]any, finish any) map[string]any {
		return map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{map[string]any{"index": 0, "delta": delta, "finish_reason": finish}},
		}
	}
	if !send(chunk(map[string]any{"role": "assistant", "content": ""}, nil)) {
		return
	}
	if reply.Hang {
		s.http.Wait(r, 0, true)
		return
	}
	for _, piece := range fakeapi.Split(content, size) {
		if !send(chunk(map[string]any{"content": piece}, nil)) {
			return
		}
	}
	for i, c := range calls {
		first := map[string]any{"index": i, "id": c.ID, "type": "function",
			"function": map[string]any{"name": c.Name, "arguments": ""}}
		if !send(chunk(map[string]any{"tool_calls": []any{first}}, nil)) {
			return
		}
		for _, piece := range fakeapi.Split(c.Arguments, size) {
			frag := map[string]any{"index": i, "function": map[string]any{"arguments": piece}}
			if !send(chunk(map[string]any{"tool_calls": []any{frag}}, nil)) {
				return
			}
		}
	}
	if reply.CutShort {
		return // the connection closes without a finish or [DONE]
	}
	if !send(chunk(map[string]any{}, finish)) {
		return
	}
	if req.IncludeUsage && usage != nil {
		last := map[string]any{
			"id": "chatcmpl-fake", "object": "chat.completion.chunk", "created": time.Now().Unix(), "model": req.Model,
			"choices": []any{}, "usage": usage.wire(),
		}
		if !send(last) {
			return
		}
	}
	_ = events.Raw("data: [DONE]")
}

// writeError sends an API error in the API's shape.
func writeError(w http.ResponseWriter, status int, code, message, typ string, param *string) {
	fakeapi.WriteJSON(w, status, fakeapi.OpenAIError(message, typ, code, param))
}

// parseRequest decodes a chat completions request body.
func parseRequest(body []byte) (Request, error) {
	var wire struct {
		Model         string            `json:"model"`
		Stream        bool              `json:"stream"`
		Messages      []json.RawMessage `json:"messages"`
		Tools         []json.RawMessage `json:"tools"`
		ToolChoice    json.RawMessage   `json:"tool_choice"`
		StreamOptions *struct {
			IncludeUsage bool `json:"include_usage"`
		} `json:"stream_options"`
		ResponseFormat *struct {
			Type       string `json:"type"`
			JSONSchema *struct {
				Name   string          `json:"name"`
				Strict bool            `json:"strict"`
				Schema json.RawMessage `json:"schema"`
			} `json:"json_schema"`
		} `json:"response_format"`
	}
	if err := json.Unmarshal(body, &wire); err != nil {
		return Request{}, fmt.Errorf("the request body is not JSON: %v", err)
	}
	req := Request{Model: wire.Model, Stream: wire.Stream, ToolChoice: wire.ToolChoice}
	if wire.StreamOptions != nil {
		req.IncludeUsage = wire.StreamOptions.IncludeUsage
	}
	if rf := wire.ResponseFormat; rf != nil {
		req.ResponseFormat = &ResponseFormat{Type: rf.Type}
		if rf.JSONSchema != nil {
			req.ResponseFormat.Name = rf.JSONSchema.Name
			req.ResponseFormat.Strict = rf.JSONSchema.Strict
			req.ResponseFormat.Schema = rf.JSONSchema.Schema
		}
	}
	if req.Model == "" {
		return req, fmt.Errorf("you must provide a model parameter")
	}
	if len(wire.Messages) == 0 {
		return req, fmt.Errorf("'messages' must contain at least one message")
	}
	for i, raw := range wire.Messages {
		m, err := parseMessage(raw)
		if err != nil {
			return req, fmt.Errorf("messages[%d]: %v", i, err)
		}
		req.Messages = append(req.Messages, m)
	}
	for i, raw := range wire.Tools {
		var t struct {
			Type     string `json:"type"`
			Function struct {
				Name        string          `json:"name"`
				Description string          `json:"description"`
				Parameters  json.RawMessage `json:"parameters"`
			} `json:"function"`
		}
		if err := json.Unmarshal(raw, &t); err != nil || t.Type != "function" || t.Function.Name == "" {
			return req, fmt.Errorf("tools[%d] is not a function tool with a name", i)
		}
		req.Tools = append(req.Tools, Tool{Name: t.Function.Name, Description: t.Function.Description, Parameters: t.Function.Parameters})
	}
	return req, checkToolResults(req.Messages)
}

// parseMessage decodes one message; content may be a string or a list of
// text parts.
func parseMessage(raw json.RawMessage) (Message, error) {
	var wire struct {
		Role       string          `json:"role"`
		Content    json.RawMessage `json:"content"`
		Name       string          `json:"name"`
		ToolCallID string          `json:"tool_call_id"`
		ToolCalls  []struct {
			ID       string `json:"id"`
			Type     string `json:"type"`
			Function struct {
				Name      string `json:"name"`
				Arguments string `json:"arguments"`
			} `json:"function"`
		} `json:"tool_calls"`
	}
	if err := json.Unmarshal(raw, &wire); err != nil {
		return Message{}, err
	}
	m := Message{Role: wire.Role, Name: wire.Name, ToolCallID: wire.ToolCallID}
	switch c := bytes.TrimSpace(wire.Content); {
	case len(c) == 0 || string(c) == "null":
	case c[0] == '"':
		if err := json.Unmarshal(c, &m.Content); err != nil {
			return Message{}, err
		}
	case c[0] == '[':
		var parts []struct {
			Type string `json:"type"`
			Text string `json:"text"`
		}
		if err := json.Unmarshal(c, &parts); err != nil {
			return Message{}, err
		}
		var b strings.Builder
		for _, p := range parts {
			b.WriteString(p.Text)
		}
		m.Content = b.String()
	default:
		return Message{}, fmt.Errorf("content is neither a string nor a list of parts")
	}
	for _, tc := range wire.ToolCalls {
		m.ToolCalls = append(m.ToolCalls, ToolCall{ID: tc.ID, Name: tc.Function.Name, Arguments: tc.Function.Arguments})
	}
	switch m.Role {
	case "system", "developer", "user", "assistant", "tool":
	default:
		return Message{}, fmt.Errorf("unknown role %q", m.Role)
	}
	if m.Role == "tool" && m.ToolCallID == "" {
		return Message{}, fmt.Errorf("a tool message needs a tool_call_id")
	}
	return m, nil
}

// checkToolResults checks, as the real API does, that every tool call of
// an assistant message is answered by a tool message right after it, and
// that every tool message answers such a call.
func checkToolResults(msgs []Message) error {
	for i := 0; i < len(msgs); i++ {
		m := msgs[i]
		if m.Role == "tool" {
			return fmt.Errorf("messages[%d]: a message with role 'tool' must be a response to a preceding message with 'tool_calls'", i)
		}
		if m.Role != "assistant" || len(m.ToolCalls) == 0 {
			continue
		}
		want := map[string]bool{}
		for _, c := range m.ToolCalls {
			want[c.ID] = true
		}
		for i+1 < len(msgs) && msgs[i+1].Role == "tool" {
			i++
			if !want[msgs[i].ToolCallID] {
				return fmt.Errorf("messages[%d]: tool_call_id %q answers no tool call of the assistant message before it", i, msgs[i].ToolCallID)
			}
			delete(want, msgs[i].ToolCallID)
		}
		if len(want) > 0 {
			return fmt.Errorf("an assistant message with 'tool_calls' must be followed by tool messages responding to each 'tool_call_id'; %d are missing", len(want))
		}
	}
	return nil
}
