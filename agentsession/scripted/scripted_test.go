package scripted_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

func TestConformance(t *testing.T) {
	t.Parallel()
	agentsessiontest.Run(t, agentsessiontest.Harness{
		New:      func(*testing.T) chat.Backend { return scripted.New("") },
		Sessions: true,
		Program: func(_ *testing.T, b chat.Backend, a chat.Answer) {
			b.(*scripted.Backend).Push(scripted.Step{
				Answer: &a,
				Events: []chat.Event{
					{Type: chat.EventToolStart, ToolID: "t1", ToolName: "read_file", Input: []byte(`{"path":"config/config.go"}`)},
					{Type: chat.EventToolResult, ToolID: "t1", ToolName: "read_file", Summary: "31 lines"},
					{Type: chat.EventTextDelta, Text: a.AnswerMarkdown},
				},
			})
		},
		Hang: func(_ *testing.T, b chat.Backend) { b.(*scripted.Backend).Push(scripted.Step{Hang: true}) },
	})
}

// run makes a call that must succeed.
func run(t *testing.T, b *scripted.Backend, req chat.RunRequest) chat.RunResult {
	t.Helper()
	res, err := b.Run(t.Context(), req, func(chat.Event) {})
	if err != nil {
		t.Fatalf("Run(%s %q) = %v", req.Mode, req.Prompt, err)
	}
	return res
}

func TestStepsInOrder(t *testing.T) {
	t.Parallel()
	b := scripted.New("claude-code")
	if b.Name() != "claude-code" {
		t.Errorf("Name() = %q, want claude-code", b.Name())
	}
	cost := 0.01
	b.Push(
		scripted.Step{Text: "not json", Usage: chat.Usage{InputTokens: 10, Calls: 1}},
		scripted.Step{Answer: &chat.Answer{AnswerMarkdown: "ok", Citations: []chat.Citation{}}, Usage: chat.Usage{CostUSD: &cost}},
	)
	if got := b.Pending(); got != 2 {
		t.Errorf("Pending() = %d, want 2", got)
	}
	first := run(t, b, chat.RunRequest{Mode: chat.SessionSeeded, Prompt: "one", Model: "m1"})
	if first.Text != "not json" || first.Usage.InputTokens != 10 || first.Model != "m1" {
		t.Errorf("first call = %+v, want the first step", first)
	}
	second := run(t, b, chat.RunRequest{Mode: chat.SessionResumed, Session: chat.SessionRef{ID: first.SessionID}, Prompt: "two"})
	if want := `{"answer_markdown":"ok","citations":[],"suggests_fix":null}`; second.Text != want {
		t.Errorf("second call text = %s, want %s", second.Text, want)
	}
	if second.Usage.CostUSD == nil || *second.Usage.CostUSD != cost {
		t.Errorf("second call usage = %+v, want the step's", second.Usage)
	}
	_, err := b.Run(t.Context(), chat.RunRequest{Prompt: "three"}, func(chat.Event) {})
	if !errors.Is(err, scripted.ErrScriptExhausted) {
		t.Errorf("third call = %v, want ErrScriptExhausted", err)
	}
	var prompts []string
	for _, r := range b.Requests() {
		prompts = append(prompts, r.Prompt)
	}
	if diff := cmp.Diff([]string{"one", "two", "three"}, prompts); diff != "" {
		t.Errorf("Requests() prompts (-want +got):\n%s", diff)
	}
}

func TestFallback(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	b.Fallback = func(req chat.RunRequest) scripted.Step { return scripted.Step{Text: "echo: " + req.Question} }
	b.Push(scripted.Step{Text: "scripted"})
	if got := run(t, b, chat.RunRequest{Question: "q1"}).Text; got != "scripted" {
		t.Errorf("first call = %q, want the pushed step", got)
	}
	if got := run(t, b, chat.RunRequest{Question: "q2"}).Text; got != "echo: q2" {
		t.Errorf("second call = %q, want the fallback's", got)
	}
}

func TestSessions(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	b.Fallback = func(chat.RunRequest) scripted.Step { return scripted.Step{Text: "{}"} }

	start := run(t, b, chat.RunRequest{Mode: chat.SessionSeeded, Prompt: "seed"})
	if start.SessionID != "scripted-1" {
		t.Errorf("first session id = %q, want scripted-1", start.SessionID)
	}
	ref := chat.SessionRef{ID: start.SessionID}
	run(t, b, chat.RunRequest{Mode: chat.SessionResumed, Session: ref, Prompt: "resume"})
	fork := run(t, b, chat.RunRequest{Mode: chat.SessionForked, Session: ref, Prompt: "fork"})
	if fork.SessionID == ref.ID {
		t.Fatalf("fork kept the parent's id %s", ref.ID)
	}
	run(t, b, chat.RunRequest{Mode: chat.SessionResumed, Session: ref, Prompt: "resume again"})

	if diff := cmp.Diff([]string{"seed", "resume", "resume again"}, b.History(ref.ID)); diff != "" {
		t.Errorf("parent history (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"seed", "resume", "fork"}, b.History(fork.SessionID)); diff != "" {
		t.Errorf("fork history (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"scripted-1", "scripted-2"}, b.Sessions()); diff != "" {
		t.Errorf("Sessions() (-want +got):\n%s", diff)
	}

	b.Forget(ref.ID)
	if err := b.HasSession(t.Context(), ref); !errors.Is(err, chat.ErrSessionGone) {
		t.Errorf("HasSession(forgotten) = %v, want ErrSessionGone", err)
	}
	b.Push(scripted.Step{Text: "must not be used"})
	if _, err := b.Run(t.Context(), chat.RunRequest{Mode: chat.SessionResumed, Session: ref}, func(chat.Event) {}); !errors.Is(err, chat.ErrSessionGone) {
		t.Errorf("resume of a forgotten session = %v, want ErrSessionGone", err)
	}
	if b.Pending() != 1 {
		t.Errorf("a failed resume consumed a step")
	}
	if err := b.HasSession(t.Context(), chat.SessionRef{ID: fork.SessionID}); err != nil {
		t.Errorf("HasSession(fork) = %v, want nil", err)
	}
}

func TestSessionIDOverride(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	b.Push(scripted.Step{Text: "{}", SessionID: "abc"})
	if got := run(t, b, chat.RunRequest{Mode: chat.SessionSeeded, Prompt: "p"}).SessionID; got != "abc" {
		t.Errorf("session id = %q, want the step's abc", got)
	}
	if err := b.HasSession(t.Context(), chat.SessionRef{ID: "abc"}); err != nil {
		t.Errorf("HasSession(abc) = %v", err)
	}
}

func TestErrorLeavesNoSession(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	boom := chat.Fail(chat.ReasonBackendError, errors.New("boom"))
	b.Push(scripted.Step{Err: boom, Events: []chat.Event{{Type: chat.EventTextDelta, Text: "partial"}}})
	var got []chat.Event
	res, err := b.Run(t.Context(), chat.RunRequest{Mode: chat.SessionSeeded}, func(e chat.Event) { got = append(got, e) })
	if !errors.Is(err, boom) {
		t.Errorf("Run = %v, want the step's error", err)
	}
	if res.SessionID != "" || len(b.Sessions()) != 0 {
		t.Errorf("a failed call made session %q (sessions %v)", res.SessionID, b.Sessions())
	}
	if len(got) != 1 || got[0].Text != "partial" || got[0].At.IsZero() {
		t.Errorf("events = %+v, want the step's event with a time", got)
	}
}

func TestWait(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	release := make(chan struct{})
	b.Push(scripted.Step{Text: "{}", Wait: release, Events: []chat.Event{{Type: chat.EventTextDelta, Text: "working"}}})
	emitted := make(chan struct{})
	done := make(chan error, 1)
	go func() {
		_, err := b.Run(t.Context(), chat.RunRequest{}, func(chat.Event) { close(emitted) })
		done <- err
	}()
	chattest.Receive(t, "the step's event", emitted)
	// A while for a Run that ignores Wait to show, not a wait for a condition.
	select {
	case err := <-done:
		t.Fatalf("Run returned before Wait was closed: %v", err)
	case <-time.After(50 * time.Millisecond):
	}
	close(release)
	if err := chattest.Receive(t, "Run to return once Wait closed", done); err != nil {
		t.Errorf("Run after Wait closed = %v", err)
	}
}

func TestWaitCancelled(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	b.Push(scripted.Step{Text: "{}", Wait: make(chan struct{})})
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := b.Run(ctx, chat.RunRequest{}, func(chat.Event) {}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Run = %v, want DeadlineExceeded", err)
	}
}

func TestAvailable(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	if err := b.Available(t.Context()); err != nil {
		t.Errorf("Available() = %v, want nil", err)
	}
	missing := errors.New("claude not installed")
	b.SetAvailable(missing)
	if err := b.Available(t.Context()); !errors.Is(err, missing) {
		t.Errorf("Available() = %v, want %v", err, missing)
	}
}

func TestConcurrentUse(t *testing.T) {
	t.Parallel()
	b := scripted.New("")
	b.Fallback = func(chat.RunRequest) scripted.Step { return scripted.Step{Text: "{}"} }
	start := run(t, b, chat.RunRequest{Mode: chat.SessionSeeded, Prompt: "seed"})
	var wg sync.WaitGroup
	for range 20 {
		wg.Go(func() {
			if _, err := b.Run(t.Context(), chat.RunRequest{Mode: chat.SessionResumed, Session: chat.SessionRef{ID: start.SessionID}, Prompt: "r"}, func(chat.Event) {}); err != nil {
				t.Error(err)
			}
		})
		wg.Go(func() { _ = b.Requests(); _ = b.History(start.SessionID) })
	}
	wg.Wait()
	if got := len(b.History(start.SessionID)); got != 21 {
		t.Errorf("history has %d prompts, want 21", got)
	}
}
