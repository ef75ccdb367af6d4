package codex_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/fakeapi/responses"
	"github.com/prchat/prchat/chat"
)

// otherHost returns a backend like e's with a CODEX_HOME of its own: another
// machine against the same fake API.
func (e *env) otherHost() *codex.Backend {
	e.t.Helper()
	cfg := e.cfg
	cfg.Home = e.t.TempDir()
	b, err := codex.New(cfg)
	if err != nil {
		e.t.Fatal(err)
	}
	return b
}

// TestSessionTravels makes a review session on a "laptop" (a run directory
// and CODEX_HOME of its own, deleted afterwards), restores its rollout on a
// worker that never saw it and forks it there, then restores the fork's
// rollout with its parent's on a second worker, in another run directory,
// and resumes it: each time the model gets the whole history, with the
// review's paths mapped to the run directory.
func TestSessionTravels(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()

	laptopDir := e.runDir()
	e.api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("cat " + filepath.Join(laptopDir, "config/config.go"))}},
		responses.Reply{Text: "REVIEW-58c: Load does not bound max_retries."},
	)
	reviewID := e.bareExec(laptopDir, "read-only", "Review this change.")
	data, err := e.b.ReadSessionFile(ctx, chat.SessionRef{ID: reviewID, Dir: laptopDir})
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.b.CheckSessionFile(data, reviewID)
	if err != nil {
		t.Fatalf("CheckSessionFile(the review's rollout) = %v", err)
	}
	if info.Cwd == "" || info.Parent != "" {
		t.Errorf("the review's rollout says cwd %q, parent %q", info.Cwd, info.Parent)
	}
	review := chat.SessionFile{Backend: chat.BackendCodex, SessionID: reviewID, Cwd: info.Cwd, Data: data}
	if err := os.RemoveAll(e.b.Home()); err != nil {
		t.Fatal(err)
	}
	if err := e.ws.Remove(ctx, laptopDir); err != nil {
		t.Fatal(err)
	}

	// Worker 1 restores the review and forks it.
	w1, dir1 := e.otherHost(), e.runDir()
	if err := w1.RestoreSession(ctx, dir1, []chat.SessionFile{review}); err != nil {
		t.Fatal(err)
	}
	e.b = w1
	e.api.Push(responses.Reply{Text: answer("TURN-1-ANSWER-0f3: Load takes n as it is.")})
	fork, _ := e.run(request(dir1, chat.SessionForked, reviewID))
	checkAnswer(t, e, fork)
	first := e.last()
	if !first.Contains("REVIEW-58c") || !first.Contains("func Load(n int) Config") {
		t.Errorf("the fork's request lacks the review's messages and tool output:\n%v", first.Texts(""))
	}
	if first.Contains(laptopDir) || !first.Contains(filepath.Join(dir1, "config/config.go")) {
		t.Errorf("the review's paths are not mapped to the run directory %s:\n%v", dir1, first.Texts(""))
	}
	forkData, err := w1.ReadSessionFile(ctx, chat.SessionRef{ID: fork.SessionID, Dir: dir1})
	if err != nil {
		t.Fatal(err)
	}
	forkInfo, err := w1.CheckSessionFile(forkData, fork.SessionID)
	if err != nil {
		t.Fatalf("CheckSessionFile(the fork's rollout) = %v", err)
	}
	if !strings.EqualFold(forkInfo.Parent, reviewID) {
		t.Fatalf("the fork's rollout names parent %q, want %s", forkInfo.Parent, reviewID)
	}
	forkFile := chat.SessionFile{Backend: chat.BackendCodex, SessionID: fork.SessionID, Cwd: forkInfo.Cwd, Data: forkData}

	// Worker 2, in a run directory whose path is longer (so every offset
	// into the parent's rollout moves): the fork's rollout alone is not
	// enough.
	e.n = 1000
	w2, dir2 := e.otherHost(), e.runDir()
	if len(dir2) == len(dir1) {
		t.Fatalf("run directories %s and %s have the same length", dir1, dir2)
	}
	if err := w2.RestoreSession(ctx, dir2, []chat.SessionFile{forkFile}); err != nil {
		t.Fatal(err)
	}
	if err := w2.HasSession(ctx, chat.SessionRef{ID: fork.SessionID, Dir: dir2}); !errors.Is(err, chat.ErrSessionGone) {
		t.Fatalf("HasSession(a fork without its parent) = %v, want gone", err)
	}
	// With its parent's, it resumes with the whole history.
	if err := w2.RestoreSession(ctx, dir2, []chat.SessionFile{review, forkFile}); err != nil {
		t.Fatal(err)
	}
	e.b = w2
	e.api.Push(responses.Reply{Text: answer("Still unbounded.")})
	req := request(dir2, chat.SessionResumed, fork.SessionID)
	req.Prompt = "TURN-2-c11: and the default?"
	resumed, _ := e.run(req)
	checkAnswer(t, e, resumed)
	if resumed.SessionID != fork.SessionID {
		t.Errorf("the resume ran in session %q, want %s", resumed.SessionID, fork.SessionID)
	}
	last := e.last()
	if !last.Contains("REVIEW-58c") || !last.Contains("TURN-1-ANSWER-0f3") || !last.Contains("func Load(n int) Config") {
		t.Errorf("the resume's request lacks the review or turn 1:\n%v", last.Texts(""))
	}
	if m := last.Metadata; m.HistoryInitialization != "cold_resume" || m.ThreadID != fork.SessionID {
		t.Errorf("resume metadata = %+v, want cold_resume of thread %s", m, fork.SessionID)
	}
	if last.Contains(dir1) {
		t.Errorf("the resumed history still names worker 1's run directory %s", dir1)
	}
}

// TestCheckSessionFile refuses what is not a rollout of the id.
func TestCheckSessionFile(t *testing.T) {
	t.Parallel()
	b, err := codex.New(codex.Config{Home: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	const id = "01a22b2d-79a6-7ee3-8f95-c8fa34a78416"
	good := `{"timestamp":"2026-01-02T03:04:05.000Z","type":"session_meta","payload":{"id":"` + id + `","cwd":"/home/me/src","forked_from_id":"01a22b2d-26bf-7212-8ee7-412acfad9f9e"}}
{"timestamp":"2026-01-02T03:04:06.000Z","type":"event_msg","payload":{"type":"task_started"}}
`
	info, err := b.CheckSessionFile([]byte(good), id)
	if err != nil || info.Cwd != "/home/me/src" || info.Parent != "01a22b2d-26bf-7212-8ee7-412acfad9f9e" {
		t.Fatalf("CheckSessionFile(good) = %+v, %v", info, err)
	}
	for name, tc := range map[string]struct{ data, id, want string }{
		"truncated":   {good[:len(good)-10], id, "line 2 is not a JSON object"},
		"garbage":     {"\x00\x01 not json\n", id, "line 1 is not a JSON object"},
		"empty":       {"", id, "is empty"},
		"other id":    {good, "0d6a1f3e-2b49-4c6f-8c0a-0e7e3b7a9c22", "holds session"},
		"not an id":   {good, "thread-1", "not a Codex session id"},
		"claude file": {`{"type":"user","sessionId":"` + id + `","cwd":"/x"}` + "\n", id, "not a Codex session"},
	} {
		_, err := b.CheckSessionFile([]byte(tc.data), tc.id)
		if chat.ErrorCode(err) != chat.CodeInvalid || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: CheckSessionFile = %v, want invalid saying %q", name, err, tc.want)
		}
	}
}

// TestForksOfOneReviewTakeTurns: two conversations about one review on
// one host fork it one after the other, and a restore of its rollout
// waits while a fork runs: the CLI fails a fork whose parent's rollout is
// rewritten or projected by another process meanwhile ("thread history
// projection ... is behind durable rollout").
func TestForksOfOneReviewTakeTurns(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	laptopDir := e.runDir()
	e.api.Push(
		responses.Reply{Calls: []responses.Call{responses.Shell("cat " + filepath.Join(laptopDir, "config/config.go"))}},
		responses.Reply{Text: "REVIEW-2f7: Load does not bound max_retries."},
	)
	reviewID := e.bareExec(laptopDir, "read-only", "Review this change.")
	data, err := e.b.ReadSessionFile(ctx, chat.SessionRef{ID: reviewID, Dir: laptopDir})
	if err != nil {
		t.Fatal(err)
	}
	info, err := e.b.CheckSessionFile(data, reviewID)
	if err != nil {
		t.Fatal(err)
	}
	review := []chat.SessionFile{{Backend: chat.BackendCodex, SessionID: reviewID, Cwd: info.Cwd, Data: data}}
	w := e.otherHost()
	e.b = w
	var mu sync.Mutex
	var calls []time.Time
	started := make(chan struct{}, 2)
	e.api.Handle(func(r responses.Request) responses.Reply {
		mu.Lock()
		calls = append(calls, time.Now())
		mu.Unlock()
		started <- struct{}{}
		return responses.Reply{Text: answer("FORK-ANSWER: unbounded."), Delay: time.Second}
	})
	type result struct{ err error }
	fork := func(dir string, done chan<- result) {
		err := w.RestoreSession(ctx, dir, review)
		if err == nil {
			_, _, err = e.call(ctx, request(dir, chat.SessionForked, reviewID))
		}
		done <- result{err}
	}
	dir1, dir2 := e.runDir(), e.runDir()
	first, second := make(chan result, 1), make(chan result, 1)
	go fork(dir1, first)
	select {
	case <-started:
	case r := <-first:
		t.Fatalf("the first fork ended before it reached the model: %v", r.err)
	}
	short, cancel := context.WithTimeout(ctx, 200*time.Millisecond)
	err = w.RestoreSession(short, dir2, review)
	cancel()
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a restore while the fork runs = %v, want it to wait (deadline exceeded)", err)
	}
	go fork(dir2, second)
	r1, r2 := <-first, <-second
	if r1.err != nil || r2.err != nil {
		t.Fatalf("forks: %v, %v", r1.err, r2.err)
	}
	mu.Lock()
	defer mu.Unlock()
	// The first fork's answer comes a second after its call, and it holds
	// the lineage until its CLI exits.
	if len(calls) != 2 || calls[1].Before(calls[0].Add(time.Second)) {
		t.Errorf("the model was called at %v: the second fork ran while the first did", calls)
	}
	for _, r := range e.api.Requests()[2:] {
		if !r.Contains("REVIEW-2f7") {
			t.Errorf("a fork's request lacks the review's messages:\n%v", r.Texts(""))
		}
	}
}
