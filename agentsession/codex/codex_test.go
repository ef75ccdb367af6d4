package codex_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
)

// files are the test repository's head: what the review and the answers
// are about.
var files = map[string]string{
	"config/config.go": `package config

// Config holds the service settings.
type Config struct {
	MaxRetries int
}

// Load reads max_retries without an upper bound.
func Load(n int) Config {
	return Config{MaxRetries: n}
}
`,
	"main.go": "package main\n\nfunc main() {}\n",
}

// env is what a test works with: a fake model API, a codex backend with a
// CODEX_HOME of its own, and a repository to make run directories of.
type env struct {
	t    testing.TB
	api  *responses.Server
	cfg  codex.Config
	b    *codex.Backend
	repo agentsessiontest.Repo
	ws   *agentsession.Workspaces
	n    int
}

func setup(t testing.TB) *env {
	t.Helper()
	api := responses.New(t)
	cfg := codextest.Config(t, api)
	cfg.Prices = map[string]codex.Price{codextest.Model: {Input: 2, CachedInput: 0.5, Output: 10}}
	b, err := codex.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &env{t: t, api: api, cfg: cfg, b: b, repo: agentsessiontest.NewRepo(t, map[string]string{"README.md": "widgets\n"}, files), ws: ws}
}

// runDir prepares a run directory (a worktree at the head with the seed).
func (e *env) runDir() string {
	e.t.Helper()
	e.n++
	dir, err := e.ws.Prepare(e.t.Context(), chat.Seed{
		Repository:   e.repo.Repository("acme/widgets"),
		Review:       chat.Review{Repository: "acme/widgets", PR: 7, Version: 1, HeadSHA: e.repo.Head(), Markdown: "Load does not bound max_retries."},
		Conversation: chat.Conversation{ID: fmt.Sprintf("conv-%d", e.n)},
	})
	if err != nil {
		e.t.Fatal(err)
	}
	return dir
}

// request is a call asking about config.go in dir.
func request(dir string, mode chat.SessionMode, session string) chat.RunRequest {
	return chat.RunRequest{
		Mode:    mode,
		Session: chat.SessionRef{ID: session, Dir: dir},
		Dir:     dir,
		Prompt:  chat.QuestionPrompt(chat.Review{}, chat.Ask{Question: "Why is max_retries unbounded?"}),
		System:  chat.System(),
		Schema:  json.RawMessage(chat.AnswerSchema),
	}
}

// answer is a valid answer about config.go, as JSON.
func answer(text string) string {
	raw, err := json.Marshal(chat.Answer{
		AnswerMarkdown: text,
		Citations:      []chat.Citation{{Path: "config/config.go", StartLine: 8, EndLine: 11}},
	})
	if err != nil {
		panic(err)
	}
	return string(raw)
}

// call runs req and returns its result, error and events.
func (e *env) call(ctx context.Context, req chat.RunRequest) (chat.RunResult, []chat.Event, error) {
	var mu sync.Mutex
	var events []chat.Event
	res, err := e.b.Run(ctx, req, func(ev chat.Event) {
		mu.Lock()
		defer mu.Unlock()
		events = append(events, ev)
	})
	return res, events, err
}

// run runs req, which must succeed.
func (e *env) run(req chat.RunRequest) (chat.RunResult, []chat.Event) {
	e.t.Helper()
	ctx, cancel := context.WithTimeout(e.t.Context(), agentsessiontest.RunTimeout())
	defer cancel()
	res, events, err := e.call(ctx, req)
	if err != nil {
		e.t.Fatalf("Run(%s) = %v", req.Mode, err)
	}
	return res, events
}

// bareExec runs the CLI itself, as a reviewing agent would, in dir with the
// sandbox given, and returns the thread it started.
func (e *env) bareExec(dir, sandbox, prompt string) string {
	e.t.Helper()
	// No shell snapshot: its background login shell would outlive the run.
	args := append([]string{"exec", "--json", "-C", dir, "-s", sandbox, "-m", codextest.Model,
		"--disable", "shell_snapshot"}, e.cfg.ExtraArgs...)
	cmd := exec.CommandContext(e.t.Context(), e.cfg.Bin, append(args, "--", prompt)...)
	cmd.Env = append(append(os.Environ(), e.cfg.Env...), "CODEX_HOME="+e.cfg.Home)
	cmd.Stdin = nil // the null device
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		e.t.Fatalf("codex exec: %v\n%s\n%s", err, out, stderr.Bytes())
	}
	for line := range strings.SplitSeq(string(out), "\n") {
		var ev struct {
			Type     string `json:"type"`
			ThreadID string `json:"thread_id"`
		}
		if json.Unmarshal([]byte(line), &ev) == nil && ev.Type == "thread.started" {
			return ev.ThreadID
		}
	}
	e.t.Fatalf("codex exec started no thread:\n%s", out)
	return ""
}

// rolloutFile returns the session file of id.
func (e *env) rolloutFile(id string) string {
	e.t.Helper()
	m, _ := filepath.Glob(filepath.Join(e.cfg.Home, "sessions", "*", "*", "*", "rollout-*-"+id+".jsonl"))
	if len(m) != 1 {
		e.t.Fatalf("session files of %s: %v, want one", id, m)
	}
	return m[0]
}

func hashFile(t *testing.T, path string) [32]byte {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return sha256.Sum256(raw)
}

// last returns the fake's last request.
func (e *env) last() responses.Request {
	e.t.Helper()
	reqs := e.api.Requests()
	if len(reqs) == 0 {
		e.t.Fatal("the fake API received no request")
	}
	return reqs[len(reqs)-1]
}

func checkAnswer(t *testing.T, e *env, res chat.RunResult) chat.Answer {
	t.Helper()
	a, err := chat.ParseAnswer(res.Structured, res.Text)
	if err != nil {
		t.Fatalf("answer %q: %v", res.Text, err)
	}
	lines := func(ctx context.Context, path string) (int, error) {
		return e.ws.LineCount(ctx, e.repo.Repository("acme/widgets"), e.repo.Head(), path)
	}
	if err := chat.CheckCitations(t.Context(), a, lines); err != nil {
		t.Fatalf("citations of %q: %v", res.Text, err)
	}
	return a
}

// TestForkAndResumeAReview forks a review session that the CLI made itself
// (with write access, as a reviewing agent may have had), then resumes the
// fork: each call sees the history before it, runs read-only, and leaves
// the review's session file as it was.
func TestForkAndResumeAReview(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dir := e.runDir()

	// The review: the agent reads config.go and writes a note, which its
	// workspace-write sandbox allows.
	e.api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("cat config/config.go && echo reviewed > review-note.txt")}},
		responses.Reply{Text: "REVIEW-7: Load does not bound max_retries."},
	)
	review := e.bareExec(dir, "workspace-write", "Review this change.")
	if _, err := os.Stat(filepath.Join(dir, "review-note.txt")); err != nil {
		t.Fatalf("the review's write did not happen, so the fork's read-only check proves nothing: %v", err)
	}
	if err := e.b.HasSession(t.Context(), chat.SessionRef{ID: review, Dir: dir}); err != nil {
		t.Fatalf("HasSession(review) = %v", err)
	}
	reviewFile := e.rolloutFile(review)
	before := hashFile(t, reviewFile)

	// Turn 1 forks the review; the model tries to write, then answers.
	e.api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("echo forked > fork-note.txt")}, Usage: responses.Usage{InputTokens: 700, OutputTokens: 20}},
		responses.Reply{Text: answer("Load takes n as it is."), Usage: responses.Usage{InputTokens: 1000, CachedTokens: 400, OutputTokens: 100}},
	)
	n := len(e.api.Requests())
	forked, events := e.run(request(dir, chat.SessionForked, review))
	checkAnswer(t, e, forked)
	if forked.SessionID == "" || forked.SessionID == review {
		t.Fatalf("fork of %s returned session %q, want a new one", review, forked.SessionID)
	}
	if _, err := os.Stat(filepath.Join(dir, "fork-note.txt")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the fork wrote fork-note.txt (stat: %v): it must run read-only", err)
	}
	reqs := e.api.Requests()[n:]
	if len(reqs) != 2 {
		t.Fatalf("the fork made %d model requests, want 2", len(reqs))
	}
	first := reqs[0]
	if !first.Contains("REVIEW-7") || !first.Contains("func Load(n int) Config") {
		t.Errorf("the fork's request lacks the review's messages and tool output:\n%v", first.Texts(""))
	}
	if m := first.Metadata; m.HistoryInitialization != "cold_fork" || m.ThreadID != forked.SessionID || m.SandboxMode != "read-only" {
		t.Errorf("fork metadata = %+v, want cold_fork of thread %s, read-only", m, forked.SessionID)
	}
	if !strings.Contains(first.LastUserText(), "You are answering a reviewer's follow-up question") {
		t.Errorf("the fork's prompt lacks prchat's instructions:\n%s", first.LastUserText())
	}
	if len(first.Schema()) == 0 {
		t.Error("the fork's request has no output schema")
	}
	if out := strings.Join(mapValues(reqs[1].ToolOutputs()), "\n"); !strings.Contains(out, "Read-only file system") {
		t.Errorf("the fork's write was not refused by the sandbox; tool output:\n%s", out)
	}
	// Usage is the fork's own (not the review's), with the cost.
	if got := forked.Usage; got.InputTokens != 1700 || got.OutputTokens != 120 || got.Calls != 2 {
		t.Errorf("fork usage = %+v, want the fork's own 1700/120 tokens in 2 calls", got)
	}
	if got := forked.Usage.CostUSD; got == nil || fmt.Sprintf("%.6f", *got) != "0.004000" {
		t.Errorf("fork cost = %v (%s), want (1300*2 + 400*0.5 + 120*10)/1e6 = 0.004", got, forked.Usage.CostReason)
	}
	checkEventKinds(t, events, chat.EventToolStart, chat.EventToolResult, chat.EventTextDelta, chat.EventUsage)

	// Turn 2 resumes the fork and sees turn 1.
	e.api.Push(responses.Reply{Text: answer("Still unbounded."), Usage: responses.Usage{InputTokens: 500, OutputTokens: 50}})
	req2 := request(dir, chat.SessionResumed, forked.SessionID)
	req2.Prompt = "TURN-2: and the default?"
	resumed, _ := e.run(req2)
	checkAnswer(t, e, resumed)
	if resumed.SessionID != forked.SessionID {
		t.Errorf("resume of %s returned session %q", forked.SessionID, resumed.SessionID)
	}
	last := e.last()
	if !last.Contains("Why is max_retries unbounded?") || !last.Contains("Load takes n as it is.") || !last.Contains("REVIEW-7") {
		t.Errorf("the resume's request lacks turn 1 or the review:\n%v", last.Texts(""))
	}
	if m := last.Metadata; m.HistoryInitialization != "cold_resume" || m.ThreadID != forked.SessionID || m.SandboxMode != "read-only" {
		t.Errorf("resume metadata = %+v, want cold_resume of thread %s, read-only", m, forked.SessionID)
	}
	if last.LastUserText() != "TURN-2: and the default?" {
		t.Errorf("resume prompt = %q", last.LastUserText())
	}
	if got := resumed.Usage; got.InputTokens != 500 || got.OutputTokens != 50 || got.Calls != 1 {
		t.Errorf("resume usage = %+v, want the turn's own 500/50 tokens in 1 call (not the thread's running total)", got)
	}
	if got := resumed.Usage.CostUSD; got == nil || fmt.Sprintf("%.6f", *got) != "0.001500" {
		t.Errorf("resume cost = %v, want 500*2/1e6 + 50*10/1e6 = 0.0015", got)
	}

	if hashFile(t, reviewFile) != before {
		t.Error("the review's session file changed")
	}
}

func mapValues(m map[string]string) []string {
	var out []string
	for _, v := range m {
		out = append(out, v)
	}
	return out
}

// checkEventKinds checks that events has each of the types.
func checkEventKinds(t *testing.T, events []chat.Event, types ...string) {
	t.Helper()
	seen := map[string]bool{}
	for _, ev := range events {
		seen[ev.Type] = true
	}
	for _, typ := range types {
		if !seen[typ] {
			t.Errorf("no %s event among %d events", typ, len(events))
		}
	}
}

// TestSeededStart starts a new session in a fresh run directory: prchat's
// instructions go in as developer instructions, the agent reads a file and
// answers with valid citations, and the session can be resumed.
func TestSeededStart(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dir := e.runDir()
	e.api.Push(
		responses.Reply{Text: "Reading the config.", Calls: []responses.Call{responses.Shell("cat config/config.go")}},
		responses.Reply{Text: answer("Load stores n unchecked.")},
	)
	req := request(dir, chat.SessionSeeded, "")
	req.Prompt = chat.SeedPrompt(chat.Review{Repository: "acme/widgets", PR: 7, HeadSHA: e.repo.Head(), Markdown: "SEEDED-REVIEW"}, nil,
		chat.Ask{Question: "Why is max_retries unbounded?"})
	res, events := e.run(req)
	a := checkAnswer(t, e, res)
	if a.AnswerMarkdown != "Load stores n unchecked." {
		t.Errorf("answer = %q", a.AnswerMarkdown)
	}
	if err := e.b.HasSession(t.Context(), chat.SessionRef{ID: res.SessionID, Dir: dir}); err != nil {
		t.Errorf("HasSession(new session %q) = %v", res.SessionID, err)
	}
	if res.Model != codextest.Model || res.Usage.Calls != 2 {
		t.Errorf("result model %q, usage %+v; want %s in 2 calls", res.Model, res.Usage, codextest.Model)
	}

	first := e.api.Requests()[0]
	if m := first.Metadata; m.HistoryInitialization != "new" || m.ThreadID != res.SessionID || m.SandboxMode != "read-only" {
		t.Errorf("metadata = %+v, want a new read-only thread %s", m, res.SessionID)
	}
	// The instructions arrive as they are (the -c value parsed as TOML, not
	// taken as a literal with its quotes and escapes).
	if dev := strings.Join(first.Texts("developer"), "\n"); !strings.Contains(dev, chat.System()) {
		t.Error("prchat's instructions are not among the developer messages as they are")
	}
	if !strings.Contains(first.LastUserText(), "SEEDED-REVIEW") {
		t.Errorf("the seeded prompt did not reach the model:\n%s", first.LastUserText())
	}
	// The schema goes out without the keywords strict mode rejects.
	if s := string(first.Schema()); !strings.Contains(s, "answer_markdown") || strings.Contains(s, "minLength") {
		t.Errorf("output schema = %s", s)
	}

	// The CLI left nothing running (it starts a shell in the background
	// to snapshot the user's environment, and the commands).
	checkNothingLeft(t, "CODEX_HOME="+e.cfg.Home)

	// The events: the message, then the command with a one-line summary.
	var got []string
	for _, ev := range events {
		switch ev.Type {
		case chat.EventToolStart:
			// The command runs in the user's shell: /bin/bash -c '...'.
			var in struct{ Command string }
			if err := json.Unmarshal(ev.Input, &in); err != nil {
				t.Errorf("tool_start input %s: %v", ev.Input, err)
			}
			if _, cmd, ok := strings.Cut(in.Command, " -c "); ok {
				in.Command = cmd
			}
			got = append(got, ev.Type+" "+ev.ToolName+" "+in.Command)
		case chat.EventToolResult:
			got = append(got, ev.Type+" "+ev.ToolName+" "+ev.Summary)
		case chat.EventTextDelta:
			got = append(got, ev.Type+" "+ev.Text)
		default:
			got = append(got, ev.Type)
		}
	}
	want := []string{
		"text_delta Reading the config.",
		"tool_start shell 'cat config/config.go'",
		"tool_result shell exit 0, 11 lines: package config",
		"text_delta Load stores n unchecked.", // the answer's markdown, not its JSON
		"usage",
	}
	// The CLI sometimes leaves out a command that ends at once, and the
	// backend then reports it from the session file after the fact: the
	// events are the same, not always in this order.
	slices.Sort(got)
	slices.Sort(want)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("events (-want +got):\n%s", diff)
	}
}
