package main

import (
	"context"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
)

// reviewSession makes a session in the scripted agent, as the reviewing
// agent would have, and returns its id.
func (e *env) reviewSession() string {
	e.t.Helper()
	e.scripted.Push(scripted.Step{Answer: goodAnswer("the review")})
	res, err := e.scripted.Run(context.Background(), chat.RunRequest{Mode: chat.SessionNone, Prompt: "review the PR"}, func(chat.Event) {})
	if err != nil {
		e.t.Fatal(err)
	}
	return res.SessionID
}

// worker boots another worker process with its own id.
func (e *env) worker(id string) *daemon {
	e.t.Helper()
	cfg := e.cfg
	cfg.WorkerID = id
	return e.boot(role{worker: true}, cfg)
}

func (e *env) conversation(id string) chat.Conversation {
	e.t.Helper()
	c, err := e.d.store.Conversation(context.Background(), id)
	if err != nil {
		e.t.Fatal(err)
	}
	return c
}

// TestPinnedToTheSessionHost: the first question forks the review's session
// on the worker that holds it; the conversation keeps its own session and
// host; when that worker is gone, or the session or run directory is, a new
// conversation is seeded on any worker and says why.
func TestPinnedToTheSessionHost(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			a := e.worker("host-a")
			e.worker("host-b")
			session := e.reviewSession()
			v := e.review("scripted", map[string]any{"session_id": session, "session_host": "host-a"})

			// Forked on host-a, the host of the review's session.
			for i := 0; i < 3; i++ {
				e.scripted.Push(scripted.Step{Answer: goodAnswer("forked")})
				conv, _ := e.ask(v, "Why?")
				got := e.wait(conv, 1)
				if got.State != "succeeded" || got.Session != "forked" {
					t.Fatalf("turn = %+v, want succeeded and forked", got)
				}
				c := e.conversation(conv)
				if c.SessionHost != "host-a" || c.SessionID == "" || c.SessionID == session {
					t.Fatalf("conversation session %q on %q, want a new session on host-a", c.SessionID, c.SessionHost)
				}
				if h := e.scripted.History(c.SessionID); len(h) < 2 || h[0] != "review the PR" {
					t.Fatalf("the fork did not start from the review's history: %q", h)
				}
				if i == 0 {
					// The next question resumes the conversation's own session on its host.
					e.scripted.Push(scripted.Step{Answer: goodAnswer("resumed")})
					e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "And?"}, http.StatusAccepted, nil)
					got = e.wait(conv, 2)
					c2 := e.conversation(conv)
					if got.Session != "resumed" || c2.SessionID != c.SessionID || c2.SessionHost != "host-a" {
						t.Fatalf("turn 2 = %+v, session %q on %q; want resumed in %q on host-a", got, c2.SessionID, c2.SessionHost, c.SessionID)
					}
				}
			}

			// host-a stops: a new conversation is seeded on host-b.
			a.Stop()
			e.scripted.Push(scripted.Step{Answer: goodAnswer("seeded")})
			conv, _ := e.ask(v, "Still there?")
			got := e.wait(conv, 1)
			if got.State != "succeeded" || got.Session != "seeded" || !strings.Contains(got.Note, "Started without the review's own context: the review's session is on worker host-a") {
				t.Fatalf("turn = %+v, want seeded with the note", got)
			}
			if c := e.conversation(conv); c.SessionHost != "host-b" || c.SeededReason == "" {
				t.Fatalf("seeded conversation on %q with reason %q", c.SessionHost, c.SeededReason)
			}
			// The seeded session was given the saved review.
			reqs := e.scripted.Requests()
			last := reqs[len(reqs)-1]
			if last.Mode != chat.SessionSeeded || !strings.Contains(last.Prompt, "Load now refuses an empty path.") {
				t.Fatalf("seeded call: mode %s, prompt lacks the saved review:\n%s", last.Mode, last.Prompt)
			}
		})
	}
}

// TestSeededWhenTheSessionOrRunDirIsGone: a review whose session file or
// run directory is gone is answered from a seeded session.
func TestSeededWhenTheSessionOrRunDirIsGone(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	gone := e.reviewSession()
	e.scripted.Forget(gone)
	v := e.review("scripted", map[string]any{"session_id": gone})
	e.scripted.Push(scripted.Step{Answer: goodAnswer("seeded")})
	conv, _ := e.ask(v, "Why?")
	got := e.wait(conv, 1)
	if got.Session != "seeded" || !strings.Contains(got.Note, "the review's session is gone") {
		t.Fatalf("turn = %+v", got)
	}
	e.checkAnswer(got.Answer)

	v2 := e.review("scripted", map[string]any{"session_id": e.reviewSession(), "run_dir": "/nonexistent/run/dir"})
	e.scripted.Push(scripted.Step{Answer: goodAnswer("seeded")})
	conv, _ = e.ask(v2, "Why?")
	got = e.wait(conv, 1)
	if got.Session != "seeded" || !strings.Contains(got.Note, "run directory is gone") {
		t.Fatalf("turn = %+v", got)
	}
	// The seeded run directory holds the head checkout and the saved review.
	c := e.conversation(conv)
	for _, f := range []string{"settings/settings.go", ".prchat/review.md"} {
		if _, err := readFile(c.RunDir, f); err != nil {
			t.Errorf("run directory lacks %s: %v", f, err)
		}
	}
	if b, _ := readFile(c.RunDir, "settings/settings.go"); !strings.Contains(string(b), "errEmptyPath") {
		t.Error("the run directory is not at the head commit")
	}

	// The conversation's own session is lost too: turn 2 is seeded with
	// the saved review and turn 1, in the prompt and in the run directory.
	e.scripted.Forget(c.SessionID)
	e.scripted.Push(scripted.Step{Answer: goodAnswer("seeded again")})
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "And the caller?"}, http.StatusAccepted, nil)
	got = e.wait(conv, 2)
	if got.Session != "seeded" || !strings.Contains(got.Note, "the conversation's session is gone") {
		t.Fatalf("turn 2 = %+v", got)
	}
	reqs := e.scripted.Requests()
	last := reqs[len(reqs)-1]
	if !strings.Contains(last.Prompt, "Q1: Why?") || !strings.Contains(last.Prompt, "A1: seeded") {
		t.Errorf("the seeded prompt lacks turn 1:\n%s", last.Prompt)
	}
	c = e.conversation(conv)
	if b, err := readFile(c.RunDir, ".prchat/turns.md"); err != nil || !strings.Contains(string(b), "Why?") {
		t.Errorf("the run directory's turns.md lacks turn 1: %v %q", err, b)
	}
}

func readFile(dir, name string) ([]byte, error) {
	return os.ReadFile(filepath.Join(dir, filepath.FromSlash(name)))
}
