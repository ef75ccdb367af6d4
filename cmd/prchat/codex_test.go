package main

import (
	"encoding/json"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/codex/codextest"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
)

// TestCodexConversation runs a conversation about a review written with
// the real Codex CLI (against a fake model API) through the daemon: the
// first question forks the review's session, the next resumes the
// conversation's own, a broken answer is repaired in the same session, and
// once the review's session is gone a new conversation is seeded.
func TestCodexConversation(t *testing.T) {
	t.Parallel()
	api := responses.NewServer(t)
	cfg := codextest.Config(t, api)
	cfg.Prices = map[string]codex.Price{codextest.Model: {Input: 1, Output: 8}}
	b, err := codex.New(cfg)
	if err != nil {
		t.Fatal(err)
	}
	e := prepare(t, mode{name: "embedded"}, nil)
	e.opts.backends = append(e.opts.backends, b)
	e.serve(roleOf("serve"))

	// The review: codex ran in a checkout of the head, read a file and
	// wrote its review.
	reviewDir := filepath.Join(t.TempDir(), "review")
	agentsessiontest.Git(t, e.repoDir, "worktree", "add", "--detach", "--quiet", reviewDir, e.head)
	api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("cat settings/settings.go")}},
		responses.Reply{Text: "REVIEW-E2E: Load refuses an empty path."},
	)
	reviewID := codextest.Bare(t, cfg, reviewDir, "read-only", "Review this pull request.")
	v := e.review(chat.BackendCodex, map[string]any{
		"session_id": reviewID, "session_host": e.cfg.WorkerID, "run_dir": reviewDir, "model": codextest.Model,
	})

	answer := func(text string) responses.Reply {
		raw, err := json.Marshal(goodAnswer(text))
		if err != nil {
			t.Fatal(err)
		}
		return responses.Reply{Text: string(raw)}
	}
	lastRequest := func() responses.Request {
		reqs := api.Requests()
		return reqs[len(reqs)-1]
	}

	// Turn 1 forks the review.
	api.Push(answer("It checks the path first."))
	conv, _ := e.ask(v, "Why does Load refuse an empty path?")
	t1 := e.wait(conv, 1)
	if t1.State != "succeeded" || t1.Session != "forked" {
		t.Fatalf("turn 1 = %+v, want succeeded, forked", t1)
	}
	e.checkAnswer(t1.Answer)
	fork := lastRequest()
	if m := fork.Metadata; m.HistoryInitialization != "cold_fork" || m.ThreadID == reviewID || m.SandboxMode != "read-only" {
		t.Errorf("turn 1 metadata = %+v, want a read-only fork of %s", m, reviewID)
	}
	if !fork.Contains("REVIEW-E2E") || !fork.Contains("errEmptyPath") {
		t.Errorf("turn 1 did not see the review's messages and reads:\n%v", fork.Texts(""))
	}
	if t1.Usage.Calls != 1 || t1.Usage.CostUSD == nil {
		t.Errorf("turn 1 usage = %+v, want 1 call with a cost", t1.Usage)
	}
	thread := fork.Metadata.ThreadID

	// Turn 2 resumes the conversation's session.
	api.Push(answer("Because of errEmptyPath."))
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Which error does it return?"}, http.StatusAccepted, nil)
	t2 := e.wait(conv, 2)
	if t2.State != "succeeded" || t2.Session != "resumed" {
		t.Fatalf("turn 2 = %+v, want succeeded, resumed", t2)
	}
	resume := lastRequest()
	if m := resume.Metadata; m.HistoryInitialization != "cold_resume" || m.ThreadID != thread {
		t.Errorf("turn 2 metadata = %+v, want a resume of %s", m, thread)
	}
	if !resume.Contains("Why does Load refuse an empty path?") || !resume.Contains("It checks the path first.") {
		t.Errorf("turn 2 did not see turn 1:\n%v", resume.Texts(""))
	}

	// Turn 3: the first answer breaks the schema and is repaired in the
	// same session.
	api.Push(responses.Reply{Text: `{"answer_markdown": "no citations"}`}, answer("Repaired."))
	e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Anything else?"}, http.StatusAccepted, nil)
	t3 := e.wait(conv, 3)
	if t3.State != "succeeded" || t3.Usage.Repairs != 1 || t3.Answer.AnswerMarkdown != "Repaired." {
		t.Fatalf("turn 3 = %+v, want succeeded after 1 repair", t3)
	}
	repair := lastRequest()
	if m := repair.Metadata; m.ThreadID != thread || m.HistoryInitialization != "cold_resume" {
		t.Errorf("repair metadata = %+v, want a resume of %s", m, thread)
	}
	if !repair.Contains(`{"answer_markdown": "no citations"}`) || !strings.Contains(repair.LastUserText(), "could not be used") {
		t.Errorf("the repair did not show the model its answer and the problem:\n%s", repair.LastUserText())
	}

	// The review's session is lost: a new conversation is seeded.
	files, _ := filepath.Glob(filepath.Join(cfg.Home, "sessions", "*", "*", "*", "rollout-*-"+reviewID+".jsonl"))
	if len(files) != 1 {
		t.Fatalf("session files of the review: %v", files)
	}
	if err := os.Remove(files[0]); err != nil {
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
	if seeded.Metadata.HistoryInitialization != "new" || !strings.Contains(seeded.LastUserText(), "Load now refuses an empty path.") {
		t.Errorf("the seeded session did not start new with the saved review: %+v\n%s", seeded.Metadata, seeded.LastUserText())
	}
	if n := api.Pending(); n != 0 {
		t.Errorf("%d scripted replies were not used", n)
	}
}
