package anthropic_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/chat/chattest"
)

// body is a request shaped as the Claude Code CLI sends it: system prompt
// blocks, a role "system" entry, <system-reminder> blocks, thinking, tool
// results, and string contents.
const body = `{
 "model": "claude-test", "max_tokens": 1000, "stream": %s,
 "system": [{"type":"text","text":"You are Claude."},{"type":"text","text":"PRCHAT RULES"}],
 "tools": [{"name":"Read","input_schema":{"type":"object"}},{"name":"StructuredOutput","input_schema":{"type":"object"}}],
 "messages": [
  {"role":"user","content":[{"type":"text","text":"<system-reminder>\ngit status\n</system-reminder>"},{"type":"text","text":"first question"}]},
  {"role":"system","content":[{"type":"text","text":"# Environment"}]},
  {"role":"assistant","content":[{"type":"thinking","thinking":"hm","signature":"x"},{"type":"tool_use","id":"t1","name":"Read","input":{"file_path":"/a.go"}}]},
  {"role":"user","content":[{"type":"tool_result","tool_use_id":"t1","content":[{"type":"text","text":"1\tpackage a"}]}]},
  {"role":"assistant","content":"a plain string answer"},
  {"role":"user","content":"second question"}
 ]}`

func post(t *testing.T, ctx context.Context, url, stream string) (*http.Response, error) {
	t.Helper()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, url+"/v1/messages?beta=true",
		strings.NewReader(strings.Replace(body, "%s", stream, 1)))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("X-Claude-Code-Session-Id", "sess-1")
	return http.DefaultClient.Do(req)
}

// sse reads the events of a streamed reply as (type, data) pairs.
func sse(t *testing.T, r io.Reader) (types []string, data []map[string]any) {
	t.Helper()
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "event: "):
			types = append(types, strings.TrimPrefix(line, "event: "))
		case strings.HasPrefix(line, "data: "):
			var m map[string]any
			if err := json.Unmarshal([]byte(strings.TrimPrefix(line, "data: ")), &m); err != nil {
				t.Fatalf("data is not JSON: %s", line)
			}
			data = append(data, m)
		}
	}
	return types, data
}

func TestStreamAndRecord(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	api.Push(anthropic.Reply{
		Content: []anthropic.Block{anthropic.TextBlock("Let me read it."), anthropic.ToolUseBlock("", "Read", map[string]string{"file_path": "/b.go"})},
		Usage:   anthropic.Usage{InputTokens: 7, OutputTokens: 3, CacheReadInputTokens: 5},
	})
	resp, err := post(t, t.Context(), api.URL, "true")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); resp.StatusCode != 200 || ct != "text/event-stream" {
		t.Fatalf("reply %d %s, want 200 text/event-stream", resp.StatusCode, ct)
	}
	types, data := sse(t, resp.Body)
	want := []string{"message_start",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_delta", "content_block_stop",
		"content_block_start", "content_block_delta", "content_block_delta", "content_block_stop",
		"message_delta", "message_stop"}
	if diff := cmp.Diff(want, types); diff != "" {
		t.Fatalf("event types (-want +got):\n%s", diff)
	}
	var text, input string
	for _, d := range data {
		if delta, ok := d["delta"].(map[string]any); ok {
			text += str(delta["text"])
			input += str(delta["partial_json"])
		}
	}
	if text != "Let me read it." || input != `{"file_path":"/b.go"}` {
		t.Errorf("deltas add up to text %q and input %q", text, input)
	}
	start := data[0]["message"].(map[string]any)
	if start["model"] != "claude-test" || start["usage"].(map[string]any)["cache_read_input_tokens"] != 5.0 {
		t.Errorf("message_start = %v", start)
	}
	md := data[len(data)-2]
	if md["delta"].(map[string]any)["stop_reason"] != "tool_use" || md["usage"].(map[string]any)["output_tokens"] != 3.0 {
		t.Errorf("message_delta = %v, want stop_reason tool_use and 3 output tokens", md)
	}

	reqs := api.Messages()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(reqs))
	}
	r := reqs[0]
	if r.SessionID != "sess-1" || r.Model != "claude-test" || !r.Stream || r.Query.Get("beta") != "true" {
		t.Errorf("request = session %q model %q stream %v query %v", r.SessionID, r.Model, r.Stream, r.Query)
	}
	if diff := cmp.Diff([]string{"first question", "second question"}, r.Prompts()); diff != "" {
		t.Errorf("Prompts (-want +got):\n%s", diff)
	}
	if !r.Contains("package a") || !r.Contains("/a.go") || !r.Contains("plain string answer") || r.Contains("nowhere") {
		t.Error("Contains does not see tool results, tool inputs and string contents")
	}
	if !strings.Contains(r.SystemText(), "PRCHAT RULES") {
		t.Errorf("SystemText = %q", r.SystemText())
	}
	if _, ok := r.Tool(anthropic.StructuredOutputTool); !ok {
		t.Errorf("Tool(StructuredOutput) not found in %v", r.ToolNames())
	}
	if len(r.ToolResults()) != 0 || r.Last().Text() != "second question" {
		t.Errorf("the request ends with a prompt, not tool results: Last = %+v", r.Last())
	}
}

func str(v any) string {
	s, _ := v.(string)
	return s
}

func TestHandlerJSONErrorsAndOtherEndpoints(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	api.Push(anthropic.Error(529, "busy"))
	api.Handle(func(r anthropic.Request) anthropic.Reply {
		return anthropic.Structured(map[string]int{"n": len(r.Messages)})
	})

	resp, err := post(t, t.Context(), api.URL, "true")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 529 || !bytes.Contains(b, []byte(`"overloaded_error"`)) || !bytes.Contains(b, []byte("busy")) {
		t.Errorf("scripted 529 = %d %s", resp.StatusCode, b)
	}

	resp, err = post(t, t.Context(), api.URL, "false")
	if err != nil {
		t.Fatal(err)
	}
	var msg struct {
		Content    []anthropic.Block `json:"content"`
		StopReason string            `json:"stop_reason"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&msg); err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if len(msg.Content) != 1 || msg.Content[0].Name != anthropic.StructuredOutputTool || string(msg.Content[0].Input) != `{"n":6}` || msg.StopReason != "tool_use" {
		t.Errorf("non-streaming reply from the handler = %+v", msg)
	}

	for path, want := range map[string]int{"/v1/models": 200, "/api/hello": 404} {
		resp, err := http.Get(api.URL + path)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("GET %s = %d, want %d", path, resp.StatusCode, want)
		}
	}
	if diff := cmp.Diff([]string{"GET /api/hello"}, api.Unknown()); diff != "" {
		t.Errorf("Unknown (-want +got):\n%s", diff)
	}
	if n := len(api.Requests()); n != 4 {
		t.Errorf("%d requests recorded, want 4", n)
	}
}

func TestNothingScriptedIs500(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	resp, err := post(t, t.Context(), api.URL, "true")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != 500 {
		t.Errorf("a request with no reply scripted = %d, want 500", resp.StatusCode)
	}
}

func TestHangAndDelay(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	api.Push(anthropic.Hang(), anthropic.Reply{Delay: 100 * time.Millisecond, Content: []anthropic.Block{anthropic.TextBlock("late")}}, anthropic.Hang())

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	hung := make(chan error, 1)
	go func() {
		resp, err := post(t, ctx, api.URL, "true")
		if err == nil {
			resp.Body.Close()
		}
		hung <- err
	}()
	if err := chattest.Receive(t, "the hanging reply to end at the client's deadline", hung); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a hanging reply = %v, want the client's deadline", err)
	}

	// The delay is a lower bound a loaded machine cannot break.
	start := time.Now()
	resp, err := post(t, t.Context(), api.URL, "true")
	if err != nil {
		t.Fatal(err)
	}
	types, _ := sse(t, resp.Body)
	resp.Body.Close()
	if d := time.Since(start); d < 100*time.Millisecond || len(types) == 0 {
		t.Errorf("a delayed reply came after %v with %d events, want after 100ms", d, len(types))
	}

	// Close releases a request that hangs.
	done := make(chan error, 1)
	go func() {
		resp, err := post(t, context.Background(), api.URL, "true")
		if err == nil {
			resp.Body.Close()
		}
		done <- err
	}()
	chattest.Eventually(t, "the third request", func() bool { return len(api.Messages()) >= 3 })
	closed := make(chan struct{})
	go func() { api.Close(); close(closed) }()
	chattest.Receive(t, "Close to return while a request hung", closed)
	chattest.Receive(t, "the hanging request to end with Close", done)
	api.Close() // twice is fine
}
