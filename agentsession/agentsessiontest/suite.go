// Package agentsessiontest is the conformance suite that every prchat agent
// backend (chat.Backend) passes, and helpers to make git repositories for
// tests.
//
// A backend's package runs the suite from its tests:
//
//	func TestConformance(t *testing.T) {
//		agentsessiontest.Run(t, agentsessiontest.Harness{
//			New:      func(t *testing.T) chat.Backend { return mybackend.New(...) },
//			Sessions: true,
//			Program:  func(t *testing.T, b chat.Backend, a chat.Answer) { ... },
//			Hang:     func(t *testing.T, b chat.Backend) { ... },
//		})
//	}
//
// The suite makes its own git repository with a few source files, prepares
// run directories with agentsession.Workspaces (so seeding is exercised
// too), and checks starting, resuming and forking sessions, the answer and
// its citations, the events, a missing session, a timeout and cancellation.
package agentsessiontest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// Harness describes the backend under test.
type Harness struct {
	// New returns a fresh backend for one subtest (required). The backend
	// must be available (Available returns nil).
	New func(t *testing.T) chat.Backend
	// Sessions says the backend keeps sessions: a call returns a session id,
	// and fork and resume work. A backend without sessions returns an empty
	// session id, and HasSession always reports chat.ErrSessionGone.
	Sessions bool
	// Program, if set, makes the backend's next call answer with a (through
	// a scripted or fake model); the suite then checks that the call returns
	// exactly that answer. Nil for backends that answer on their own (local),
	// which must then answer the suite's questions about its repository with
	// citations.
	Program func(t *testing.T, b chat.Backend, a chat.Answer)
	// Hang, if set, makes the backend's next call hang until its context
	// ends. Nil skips the timeout and cancellation checks that need a call
	// in progress.
	Hang func(t *testing.T, b chat.Backend)
}

// hangDeadline is the deadline of a call that hangs: the deadline under
// test, not scaled (a loaded machine may reach it before the call gets
// under way, which the call must survive as well).
const hangDeadline = 200 * time.Millisecond

// CLIStart is how long a test gives an agent CLI to start and reach its
// model API before it fails: on a machine whose cores are busy with other
// work, a Node CLI's start alone takes tens of seconds (pass it to
// chattest.EventuallyWithin, which scales it).
const CLIStart = 3 * time.Minute

// RunTimeout is the deadline a test gives a call that should answer: a
// CLI's start and a few model calls on a loaded machine, scaled by
// PRCHAT_TEST_TIMEOUT_SCALE.
func RunTimeout() time.Duration { return chattest.Within(CLIStart + time.Minute) }

// repoName is the name the suite registers its repository under.
const repoName = "acme/widgets"

// Question is the question the suite asks; the suite's repository answers it
// in config/config.go.
const Question = "Where is parseConfig defined, and how does it read max_retries?"

// baseFiles are the files of the suite repository's first commit, the PR's
// base; headFiles change and add to them at the head.
var baseFiles = map[string]string{
	"go.mod": "module example.com/widgets\n\ngo 1.22\n",
	"config/config.go": `package config

// Config holds the service settings.
type Config struct {
	Retries int
}
`,
	"main.go": `package main

import "fmt"

func main() {
	fmt.Println("widgets")
}
`,
}

// headFiles are the suite repository's second commit, the PR's head.
var headFiles = map[string]string{
	"config/config.go": `package config

import (
	"fmt"
	"strconv"
	"strings"
)

// Config holds the service settings.
type Config struct {
	// MaxRetries is how often a request is retried.
	MaxRetries int
}

// parseConfig reads settings from key=value lines.
func parseConfig(lines []string) (*Config, error) {
	c := &Config{MaxRetries: 3}
	for _, l := range lines {
		key, value, ok := strings.Cut(l, "=")
		if !ok {
			return nil, fmt.Errorf("line %q has no =", l)
		}
		if key == "max_retries" {
			n, err := strconv.Atoi(value)
			if err != nil {
				return nil, fmt.Errorf("max_retries: %w", err)
			}
			c.MaxRetries = n
		}
	}
	return c, nil
}
`,
	"main.go": `package main

import (
	"fmt"
	"os"
	"strings"

	"example.com/widgets/config"
)

func main() {
	c, err := config.FromEnv(strings.Split(os.Getenv("WIDGETS"), ";"))
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	fmt.Println("widgets with", c.MaxRetries, "retries")
}
`,
	"README.md": "# widgets\n\nA tiny service used by prchat's backend conformance suite.\n",
}

// answer is what the suite programs backends to answer.
func answer() chat.Answer {
	start := lineOf(headFiles["config/config.go"], "func parseConfig")
	end := lineOf(headFiles["config/config.go"], "c.MaxRetries = n")
	return chat.Answer{
		AnswerMarkdown: "`parseConfig` in `config/config.go` reads `max_retries` with `strconv.Atoi`.",
		Citations:      []chat.Citation{{Path: "config/config.go", StartLine: start, EndLine: end}},
	}
}

// focus is the part of the review the suite's question is about: the
// whole of parseConfig.
func focus() []chat.Anchor {
	return []chat.Anchor{{
		Path:      "config/config.go",
		StartLine: lineOf(headFiles["config/config.go"], "func parseConfig"),
		EndLine:   lineOf(headFiles["config/config.go"], "return c, nil") + 1,
	}}
}

// lineOf returns the number of the first line of text that contains s.
func lineOf(text, s string) int {
	for i, l := range strings.Split(text, "\n") {
		if strings.Contains(l, s) {
			return i + 1
		}
	}
	panic(fmt.Sprintf("agentsessiontest: %q not in the suite's files", s))
}

// suite is what the subtests share: one repository, one Workspaces.
type suite struct {
	h     Harness
	repo  Repo
	ws    *agentsession.Workspaces
	n     atomic.Int64 // run directories made
	chatR chat.Repository
}

// Run runs the conformance suite against the backend h describes.
func Run(t *testing.T, h Harness) {
	t.Helper()
	if h.New == nil {
		t.Fatal("agentsessiontest: Harness.New is nil")
	}
	repo := NewRepo(t, baseFiles, headFiles)
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	s := &suite{h: h, repo: repo, ws: ws, chatR: repo.Repository(repoName)}

	t.Run("Identity", s.testIdentity)
	t.Run("Start", s.testStart)
	t.Run("Sessions", s.testSessions)
	t.Run("MissingSession", s.testMissingSession)
	t.Run("ContextAlreadyDone", s.testContextAlreadyDone)
	t.Run("Timeout", s.testTimeout)
	t.Run("Cancel", s.testCancel)
	t.Run("Concurrent", s.testConcurrent)
}

func (s *suite) testIdentity(t *testing.T) {
	t.Parallel()
	b := s.h.New(t)
	if b.Name() == "" {
		t.Error("Name() is empty")
	}
	if err := b.Available(t.Context()); err != nil {
		t.Errorf("Available() = %v, want nil", err)
	}
}

// testStart checks a first call: the answer, its citations, the events and
// the session id.
func (s *suite) testStart(t *testing.T) {
	t.Parallel()
	b := s.h.New(t)
	dir := s.prepare(t)
	s.program(t, b)
	res, events := s.run(t, b, s.request(dir, chat.SessionSeeded, chat.SessionRef{}))
	s.checkAnswer(t, res)
	checkEvents(t, events)
	s.checkShown(t, res, events)
	if s.h.Sessions {
		if res.SessionID == "" {
			t.Fatal("a backend with sessions returned no session id")
		}
		if err := b.HasSession(t.Context(), chat.SessionRef{ID: res.SessionID, Dir: dir}); err != nil {
			t.Errorf("HasSession(new session %s) = %v, want nil", res.SessionID, err)
		}
	} else if res.SessionID != "" {
		t.Errorf("a backend without sessions returned session id %q, want none", res.SessionID)
	}
}

// testSessions checks resume and fork, or that a backend without sessions
// reports none.
func (s *suite) testSessions(t *testing.T) {
	t.Parallel()
	b := s.h.New(t)
	dir := s.prepare(t)
	if !s.h.Sessions {
		err := b.HasSession(t.Context(), chat.SessionRef{ID: "any", Dir: dir})
		if !errors.Is(err, chat.ErrSessionGone) {
			t.Errorf("HasSession on a backend without sessions = %v, want an error wrapping chat.ErrSessionGone", err)
		}
		return
	}

	s.program(t, b)
	start, _ := s.run(t, b, s.request(dir, chat.SessionSeeded, chat.SessionRef{}))
	if start.SessionID == "" {
		t.Fatal("start returned no session id")
	}
	parent := chat.SessionRef{ID: start.SessionID, Dir: dir}

	s.program(t, b)
	resumed, _ := s.run(t, b, s.request(dir, chat.SessionResumed, parent))
	s.checkAnswer(t, resumed)
	if resumed.SessionID != parent.ID {
		t.Errorf("resume of %s returned session %q, want the same id", parent.ID, resumed.SessionID)
	}

	s.program(t, b)
	forked, _ := s.run(t, b, s.request(dir, chat.SessionForked, parent))
	s.checkAnswer(t, forked)
	if forked.SessionID == "" || forked.SessionID == parent.ID {
		t.Errorf("fork of %s returned session %q, want a new id", parent.ID, forked.SessionID)
	}
	if err := b.HasSession(t.Context(), parent); err != nil {
		t.Errorf("HasSession(parent %s) after fork = %v, want nil", parent.ID, err)
	}
	if err := b.HasSession(t.Context(), chat.SessionRef{ID: forked.SessionID, Dir: dir}); err != nil {
		t.Errorf("HasSession(fork %s) = %v, want nil", forked.SessionID, err)
	}
}

// testMissingSession checks that a session that is not there is reported
// gone, and that resuming or forking it fails instead of starting afresh.
func (s *suite) testMissingSession(t *testing.T) {
	t.Parallel()
	b := s.h.New(t)
	dir := s.prepare(t)
	missing := chat.SessionRef{ID: "00000000-prchat-no-such-session", Dir: dir}
	if err := b.HasSession(t.Context(), missing); !errors.Is(err, chat.ErrSessionGone) {
		t.Errorf("HasSession(missing session) = %v, want an error wrapping chat.ErrSessionGone", err)
	}
	for _, mode := range []chat.SessionMode{chat.SessionResumed, chat.SessionForked} {
		// An answer is ready, so a backend that wrongly starts a new session
		// would succeed.
		s.program(t, b)
		res, err := s.call(t, t.Context(), b, s.request(dir, mode, missing))
		if err == nil {
			t.Errorf("Run(%s a missing session) = session %q, no error; want an error wrapping chat.ErrSessionGone", mode, res.SessionID)
		} else if !errors.Is(err, chat.ErrSessionGone) {
			t.Errorf("Run(%s a missing session) = %v, want an error wrapping chat.ErrSessionGone", mode, err)
		}
		if s.h.Program != nil {
			// Drop the unused answer so it cannot leak into the next call.
			b = s.h.New(t)
		}
	}
}

// testContextAlreadyDone checks that a call under a context that already
// ended returns its error and starts nothing (emits no event).
func (s *suite) testContextAlreadyDone(t *testing.T) {
	t.Parallel()
	b := s.h.New(t)
	dir := s.prepare(t)
	s.program(t, b)
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	var events atomic.Int32
	done := make(chan error, 1)
	go func() {
		_, err := b.Run(ctx, s.request(dir, chat.SessionSeeded, chat.SessionRef{}), func(chat.Event) { events.Add(1) })
		done <- err
	}()
	if err := chattest.Receive(t, "Run under a cancelled context to return", done); !errors.Is(err, context.Canceled) {
		t.Errorf("Run under a cancelled context = %v, want an error wrapping context.Canceled", err)
	}
	if n := events.Load(); n > 0 {
		t.Errorf("Run under a cancelled context emitted %d events, want none: it starts nothing", n)
	}
}

// testTimeout checks that a hanging call returns after its deadline with
// an error wrapping context.DeadlineExceeded.
func (s *suite) testTimeout(t *testing.T) {
	if s.h.Hang == nil {
		t.Skip("Harness.Hang is nil")
	}
	t.Parallel()
	b := s.h.New(t)
	dir := s.prepare(t)
	s.h.Hang(t, b)
	ctx, cancel := context.WithTimeout(t.Context(), hangDeadline)
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := s.call(t, ctx, b, s.request(dir, chat.SessionSeeded, chat.SessionRef{}))
		done <- err
	}()
	if err := chattest.Receive(t, "Run to return after its deadline", done); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run past its deadline = %v, want an error wrapping context.DeadlineExceeded", err)
	}
}

// testCancel checks that cancelling a call in progress makes it return
// with an error wrapping context.Canceled.
func (s *suite) testCancel(t *testing.T) {
	if s.h.Hang == nil {
		t.Skip("Harness.Hang is nil")
	}
	t.Parallel()
	b := s.h.New(t)
	dir := s.prepare(t)
	s.h.Hang(t, b)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	done := make(chan error, 1)
	go func() {
		_, err := b.Run(ctx, s.request(dir, chat.SessionSeeded, chat.SessionRef{}), func(chat.Event) {})
		done <- err
	}()
	// A while for the call to get under way (and for a call that ignores
	// the hang to show), not a wait for a condition.
	select {
	case err := <-done:
		t.Fatalf("Run returned before it was cancelled: %v", err)
	case <-time.After(300 * time.Millisecond):
	}
	cancel()
	if err := chattest.Receive(t, "the cancelled Run to return", done); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled Run = %v, want an error wrapping context.Canceled", err)
	}
}

// testConcurrent checks that one backend runs two calls at once, each in
// its own run directory.
func (s *suite) testConcurrent(t *testing.T) {
	t.Parallel()
	b := s.h.New(t)
	dirs := []string{s.prepare(t), s.prepare(t)}
	s.program(t, b)
	s.program(t, b)
	results := make([]chat.RunResult, len(dirs))
	errs := make([]error, len(dirs))
	var wg sync.WaitGroup
	for i, dir := range dirs {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(t.Context(), RunTimeout())
			defer cancel()
			results[i], errs[i] = b.Run(ctx, s.request(dir, chat.SessionSeeded, chat.SessionRef{}), func(chat.Event) {})
		})
	}
	wg.Wait()
	for i, err := range errs {
		if err != nil {
			t.Fatalf("concurrent Run %d: %v", i, err)
		}
		s.checkAnswer(t, results[i])
	}
	if s.h.Sessions && results[0].SessionID == results[1].SessionID {
		t.Errorf("concurrent starts share session id %q, want two sessions", results[0].SessionID)
	}
}

// prepare makes a new run directory of the suite's repository at its head.
func (s *suite) prepare(t *testing.T) string {
	t.Helper()
	n := s.n.Add(1)
	review := chat.Review{
		Repository: repoName, PR: 7, Version: 1,
		HeadSHA: s.repo.Head(), BaseSHA: s.repo.Commits[0],
		Markdown: "The new `parseConfig` does not bound `max_retries`.",
		Sections: []chat.Section{{ID: "f1", Title: "Unbounded retries",
			Anchors: focus()}},
	}
	seed := chat.Seed{
		Repository:   s.chatR,
		Review:       review,
		Conversation: chat.Conversation{ID: fmt.Sprintf("conformance-%d", n), Repository: repoName, PR: 7, ReviewVersion: 1},
		Turns: []chat.Turn{{Number: 1, State: chat.StateSucceeded, Question: "What does main do?",
			Answer: &chat.Answer{AnswerMarkdown: "It prints the settings.", Citations: []chat.Citation{{Path: "main.go", StartLine: 11, EndLine: 17}}}}},
	}
	dir, err := s.ws.Prepare(t.Context(), seed)
	if err != nil {
		t.Fatalf("prepare a run directory: %v", err)
	}
	return dir
}

// request returns a call asking the suite's question in dir.
func (s *suite) request(dir string, mode chat.SessionMode, session chat.SessionRef) chat.RunRequest {
	review := chat.Review{Repository: repoName, PR: 7, Version: 1, HeadSHA: s.repo.Head(), BaseSHA: s.repo.Commits[0]}
	return chat.RunRequest{
		Mode:    mode,
		Session: session,
		Dir:     dir,
		Prompt:  "Question: " + Question + "\n\nAnswer with JSON that matches the schema.",
		System:  "You answer a reviewer's follow-up questions about a pull request. Read only; cite file lines.",
		Schema:  json.RawMessage(chat.AnswerSchema),
		// MaxCalls and MaxTokens leave room for a real agent.
		MaxCalls:   10,
		MaxTokens:  200_000,
		Question:   Question,
		Focus:      &chat.Focus{Kind: chat.FocusSection, ID: "f1", Anchors: focus()},
		Repository: s.chatR,
		Review:     review,
	}
}

// program makes b's next call answer the suite's answer, if the harness
// programs answers.
func (s *suite) program(t *testing.T, b chat.Backend) {
	t.Helper()
	if s.h.Program != nil {
		s.h.Program(t, b, answer())
	}
}

// run makes a call that must succeed and returns its result and events.
func (s *suite) run(t *testing.T, b chat.Backend, req chat.RunRequest) (chat.RunResult, []chat.Event) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), RunTimeout())
	defer cancel()
	var (
		mu       sync.Mutex
		events   []chat.Event
		returned bool
	)
	res, err := b.Run(ctx, req, func(e chat.Event) {
		mu.Lock()
		defer mu.Unlock()
		if returned {
			t.Errorf("event %s emitted after Run returned", e.Type)
		}
		events = append(events, e)
	})
	mu.Lock()
	returned = true
	mu.Unlock()
	if err != nil {
		t.Fatalf("Run(%s) = %v", req.Mode, err)
	}
	return res, events
}

// call makes a call that may fail, under ctx.
func (s *suite) call(t *testing.T, ctx context.Context, b chat.Backend, req chat.RunRequest) (chat.RunResult, error) {
	t.Helper()
	return b.Run(ctx, req, func(chat.Event) {})
}

// checkAnswer checks that res holds an answer of the contract's shape whose
// citations point at lines of files at the head, and, for a programmed
// backend, that it is the programmed answer.
func (s *suite) checkAnswer(t *testing.T, res chat.RunResult) {
	t.Helper()
	raw := []byte(res.Text)
	if len(res.Structured) > 0 {
		raw = res.Structured
	}
	got, err := ParseAnswer(raw)
	if err != nil {
		t.Fatalf("the answer does not parse: %v\n%s", err, raw)
	}
	if s.h.Program != nil {
		if diff := cmp.Diff(answer(), got); diff != "" {
			t.Errorf("answer differs from the programmed one (-want +got):\n%s", diff)
		}
	}
	if len(got.Citations) == 0 {
		t.Errorf("the answer cites nothing; the suite's question is answered in config/config.go\n%s", got.AnswerMarkdown)
	}
	for _, c := range got.Citations {
		n, err := s.ws.LineCount(t.Context(), s.chatR, s.repo.Head(), c.Path)
		if err != nil {
			t.Errorf("citation %+v: %v", c, err)
			continue
		}
		if c.StartLine < 1 || c.StartLine > c.EndLine || c.EndLine > n {
			t.Errorf("citation %+v is not within the file's %d lines", c, n)
		}
	}
}

// ParseAnswer parses an agent's final text as chat does: the JSON object
// in it, validated against chat.AnswerSchema. It checks the shape only, not
// the citations' lines.
func ParseAnswer(raw []byte) (chat.Answer, error) {
	return chat.ParseAnswer(nil, string(raw))
}

// backendEvents are the event types a backend may emit; state, done and
// error belong to the turn and are emitted by chat.
var backendEvents = map[string]bool{
	chat.EventTextDelta: true, chat.EventToolStart: true, chat.EventToolResult: true,
	chat.EventUsage: true, chat.EventNote: true,
}

// checkShown checks that the text deltas of a call that streamed text
// show its answer's markdown.
func (s *suite) checkShown(t *testing.T, res chat.RunResult, events []chat.Event) {
	t.Helper()
	var text strings.Builder
	for _, e := range events {
		if e.Type == chat.EventTextDelta {
			text.WriteString(e.Text)
		}
	}
	if text.Len() == 0 {
		return
	}
	a, err := chat.ParseAnswer(res.Structured, res.Text)
	if err == nil && !strings.Contains(text.String(), a.AnswerMarkdown) {
		t.Errorf("the text deltas %.300q do not show the answer's markdown %.100q", text.String(), a.AnswerMarkdown)
	}
}

// checkEvents checks that a call reported events of the contract's types,
// with their fields set, and tool results after their tools' starts; that
// its text deltas show text (the answer's markdown), never the JSON
// envelope of the structured answer; and that it reported its usage at
// most once and no note twice.
func checkEvents(t *testing.T, events []chat.Event) {
	t.Helper()
	if len(events) == 0 {
		t.Error("Run reported no events")
	}
	var text strings.Builder
	usages := 0
	notes := map[string]bool{}
	for _, e := range events {
		switch e.Type {
		case chat.EventTextDelta:
			text.WriteString(e.Text)
		case chat.EventUsage:
			usages++
		case chat.EventNote:
			if notes[e.Text] {
				t.Errorf("note %q reported twice", e.Text)
			}
			notes[e.Text] = true
		}
	}
	if strings.Contains(text.String(), `"answer_markdown"`) {
		t.Errorf("the text deltas show the answer's JSON, not its markdown: %.300q", text.String())
	}
	if usages > 1 {
		t.Errorf("%d usage events, want at most one per call", usages)
	}
	started := map[string]bool{}
	for i, e := range events {
		switch {
		case !backendEvents[e.Type]:
			t.Errorf("event %d has type %q, want one of text_delta, tool_start, tool_result, usage, note", i, e.Type)
		case e.Type == chat.EventTextDelta && e.Text == "":
			t.Errorf("event %d: text_delta with no text", i)
		case e.Type == chat.EventNote && e.Text == "":
			t.Errorf("event %d: note with no text", i)
		case e.Type == chat.EventToolStart && (e.ToolID == "" || e.ToolName == ""):
			t.Errorf("event %d: tool_start without tool_id or tool_name: %+v", i, e)
		case e.Type == chat.EventToolStart && len(e.Input) > 0 && !json.Valid(e.Input):
			t.Errorf("event %d: tool_start input is not JSON: %s", i, e.Input)
		case e.Type == chat.EventToolResult && !started[e.ToolID]:
			t.Errorf("event %d: tool_result for tool %q that did not start", i, e.ToolID)
		}
		if e.Type == chat.EventToolStart {
			started[e.ToolID] = true
		}
	}
}
