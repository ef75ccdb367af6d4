// Package chatcompletions is an in-process fake of the OpenAI chat
// completions API (POST /v1/chat/completions), for tests of clients such as
// prchat's openai backend. No model runs: every request is answered by the
// next scripted Reply.
//
//	s := chatcompletions.NewServer()
//	defer s.Close()
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
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
)

// Path is the path the server answers, under its host.
const Path = "/v1/chat/completions"

// DefaultChunkSize is how many bytes of content or arguments one streamed
// chunk carries unless a Reply says otherwise.
const DefaultChunkSize = 8

// maxBody bounds a request body the server reads.
const maxBody = 32 << 20

// Server is a fake chat completions endpoint. Its methods are safe for
// concurrent use.
type Server struct {
	// URL is the API's base URL (http://127.0.0.1:port/v1), what a client
	// takes as its base URL.
	URL string

	srv       *httptest.Server
	done      chan struct{} // closed by Close: hanging replies end
	closeOnce sync.Once

	mu           sync.Mutex
	replies      []Reply
	handler      func(Request) Reply
	requests     []Request
	apiKey       string
	rejectSchema bool
	nextID       int
}

// NewServer starts a fake endpoint on a loopback port. Close it when done.
func NewServer() *Server {
	s := &Server{done: make(chan struct{})}
	mux := http.NewServeMux()
	mux.HandleFunc("POST "+Path, s.serveCompletions)
	s.srv = httptest.NewServer(mux)
	s.URL = s.srv.URL + "/v1"
	return s
}

// Close ends hanging replies and shuts the server down. It is safe to call
// twice.
func (s *Server) Close() {
	s.closeOnce.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Push appends replies to the script; each request that reaches the model
// takes the next one.
func (s *Server) Push(replies ...Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.replies = append(s.replies, replies...)
}

// Handle sets f to answer requests when the script is empty. Without a
// handler, such a request gets HTTP 400 "no reply scripted".
func (s *Server) Handle(f func(Request) Reply) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = f
}

// Pending returns how many pushed replies no request has taken yet.
func (s *Server) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.replies)
}

// Requests returns every request the server got so far, in order,
// including the ones it refused.
func (s *Server) Requests() []Request {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

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

	s.mu.Lock()
	i := len(s.requests)
	s.requests = append(s.requests, req)
	reply, refused := s.take(req, perr)
	if refused != nil {
		reply = *refused
	}
	s.requests[i].Status = cmpOr(reply.Status, http.StatusOK)
	s.mu.Unlock()

	s.write(w, r, req, reply)
}

// take decides the reply to req: a refusal, or the next scripted reply.
// s.mu is held.
func (s *Server) take(req Request, perr error) (Reply, *Reply) {
	switch {
	case perr != nil:
		return Reply{}, &Reply{Status: http.StatusBadRequest, Message: perr.Error()}
	case s.apiKey != "" && req.Header.Get("Authorization") != "Bearer "+s.apiKey:
		return Reply{}, &Reply{Status: http.StatusUnauthorized, Message: "Incorrect API key provided.", Code: "invalid_api_key"}
	case s.rejectSchema && req.ResponseFormat != nil && req.ResponseFormat.Type == "json_schema":
		return Reply{}, &Reply{
			Status:  http.StatusBadRequest,
			Message: "Invalid parameter: 'response_format' of type 'json_schema' is not supported with this model.",
			Param:   "response_format",
		}
	}
	if len(s.replies) > 0 {
		r := s.replies[0]
		s.replies = s.replies[1:]
		return r, nil
	}
	if s.handler != nil {
		h := s.handler
		s.mu.Unlock()
		r := h(req)
		s.mu.Lock()
		return r, nil
	}
	return Reply{}, &Reply{Status: http.StatusBadRequest, Message: "chatcompletions fake: no reply scripted"}
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
		writeError(w, reply.Status, reply.Code, cmpOr(reply.Message, http.StatusText(reply.Status)), typ, param)
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
		s.hang(r)
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
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode(resp)
}

// stream sends a reply as server-sent events.
func (s *Server) stream(w http.ResponseWriter, r *http.Request, req Request, reply Reply, content string, calls []ToolCall, finish string, usage *Usage) {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher, _ := w.(http.Flusher)
	size := cmpOr(reply.ChunkSize, DefaultChunkSize)
	send := func(v any) bool {
		raw, _ := json.Marshal(v)
		if _, err := fmt.Fprintf(w, "data: %s\n\n", raw); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		if reply.Delay > 0 {
			select {
			case <-time.After(reply.Delay):
			case <-r.Context().Done():
				return false
			case <-s.done:
				return false
			}
		}
		return true
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
		s.hang(r)
		return
	}
	for _, piece := range split(content, size) {
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
		for _, piece := range split(c.Arguments, size) {
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
	fmt.Fprint(w, "data: [DONE]\n\n")
	if flusher != nil {
		flusher.Flush()
	}
}

// hang blocks until the client goes away or the server closes.
func (s *Server) hang(r *http.Request) {
	select {
	case <-r.Context().Done():
	case <-s.done:
	}
}

// split cuts s into pieces of about size bytes, on rune boundaries.
func split(s string, size int) []string {
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// writeError sends an API error in the API's shape.
func writeError(w http.ResponseWriter, status int, code, message, typ string, param *string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	var c any
	if code != "" {
		c = code
	}
	_ = json.NewEncoder(w).Encode(map[string]any{"error": map[string]any{
		"message": message, "type": typ, "param": param, "code": c,
	}})
}

func cmpOr[T comparable](vals ...T) T {
	var zero T
	for _, v := range vals {
		if v != zero {
			return v
		}
	}
	return zero
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
