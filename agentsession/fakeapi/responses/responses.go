// Package responses is a fake of the OpenAI Responses API for tests: an
// httptest.Server that answers POST /v1/responses with the streamed
// (server-sent events) replies a test scripts, and records every request it
// received so the test can check what history a client sent.
//
// prchat's tests drive the real Codex CLI against it:
//
//	api := responses.New(t)
//	api.Push(
//		responses.Reply{Calls: []responses.Call{responses.Shell("cat main.go")}},
//		responses.Reply{Text: `{"answer_markdown":"...","citations":[],"suggests_fix":null}`},
//	)
//	args := api.CodexArgs() // -c model_provider=... settings for `codex exec`
//	env := api.CodexEnv()
//	...
//	for _, r := range api.Requests() { r.Metadata.HistoryInitialization ... }
//
// Each request takes the next pushed Reply; when none is left the Handler
// set with Handle answers, and without one the request fails with HTTP 500.
// A Reply is a text message, tool calls (function calls such as the CLI's
// exec_command, or freeform custom tool calls such as apply_patch), an HTTP
// error, a failed response, a delay or a hang.
//
// Other paths are answered harmlessly (an empty model list for GET
// /v1/models, 404 elsewhere) and recorded in Unknown.
package responses

import (
	"cmp"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/fakeapi"
)

// Server is a fake Responses API. It is safe for concurrent use. Its
// Push, Handle, Pending and Requests (the requests to /v1/responses) come
// from the script core, fakeapi.Script.
type Server struct {
	// URL is the API's base URL, ending in /v1 (what a client's base_url
	// is).
	URL string

	*fakeapi.Script[Request, Reply]
	http *fakeapi.Server

	mu       sync.Mutex
	unknown  []string
	inflight int // requests being answered
}

// New starts a fake Responses API on a loopback port. It is closed when
// tb's test ends.
func New(tb testing.TB) *Server {
	tb.Helper()
	s := &Server{Script: &fakeapi.Script[Request, Reply]{}}
	s.http = fakeapi.Start(tb, http.HandlerFunc(s.serveHTTP))
	s.URL = s.http.Base + "/v1"
	return s
}

// Open starts a fake Responses API outside a test (prchat-bench drives the
// real CLI against it); the caller closes it.
func Open() *Server {
	s := &Server{Script: &fakeapi.Script[Request, Reply]{}}
	s.http = fakeapi.NewServer(http.HandlerFunc(s.serveHTTP))
	s.URL = s.http.Base + "/v1"
	return s
}

// NewServer is New under the name it had first.
func NewServer(tb testing.TB) *Server {
	tb.Helper()
	return New(tb)
}

// Close stops the server. Requests that hang are released first. Close may
// be called more than once.
func (s *Server) Close() { s.http.Close() }

// APIKeyEnv is the environment variable CodexArgs names as the provider's
// key; CodexEnv sets it.
const APIKeyEnv = "FAKE_RESPONSES_API_KEY"

// CodexArgs returns the codex CLI flags that make it use this server as
// its model provider, with retries off (an unreachable or failing server
// would otherwise be retried for minutes) and plugins disabled. Add a model
// the CLI knows (-m gpt-5.5) and the environment from CodexEnv.
func (s *Server) CodexArgs() []string {
	provider := fmt.Sprintf(`model_providers.prchat_fake={name="prchat fake",base_url=%q,wire_api="responses",env_key=%q,request_max_retries=0,stream_max_retries=0}`,
		s.URL, APIKeyEnv)
	return []string{
		"-c", "model_provider=prchat_fake",
		"-c", provider,
		"--disable", "unbounded_connection_retries",
		"--disable", "plugins",
	}
}

// CodexConfig returns what CodexArgs sets as the text of a config.toml,
// for a codex run whose command line the test does not write (a process
// of its own, a script): this server as the model provider, retries,
// plugins and the shell snapshot off. It also needs CodexEnv.
func (s *Server) CodexConfig() string {
	return fmt.Sprintf(`model_provider = "prchat_fake"

[model_providers.prchat_fake]
name = "prchat fake"
base_url = %q
wire_api = "responses"
env_key = %q
request_max_retries = 0
stream_max_retries = 0

[features]
unbounded_connection_retries = false
plugins = false
shell_snapshot = false
`, s.URL, APIKeyEnv)
}

// CodexEnv returns the environment CodexArgs needs (the provider's key).
func (s *Server) CodexEnv() []string { return []string{APIKeyEnv + "=fake-key"} }

// Unknown returns "METHOD /path" of the requests to paths other than
// /v1/responses, in order.
func (s *Server) Unknown() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.unknown)
}

// Inflight returns how many requests the server is answering now (a hung
// request counts until its client goes away).
func (s *Server) Inflight() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.inflight
}

func (s *Server) serveHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodPost || r.URL.Path != "/v1/responses" {
		s.mu.Lock()
		s.unknown = append(s.unknown, r.Method+" "+r.URL.Path)
		s.mu.Unlock()
		if r.Method == http.MethodGet && r.URL.Path == "/v1/models" {
			fakeapi.WriteJSON(w, http.StatusOK, map[string]any{"object": "list", "data": []any{}, "models": []any{}})
			return
		}
		writeError(w, http.StatusNotFound, "not_found", "the fake Responses API has no "+r.URL.Path)
		return
	}
	req, err := decodeRequest(r)
	if err != nil {
		writeError(w, http.StatusBadRequest, "invalid_request_error", err.Error())
		return
	}

	s.mu.Lock()
	s.inflight++
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		s.inflight--
		s.mu.Unlock()
	}()
	n, reply, ok := s.Take(req)
	if !ok {
		reply = Reply{Status: http.StatusInternalServerError, Message: "the fake Responses API has no reply scripted for this request"}
	}

	if !s.http.Wait(r, reply.Delay, reply.Hang) {
		return
	}
	if reply.Status != 0 {
		writeError(w, reply.Status, cmp.Or(reply.Code, "server_error"), cmp.Or(reply.Message, http.StatusText(reply.Status)))
		return
	}
	writeStream(w, req, reply, n)
}

func writeError(w http.ResponseWriter, status int, code, message string) {
	fakeapi.WriteJSON(w, status, fakeapi.OpenAIError(message, code, code, nil))
}

// approxTokens is the fake's token count of a text: a quarter of its bytes,
// at least 1.
func approxTokens(s string) int64 { return max(1, int64(len(s)/4)) }

// tool returns the tool of that name the request offered.
func (r Request) tool(name string) (Tool, bool) {
	for _, t := range r.Tools {
		if t.Name == name {
			return t, true
		}
	}
	return Tool{}, false
}

// shellCall turns a Shell call into the call of the shell tool the request
// offers: exec_command {"cmd", "login": false} (codex's unified exec),
// shell_command {"command": string}, or shell {"command": [argv]}.
func shellCall(r Request, c Call) Call {
	switch {
	case hasName(r, "exec_command") || len(r.Tools) == 0:
		c.Name = "exec_command"
		// Not a login shell: the user's profile would add its own output.
		c.Arguments = mustJSON(map[string]any{"cmd": c.Shell, "login": false})
	case hasName(r, "shell_command"):
		c.Name = "shell_command"
		c.Arguments = mustJSON(map[string]any{"command": c.Shell})
	default:
		c.Name = "shell"
		c.Arguments = mustJSON(map[string]any{"command": []string{"bash", "-lc", c.Shell}})
	}
	return c
}

func hasName(r Request, name string) bool {
	_, ok := r.tool(name)
	return ok
}

func mustJSON(v any) string {
	b, err := json.Marshal(v)
	if err != nil {
		panic(fmt.Sprintf("responses: marshal %T: %v", v, err))
	}
	return string(b)
}

// eventWriter writes the stream's events, each with its sequence number.
type eventWriter struct {
	events *fakeapi.Events
	seq    int
}

func (f *eventWriter) event(typ string, fields map[string]any) {
	fields["type"] = typ
	fields["sequence_number"] = f.seq
	f.seq++
	_ = f.events.Send(typ, fields)
}

// writeStream writes reply as a streamed response.
func writeStream(w http.ResponseWriter, req Request, reply Reply, n int) {
	f := &eventWriter{events: fakeapi.StartEvents(w)}
	respID := fmt.Sprintf("resp_fake_%d", n)
	model := cmp.Or(req.Model, "fake-model")
	resp := func(status string, output []any) map[string]any {
		return map[string]any{
			"id": respID, "object": "response", "created_at": time.Now().Unix(),
			"status": status, "model": model, "output": output,
		}
	}
	f.event("response.created", map[string]any{"response": resp("in_progress", []any{})})

	var output []any
	outText := ""
	idx := 0
	if reply.Reasoning != "" {
		item := map[string]any{"id": fmt.Sprintf("rs_%d", n), "type": "reasoning",
			"summary": []any{map[string]any{"type": "summary_text", "text": reply.Reasoning}}}
		f.event("response.output_item.added", map[string]any{"output_index": idx, "item": item})
		f.event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
		idx++
	}
	if reply.Text != "" {
		itemID := fmt.Sprintf("msg_fake_%d", n)
		f.event("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
			"id": itemID, "type": "message", "status": "in_progress", "role": "assistant", "content": []any{}}})
		f.event("response.content_part.added", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0,
			"part": map[string]any{"type": "output_text", "text": "", "annotations": []any{}}})
		for _, d := range fakeapi.Split(reply.Text, 48) {
			f.event("response.output_text.delta", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "delta": d})
		}
		f.event("response.output_text.done", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "text": reply.Text})
		part := map[string]any{"type": "output_text", "text": reply.Text, "annotations": []any{}}
		f.event("response.content_part.done", map[string]any{"item_id": itemID, "output_index": idx, "content_index": 0, "part": part})
		item := map[string]any{"id": itemID, "type": "message", "status": "completed", "role": "assistant", "content": []any{part}}
		f.event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
		outText += reply.Text
		idx++
	}
	for i, c := range reply.Calls {
		if c.Shell != "" {
			c = shellCall(req, c)
		}
		callID := cmp.Or(c.CallID, fmt.Sprintf("call_fake_%d_%d", n, i+1))
		itemID := fmt.Sprintf("fc_fake_%d_%d", n, i+1)
		custom := c.Input != ""
		if t, ok := req.tool(c.Name); ok && t.Type == "custom" {
			custom = true
		}
		var item map[string]any
		if custom {
			item = map[string]any{"id": itemID, "type": "custom_tool_call", "status": "completed", "call_id": callID, "name": c.Name, "input": c.Input}
			f.event("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
				"id": itemID, "type": "custom_tool_call", "status": "in_progress", "call_id": callID, "name": c.Name, "input": ""}})
			f.event("response.custom_tool_call_input.delta", map[string]any{"item_id": itemID, "output_index": idx, "delta": c.Input})
			f.event("response.custom_tool_call_input.done", map[string]any{"item_id": itemID, "output_index": idx, "input": c.Input})
			outText += c.Input
		} else {
			args := cmp.Or(c.Arguments, "{}")
			item = map[string]any{"id": itemID, "type": "function_call", "status": "completed", "call_id": callID, "name": c.Name, "arguments": args}
			f.event("response.output_item.added", map[string]any{"output_index": idx, "item": map[string]any{
				"id": itemID, "type": "function_call", "status": "in_progress", "call_id": callID, "name": c.Name, "arguments": ""}})
			f.event("response.function_call_arguments.delta", map[string]any{"item_id": itemID, "output_index": idx, "delta": args})
			f.event("response.function_call_arguments.done", map[string]any{"item_id": itemID, "output_index": idx, "arguments": args})
			outText += args
		}
		f.event("response.output_item.done", map[string]any{"output_index": idx, "item": item})
		output = append(output, item)
		idx++
	}
	if reply.Failed != "" {
		r := resp("failed", output)
		r["error"] = map[string]any{"code": cmp.Or(reply.Code, "server_error"), "message": reply.Failed}
		f.event("response.failed", map[string]any{"response": r})
		return
	}
	if reply.Truncate {
		return // the stream ends without response.completed
	}
	u := reply.Usage
	if u == (Usage{}) {
		u = Usage{InputTokens: approxTokens(string(req.Body)), OutputTokens: approxTokens(outText)}
	}
	r := resp("completed", output)
	r["usage"] = map[string]any{
		"input_tokens":          u.InputTokens,
		"input_tokens_details":  map[string]any{"cached_tokens": u.CachedTokens},
		"output_tokens":         u.OutputTokens,
		"output_tokens_details": map[string]any{"reasoning_tokens": u.ReasoningTokens},
		"total_tokens":          u.InputTokens + u.OutputTokens,
	}
	f.event("response.completed", map[string]any{"response": r})
}

// Reply is what the fake answers one request with. The zero Reply is an
// empty completed response.
type Reply struct {
	// Text is the assistant's message (streamed in several deltas).
	Text string
	// Calls are tool calls the model makes, after Text.
	Calls []Call
	// Reasoning, if set, is sent first as a reasoning item's summary.
	Reasoning string
	// Usage is what response.completed reports; zero: input tokens are a
	// quarter of the request body's bytes, output tokens a quarter of the
	// reply's text.
	Usage Usage

	// Status, if set, answers with this HTTP status and a JSON error
	// (Code, Message) instead of a stream.
	Status int
	// Code and Message describe an error (Status or Failed); defaults
	// "server_error" and the status text.
	Code    string
	Message string
	// Failed, if set, ends the stream with response.failed carrying this
	// message instead of response.completed.
	Failed string
	// Truncate ends the stream after the output items, without
	// response.completed.
	Truncate bool

	// Delay waits this long before answering.
	Delay time.Duration
	// Hang never answers: the request waits until its client goes away or
	// the server closes.
	Hang bool
}

// Usage is a response's token usage.
type Usage struct {
	InputTokens     int64
	CachedTokens    int64
	OutputTokens    int64
	ReasoningTokens int64
}

// Call is a tool call the model makes.
type Call struct {
	// Name is the tool's name (exec_command, apply_patch, ...).
	Name string
	// Arguments is the JSON arguments of a function call.
	Arguments string
	// Input is the freeform input of a custom tool call (apply_patch's
	// patch). A call to a tool the request offers as "custom" is sent as a
	// custom_tool_call, any other as a function_call.
	Input string
	// Shell, if set, makes the call run this shell command through the
	// shell tool the request offers (Name and Arguments are filled in).
	Shell string
	// CallID is the call's id; default call_fake_<response>_<n>.
	CallID string
}

// Shell returns a call that runs cmd through the client's shell tool.
func Shell(cmd string) Call { return Call{Shell: cmd} }

// ApplyPatch returns a call of codex's apply_patch tool with patch as its
// input (the "*** Begin Patch" ... "*** End Patch" format).
func ApplyPatch(patch string) Call { return Call{Name: "apply_patch", Input: patch} }

// AddFilePatch returns an apply_patch input that adds the file path with
// the given lines.
func AddFilePatch(path string, lines ...string) string {
	var b strings.Builder
	b.WriteString("*** Begin Patch\n*** Add File: " + path + "\n")
	for _, l := range lines {
		b.WriteString("+" + l + "\n")
	}
	b.WriteString("*** End Patch\n")
	return b.String()
}
