package chatcompletions_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	goopenai "github.com/sashabaranov/go-openai"

	"github.com/prchat/prchat/agentsession/fakeapi/chatcompletions"
	"github.com/prchat/prchat/chat/chattest"
)

func setup(t *testing.T) (*chatcompletions.Server, *goopenai.Client) {
	t.Helper()
	s := chatcompletions.New(t)
	cfg := goopenai.DefaultConfig("sk-fake")
	cfg.BaseURL = s.URL
	return s, goopenai.NewClientWithConfig(cfg)
}

func request() goopenai.ChatCompletionRequest {
	return goopenai.ChatCompletionRequest{
		Model:    "gpt-test",
		Messages: []goopenai.ChatCompletionMessage{{Role: "system", Content: "be brief"}, {Role: "user", Content: "hello"}},
		Tools: []goopenai.Tool{{Type: goopenai.ToolTypeFunction, Function: &goopenai.FunctionDefinition{
			Name: "search_code", Parameters: json.RawMessage(`{"type":"object"}`)}}},
		StreamOptions: &goopenai.StreamOptions{IncludeUsage: true},
	}
}

// TestStreamSplitsToolCalls checks that a streamed tool call arrives in
// fragments: id and name first, then the arguments in several pieces.
func TestStreamSplitsToolCalls(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	args := `{"query":"parseConfig","path_glob":"**/*.go"}`
	s.Push(chatcompletions.Reply{Content: "Let me look.", ToolCalls: []chatcompletions.ToolCall{
		{Name: "search_code", Arguments: args},
		{ID: "call_b", Name: "read_file", Arguments: `{"path":"main.go"}`},
	}, Usage: &chatcompletions.Usage{PromptTokens: 11, CompletionTokens: 7}})

	stream, err := c.CreateChatCompletionStream(t.Context(), request())
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	var (
		content   strings.Builder
		fragments = map[int][]goopenai.ToolCall{}
		finish    goopenai.FinishReason
		usage     *goopenai.Usage
	)
	for {
		chunk, err := stream.Recv()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if chunk.Usage != nil {
			usage = chunk.Usage
		}
		for _, ch := range chunk.Choices {
			content.WriteString(ch.Delta.Content)
			for _, tc := range ch.Delta.ToolCalls {
				fragments[*tc.Index] = append(fragments[*tc.Index], tc)
			}
			if ch.FinishReason != "" {
				finish = ch.FinishReason
			}
		}
	}
	if content.String() != "Let me look." {
		t.Errorf("content = %q", content.String())
	}
	if finish != goopenai.FinishReasonToolCalls {
		t.Errorf("finish reason = %q, want tool_calls", finish)
	}
	if usage == nil || usage.PromptTokens != 11 || usage.CompletionTokens != 7 {
		t.Errorf("usage = %+v, want 11 and 7", usage)
	}
	frags := fragments[0]
	if len(frags) < 3 {
		t.Fatalf("the first call came in %d fragments, want several", len(frags))
	}
	if frags[0].ID == "" || frags[0].Function.Name != "search_code" || frags[0].Function.Arguments != "" {
		t.Errorf("first fragment = %+v, want an id and the name only", frags[0])
	}
	var joined strings.Builder
	for i, f := range frags {
		if i > 0 && (f.ID != "" || f.Function.Name != "") {
			t.Errorf("fragment %d repeats the id or name: %+v", i, f)
		}
		joined.WriteString(f.Function.Arguments)
	}
	if joined.String() != args {
		t.Errorf("arguments = %s, want %s", joined.String(), args)
	}
	if got := fragments[1][0]; got.ID != "call_b" || got.Function.Name != "read_file" {
		t.Errorf("second call starts with %+v", got)
	}

	reqs := s.Requests()
	if len(reqs) != 1 {
		t.Fatalf("%d requests recorded, want 1", len(reqs))
	}
	r := reqs[0]
	if !r.Stream || !r.IncludeUsage || r.Model != "gpt-test" || r.Header.Get("Authorization") != "Bearer sk-fake" {
		t.Errorf("recorded request = stream %v, usage %v, model %q, auth %q", r.Stream, r.IncludeUsage, r.Model, r.Header.Get("Authorization"))
	}
	if len(r.Messages) != 2 || r.LastUser() != "hello" || len(r.Tools) != 1 || r.Tools[0].Name != "search_code" {
		t.Errorf("recorded messages %+v, tools %+v", r.Messages, r.Tools)
	}
	if r.Status != http.StatusOK {
		t.Errorf("recorded status = %d", r.Status)
	}
}

// TestRawStream checks the wire format: data lines and [DONE].
func TestRawStream(t *testing.T) {
	t.Parallel()
	s, _ := setup(t)
	s.Push(chatcompletions.Text("hi"))
	resp, err := http.Post(s.URL+"/chat/completions", "application/json",
		strings.NewReader(`{"model":"m","stream":true,"messages":[{"role":"user","content":"x"}]}`))
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if ct := resp.Header.Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}
	var lines []string
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		if l := sc.Text(); l != "" {
			lines = append(lines, l)
		}
	}
	for _, l := range lines {
		if !strings.HasPrefix(l, "data: ") {
			t.Errorf("line %q is not a data line", l)
		}
	}
	if last := lines[len(lines)-1]; last != "data: [DONE]" {
		t.Errorf("last line = %q, want data: [DONE]", last)
	}
	for _, l := range lines {
		if strings.Contains(l, `"usage"`) {
			t.Errorf("usage sent without stream_options.include_usage: %s", l)
		}
	}
}

func TestNonStreaming(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	s.Push(chatcompletions.Answer(map[string]any{"ok": true}), chatcompletions.Call("read_file", map[string]any{"path": "a.go"}))
	req := request()
	req.StreamOptions = nil
	resp, err := c.CreateChatCompletion(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if got := resp.Choices[0].Message.Content; got != `{"ok":true}` {
		t.Errorf("content = %q", got)
	}
	if resp.Usage.TotalTokens == 0 {
		t.Error("no usage")
	}
	resp, err = c.CreateChatCompletion(t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	tc := resp.Choices[0].Message.ToolCalls
	if len(tc) != 1 || tc[0].Function.Name != "read_file" || tc[0].Function.Arguments != `{"path":"a.go"}` || tc[0].ID == "" {
		t.Errorf("tool calls = %+v", tc)
	}
	if resp.Choices[0].FinishReason != goopenai.FinishReasonToolCalls {
		t.Errorf("finish reason = %q", resp.Choices[0].FinishReason)
	}
}

func TestErrors(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	s.Push(chatcompletions.RateLimited(3*time.Second), chatcompletions.Error(500, "boom"))
	for _, want := range []int{429, 500} {
		resp, err := http.Post(s.URL+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != want {
			t.Errorf("status = %d, want %d", resp.StatusCode, want)
		}
		if want == 429 && resp.Header.Get("Retry-After") != "3" {
			t.Errorf("Retry-After = %q, want 3", resp.Header.Get("Retry-After"))
		}
		var e struct {
			Error struct{ Message string } `json:"error"`
		}
		if json.Unmarshal(body, &e) != nil || e.Error.Message == "" {
			t.Errorf("body = %s, want an error object", body)
		}
	}

	// Nothing scripted: 400, which go-openai reports as an APIError.
	_, err := c.CreateChatCompletion(t.Context(), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || !strings.Contains(apiErr.Message, "no reply scripted") {
		t.Errorf("unscripted request = %v", err)
	}
}

func TestRefusals(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	s.RequireKey("sk-other")
	s.Push(chatcompletions.Text("never sent"))
	_, err := c.CreateChatCompletion(t.Context(), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}}})
	var apiErr *goopenai.APIError
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 401 {
		t.Errorf("wrong key = %v, want HTTP 401", err)
	}
	s.RequireKey("")
	s.RejectJSONSchema(true)
	req := goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{{Role: "user", Content: "x"}},
		ResponseFormat: &goopenai.ChatCompletionResponseFormat{Type: goopenai.ChatCompletionResponseFormatTypeJSONSchema,
			JSONSchema: &goopenai.ChatCompletionResponseFormatJSONSchema{Name: "a", Schema: json.RawMessage(`{"type":"object"}`), Strict: true}}}
	_, err = c.CreateChatCompletion(t.Context(), req)
	if !errors.As(err, &apiErr) || apiErr.HTTPStatusCode != 400 || !strings.Contains(apiErr.Message, "response_format") {
		t.Errorf("json_schema = %v, want HTTP 400 naming response_format", err)
	}
	if s.Pending() != 1 {
		t.Errorf("refused requests took a reply: %d pending", s.Pending())
	}
	reqs := s.Requests()
	if rf := reqs[1].ResponseFormat; rf == nil || rf.Type != "json_schema" || rf.Name != "a" || !rf.Strict || string(rf.Schema) != `{"type":"object"}` {
		t.Errorf("recorded response_format = %+v", rf)
	}
	if reqs[0].Status != 401 || reqs[1].Status != 400 {
		t.Errorf("recorded statuses = %d, %d", reqs[0].Status, reqs[1].Status)
	}
}

// TestToolResultsChecked checks that the fake refuses histories the real
// API refuses: a tool call with no result.
func TestToolResultsChecked(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	s.Push(chatcompletions.Text("ok"))
	_, err := c.CreateChatCompletion(t.Context(), goopenai.ChatCompletionRequest{Model: "m", Messages: []goopenai.ChatCompletionMessage{
		{Role: "user", Content: "x"},
		{Role: "assistant", ToolCalls: []goopenai.ToolCall{{ID: "c1", Type: "function", Function: goopenai.FunctionCall{Name: "f", Arguments: "{}"}}}},
		{Role: "user", Content: "y"},
	}})
	if err == nil || s.Pending() != 1 {
		t.Errorf("a tool call without a result = %v, %d pending; want a 400", err, s.Pending())
	}
}

func TestHandlerAndHang(t *testing.T) {
	t.Parallel()
	s, c := setup(t)
	s.Handle(func(r chatcompletions.Request) chatcompletions.Reply {
		if r.LastUser() == "hang" {
			return chatcompletions.Hang()
		}
		return chatcompletions.Text("echo " + r.LastUser())
	})
	req := request()
	req.Messages = []goopenai.ChatCompletionMessage{{Role: "user", Content: "ping"}}
	resp, err := c.CreateChatCompletion(t.Context(), goopenai.ChatCompletionRequest{Model: "m", Messages: req.Messages})
	if err != nil || resp.Choices[0].Message.Content != "echo ping" {
		t.Fatalf("handler reply = %+v, %v", resp, err)
	}

	ctx, cancel := context.WithTimeout(t.Context(), 200*time.Millisecond)
	defer cancel()
	req.Messages = []goopenai.ChatCompletionMessage{{Role: "user", Content: "hang"}}
	stream, err := c.CreateChatCompletionStream(ctx, req)
	if err != nil {
		t.Fatal(err)
	}
	defer stream.Close()
	if _, err := stream.Recv(); err != nil {
		t.Fatalf("first chunk: %v", err)
	}
	recvd := make(chan error, 1)
	go func() {
		_, err := stream.Recv()
		recvd <- err
	}()
	if err := chattest.Receive(t, "the hanging stream to end at the deadline", recvd); err == nil {
		t.Errorf("hanging stream gave %v, want an error at the deadline", err)
	}
}

// TestCloseEndsHangs checks that Close does not wait for hanging replies.
func TestCloseEndsHangs(t *testing.T) {
	t.Parallel()
	s := chatcompletions.New(t)
	s.Push(chatcompletions.Hang())
	go func() {
		resp, err := http.Post(s.URL+"/chat/completions", "application/json",
			strings.NewReader(`{"model":"m","messages":[{"role":"user","content":"x"}]}`))
		if err == nil {
			resp.Body.Close()
		}
	}()
	chattest.Eventually(t, "the hanging request", func() bool { return len(s.Requests()) > 0 })
	done := make(chan struct{})
	go func() { s.Close(); s.Close(); close(done) }()
	chattest.Receive(t, "Close to return while a reply hung", done)
}
