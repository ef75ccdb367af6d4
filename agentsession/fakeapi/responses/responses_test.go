package responses_test

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat/chattest"
)

// post sends a Responses API request and returns the status and the
// server-sent events (type and data) of the reply.
func post(t *testing.T, ctx context.Context, s *responses.Server, body string, header map[string]string) (int, []string, []map[string]any, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, s.URL+"/responses", strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	for k, v := range header {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	if resp.Header.Get("Content-Type") != "text/event-stream" {
		raw, _ := io.ReadAll(resp.Body)
		var m map[string]any
		_ = json.Unmarshal(raw, &m)
		return resp.StatusCode, nil, []map[string]any{m}, nil
	}
	var types []string
	var data []map[string]any
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if d, ok := strings.CutPrefix(sc.Text(), "data: "); ok {
			var m map[string]any
			if err := json.Unmarshal([]byte(d), &m); err != nil {
				t.Fatalf("event data %s: %v", d, err)
			}
			types = append(types, m["type"].(string))
			data = append(data, m)
		}
	}
	return resp.StatusCode, types, data, sc.Err()
}

const body = `{"model":"gpt-5.5","stream":true,"instructions":"be brief",
"input":[{"type":"message","role":"developer","content":[{"type":"input_text","text":"rules"}]},
 {"type":"message","role":"user","content":[{"type":"input_text","text":"hello"},{"type":"input_text","text":"there"}]},
 {"type":"function_call","name":"exec_command","call_id":"c1","arguments":"{\"cmd\":\"ls\"}"},
 {"type":"function_call_output","call_id":"c1","output":"a.go"}],
"tools":[{"type":"function","name":"exec_command"},{"type":"custom","name":"apply_patch"}],
"text":{"format":{"type":"json_schema","name":"x","strict":true,"schema":{"type":"object"}}}}`

func TestStreamAndRecord(t *testing.T) {
	t.Parallel()
	s := responses.New(t)
	s.Push(responses.Reply{
		Text:  "hi",
		Calls: []responses.Call{responses.Shell("cat a.go"), responses.ApplyPatch("*** Begin Patch\n*** End Patch\n")},
		Usage: responses.Usage{InputTokens: 10, CachedTokens: 4, OutputTokens: 3},
	})
	status, types, data, err := post(t, t.Context(), s, body, map[string]string{
		"x-codex-turn-metadata": `{"thread_id":"t1","history_initialization":"cold_fork","sandbox_mode":"read-only"}`,
	})
	if err != nil || status != http.StatusOK {
		t.Fatalf("status %d, %v", status, err)
	}
	want := []string{
		"response.created",
		"response.output_item.added", "response.content_part.added", "response.output_text.delta",
		"response.output_text.done", "response.content_part.done", "response.output_item.done",
		"response.output_item.added", "response.function_call_arguments.delta", "response.function_call_arguments.done", "response.output_item.done",
		"response.output_item.added", "response.custom_tool_call_input.delta", "response.custom_tool_call_input.done", "response.output_item.done",
		"response.completed",
	}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Errorf("event types (-want +got):\n%s", diff)
	}
	shell := data[10]["item"].(map[string]any)
	if shell["name"] != "exec_command" || shell["arguments"] != `{"cmd":"cat a.go","login":false}` {
		t.Errorf("shell call = %v", shell)
	}
	patch := data[14]["item"].(map[string]any)
	if patch["type"] != "custom_tool_call" || patch["name"] != "apply_patch" {
		t.Errorf("apply_patch call = %v", patch)
	}
	usage := data[15]["response"].(map[string]any)["usage"].(map[string]any)
	if usage["input_tokens"] != 10.0 || usage["output_tokens"] != 3.0 || usage["input_tokens_details"].(map[string]any)["cached_tokens"] != 4.0 {
		t.Errorf("usage = %v", usage)
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("recorded %d requests", len(reqs))
	}
	r := reqs[0]
	if r.Model != "gpt-5.5" || r.Instructions != "be brief" || len(r.Tools) != 2 || r.Tools[1].Type != "custom" {
		t.Errorf("request = model %q, instructions %q, tools %+v", r.Model, r.Instructions, r.Tools)
	}
	if diff := cmp.Diff([]string{"rules", "hello\nthere"}, r.Texts("")); diff != "" {
		t.Errorf("texts (-want +got):\n%s", diff)
	}
	if r.LastUserText() != "hello\nthere" || !r.Contains("a.go") || r.ToolOutputs()["c1"] != "a.go" || string(r.Schema()) != `{"type":"object"}` {
		t.Errorf("request helpers: last user %q, outputs %v, schema %s", r.LastUserText(), r.ToolOutputs(), r.Schema())
	}
	if m := r.Metadata; m.ThreadID != "t1" || m.HistoryInitialization != "cold_fork" || m.SandboxMode != "read-only" {
		t.Errorf("metadata = %+v", m)
	}
}

func TestErrorsHandlerAndUnknownPaths(t *testing.T) {
	t.Parallel()
	s := responses.New(t)
	s.Push(responses.Reply{Status: http.StatusTooManyRequests, Message: "slow down"}, responses.Reply{Failed: "broke"})
	status, _, data, err := post(t, t.Context(), s, body, nil)
	if err != nil || status != http.StatusTooManyRequests || data[0]["error"].(map[string]any)["message"] != "slow down" {
		t.Errorf("scripted HTTP error = %d %v %v", status, data, err)
	}
	_, types, _, _ := post(t, t.Context(), s, body, nil)
	if types[len(types)-1] != "response.failed" {
		t.Errorf("failed reply ends with %v", types)
	}
	// Nothing scripted: 500, until a handler answers.
	if status, _, _, _ := post(t, t.Context(), s, body, nil); status != http.StatusInternalServerError {
		t.Errorf("unscripted request = %d, want 500", status)
	}
	s.Handle(func(r responses.Request) responses.Reply { return responses.Reply{Text: "echo " + r.LastUserText()} })
	_, _, data, _ = post(t, t.Context(), s, body, nil)
	if got := data[3]["delta"]; got != "echo hello\nthere" {
		t.Errorf("handler reply delta = %v", got)
	}

	resp, err := http.Get(s.URL + "/models")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !cmp.Equal(s.Unknown(), []string{"GET /v1/models"}) {
		t.Errorf("GET /v1/models = %d, unknown %v", resp.StatusCode, s.Unknown())
	}
}

func TestHangEndsWithTheClient(t *testing.T) {
	t.Parallel()
	s := responses.New(t)
	s.Push(responses.Reply{Hang: true}, responses.Reply{Hang: true})
	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	if _, _, _, err := post(t, ctx, s, body, nil); err == nil {
		t.Error("a hung request answered")
	}
	chattest.Eventually(t, "no request in flight after the client left", func() bool { return s.Inflight() == 0 })
	// Close releases a request that still hangs.
	released := make(chan struct{})
	go func() {
		defer close(released)
		resp, err := http.Post(s.URL+"/responses", "application/json", strings.NewReader(body))
		if err == nil {
			_, _ = io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
		}
	}()
	chattest.Eventually(t, "the second request to hang", func() bool { return s.Inflight() > 0 })
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	chattest.Receive(t, "Close to return while a request hung", closed)
	chattest.Receive(t, "the hung request to end with Close", released)
}
