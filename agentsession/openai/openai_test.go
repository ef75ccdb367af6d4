package openai_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/fakeapi/chatcompletions"
	"github.com/prchat/prchat/agentsession/openai"
	"github.com/prchat/prchat/chat"
)

const testKey = "sk-test-0123456789abcdef"

const configGo = `package config

import "strconv"

// Config holds the settings.
type Config struct {
	MaxRetries int
}

// parseConfig reads max_retries.
func parseConfig(v string) (*Config, error) {
	n, err := strconv.Atoi(v)
	if err != nil {
		return nil, err
	}
	return &Config{MaxRetries: n}, nil
}
`

// env is what a test needs: a fake endpoint, the backend pointed at it,
// its sessions and a checkout to work in.
type env struct {
	fake     *chatcompletions.Server
	sessions *openai.MemorySessions
	b        *openai.Backend
	repo     agentsessiontest.Repo
}

// setup starts a fake endpoint and a backend with tiny backoffs, and makes
// a repository whose head holds config/config.go. opts change the Config.
func setup(t *testing.T, opts ...func(*openai.Config)) *env {
	t.Helper()
	fake := chatcompletions.New(t)
	sessions := openai.NewMemorySessions()
	cfg := openai.Config{
		BaseURL:     fake.URL,
		APIKey:      testKey,
		Model:       "gpt-4o-mini",
		Sessions:    sessions,
		CallTimeout: 10 * time.Second,
		BackoffBase: time.Millisecond,
		BackoffMax:  5 * time.Millisecond,
	}
	for _, o := range opts {
		o(&cfg)
	}
	b, err := openai.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	repo := agentsessiontest.NewRepo(t,
		map[string]string{"config/config.go": "package config\n", "main.go": "package main\n\nfunc main() {}\n"},
		map[string]string{"config/config.go": configGo})
	return &env{fake: fake, sessions: sessions, b: b, repo: repo}
}

// request returns a first call's request in the repository.
func (e *env) request(prompt string) chat.RunRequest {
	return chat.RunRequest{
		Mode:      chat.SessionSeeded,
		Dir:       e.repo.Dir,
		Prompt:    prompt,
		System:    chat.System(),
		Schema:    json.RawMessage(chat.AnswerSchema),
		MaxCalls:  10,
		MaxTokens: 1_000_000,
		Review:    chat.Review{Repository: "acme/widgets", PR: 7, HeadSHA: e.repo.Head(), BaseSHA: e.repo.Commits[0]},
	}
}

// run makes a call and returns its result, error and events.
func (e *env) run(t *testing.T, ctx context.Context, req chat.RunRequest) (chat.RunResult, []chat.Event, error) {
	t.Helper()
	var (
		mu     sync.Mutex
		events []chat.Event
	)
	res, err := e.b.Run(ctx, req, func(ev chat.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})
	return res, events, err
}

// lines counts the lines of a file in the checkout, for citation checks.
func (e *env) lines(_ context.Context, p string) (int, error) {
	b, err := os.ReadFile(filepath.Join(e.repo.Dir, filepath.FromSlash(p)))
	if err != nil {
		return 0, err
	}
	return strings.Count(string(b), "\n"), nil
}

func lineOf(text, s string) int {
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	panic(s + " not found")
}

func answer(markdown string, citations ...chat.Citation) chat.Answer {
	if citations == nil {
		citations = []chat.Citation{}
	}
	return chat.Answer{AnswerMarkdown: markdown, Citations: citations}
}

func eventsOf(events []chat.Event, typ string) []chat.Event {
	var out []chat.Event
	for _, e := range events {
		if e.Type == typ {
			out = append(out, e)
		}
	}
	return out
}

// TestConformance runs the shared backend suite against the fake.
func TestConformance(t *testing.T) {
	t.Parallel()
	var fakes sync.Map // *openai.Backend -> *chatcompletions.Server
	fakeOf := func(t *testing.T, b chat.Backend) *chatcompletions.Server {
		f, ok := fakes.Load(b)
		if !ok {
			t.Fatalf("backend %p was not made by the harness", b)
		}
		return f.(*chatcompletions.Server)
	}
	agentsessiontest.Run(t, agentsessiontest.Harness{
		New: func(t *testing.T) chat.Backend {
			fake := chatcompletions.New(t)
			b, err := openai.New(openai.Config{BaseURL: fake.URL, APIKey: testKey, Model: "gpt-4o-mini",
				Sessions: openai.NewMemorySessions(), BackoffBase: time.Millisecond, BackoffMax: 5 * time.Millisecond})
			if err != nil {
				t.Fatal(err)
			}
			fakes.Store(b, fake)
			return b
		},
		Sessions: true,
		Program: func(t *testing.T, b chat.Backend, a chat.Answer) {
			// Look first, then answer: the suite sees tool events too.
			fakeOf(t, b).Push(
				chatcompletions.Call("read_file", map[string]any{"path": a.Citations[0].Path}),
				chatcompletions.Answer(a))
		},
		Hang: func(t *testing.T, b chat.Backend) { fakeOf(t, b).Push(chatcompletions.Hang()) },
	})
}

// TestSearchReadAnswer checks a turn that searches, reads and answers with
// valid citations, its events, usage, the requests the endpoint saw, and
// the session it saved.
func TestSearchReadAnswer(t *testing.T) {
	t.Parallel()
	e := setup(t)
	start, end := lineOf(configGo, "func parseConfig"), lineOf(configGo, "return &Config")
	want := answer("`parseConfig` reads `max_retries` with `strconv.Atoi`.",
		chat.Citation{Path: "config/config.go", StartLine: start, EndLine: end})
	searchArgs := `{"query":"parseConfig","path_glob":"**/*.go"}`
	readArgs := fmt.Sprintf(`{"path":"config/config.go","start_line":%d,"end_line":%d}`, start-1, end+1)
	e.fake.Push(
		chatcompletions.Reply{ToolCalls: []chatcompletions.ToolCall{{ID: "call_search", Name: "search_code", Arguments: searchArgs}},
			Usage: &chatcompletions.Usage{PromptTokens: 1000, CompletionTokens: 20}},
		chatcompletions.Reply{Content: "Reading it.", ToolCalls: []chatcompletions.ToolCall{{ID: "call_read", Name: "read_file", Arguments: readArgs}},
			Usage: &chatcompletions.Usage{PromptTokens: 1500, CompletionTokens: 30}},
		chatcompletions.Reply{JSON: want, Usage: &chatcompletions.Usage{PromptTokens: 2000, CompletionTokens: 100}, ChunkSize: 5},
	)
	res, events, err := e.run(t, t.Context(), e.request("Where is parseConfig?"))
	if err != nil {
		t.Fatalf("Run: %v", err)
	}

	got, err := chat.ParseAnswer(res.Structured, res.Text)
	if err != nil {
		t.Fatalf("answer: %v\n%s", err, res.Text)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("answer (-want +got):\n%s", diff)
	}
	if err := chat.CheckCitations(t.Context(), got, e.lines); err != nil {
		t.Errorf("citations: %v", err)
	}

	// Usage: three calls, their tokens, the price of gpt-4o-mini.
	if res.Usage.Calls != 3 || res.Usage.InputTokens != 4500 || res.Usage.OutputTokens != 150 {
		t.Errorf("usage = %+v, want 3 calls, 4500 in, 150 out", res.Usage)
	}
	wantCost := (4500*0.15 + 150*0.60) / 1e6
	if res.Usage.CostUSD == nil || *res.Usage.CostUSD < wantCost*0.999 || *res.Usage.CostUSD > wantCost*1.001 || res.Usage.CostReason != "" {
		t.Errorf("cost = %v (%q), want %v", res.Usage.CostUSD, res.Usage.CostReason, wantCost)
	}
	if res.Model != "gpt-4o-mini" || res.SessionID == "" {
		t.Errorf("model %q, session %q", res.Model, res.SessionID)
	}

	// Events: tool starts with the whole arguments (put together from
	// fragments), results after them, the prose and the answer's markdown
	// (not its JSON) as they streamed, one usage event with the call's
	// total.
	var types []string
	for _, ev := range events {
		if ev.Type != chat.EventTextDelta {
			types = append(types, ev.Type+":"+ev.ToolName)
		}
	}
	wantTypes := []string{"tool_start:search_code", "tool_result:search_code", "tool_start:read_file", "tool_result:read_file", "usage:"}
	if diff := cmp.Diff(wantTypes, types); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
	starts := eventsOf(events, chat.EventToolStart)
	if len(starts) == 2 && (string(starts[0].Input) != searchArgs || string(starts[1].Input) != readArgs || starts[0].ToolID != "call_search") {
		t.Errorf("tool_start inputs = %s, %s", starts[0].Input, starts[1].Input)
	}
	results := eventsOf(events, chat.EventToolResult)
	if len(results) == 2 && (results[0].Summary != "2 matches in 1 file" || !strings.HasPrefix(results[1].Summary, "read config/config.go lines")) {
		t.Errorf("tool_result summaries = %q, %q", results[0].Summary, results[1].Summary)
	}
	var text strings.Builder
	deltas := eventsOf(events, chat.EventTextDelta)
	for _, d := range deltas {
		text.WriteString(d.Text)
	}
	if len(deltas) < 3 || text.String() != "Reading it."+want.AnswerMarkdown {
		t.Errorf("%d text deltas make %q, want the prose and the answer's markdown", len(deltas), text.String())
	}
	if u := eventsOf(events, chat.EventUsage); len(u) == 1 && (*u[0].InputTokens != 4500 || *u[0].OutputTokens != 150) {
		t.Errorf("usage event = %d in, %d out; want the call's total, 4500 and 150", *u[0].InputTokens, *u[0].OutputTokens)
	}

	// The requests: key, model, stream with usage, tools, the schema, and
	// the tools' results fed back.
	reqs := e.fake.Requests()
	if len(reqs) != 3 {
		t.Fatalf("%d requests, want 3", len(reqs))
	}
	for i, r := range reqs {
		var tools []string
		for _, tl := range r.Tools {
			tools = append(tools, tl.Name)
		}
		if r.Header.Get("Authorization") != "Bearer "+testKey || r.Model != "gpt-4o-mini" || !r.Stream || !r.IncludeUsage ||
			!cmp.Equal(tools, []string{"search_code", "read_file", "list_files", "git_diff"}) {
			t.Errorf("request %d: auth %q, model %q, stream %v, usage %v, tools %v", i, r.Header.Get("Authorization"), r.Model, r.Stream, r.IncludeUsage, tools)
		}
		if rf := r.ResponseFormat; rf == nil || rf.Type != "json_schema" || !rf.Strict || !strings.Contains(string(rf.Schema), "answer_markdown") {
			t.Errorf("request %d: response_format = %+v", i, rf)
		}
		if r.Messages[0].Role != "system" || !strings.Contains(r.Messages[0].Content, "search_code") || !strings.Contains(r.Messages[0].Content, "untrusted data") {
			t.Errorf("request %d: system message = %q", i, clip(r.Messages[0].Content))
		}
	}
	searchOut, ok := reqs[1].ToolResult("call_search")
	if !ok || !strings.Contains(searchOut, fmt.Sprintf("config/config.go:%d: func parseConfig(v string) (*Config, error) {", start)) ||
		!strings.Contains(searchOut, "<tool_output") {
		t.Errorf("search result fed back = %q", searchOut)
	}
	readOut, ok := reqs[2].ToolResult("call_read")
	if !ok || !strings.Contains(readOut, fmt.Sprintf("%6d\tfunc parseConfig", start)) || !strings.Contains(readOut, "untrusted data") {
		t.Errorf("read result fed back = %q", readOut)
	}
	if got := reqs[2].Messages; len(got) != 6 || got[4].Content != "Reading it." || got[4].ToolCalls[0].Arguments != readArgs {
		t.Errorf("third request's messages = %+v", got)
	}

	// The session holds the whole turn.
	hist, err := e.sessions.Messages(t.Context(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	var roles []string
	for _, m := range hist {
		roles = append(roles, m.Role)
	}
	if diff := cmp.Diff([]string{"user", "assistant", "tool", "assistant", "tool", "assistant"}, roles); diff != "" {
		t.Errorf("session roles (-want +got):\n%s", diff)
	}
	if hist[0].Content != "Where is parseConfig?" || hist[5].Content != res.Text || hist[2].ToolName != "search_code" {
		t.Errorf("session history = %+v", hist)
	}
}

// TestForkAndResume checks that a fork sends the review's messages and
// leaves the review's session alone, and that a resume sends turn 1.
func TestForkAndResume(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fake.Push(chatcompletions.Text("REVIEW: parseConfig does not bound max_retries."))
	review, _, err := e.run(t, t.Context(), e.request("Review pull request 7 (REVIEW-PROMPT)."))
	if err != nil {
		t.Fatal(err)
	}

	a1 := answer("First answer.", chat.Citation{Path: "config/config.go", StartLine: 1, EndLine: 2})
	e.fake.Push(chatcompletions.Answer(a1))
	req := e.request("TURN-1: why flag parseConfig?")
	req.Mode, req.Session = chat.SessionForked, chat.SessionRef{ID: review.SessionID, Dir: e.repo.Dir}
	forked, _, err := e.run(t, t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if forked.SessionID == "" || forked.SessionID == review.SessionID {
		t.Errorf("fork returned session %q, want a new one", forked.SessionID)
	}
	seen := e.fake.Requests()[1]
	var contents []string
	for _, m := range seen.Messages[1:] {
		contents = append(contents, m.Role+": "+clip(m.Content))
	}
	wantFork := []string{
		"user: Review pull request 7 (REVIEW-PROMPT).",
		"assistant: REVIEW: parseConfig does not bound max_retries.",
		"user: TURN-1: why flag parseConfig?",
	}
	if diff := cmp.Diff(wantFork, contents); diff != "" {
		t.Errorf("the fork's request (-want +got):\n%s", diff)
	}
	parent, _ := e.sessions.Messages(t.Context(), review.SessionID)
	if len(parent) != 2 {
		t.Errorf("the review's session has %d messages after the fork, want its own 2", len(parent))
	}

	e.fake.Push(chatcompletions.Answer(answer("Second answer.")))
	req = e.request("TURN-2: and the caller?")
	req.Mode, req.Session = chat.SessionResumed, chat.SessionRef{ID: forked.SessionID, Dir: e.repo.Dir}
	resumed, _, err := e.run(t, t.Context(), req)
	if err != nil {
		t.Fatal(err)
	}
	if resumed.SessionID != forked.SessionID {
		t.Errorf("resume returned session %q, want %q", resumed.SessionID, forked.SessionID)
	}
	seen = e.fake.Requests()[2]
	contents = nil
	for _, m := range seen.Messages[1:] {
		contents = append(contents, m.Role+": "+clip(m.Content))
	}
	a1JSON, _ := json.Marshal(a1)
	wantResume := append(wantFork, "assistant: "+clip(string(a1JSON)), "user: TURN-2: and the caller?")
	if diff := cmp.Diff(wantResume, contents); diff != "" {
		t.Errorf("the resume's request (-want +got):\n%s", diff)
	}
	if h, _ := e.sessions.Messages(t.Context(), forked.SessionID); len(h) != 6 {
		t.Errorf("the conversation's session has %d messages, want 6", len(h))
	}

	// A session that is gone.
	e.sessions.Delete(forked.SessionID)
	if err := e.b.HasSession(t.Context(), chat.SessionRef{ID: forked.SessionID}); !errors.Is(err, chat.ErrSessionGone) {
		t.Errorf("HasSession(deleted) = %v, want ErrSessionGone", err)
	}
	if _, _, err := e.run(t, t.Context(), req); !errors.Is(err, chat.ErrSessionGone) {
		t.Errorf("resume of a deleted session = %v, want ErrSessionGone", err)
	}
}

// TestRateLimitedThenAnswers checks that a 429 with Retry-After is waited
// out, retried, counted, and answered.
func TestRateLimitedThenAnswers(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fake.Push(chatcompletions.RateLimited(time.Second), chatcompletions.Answer(answer("ok")))
	start := time.Now()
	res, events, err := e.run(t, t.Context(), e.request("q"))
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Run: %v", err)
	}
	if res.Text == "" || res.Usage.Calls != 1 {
		t.Errorf("result = %+v, want an answer from 1 call", res)
	}
	// The backoff is at most 5ms: only Retry-After makes the call wait 1s
	// (a lower bound a loaded machine cannot break).
	if took < time.Second {
		t.Errorf("answered after %v, before the 1s Retry-After", took)
	}
	notes := eventsOf(events, chat.EventNote)
	if len(notes) != 1 || !strings.Contains(notes[0].Text, "HTTP 429") || !strings.Contains(notes[0].Text, "retry 1 of 3 in 1s") {
		t.Errorf("notes = %+v, want one counting the retry", notes)
	}
	if reqs := e.fake.Requests(); len(reqs) != 2 || reqs[0].Status != http.StatusTooManyRequests {
		t.Errorf("%d requests, want a 429 then a success", len(reqs))
	}
}

// TestServerErrorForever checks that a call that keeps failing ends the
// turn with backend_error after MaxAttempts tries.
func TestServerErrorForever(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *openai.Config) { c.MaxAttempts = 3 })
	e.fake.Handle(func(chatcompletions.Request) chatcompletions.Reply {
		return chatcompletions.Error(http.StatusInternalServerError, "The server had an error while processing your request.")
	})
	res, events, err := e.run(t, t.Context(), e.request("q"))
	if got := chat.FailureReason(err, ""); got != chat.ReasonBackendError {
		t.Fatalf("Run = %v (reason %q), want backend_error", err, got)
	}
	if !strings.Contains(err.Error(), "failed 3 times") || !strings.Contains(err.Error(), "HTTP 500") {
		t.Errorf("error = %v", err)
	}
	if n := len(e.fake.Requests()); n != 3 {
		t.Errorf("%d requests, want 3", n)
	}
	if n := len(eventsOf(events, chat.EventNote)); n != 2 {
		t.Errorf("%d retry notes, want 2", n)
	}
	if res.SessionID != "" || res.Usage.Calls != 0 {
		t.Errorf("failed start returned session %q, usage %+v", res.SessionID, res.Usage)
	}
	if len(e.sessions.IDs()) != 0 {
		t.Errorf("a failed call saved sessions %v", e.sessions.IDs())
	}
}

// TestHungStream checks that a stream that stops sending times out: each
// attempt after CallTimeout, the turn with timeout.
func TestHungStream(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *openai.Config) { c.CallTimeout = 150 * time.Millisecond; c.MaxAttempts = 2 })
	e.fake.Handle(func(chatcompletions.Request) chatcompletions.Reply { return chatcompletions.Hang() })
	start := time.Now()
	_, _, err := e.run(t, t.Context(), e.request("q"))
	if got := chat.FailureReason(err, ""); got != chat.ReasonTimeout {
		t.Fatalf("Run = %v (reason %q), want timeout", err, got)
	}
	// A lower bound a loaded machine cannot break; how many attempts were
	// made is counted below.
	if d := time.Since(start); d < 300*time.Millisecond {
		t.Errorf("took %v, want two 150ms attempts", d)
	}
	if n := len(e.fake.Requests()); n != 2 {
		t.Errorf("%d requests, want 2", n)
	}

	// When the turn's own deadline passes, Run returns its error, so that
	// chat settles the turn as timed out.
	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	e2 := setup(t)
	e2.fake.Push(chatcompletions.Hang())
	_, _, err = e2.run(t, ctx, e2.request("q"))
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run past the turn's deadline = %v, want context.DeadlineExceeded", err)
	}
}

// TestStreamCutShort checks that a stream that ends without finishing is
// retried.
func TestStreamCutShort(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fake.Push(chatcompletions.Reply{Content: `{"answer_mark`, CutShort: true}, chatcompletions.Answer(answer("whole")))
	res, events, err := e.run(t, t.Context(), e.request("q"))
	if err != nil || !strings.Contains(res.Text, "whole") {
		t.Fatalf("Run = %q, %v", res.Text, err)
	}
	if notes := eventsOf(events, chat.EventNote); len(notes) != 1 || !strings.Contains(notes[0].Text, "stream ended") {
		t.Errorf("notes = %+v", notes)
	}
}

// TestRetriedStreamShowsTheAnswerOnce: the text of an attempt cut short
// is not shown again when the retry streams the same answer; the reader
// sees the answer's markdown once.
func TestRetriedStreamShowsTheAnswerOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	whole, err := json.Marshal(answer("The **whole** answer, streamed in pieces."))
	if err != nil {
		t.Fatal(err)
	}
	e.fake.Push(chatcompletions.Reply{Content: string(whole[:40]), CutShort: true, ChunkSize: 4},
		chatcompletions.Reply{Content: string(whole), ChunkSize: 4})
	_, events, err := e.run(t, t.Context(), e.request("q"))
	if err != nil {
		t.Fatal(err)
	}
	var text strings.Builder
	for _, d := range eventsOf(events, chat.EventTextDelta) {
		text.WriteString(d.Text)
	}
	if got := text.String(); got != "The **whole** answer, streamed in pieces." {
		t.Errorf("text deltas make %q, want the answer's markdown once", got)
	}
	if u := eventsOf(events, chat.EventUsage); len(u) != 1 {
		t.Errorf("%d usage events, want 1", len(u))
	}
}

// TestToolLoopBudget checks that a model that never stops calling tools
// ends the turn with budget_exceeded, and that its last call was told to
// answer.
func TestToolLoopBudget(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fake.Handle(func(chatcompletions.Request) chatcompletions.Reply {
		return chatcompletions.Call("list_files", map[string]any{})
	})
	req := e.request("q")
	req.MaxCalls = 4
	res, events, err := e.run(t, t.Context(), req)
	if got := chat.FailureReason(err, ""); got != chat.ReasonBudgetExceeded {
		t.Fatalf("Run = %v (reason %q), want budget_exceeded", err, got)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 4 || res.Usage.Calls != 4 {
		t.Errorf("%d requests, %d calls counted; want 4", len(reqs), res.Usage.Calls)
	}
	if tc := string(reqs[3].ToolChoice); tc != `"none"` {
		t.Errorf("the last call's tool_choice = %s, want \"none\"", tc)
	}
	if tc := reqs[0].ToolChoice; tc != nil {
		t.Errorf("the first call's tool_choice = %s, want none set", tc)
	}
	if n := len(eventsOf(events, chat.EventToolResult)); n != 3 {
		t.Errorf("%d tools ran, want 3", n)
	}

	// A token budget.
	e.fake.Handle(func(chatcompletions.Request) chatcompletions.Reply {
		r := chatcompletions.Call("list_files", map[string]any{})
		r.Usage = &chatcompletions.Usage{PromptTokens: 900, CompletionTokens: 100}
		return r
	})
	req.MaxCalls, req.MaxTokens = 40, 2500
	res, _, err = e.run(t, t.Context(), req)
	if got := chat.FailureReason(err, ""); got != chat.ReasonBudgetExceeded || res.Usage.Calls != 3 {
		t.Errorf("token budget: Run = %v after %d calls; want budget_exceeded after 3", err, res.Usage.Calls)
	}

	// No budget left at all.
	req.MaxCalls = 0
	before := len(e.fake.Requests())
	if _, _, err := e.run(t, t.Context(), req); chat.FailureReason(err, "") != chat.ReasonBudgetExceeded || len(e.fake.Requests()) != before {
		t.Errorf("no calls left: Run = %v", err)
	}
}

// TestResponseFormatRejected checks the fallback to instructions when the
// endpoint rejects response_format json_schema, and that it is remembered.
func TestResponseFormatRejected(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fake.RejectJSONSchema(true)
	e.fake.Push(chatcompletions.Answer(answer("ok")), chatcompletions.Answer(answer("again")))
	req := e.request("q")
	req.System = "Answer questions." // without the schema, so the fallback must add it
	res, _, err := e.run(t, t.Context(), req)
	if err != nil || !strings.Contains(res.Text, "ok") {
		t.Fatalf("Run = %q, %v", res.Text, err)
	}
	reqs := e.fake.Requests()
	if len(reqs) != 2 || reqs[0].ResponseFormat == nil || reqs[0].Status != 400 || reqs[1].ResponseFormat != nil {
		t.Fatalf("requests: %d, want one with response_format refused and one without", len(reqs))
	}
	if sys := reqs[1].Messages[0].Content; !strings.Contains(sys, "matching this JSON Schema") || !strings.Contains(sys, `"answer_markdown"`) {
		t.Errorf("the fallback's system message lacks the schema:\n%s", sys)
	}
	if _, _, err := e.run(t, t.Context(), req); err != nil {
		t.Fatal(err)
	}
	if reqs := e.fake.Requests(); len(reqs) != 3 || reqs[2].ResponseFormat != nil {
		t.Errorf("the next call asked for json_schema again")
	}
}

// TestToolsConfinedEndToEnd checks through the model's eyes that the tools
// refuse paths out of the checkout and never show .git, the private folder
// or binary files.
func TestToolsConfinedEndToEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	outside := t.TempDir()
	write := func(p, content string) {
		t.Helper()
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write(filepath.Join(outside, "secret.txt"), "SECRET_NEEDLE outside\n")
	write(filepath.Join(e.repo.Dir, ".git", "SECRET_NEEDLE"), "SECRET_NEEDLE in git\n")
	write(filepath.Join(e.repo.Dir, ".prchat", "review.md"), "SECRET_NEEDLE in the review\n")
	write(filepath.Join(e.repo.Dir, "data.bin"), "\x00\x01SECRET_NEEDLE binary\n")
	write(filepath.Join(e.repo.Dir, "src", "ok.go"), "package src // SECRET_NEEDLE ok\n")
	if err := os.Symlink(filepath.Join(outside, "secret.txt"), filepath.Join(e.repo.Dir, "link.txt")); err != nil {
		t.Fatal(err)
	}
	calls := []chatcompletions.ToolCall{
		{ID: "dotdot", Name: "read_file", Arguments: `{"path":"../` + filepath.Base(outside) + `/secret.txt"}`},
		{ID: "abs", Name: "read_file", Arguments: `{"path":"` + filepath.Join(outside, "secret.txt") + `"}`},
		{ID: "link", Name: "read_file", Arguments: `{"path":"link.txt"}`},
		{ID: "git", Name: "read_file", Arguments: `{"path":".git/SECRET_NEEDLE"}`},
		{ID: "private", Name: "read_file", Arguments: `{"path":".prchat/review.md"}`},
		{ID: "search", Name: "search_code", Arguments: `{"query":"SECRET_NEEDLE"}`},
		{ID: "badjson", Name: "read_file", Arguments: `{"path":`},
	}
	e.fake.Push(chatcompletions.Reply{ToolCalls: calls}, chatcompletions.Answer(answer("done")))
	if _, _, err := e.run(t, t.Context(), e.request("q")); err != nil {
		t.Fatal(err)
	}
	seen := e.fake.Requests()[1]
	for _, c := range calls {
		out, ok := seen.ToolResult(c.ID)
		if !ok {
			t.Errorf("no result for %s", c.ID)
			continue
		}
		if c.ID == "search" {
			if !strings.Contains(out, "src/ok.go:1:") || strings.Count(out, "SECRET_NEEDLE") != 1 {
				t.Errorf("search result = %q, want only src/ok.go", out)
			}
			continue
		}
		if !strings.HasPrefix(out, "error: ") || strings.Contains(out, "SECRET_NEEDLE in") || strings.Contains(out, "outside\n") {
			t.Errorf("%s: result = %q, want a refusal", c.ID, out)
		}
	}
}

// TestAuthFailure checks that a refused key fails at once with a clear
// message that does not hold the key, and that Key supplies the key.
func TestAuthFailure(t *testing.T) {
	t.Parallel()
	e := setup(t)
	e.fake.RequireKey("sk-the-right-one")
	_, events, err := e.run(t, t.Context(), e.request("q"))
	if got := chat.FailureReason(err, ""); got != chat.ReasonBackendError || !strings.Contains(err.Error(), "HTTP 401") ||
		!strings.Contains(err.Error(), "check the API key") {
		t.Fatalf("Run with a wrong key = %v (reason %q)", err, got)
	}
	if strings.Contains(err.Error(), testKey) || strings.Contains(err.Error(), "Incorrect API key") {
		t.Errorf("the error shows the key or the endpoint's message: %v", err)
	}
	if n := len(e.fake.Requests()); n != 1 || len(eventsOf(events, chat.EventNote)) != 0 {
		t.Errorf("%d requests; a refused key is not retried", n)
	}

	var asked int
	e2 := setup(t, func(c *openai.Config) {
		c.APIKey = ""
		c.Key = func(context.Context) (string, error) { asked++; return "sk-stored", nil }
	})
	e2.fake.RequireKey("sk-stored")
	e2.fake.Push(chatcompletions.Answer(answer("ok")))
	if _, _, err := e2.run(t, t.Context(), e2.request("q")); err != nil || asked == 0 {
		t.Errorf("Run with Key = %v (asked %d times)", err, asked)
	}

	e3 := setup(t, func(c *openai.Config) {
		c.Key = func(context.Context) (string, error) { return "", errors.New("no key stored") }
	})
	if err := e3.b.Available(t.Context()); err == nil || !strings.Contains(err.Error(), "no key stored") {
		t.Errorf("Available with a failing Key = %v", err)
	}
	if _, _, err := e3.run(t, t.Context(), e3.request("q")); chat.FailureReason(err, "") != chat.ReasonBackendUnavailable {
		t.Errorf("Run with a failing Key = %v, want backend_unavailable", err)
	}
}

// TestTurnEndpoint checks that a turn's own endpoint and key
// (chat.RunRequest.Endpoint) win over the backend's.
func TestTurnEndpoint(t *testing.T) {
	t.Parallel()
	e := setup(t)
	other := chatcompletions.New(t)
	other.RequireKey("sk-provider")
	other.Push(chatcompletions.Answer(answer("from the provider")))
	req := e.request("q")
	req.Endpoint = &chat.Endpoint{Provider: "litellm", BaseURL: other.URL, APIKey: "sk-provider"}
	res, _, err := e.run(t, t.Context(), req)
	if err != nil || !strings.Contains(res.Text, "from the provider") {
		t.Fatalf("Run with an endpoint = %q, %v", res.Text, err)
	}
	if len(e.fake.Requests()) != 0 || len(other.Requests()) != 1 {
		t.Errorf("requests: %d to the backend's endpoint, %d to the turn's; want 0 and 1", len(e.fake.Requests()), len(other.Requests()))
	}

	// OpenAI's own endpoint needs a key.
	req.Endpoint = &chat.Endpoint{Provider: "openai", BaseURL: openai.DefaultBaseURL}
	if _, _, err := e.run(t, t.Context(), req); chat.FailureReason(err, "") != chat.ReasonBackendUnavailable || !strings.Contains(err.Error(), "no API key") {
		t.Errorf("Run against OpenAI without a key = %v, want backend_unavailable", err)
	}
}

// TestFatalErrors checks errors that are not retried.
func TestFatalErrors(t *testing.T) {
	t.Parallel()
	for _, tt := range []struct {
		reply chatcompletions.Reply
		want  string
	}{
		{chatcompletions.Error(http.StatusNotFound, "The model `gpt-nope` does not exist"), "HTTP 404"},
		{chatcompletions.Error(http.StatusBadRequest, "context_length_exceeded"), "HTTP 400 Bad Request: context_length_exceeded"},
		{chatcompletions.Reply{Status: 429, Code: "insufficient_quota", Message: "You exceeded your current quota"}, "no quota left"},
	} {
		e := setup(t)
		e.fake.Push(tt.reply, chatcompletions.Answer(answer("never")))
		_, _, err := e.run(t, t.Context(), e.request("q"))
		if chat.FailureReason(err, "") != chat.ReasonBackendError || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("reply %d %q: Run = %v, want backend_error with %q", tt.reply.Status, tt.reply.Message, err, tt.want)
		}
		if n := len(e.fake.Requests()); n != 1 {
			t.Errorf("reply %d %q was retried (%d requests)", tt.reply.Status, tt.reply.Message, n)
		}
	}
}

// TestWithoutStreamingOrUsage checks calls without streaming, and cost
// reasons when the endpoint reports no usage or the model has no price.
func TestWithoutStreamingOrUsage(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *openai.Config) { c.DisableStreaming = true; c.Model = "llama3.1:8b" })
	e.fake.Push(chatcompletions.Call("read_file", map[string]any{"path": "main.go"}), chatcompletions.Answer(answer("ok")))
	res, events, err := e.run(t, t.Context(), e.request("q"))
	if err != nil {
		t.Fatal(err)
	}
	if e.fake.Requests()[0].Stream {
		t.Error("the request streamed")
	}
	if res.Usage.Calls != 2 || res.Usage.CostUSD != nil || res.Usage.CostReason != "no price known for model llama3.1:8b" {
		t.Errorf("usage = %+v", res.Usage)
	}
	if len(eventsOf(events, chat.EventTextDelta)) != 1 || len(eventsOf(events, chat.EventToolResult)) != 1 {
		t.Errorf("events = %+v", events)
	}

	e2 := setup(t)
	e2.fake.Push(chatcompletions.Reply{JSON: answer("ok"), NoUsage: true})
	res, _, err = e2.run(t, t.Context(), e2.request("q"))
	if err != nil || res.Usage.InputTokens == 0 || res.Usage.CostUSD != nil || !strings.Contains(res.Usage.CostReason, "estimated") {
		t.Errorf("no usage reported: usage %+v, %v", res.Usage, err)
	}
}

// TestRunChecks checks requests that cannot run.
func TestRunChecks(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *openai.Config) { c.Model = "" })
	req := e.request("q")
	if _, _, err := e.run(t, t.Context(), req); chat.FailureReason(err, "") != chat.ReasonBackendUnavailable {
		t.Errorf("no model: %v", err)
	}
	req.Model = "gpt-4o"
	req.Dir = filepath.Join(t.TempDir(), "gone")
	if _, _, err := e.run(t, t.Context(), req); chat.FailureReason(err, "") != chat.ReasonBackendError || !strings.Contains(err.Error(), "run directory") {
		t.Errorf("missing run directory: %v", err)
	}
	if err := e.b.HasSession(t.Context(), chat.SessionRef{}); !errors.Is(err, chat.ErrSessionGone) {
		t.Errorf("HasSession(empty id) = %v", err)
	}
	if e.b.Name() != chat.BackendOpenAI {
		t.Errorf("Name = %q", e.b.Name())
	}
	if err := e.b.Available(t.Context()); err != nil {
		t.Errorf("Available with a key = %v", err)
	}
}

// TestHistoryMasked checks that Mask masks a history before it is saved.
func TestHistoryMasked(t *testing.T) {
	t.Parallel()
	e := setup(t, func(c *openai.Config) {
		c.Mask = func(s string) string { return strings.ReplaceAll(s, "hunter2", "[masked:password]") }
	})
	e.fake.Push(chatcompletions.Call("search_code", map[string]any{"query": "hunter2"}), chatcompletions.Answer(answer("The password hunter2 is not in the code.")))
	res, _, err := e.run(t, t.Context(), e.request("Is hunter2 in the code?"))
	if err != nil {
		t.Fatal(err)
	}
	raw, err := e.sessions.Load(t.Context(), res.SessionID)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(raw), "hunter2") || strings.Count(string(raw), "[masked:password]") != 4 {
		t.Errorf("saved history is not masked:\n%s", raw)
	}
	if !strings.Contains(res.Text, "hunter2") {
		t.Errorf("the answer itself was masked: chat masks it, not the backend")
	}
}

func clip(s string) string {
	if len(s) > 80 {
		return s[:80]
	}
	return s
}
