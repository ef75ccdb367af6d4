package claude_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/claude/claudetest"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// fixture is what a test of the real CLI needs: a fake API and a backend
// running the CLI against it, with a configuration directory of its own.
type fixture struct {
	cfg  claude.Config
	api  *anthropic.Server
	b    *claude.Backend
	home string // the CLI's HOME and CLAUDE_CONFIG_DIR
}

func setup(t testing.TB) *fixture {
	t.Helper()
	f := &fixture{api: anthropic.New(t)}
	f.cfg = claudetest.Config(t, f.api)
	b, err := claude.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.b, f.home = b, b.ConfigDir()
	return f
}

// env is the CLI's environment on top of the test process's.
func (f *fixture) env() []string { return f.cfg.Env }

// bare runs the CLI itself in dir, as a reviewing agent, and returns its
// session id.
func (f *fixture) bare(t testing.TB, dir string, args ...string) string {
	t.Helper()
	return claudetest.Bare(t, f.cfg, dir, args...)
}

// files are the repository the tests ask about.
var files = map[string]string{
	"go.mod": "module example.com/widgets\n\ngo 1.22\n",
	"config/config.go": `package config

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
`,
}

// theAnswer is what the fake model answers: lines 10-16 are parseConfig.
func theAnswer() chat.Answer {
	return chat.Answer{
		AnswerMarkdown: "`parseConfig` reads `max_retries` with `strconv.Atoi` and does not bound it.",
		Citations:      []chat.Citation{{Path: "config/config.go", StartLine: 10, EndLine: 16}},
	}
}

// workspace is a repository and the Workspaces that make run directories
// of it.
type workspace struct {
	repo agentsessiontest.Repo
	ws   *agentsession.Workspaces
}

func newWorkspace(t testing.TB, extra map[string]string) *workspace {
	t.Helper()
	head := map[string]string{}
	for k, v := range files {
		head[k] = v
	}
	for k, v := range extra {
		head[k] = v
	}
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	return &workspace{repo: agentsessiontest.NewRepo(t, map[string]string{"go.mod": files["go.mod"]}, head), ws: ws}
}

func (w *workspace) review() chat.Review {
	return chat.Review{
		Repository: "acme/widgets", PR: 7, Version: 1,
		HeadSHA: w.repo.Head(), BaseSHA: w.repo.Commits[0],
		Backend:  chat.BackendClaudeCode,
		Markdown: "`parseConfig` does not bound `max_retries`.",
	}
}

// prepare makes a run directory (a worktree at the head with the seed).
func (w *workspace) prepare(t testing.TB, conversation string) string {
	t.Helper()
	dir, err := w.ws.Prepare(t.Context(), chat.Seed{
		Repository:   w.repo.Repository("acme/widgets"),
		Review:       w.review(),
		Conversation: chat.Conversation{ID: conversation, Repository: "acme/widgets", PR: 7, ReviewVersion: 1},
	})
	if err != nil {
		t.Fatal(err)
	}
	return dir
}

// lines counts the lines of a file at the head, for chat.CheckCitations.
func (w *workspace) lines(ctx context.Context, path string) (int, error) {
	return w.ws.LineCount(ctx, w.repo.Repository("acme/widgets"), w.repo.Head(), path)
}

// request is a call in dir as chat makes it.
func request(dir string, mode chat.SessionMode, session chat.SessionRef, prompt string) chat.RunRequest {
	return chat.RunRequest{
		Mode: mode, Session: session, Dir: dir,
		Prompt:   prompt,
		System:   chat.System(),
		Schema:   json.RawMessage(chat.AnswerSchema),
		MaxCalls: 10, MaxTokens: 1_000_000,
	}
}

// run makes a call that must succeed and returns its result and events.
func run(t *testing.T, b chat.Backend, req chat.RunRequest) (chat.RunResult, []chat.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), agentsessiontest.RunTimeout())
	defer cancel()
	var events []chat.Event
	res, err := b.Run(ctx, req, func(e chat.Event) { events = append(events, e) })
	if err != nil {
		t.Fatalf("Run(%s) = %v", req.Mode, err)
	}
	return res, events
}

// readThenAnswer is a model that reads path (under dir) and then answers
// a through the structured output tool.
func readThenAnswer(dir, path string, a chat.Answer) func(anthropic.Request) anthropic.Reply {
	return func(r anthropic.Request) anthropic.Reply {
		if len(r.ToolResults()) == 0 {
			return anthropic.ToolUse("Read", map[string]any{"file_path": filepath.Join(dir, path)})
		}
		return anthropic.Structured(a)
	}
}

// parse returns the answer of res, as chat parses it.
func parse(t *testing.T, res chat.RunResult) chat.Answer {
	t.Helper()
	if len(res.Structured) == 0 {
		t.Fatalf("the result has no structured answer; text: %q", res.Text)
	}
	a, err := chat.ParseAnswer(res.Structured, res.Text)
	if err != nil {
		t.Fatalf("the answer does not parse: %v\n%s", err, res.Structured)
	}
	return a
}

// ofSession returns the Messages requests of session id.
func ofSession(reqs []anthropic.Request, id string) []anthropic.Request {
	var out []anthropic.Request
	for _, r := range reqs {
		if r.SessionID == id {
			out = append(out, r)
		}
	}
	return out
}

func TestConformance(t *testing.T) {
	t.Parallel()
	claudetest.Bin(t)
	var apis sync.Map // *claude.Backend -> *anthropic.Server
	agentsessiontest.Run(t, agentsessiontest.Harness{
		New: func(t *testing.T) chat.Backend {
			f := setup(t)
			apis.Store(f.b, f.api)
			return f.b
		},
		Sessions: true,
		Program: func(t *testing.T, b chat.Backend, a chat.Answer) {
			api, _ := apis.Load(b)
			// Grep (relative to the run directory), then the answer.
			api.(*anthropic.Server).Handle(func(r anthropic.Request) anthropic.Reply {
				if len(r.ToolResults()) == 0 {
					return anthropic.ToolUse("Grep", map[string]any{"pattern": "func parseConfig", "output_mode": "content", "-n": true})
				}
				return anthropic.Structured(a)
			})
		},
		Hang: func(t *testing.T, b chat.Backend) {
			api, _ := apis.Load(b)
			api.(*anthropic.Server).Handle(func(anthropic.Request) anthropic.Reply { return anthropic.Hang() })
		},
	})
}

// TestForkAndResumeReview forks a review session that the CLI itself
// wrote, then resumes the fork: each call carries the history before it,
// and the review's own session file is never touched.
func TestForkAndResumeReview(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := newWorkspace(t, nil)
	dir := w.prepare(t, "review")

	// The reviewing agent's own session: it read the file and wrote a
	// finding.
	const reviewPrompt, finding = "Review pull request 7 (REVIEW-PROMPT-4c1).", "FINDING-9d2: parseConfig does not bound max_retries."
	f.api.Push(
		anthropic.ToolUse("Read", map[string]any{"file_path": filepath.Join(dir, "config/config.go")}),
		anthropic.Text(finding),
	)
	reviewID := f.bare(t, dir, "--", reviewPrompt)
	review := chat.SessionRef{ID: reviewID, Dir: dir}
	if err := f.b.HasSession(t.Context(), review); err != nil {
		t.Fatalf("HasSession(review) = %v", err)
	}
	reviewFile := claudetest.SessionFile(t, f.home, reviewID)
	before, err := os.ReadFile(reviewFile)
	if err != nil {
		t.Fatal(err)
	}
	seen := len(f.api.Messages())

	// Turn 1 forks the review.
	f.api.Handle(readThenAnswer(dir, "config/config.go", theAnswer()))
	const q1 = "Q1-6b0: why did you flag parseConfig?"
	req := request(dir, chat.SessionForked, review, q1)
	req.System += "\nSYSTEM-MARKER-e41"
	fork, events := run(t, f.b, req)
	if fork.SessionID == "" || fork.SessionID == reviewID {
		t.Fatalf("fork of %s returned session %q, want a new id", reviewID, fork.SessionID)
	}
	if diff := cmp.Diff(theAnswer(), parse(t, fork)); diff != "" {
		t.Errorf("fork's answer (-want +got):\n%s", diff)
	}
	reqs := f.api.Messages()[seen:]
	if len(reqs) == 0 || len(ofSession(reqs, fork.SessionID)) != len(reqs) {
		t.Fatalf("the fork's requests belong to sessions %v, want all to %s", sessionsOf(reqs), fork.SessionID)
	}
	first := reqs[0]
	if diff := cmp.Diff([]string{reviewPrompt, q1}, first.Prompts()); diff != "" {
		t.Errorf("prompts in the fork's first request (-want +got):\n%s", diff)
	}
	if !first.Contains(finding) || !first.Contains("package config") {
		t.Errorf("the fork's first request lacks the review's reply or the file it read:\n%s", first.Body)
	}
	if !strings.Contains(first.SystemText(), "SYSTEM-MARKER-e41") {
		t.Error("prchat's system prompt did not reach the forked session's requests")
	}
	checkReadOnlyTools(t, first)
	checkEvent(t, events, chat.EventToolStart, "Read", "")
	checkEvent(t, events, chat.EventToolResult, "Read", "read config/config.go lines 1-17 of 17")
	checkUsage(t, fork, events)
	if err := f.b.HasSession(t.Context(), chat.SessionRef{ID: fork.SessionID, Dir: dir}); err != nil {
		t.Errorf("HasSession(fork) = %v", err)
	}
	checkUnchanged(t, reviewFile, before)

	// Turn 2 resumes the fork.
	seen = len(f.api.Messages())
	const q2 = "Q2-a77: and how would you bound it?"
	resumed, _ := run(t, f.b, request(dir, chat.SessionResumed, chat.SessionRef{ID: fork.SessionID, Dir: dir}, q2))
	if resumed.SessionID != fork.SessionID {
		t.Errorf("resume of %s ran in session %q, want the same", fork.SessionID, resumed.SessionID)
	}
	parse(t, resumed)
	reqs = f.api.Messages()[seen:]
	if len(reqs) == 0 {
		t.Fatal("the resume sent no request")
	}
	if diff := cmp.Diff([]string{reviewPrompt, q1, q2}, reqs[0].Prompts()); diff != "" {
		t.Errorf("prompts in the resume's first request (-want +got):\n%s", diff)
	}
	if !reqs[0].Contains(theAnswer().AnswerMarkdown) {
		t.Error("the resume's history lacks turn 1's answer")
	}
	checkUnchanged(t, reviewFile, before)
}

// TestSeededStart starts a new session in a fresh run directory, as chat
// does when the review's session is gone, and gets an answer whose
// citations pass chat's checks.
func TestSeededStart(t *testing.T) {
	t.Parallel()
	f := setup(t)
	w := newWorkspace(t, nil)
	dir := w.prepare(t, "seeded")
	f.api.Handle(readThenAnswer(dir, "config/config.go", theAnswer()))
	prompt := chat.SeedPrompt(w.review(), nil, chat.Ask{Question: "Where is max_retries parsed?"})
	req := request(dir, chat.SessionSeeded, chat.SessionRef{}, prompt)
	req.Model = "claude-review-model-1"
	res, events := run(t, f.b, req)
	a := parse(t, res)
	if err := chat.CheckCitations(t.Context(), a, w.lines); err != nil {
		t.Errorf("citations: %v", err)
	}
	if len(a.Citations) == 0 {
		t.Error("the answer cites nothing")
	}
	reqs := f.api.Messages()
	if len(reqs) == 0 || reqs[0].SessionID != res.SessionID {
		t.Fatalf("requests belong to sessions %v, want %s", sessionsOf(reqs), res.SessionID)
	}
	if diff := cmp.Diff([]string{prompt}, reqs[0].Prompts()); diff != "" {
		t.Errorf("a new session's first request carries history (-want +got):\n%s", diff)
	}
	if reqs[0].Model != req.Model || res.Model != req.Model {
		t.Errorf("the request asked for model %q and the result reports %q, want the request's %q", reqs[0].Model, res.Model, req.Model)
	}
	checkUsage(t, res, events)
	if err := f.b.HasSession(t.Context(), chat.SessionRef{ID: res.SessionID, Dir: dir}); err != nil {
		t.Errorf("HasSession(new session) = %v", err)
	}
}

func TestAPIErrorIsBackendError(t *testing.T) {
	t.Parallel()
	for _, status := range []int{500, 400} {
		t.Run(fmt.Sprint(status), func(t *testing.T) {
			t.Parallel()
			f := setup(t)
			f.api.Handle(func(anthropic.Request) anthropic.Reply {
				return anthropic.Error(status, "scripted failure 3f1")
			})
			res, err := f.b.Run(t.Context(), request(t.TempDir(), chat.SessionSeeded, chat.SessionRef{}, "hello"), func(chat.Event) {})
			if got := chat.FailureReason(err, ""); got != chat.ReasonBackendError {
				t.Fatalf("Run against an API answering %d = %v (reason %q), want reason backend_error", status, err, got)
			}
			if msg := err.Error(); !strings.Contains(msg, fmt.Sprint(status)) || !strings.Contains(msg, "scripted failure 3f1") {
				t.Errorf("error %q does not say what the API said", msg)
			}
			if len(f.api.Messages()) == 0 {
				t.Error("the CLI sent no request")
			}
			if res.SessionID == "" {
				t.Error("the failed call reports no session id")
			}
		})
	}
}

// TestAPIHangIsKilled checks that a call whose API request hangs returns
// soon after its deadline and leaves no CLI process behind.
func TestAPIHangIsKilled(t *testing.T) {
	t.Parallel()
	f := setup(t)
	marker := fmt.Sprintf("hang-marker-%d", time.Now().UnixNano())
	var mu sync.Mutex
	var during []int
	var hanging bool // the handler looked for the CLI and hangs
	f.api.Handle(func(anthropic.Request) anthropic.Reply {
		mu.Lock()
		during, hanging = processesWith(marker), true
		mu.Unlock()
		return anthropic.Hang()
	})
	// The deadline passes once the request hangs, however long the CLI
	// took to start.
	ctx, expire := chattest.Expiring(t)
	done := make(chan error, 1)
	go func() {
		_, err := f.b.Run(ctx, request(t.TempDir(), chat.SessionSeeded, chat.SessionRef{}, "question "+marker), func(chat.Event) {})
		done <- err
	}()
	chattest.EventuallyWithin(t, agentsessiontest.CLIStart, "the CLI's request to reach the API and hang", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return hanging || len(done) > 0
	})
	expire()
	err := chattest.Receive(t, "Run to return after its deadline", done)
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run with a hanging API = %v, want an error wrapping context.DeadlineExceeded", err)
	}
	if len(f.api.Messages()) == 0 {
		t.Fatal("the CLI never reached the API, so nothing hung")
	}
	mu.Lock()
	found := len(during)
	mu.Unlock()
	if found == 0 {
		t.Fatalf("no process with %q in its command line while the request hung: the check cannot see the CLI", marker)
	}
	chattest.Eventually(t, "the killed call's processes to end", func() bool { return len(processesWith(marker)) == 0 })
}

// TestWritesRefused has the model of a forked review session ask for a
// shell command and file writes: nothing is written. The review's session
// was made with the CLI's default tools, which a fork must not get back. The
// checkout's own settings (hooks, permissions) are not loaded either.
func TestWritesRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	hookMarker := filepath.Join(t.TempDir(), "hook-ran")
	settings := fmt.Sprintf(`{"permissions":{"allow":["Bash(*)","Write(*)","Edit(*)"]},"hooks":{"SessionStart":[{"hooks":[{"type":"command","command":"touch %[1]s"}]}],"UserPromptSubmit":[{"hooks":[{"type":"command","command":"touch %[1]s"}]}]}}`, hookMarker)
	w := newWorkspace(t, map[string]string{".claude/settings.json": settings})
	dir := w.prepare(t, "writes")
	f.api.Push(anthropic.Text("Looks fine."))
	reviewID := f.bare(t, dir, "--", "Review this pull request.")
	if err := os.Remove(hookMarker); err != nil {
		t.Fatalf("the hook did not run in the bare CLI, so the test cannot tell whether the backend runs it: %v", err)
	}

	f.api.Push(
		anthropic.ToolUse("Bash", map[string]any{"command": "echo x > " + filepath.Join(dir, "bash.txt")}),
		anthropic.ToolUse("Write", map[string]any{"file_path": filepath.Join(dir, "write.txt"), "content": "x"}),
		anthropic.ToolUse("Edit", map[string]any{"file_path": filepath.Join(dir, "config/config.go"), "old_string": "MaxRetries int", "new_string": "Retries int"}),
		anthropic.Structured(theAnswer()),
	)
	seen := len(f.api.Messages())
	res, events := run(t, f.b, request(dir, chat.SessionForked, chat.SessionRef{ID: reviewID, Dir: dir}, "Please fix the bug yourself."))
	parse(t, res)
	for _, name := range []string{"bash.txt", "write.txt"} {
		if _, err := os.Stat(filepath.Join(dir, name)); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s was written in the run directory (stat: %v)", name, err)
		}
	}
	if st := agentsessiontest.Git(t, dir, "status", "--porcelain"); st != "" {
		t.Errorf("the checkout changed:\n%s", st)
	}
	if _, err := os.Stat(hookMarker); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a hook from the checkout's .claude/settings.json ran (stat: %v)", err)
	}
	for _, tool := range []string{"Bash", "Write", "Edit"} {
		checkEvent(t, events, chat.EventToolResult, tool, "error:")
	}
	for _, r := range f.api.Messages()[seen:] {
		checkReadOnlyTools(t, r)
	}
	if n := f.api.Pending(); n != 0 {
		t.Errorf("%d scripted replies were not asked for", n)
	}
}

// TestRepairThroughResume: a model that answers in plain text instead of
// calling the structured output tool gives a result with no structured
// answer and its text; chat then resumes the session with a repair prompt,
// which gets a valid answer in the same session.
func TestRepairThroughResume(t *testing.T) {
	t.Parallel()
	f := setup(t)
	// A model from the configuration, for requests that name none.
	f.cfg.Model = "claude-settings-model-2"
	b, err := claude.New(f.cfg)
	if err != nil {
		t.Fatal(err)
	}
	f.b = b
	w := newWorkspace(t, nil)
	dir := w.prepare(t, "repair")
	const plain = "parseConfig is in config/config.go (plain text 8e2)"
	f.api.Handle(func(r anthropic.Request) anthropic.Reply {
		if strings.Contains(r.Last().Text(), "could not be used") {
			return anthropic.Structured(theAnswer())
		}
		return anthropic.Text(plain)
	})
	const q = "Q-5d1: where is parseConfig?"
	first, _ := run(t, f.b, request(dir, chat.SessionSeeded, chat.SessionRef{}, q))
	if len(first.Structured) != 0 {
		t.Fatalf("structured answer %s from a model that never called the tool", first.Structured)
	}
	if first.Text != plain {
		t.Errorf("Text = %q, want the model's text %q", first.Text, plain)
	}
	_, problem := chat.ParseAnswer(first.Structured, first.Text)
	if problem == nil {
		t.Fatal("chat accepts the plain text answer; the test cannot check a repair")
	}
	seen := len(f.api.Messages())
	repaired, _ := run(t, f.b, request(dir, chat.SessionResumed, chat.SessionRef{ID: first.SessionID, Dir: dir}, chat.RepairPrompt(problem)))
	if repaired.SessionID != first.SessionID {
		t.Errorf("the repair ran in session %q, want %s", repaired.SessionID, first.SessionID)
	}
	if diff := cmp.Diff(theAnswer(), parse(t, repaired)); diff != "" {
		t.Errorf("repaired answer (-want +got):\n%s", diff)
	}
	reqs := f.api.Messages()[seen:]
	if len(reqs) == 0 || !slices.Contains(reqs[0].Prompts(), q) || !reqs[0].Contains(plain) {
		t.Error("the repair's request does not carry the question and the first answer")
	}
	if reqs[0].Model != f.cfg.Model || repaired.Model != f.cfg.Model {
		t.Errorf("the repair ran with model %q (result %q), want Config.Model %q", reqs[0].Model, repaired.Model, f.cfg.Model)
	}
}

func TestMaxTurnsIsBudgetExceeded(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.api.Handle(func(anthropic.Request) anthropic.Reply {
		return anthropic.ToolUse("Glob", map[string]any{"pattern": "**/*.go"})
	})
	req := request(t.TempDir(), chat.SessionSeeded, chat.SessionRef{}, "look around")
	req.MaxCalls = 2
	res, err := f.b.Run(t.Context(), req, func(chat.Event) {})
	if got := chat.FailureReason(err, ""); got != chat.ReasonBudgetExceeded {
		t.Fatalf("Run of a model that never stops = %v (reason %q), want budget_exceeded", err, got)
	}
	if n := len(f.api.Messages()); n != 2 {
		t.Errorf("the CLI made %d model calls, want the 2 allowed", n)
	}
	if res.SessionID == "" || res.Usage.Calls == 0 {
		t.Errorf("result %+v lacks the session and usage of the calls made", res)
	}
}

func TestMissingBinary(t *testing.T) {
	t.Parallel()
	for _, bin := range []string{filepath.Join(t.TempDir(), "claude"), "claude-prchat-not-installed"} {
		b, err := claude.New(claude.Config{Bin: bin})
		if err != nil {
			t.Fatal(err)
		}
		if err := b.Available(t.Context()); err == nil {
			t.Errorf("Available() with Bin %q = nil, want an error", bin)
		}
		_, err = b.Run(t.Context(), request(t.TempDir(), chat.SessionSeeded, chat.SessionRef{}, "hello"), func(chat.Event) {})
		if got := chat.FailureReason(err, ""); got != chat.ReasonBackendUnavailable {
			t.Errorf("Run with Bin %q = %v (reason %q), want backend_unavailable", bin, err, got)
		}
	}
}

func TestHasSession(t *testing.T) {
	t.Parallel()
	home := t.TempDir()
	b, err := claude.New(claude.Config{Bin: "/bin/true", Env: []string{"HOME=" + home, "CLAUDE_CONFIG_DIR="}})
	if err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(home, ".claude")
	if b.ConfigDir() != config {
		t.Fatalf("ConfigDir() = %q, want $HOME/.claude = %q", b.ConfigDir(), config)
	}
	dir := filepath.Join(t.TempDir(), "runs", "conv_1")
	const id = "5b0c6f0e-8a47-4c38-9a53-0e1c2b7d9f11"
	file := filepath.Join(config, "projects", strings.NewReplacer("/", "-", "_", "-").Replace(dir), id+".jsonl")
	link := filepath.Join(t.TempDir(), "link")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Symlink(dir, link); err != nil {
		t.Fatal(err)
	}

	gone := []struct {
		name string
		ref  chat.SessionRef
		want string
	}{
		{"no run directory", chat.SessionRef{ID: id}, "no run directory recorded"},
		{"not a uuid", chat.SessionRef{ID: "scripted-1", Dir: dir}, "not a session id"},
		{"no file", chat.SessionRef{ID: id, Dir: dir}, file},
	}
	for _, tt := range gone {
		err := b.HasSession(t.Context(), tt.ref)
		if !errors.Is(err, chat.ErrSessionGone) || !strings.Contains(fmt.Sprint(err), tt.want) {
			t.Errorf("HasSession(%s) = %v, want an error wrapping chat.ErrSessionGone that says %q", tt.name, err, tt.want)
		}
	}
	// Resuming or forking a missing session fails without starting the CLI
	// (Bin is /bin/true, which would "succeed" with no result).
	for _, mode := range []chat.SessionMode{chat.SessionResumed, chat.SessionForked} {
		_, err := b.Run(t.Context(), request(dir, mode, chat.SessionRef{ID: id, Dir: dir}, "hello"), func(chat.Event) {})
		if !errors.Is(err, chat.ErrSessionGone) {
			t.Errorf("Run(%s a missing session) = %v, want an error wrapping chat.ErrSessionGone", mode, err)
		}
	}

	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(file, []byte("{}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dir, link} {
		if err := b.HasSession(t.Context(), chat.SessionRef{ID: id, Dir: d}); err != nil {
			t.Errorf("HasSession(session file present, dir %s) = %v, want nil", d, err)
		}
	}

	// Config.ConfigDir wins over CLAUDE_CONFIG_DIR, which wins over HOME.
	b2, _ := claude.New(claude.Config{Env: []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=/etc/claude-a"}})
	b3, _ := claude.New(claude.Config{Env: []string{"HOME=" + home, "CLAUDE_CONFIG_DIR=/etc/claude-a"}, ConfigDir: "/etc/claude-b"})
	if b2.ConfigDir() != "/etc/claude-a" || b3.ConfigDir() != "/etc/claude-b" {
		t.Errorf("ConfigDir() = %q and %q, want /etc/claude-a and /etc/claude-b", b2.ConfigDir(), b3.ConfigDir())
	}
}

func checkUnchanged(t *testing.T, file string, before []byte) {
	t.Helper()
	after, err := os.ReadFile(file)
	if err != nil {
		t.Fatalf("the review's session file: %v", err)
	}
	if !bytes.Equal(before, after) {
		t.Errorf("the review's session file changed: %d bytes before, %d after", len(before), len(after))
	}
}

// checkReadOnlyTools checks that a request offered the model no tool that
// writes or runs commands.
func checkReadOnlyTools(t *testing.T, r anthropic.Request) {
	t.Helper()
	names := r.ToolNames()
	for _, bad := range []string{"Bash", "Write", "Edit", "NotebookEdit", "Agent", "Task"} {
		if slices.Contains(names, bad) {
			t.Errorf("request %d offered the model %s (tools %v)", r.N, bad, names)
		}
	}
	for _, want := range []string{"Read", "Grep", "Glob", anthropic.StructuredOutputTool} {
		if !slices.Contains(names, want) {
			t.Errorf("request %d did not offer %s (tools %v)", r.N, want, names)
		}
	}
}

// checkEvent checks that events hold an event of type typ for tool whose
// summary starts with summary.
func checkEvent(t *testing.T, events []chat.Event, typ, tool, summary string) {
	t.Helper()
	for _, e := range events {
		if e.Type == typ && e.ToolName == tool && strings.HasPrefix(e.Summary, summary) && e.ToolID != "" {
			return
		}
	}
	t.Errorf("no %s event for %s with summary %q in %s", typ, tool, summary, describe(events))
}

// checkUsage checks the usage of a successful call and its usage event.
func checkUsage(t *testing.T, res chat.RunResult, events []chat.Event) {
	t.Helper()
	u := res.Usage
	if u.InputTokens == 0 || u.OutputTokens == 0 || u.Calls == 0 || u.CostUSD == nil || res.Model == "" {
		t.Errorf("result %+v lacks tokens, calls, cost or model", res)
	}
	last := events[len(events)-1]
	if last.Type != chat.EventUsage || last.InputTokens == nil || *last.InputTokens != u.InputTokens {
		t.Errorf("the last event is %+v, want the usage", last)
	}
}

func describe(events []chat.Event) string {
	var b strings.Builder
	for _, e := range events {
		fmt.Fprintf(&b, "\n  %s %s %s %q", e.Type, e.ToolName, e.ToolID, e.Summary+e.Text)
	}
	return b.String()
}

func sessionsOf(reqs []anthropic.Request) []string {
	var ids []string
	for _, r := range reqs {
		ids = append(ids, r.SessionID)
	}
	return ids
}

// processesWith returns the ids of the processes whose command line
// contains s (read from /proc).
func processesWith(s string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		var pid int
		if _, err := fmt.Sscan(e.Name(), &pid); err != nil {
			continue
		}
		cmdline, err := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if err == nil && bytes.Contains(cmdline, []byte(s)) {
			pids = append(pids, pid)
		}
	}
	return pids
}
