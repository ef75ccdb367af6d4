// Package anthropic is a fake of the Anthropic Messages API for tests: an
// HTTP server that answers POST /v1/messages with scripted replies,
// streamed as server-sent events (or as one JSON message when the request
// does not ask for a stream), and records every request it receives.
//
// Tests point the real Claude Code CLI at it (Env gives the environment
// for that) and script what "the model" does:
//
//	api := anthropic.New(t)
//	api.Push(
//		anthropic.ToolUse("Read", map[string]any{"file_path": dir + "/main.go"}),
//		anthropic.Structured(answer), // the --json-schema answer
//	)
//	api.Handle(func(r anthropic.Request) anthropic.Reply { ... }) // when the queue is empty
//
// A reply can be text, tool calls, an HTTP error (400, 500, 529, ...), an
// error in the middle of the stream, a delay, or a hang. Requests returns
// what the client sent (the history, system prompt, tools and headers such
// as x-claude-code-session-id), so a test can assert which history a
// resumed or forked session carried. The decoding tolerates what the CLI
// sends besides plain user and assistant turns: role "system" entries,
// <system-reminder> text blocks, thinking blocks.
//
// Other endpoints a client may call answer harmlessly:
// /v1/messages/count_tokens with an estimate, /v1/models with one model,
// anything else 404 with an Anthropic error body; Unknown lists them.
package anthropic

import (
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

// Model is the model the fake reports when a request names none.
const Model = "claude-fake-1"

// Server is the fake Messages API. It is safe for concurrent use. Its
// Push, Handle, Pending and Requests (every request received, on all
// endpoints) come from the script core, fakeapi.Script.
type Server struct {
	// URL is the server's base URL, for ANTHROPIC_BASE_URL (without /v1,
	// as Anthropic's clients take it).
	URL string

	*fakeapi.Script[Request, Reply]
	http *fakeapi.Server

	mu      sync.Mutex
	unknown []string
	nextID  int
}

// New starts a fake server; it is closed when the test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{Script: &fakeapi.Script[Request, Reply]{Number: func(r *Request, n int) { r.N = n }}}
	s.http = fakeapi.Start(tb, http.HandlerFunc(s.serve))
	s.URL = s.http.Base
	return s
}

// Open starts a fake server outside a test (prchat-bench drives the real
// CLI against it); the caller closes it.
func Open() *Server {
	s := &Server{Script: &fakeapi.Script[Request, Reply]{Number: func(r *Request, n int) { r.N = n }}}
	s.http = fakeapi.NewServer(http.HandlerFunc(s.serve))
	s.URL = s.http.Base
	return s
}

// Close releases any hanging request and stops the server. It is safe to
// call twice.
func (s *Server) Close() { s.http.Close() }

// Env returns the environment that points the Claude Code CLI at this
// server, offline: ANTHROPIC_BASE_URL, a dummy ANTHROPIC_API_KEY, no
// nonessential traffic, no auto-update, and no retries (a failing request
// fails the run at once).
func (s *Server) Env() []string {
	return []string{
		"ANTHROPIC_BASE_URL=" + s.URL,
		"ANTHROPIC_API_KEY=test",
		"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1",
		"DISABLE_AUTOUPDATER=1",
		"CLAUDE_CODE_MAX_RETRIES=0",
	}
}

// Messages returns the Messages API requests received so far, in order.
func (s *Server) Messages() []Request {
	var out []Request
	for _, r := range s.Requests() {
		if isMessages(r.Method, r.Path) {
			out = append(out, r)
		}
	}
	return out
}

// Unknown returns "METHOD /path" of the requests to endpoints the fake does
// not implement, in order.
func (s *Server) Unknown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unknown)
}

func isMessages(method, path string) bool {
	return method == http.MethodPost && strings.TrimSuffix(path, "/") == "/v1/messages"
}

// serve records a request and answers it.
func (s *Server) serve(w http.ResponseWriter, r *http.Request) {
	body, err := io.ReadAll(r.Body)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", "read the body: "+err.Error())
		return
	}
	req := Request{
		Received:  time.Now(),
		Method:    r.Method,
		Path:      r.URL.Path,
		Query:     r.URL.Query(),
		Header:    r.Header.Clone(),
		SessionID: r.Header.Get("X-Claude-Code-Session-Id"),
		Body:      body,
	}
	messages := isMessages(r.Method, r.URL.Path)
	var decodeErr error
	if messages || strings.HasPrefix(r.URL.Path, "/v1/messages/count_tokens") {
		decodeErr = req.decode()
	}
	if decodeErr != nil || !messages {
		req.N = s.Record(req)
	}
	switch {
	case decodeErr != nil:
		writeError(w, http.StatusBadRequest, "invalid_request_error", decodeErr.Error())
		return
	case !messages:
		if !isKnown(r.Method, r.URL.Path) {
			s.mu.Lock()
			s.unknown = append(s.unknown, r.Method+" "+r.URL.Path)
			s.mu.Unlock()
		}
		s.serveOther(w, req)
		return
	}
	n, reply, ok := s.Take(req)
	req.N = n
	if !ok {
		reply = Error(http.StatusInternalServerError, fmt.Sprintf("fake anthropic: no reply scripted for request %d", n))
	}
	if !s.http.Wait(r, reply.Delay, reply.Hang) {
		return
	}
	if reply.isError() {
		writeError(w, reply.Status, reply.errorType(), reply.Message)
		return
	}
	reply.Content = s.withIDs(reply.Content)
	if req.Stream {
		s.stream(w, req, reply)
		return
	}
	fakeapi.WriteJSON(w, http.StatusOK, s.message(req, reply, reply.Content, reply.usage().OutputTokens, reply.stopReason()))
}

// withIDs gives tool_use blocks without an id a fresh one.
func (s *Server) withIDs(blocks []Block) []Block {
	out := slices.Clone(blocks)
	s.mu.Lock()
	defer s.mu.Unlock()
	for i, b := range out {
		if b.Type == "tool_use" && b.ID == "" {
			s.nextID++
			out[i].ID = fmt.Sprintf("toolu_fake_%04d", s.nextID)
		}
	}
	return out
}

// message is a Messages API message object.
func (s *Server) message(req Request, reply Reply, content []Block, outputTokens int64, stop any) map[string]any {
	u := reply.usage()
	s.mu.Lock()
	s.nextID++
	id := fmt.Sprintf("msg_fake_%04d", s.nextID)
	s.mu.Unlock()
	blocks := make([]map[string]any, 0, len(content))
	for _, b := range content {
		blocks = append(blocks, blockJSON(b, true))
	}
	model := req.Model
	if model == "" {
		model = Model
	}
	return map[string]any{
		"id":            id,
		"type":          "message",
		"role":          "assistant",
		"model":         model,
		"content":       blocks,
		"stop_reason":   stop,
		"stop_sequence": nil,
		"usage": map[string]any{
			"input_tokens":                u.InputTokens,
			"output_tokens":               outputTokens,
			"cache_creation_input_tokens": u.CacheCreationInputTokens,
			"cache_read_input_tokens":     u.CacheReadInputTokens,
		},
	}
}

// blockJSON is a content block as the API sends it; without full, the
// block as content_block_start announces it (empty text, empty input).
func blockJSON(b Block, full bool) map[string]any {
	switch b.Type {
	case "tool_use":
		input := json.RawMessage(`{}`)
		if full && len(b.Input) > 0 {
			input = b.Input
		}
		return map[string]any{"type": "tool_use", "id": b.ID, "name": b.Name, "input": input}
	case "thinking":
		text := ""
		if full {
			text = b.Thinking
		}
		return map[string]any{"type": "thinking", "thinking": text, "signature": ""}
	}
	text := ""
	if full {
		text = b.Text
	}
	return map[string]any{"type": "text", "text": text}
}

// stream writes the reply as the Messages API's server-sent events.
func (s *Server) stream(w http.ResponseWriter, req Request, reply Reply) {
	events := fakeapi.StartEvents(w)
	send := func(typ string, data map[string]any) {
		data["type"] = typ
		_ = events.Send(typ, data)
	}
	send("message_start", map[string]any{"message": s.message(req, reply, nil, 1, nil)})
	if reply.StreamError != "" {
		send("error", map[string]any{"error": map[string]string{"type": "overloaded_error", "message": reply.StreamError}})
		return
	}
	for i, b := range reply.Content {
		send("content_block_start", map[string]any{"index": i, "content_block": blockJSON(b, false)})
		switch b.Type {
		case "tool_use":
			for _, part := range fakeapi.SplitN(string(b.Input), 2) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "input_json_delta", "partial_json": part}})
			}
		case "thinking":
			for _, part := range fakeapi.SplitN(b.Thinking, 3) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "thinking_delta", "thinking": part}})
			}
		default:
			for _, part := range fakeapi.SplitN(b.Text, 3) {
				send("content_block_delta", map[string]any{"index": i, "delta": map[string]any{"type": "text_delta", "text": part}})
			}
		}
		send("content_block_stop", map[string]any{"index": i})
	}
	u := reply.usage()
	send("message_delta", map[string]any{
		"delta": map[string]any{"stop_reason": reply.stopReason(), "stop_sequence": nil},
		"usage": map[string]any{"output_tokens": u.OutputTokens},
	})
	send("message_stop", map[string]any{})
}

// isKnown reports whether serveOther answers this endpoint.
func isKnown(method, path string) bool {
	path = strings.TrimSuffix(path, "/")
	return (method == http.MethodPost && path == "/v1/messages/count_tokens") ||
		(method == http.MethodGet && (path == "/v1/models" || strings.HasPrefix(path, "/v1/models/")))
}

// serveOther answers the endpoints besides Messages.
func (s *Server) serveOther(w http.ResponseWriter, req Request) {
	path := strings.TrimSuffix(req.Path, "/")
	switch {
	case req.Method == http.MethodPost && path == "/v1/messages/count_tokens":
		fakeapi.WriteJSON(w, http.StatusOK, map[string]any{"input_tokens": len(req.Body)/4 + 1})
	case req.Method == http.MethodGet && path == "/v1/models":
		fakeapi.WriteJSON(w, http.StatusOK, map[string]any{
			"data":     []any{modelJSON(Model)},
			"has_more": false, "first_id": Model, "last_id": Model,
		})
	case req.Method == http.MethodGet && strings.HasPrefix(path, "/v1/models/"):
		fakeapi.WriteJSON(w, http.StatusOK, modelJSON(strings.TrimPrefix(path, "/v1/models/")))
	default:
		writeError(w, http.StatusNotFound, "not_found_error", "fake anthropic: no endpoint "+req.Method+" "+req.Path)
	}
}

func modelJSON(id string) map[string]any {
	return map[string]any{"type": "model", "id": id, "display_name": id, "created_at": "2025-01-01T00:00:00Z"}
}

func writeError(w http.ResponseWriter, status int, typ, message string) {
	fakeapi.WriteJSON(w, status, errorBody(typ, message))
}
