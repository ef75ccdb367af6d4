package main

import (
	"bytes"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/claude/claudetest"
	"github.com/prchat/prchat/agentsession/fakeapi/anthropic"
	"github.com/prchat/prchat/chat"
)

// TestClaudeConversation runs a conversation about a review written with
// the real Claude Code CLI (against a fake model API) through the daemon:
// the first question forks the review's session, the next resumes the
// conversation's own, a plain-text answer is repaired in the same session,
// and once the review's session is gone a new conversation is seeded.
func TestClaudeConversation(t *testing.T) {
	t.Parallel()
	api := anthropic.New(t)
	cfg := claudetest.Config(t, api)
	b, err := claude.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := prepare(t, mode{name: "embedded"}, nil)
	e.opts.backends = append(e.opts.backends, b)
	e.serve(roleOf("serve"))

	// The review: claude ran in a checkout of the head, read a file and
	// wrote its review.
	reviewDir := filepath.Join(t.TempDir(), "review")
	agentsessiontest.Git(t, e.repoDir, "worktree", "add", "--detach", "--quiet", reviewDir, e.head)
	api.Push(
		anthropic.ToolUse("Read", map[string]any{"file_path": filepath.Join(reviewDir, "settings", "settings.go")}),
		anthropic.Text("REVIEW-E2E-C: Load refuses an empty path."),
	)
	reviewID := claudetest.Bare(t, cfg, reviewDir, "--", "Review this pull request.")
	reviewFile := claudetest.SessionFile(t, b.ConfigDir(), reviewID)
	before, err := os.ReadFile(reviewFile)
	if err != nil {
		t.Fatal(err)
	}
	v := e.review(chat.BackendClaudeCode, map[string]any{
		"session_id": reviewID, "session_host": e.cfg.WorkerID, "run_dir": reviewDir,
	})

	answer := func(text string) anthropic.Reply { return anthropic.Structured(goodAnswer(text)) }
	lastRequest := func() anthropic.Request {
		reqs := api.Messages()
		return reqs[len(reqs)-1]
	}

	// Turn 1 forks the review.
	api.Push(answer("It checks the path first."))
	const q1 = "Why does Load refuse an empty path?"
	conv, _ := e.ask(v, q1)
	t1 := e.wait(conv, 1)
	if t1.State != "succeeded" || t1.Session != "forked" {
		t.Fatalf("turn 1 = %+v, want succeeded, forked", t1)
	}
	e.checkAnswer(t1.Answer)
	fork := lastRequest()
	if fork.SessionID == "" || fork.SessionID == reviewID {
		t.Errorf("turn 1 ran in session %q, want a fork of %s", fork.SessionID, reviewID)
	}
	if !fork.Contains("REVIEW-E2E-C") || !fork.Contains("errEmptyPath") {
		t.Errorf("turn 1 did not see the review's messages and reads:\n%q", fork.Prompts())
	}
	if !strings.Contains(fork.SystemText(), "read-only") || slices.Contains(fork.ToolNames(), "Bash") {
		t.Errorf("turn 1 ran without prchat's instructions or with Bash (tools %v)", fork.ToolNames())
	}
	if t1.Usage.Calls == 0 || t1.Usage.CostUSD == nil || t1.Usage.InputTokens == 0 {
		t.Errorf("turn 1 usage = %+v, want calls, tokens and a cost", t1.Usage)
	}
	session := fork.SessionID

	// Turn 2 resumes the conversation's session.
	api.Push(answer("Because of errEmptyPath."))
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Which error does it return?"}, http.StatusAccepted, nil)
	t2 := e.wait(conv, 2)
	if t2.State != "succeeded" || t2.Session != "resumed" {
		t.Fatalf("turn 2 = %+v, want succeeded, resumed", t2)
	}
	resume := lastRequest()
	if resume.SessionID != session {
		t.Errorf("turn 2 ran in session %q, want %s", resume.SessionID, session)
	}
	if !resume.Contains(q1) || !resume.Contains("It checks the path first.") {
		t.Errorf("turn 2 did not see turn 1:\n%q", resume.Prompts())
	}

	// Turn 3: the model answers in plain text instead of calling the
	// structured output tool; chat repairs it in the same session.
	api.Handle(func(r anthropic.Request) anthropic.Reply {
		if strings.Contains(r.Last().Text(), "could not be used") {
			return answer("Repaired.")
		}
		return anthropic.Text("PLAIN-E2E: it returns an error")
	})
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Anything else?"}, http.StatusAccepted, nil)
	t3 := e.wait(conv, 3)
	api.Handle(nil)
	if t3.State != "succeeded" || t3.Usage.Repairs != 1 || t3.Answer.AnswerMarkdown != "Repaired." {
		t.Fatalf("turn 3 = %+v, want succeeded after 1 repair", t3)
	}
	repair := lastRequest()
	if repair.SessionID != session || !repair.Contains("PLAIN-E2E") {
		t.Errorf("the repair ran in session %q without the plain answer, want %s", repair.SessionID, session)
	}
	if after, err := os.ReadFile(reviewFile); err != nil || !bytes.Equal(before, after) {
		t.Errorf("the review's session file changed (read: %v)", err)
	}

	// The review's session is lost: a new conversation is seeded.
	if err := os.Remove(reviewFile); err != nil {
		t.Fatal(err)
	}
	api.Push(answer("Seeded answer."))
	conv2, _ := e.ask(v, "Does Load read the file?")
	s1 := e.wait(conv2, 1)
	if s1.State != "succeeded" || s1.Session != "seeded" || !strings.HasPrefix(s1.Note, "Started without the review's own context: the review's session is gone") {
		t.Fatalf("turn after the review's session was lost = %+v, want succeeded, seeded, with the note", s1)
	}
	e.checkAnswer(s1.Answer)
	seeded := lastRequest()
	if p := seeded.Prompts(); seeded.SessionID == session || seeded.SessionID == reviewID || len(p) != 1 || !strings.Contains(p[0], "Load now refuses an empty path.") {
		t.Errorf("the seeded session %s did not start new with the saved review: %q", seeded.SessionID, p)
	}
	if n := api.Pending(); n != 0 {
		t.Errorf("%d scripted replies were not used", n)
	}
}
