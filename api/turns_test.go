package api_test

import (
	"errors"
	"fmt"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestResourcesJSON: what each route answers, as golden files under
// testdata/resources: repositories, reviews, a conversation and its turns
// through their life.
func TestResourcesJSON(t *testing.T) {
	t.Parallel()
	f := setup(t)
	pr := "/api/v1/repos/" + repoName + "/pulls/7"
	check := func(name, method, path string, body any, status int) response {
		t.Helper()
		r := f.c.send(t, method, path, body)
		if r.status != status {
			t.Fatalf("%s %s = %d %s, want %d", method, path, r.status, r.body, status)
		}
		f.golden(t, "resources/"+name, r)
		return r
	}
	check("register_again", "POST", "/api/v1/repos", map[string]any{"name": repoName, "clone_path": f.repo.Dir}, http.StatusOK)
	check("repositories", "GET", "/api/v1/repos", nil, http.StatusOK)
	check("repository", "GET", "/api/v1/repos/"+repoName, nil, http.StatusOK)
	check("record_review", "POST", pr+"/reviews", map[string]any{
		"head_sha": f.repo.Head(), "base_sha": f.repo.Commits[0], "backend": "scripted", "model": "m1",
		"markdown": "Load now refuses an empty path.",
		"sections": []map[string]any{{"id": "s1", "title": "Empty paths", "anchors": []map[string]any{{"path": "settings/settings.go", "start_line": 8, "end_line": 12}}}},
	}, http.StatusCreated)
	check("reviews", "GET", pr+"/reviews", nil, http.StatusOK)
	check("review_latest", "GET", pr+"/reviews/latest", nil, http.StatusOK)

	ask := map[string]any{"question": "Why does Load refuse an empty path?", "focus": map[string]any{"kind": "section", "id": "s1", "anchors": []map[string]any{{"path": "settings/settings.go", "start_line": 8}}}}
	check("ask", "POST", pr+"/reviews/1/conversations", ask, http.StatusAccepted)
	var list struct{ Conversations []struct{ ID string } }
	f.do("GET", pr+"/conversations", nil, http.StatusOK, &list)
	check("conversations", "GET", pr+"/conversations", nil, http.StatusOK)
	conv := list.Conversations[0].ID

	f.scripted.Push(scripted.Step{
		Answer: &chat.Answer{AnswerMarkdown: "Because `Load` returns `errEmptyPath`.", Citations: []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}}, SuggestsFix: &chat.Fix{Summary: "Document it."}},
		Usage:  chat.Usage{InputTokens: 1200, OutputTokens: 80, Calls: 1},
	})
	f.settle(conv, 1)
	check("turn_succeeded", "GET", "/api/v1/conversations/"+conv+"/turns/1", nil, http.StatusOK)
	check("turn_settled_wait", "GET", "/api/v1/conversations/"+conv+"/turns/1?wait=30s", nil, http.StatusOK)

	f.scripted.Push(scripted.Step{Hang: true})
	check("continue", "POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "And a nil path?", "model": "m2"}, http.StatusAccepted)
	check("cancel", "POST", "/api/v1/conversations/"+conv+"/turns/2/cancel", nil, http.StatusAccepted)
	check("cancel_settled", "POST", "/api/v1/conversations/"+conv+"/turns/2/cancel", nil, http.StatusAccepted)
	check("conversation", "GET", "/api/v1/conversations/"+conv, nil, http.StatusOK)

	check("delete", "DELETE", "/api/v1/conversations/"+conv, nil, http.StatusNoContent)
	check("deleted", "GET", "/api/v1/conversations/"+conv, nil, http.StatusNotFound)
	check("healthz", "GET", "/healthz", nil, http.StatusOK)
	check("readyz", "GET", "/readyz", nil, http.StatusOK)
}

// TestLongPoll: GET .../turns/{n}?wait= holds until the turn settles, or
// returns it as it is when the wait ends; waits are cut to MaxWait.
func TestLongPoll(t *testing.T) {
	t.Parallel()
	// longPoll asks for turn 1 of conv with query in the background.
	longPoll := func(f *fixture, conv, query string) <-chan turnJSON {
		got := make(chan turnJSON, 1)
		go func() {
			var turn turnJSON
			f.do("GET", fmt.Sprintf("/api/v1/conversations/%s/turns/1%s", conv, query), nil, http.StatusOK, &turn)
			got <- turn
		}()
		return got
	}

	// The wait ends first: the turn as it is; an hour's wait is cut to
	// MaxWait, so it returns within the test's patience.
	f := setup(t, func(o *options) { o.api.MaxWait = 2 * time.Second })
	v := f.review("scripted", nil)
	conv := f.ask(v, "Slow?") // nothing runs it: it stays queued
	for _, q := range []string{"?wait=100ms", "?wait=0", "?wait=1", "?wait=1h"} {
		if got := chattest.Receive(t, q+" to return", longPoll(f, conv, q)); got.State != "queued" {
			t.Fatalf("%s: state %s, want queued", q, got.State)
		}
	}

	// The turn settles first: the settled turn, as soon as it is (the
	// wait and MaxWait are an hour).
	f = setup(t, func(o *options) { o.api.MaxWait = time.Hour })
	v = f.review("scripted", nil)
	release := make(chan struct{})
	f.scripted.Push(scripted.Step{Wait: release, Answer: goodAnswer("answered")})
	conv = f.ask(v, "Slow?")
	res := longPoll(f, conv, "?wait=1h")
	f.run(conv, 1)
	f.waitCalls(1)
	close(release)
	got := chattest.Receive(t, "the long-poll to return with the settled turn", res)
	if got.State != "succeeded" || got.Answer == nil || got.Answer.AnswerMarkdown != "answered" {
		t.Fatalf("long-poll = %+v, want the succeeded turn with its answer", got)
	}
}

// TestRepairInvalidAnswers: an invalid answer goes back to the agent with
// what was wrong; the client sees the repaired answer, or invalid_answer
// when the agent never recovers.
func TestRepairInvalidAnswers(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	f.scripted.Push(
		scripted.Step{Text: "I think Load is fine."},
		scripted.Step{Answer: &chat.Answer{AnswerMarkdown: "x", Citations: []chat.Citation{{Path: "settings/settings.go", StartLine: 12, EndLine: 14}}}},
		scripted.Step{Answer: goodAnswer("Load refuses an empty path.")},
	)
	conv := f.ask(v, "Why does Load refuse?")
	got := f.settle(conv, 1)
	if got.State != "succeeded" || got.Usage.Repairs != 2 || got.Answer.AnswerMarkdown != "Load refuses an empty path." {
		t.Fatalf("turn = %+v, want succeeded with 2 repairs", got)
	}
	reqs := f.scripted.Requests()
	if len(reqs) != 3 || !strings.Contains(reqs[1].Prompt, "no JSON object") || !strings.Contains(reqs[2].Prompt, "past its end") {
		t.Fatalf("the repair prompts do not say what was wrong: %d calls", len(reqs))
	}

	f.scripted.Push(scripted.Step{Text: "{}"}, scripted.Step{Text: "{}"}, scripted.Step{Text: "{}"})
	n := f.next(conv, "And now?")
	got = f.settle(conv, n)
	if got.State != "failed" || got.Reason != "invalid_answer" || got.Usage.Repairs != 2 {
		t.Fatalf("turn 2 = %+v, want failed invalid_answer after 2 repairs", got)
	}
}

// TestMaskingOfWhatClientsSee: secrets in the answer, the suggested fix,
// the transcript, the event stream and a failure's note reach the client
// masked; look-alikes do not.
func TestMaskingOfWhatClientsSee(t *testing.T) {
	t.Parallel()
	leaks := map[string]string{
		"aws access key": "AKIAQYLPMN5HHHFPZAM2",
		"github pat":     "ghp_9aYbXcWdVeUfTgShRiQjPkOlNmMnLoKpJqIr",
		"slack token":    "xoxb-2741836501-5503861926-Ai8Q3Vb7Tz2Lw9Kx1Rm4Np6Y",
		"stripe":         "sk_live_51HqPzLKj8Xv3Tn2Mb7Wc9Rf4Yd6Ga1Se5Uh0",
		"google":         "AIzaSyB4x7Q2mN9pL3kT8vR1wZ6yH5jD0cF2gS4",
		"url password":   "Tr0ub4dor-3xq9",
	}
	secrets := map[string]string{
		"aws access key": leaks["aws access key"],
		"github pat":     leaks["github pat"],
		"slack token":    leaks["slack token"],
		"stripe":         leaks["stripe"],
		"google":         leaks["google"],
		"url password":   "postgres://app:" + leaks["url password"] + "@db.internal:5432/app",
	}
	lookAlikes := []string{"9fceb02d0ae598e95dc970b74767f19372d61af8", "123e4567-e89b-12d3-a456-426614174000"}
	f := setup(t)
	v := f.review("scripted", nil)
	var md strings.Builder
	md.WriteString("Here is what the config holds:\n\n")
	for name, s := range secrets {
		md.WriteString("- " + name + ": `" + s + "`\n")
	}
	md.WriteString("\nThe key " + ownSecret + " is ours. Commit " + lookAlikes[0] + ", request " + lookAlikes[1] + ".\n")
	answer := goodAnswer(md.String())
	answer.SuggestsFix = &chat.Fix{Summary: "Rotate " + secrets["github pat"] + " now."}
	f.scripted.Push(scripted.Step{
		Events: []chat.Event{
			{Type: chat.EventToolStart, ToolID: "t1", ToolName: "Read", Input: []byte(`{"path":".env","note":"` + leaks["stripe"] + `"}`)},
			{Type: chat.EventToolResult, ToolID: "t1", ToolName: "Read", Summary: "GITHUB_TOKEN=" + secrets["github pat"]},
			{Type: chat.EventTextDelta, Text: md.String()},
		},
		Answer: answer,
	})
	conv := f.ask(v, "What is in the config?")
	if got := f.settle(conv, 1); got.State != "succeeded" {
		t.Fatalf("turn = %+v", got)
	}
	// A backend's failure text reaches the note, masked (the text of an
	// error that is no chat.Failure never does).
	f.scripted.Push(scripted.Step{Err: chat.Fail(chat.ReasonBackendError, errors.New("upstream said: bad key "+secrets["github pat"]+" for "+ownSecret))})
	n := f.next(conv, "Again?")
	if got := f.settle(conv, n); got.State != "failed" || got.Reason != "backend_error" {
		t.Fatalf("turn 2 = %+v", got)
	}

	seen := map[string]string{
		"turn":       string(f.do("GET", "/api/v1/conversations/"+conv+"/turns/1", nil, http.StatusOK, nil)),
		"transcript": string(f.do("GET", "/api/v1/conversations/"+conv+"/turns/1/transcript", nil, http.StatusOK, nil)),
		"note":       string(f.do("GET", fmt.Sprintf("/api/v1/conversations/%s/turns/%d", conv, n), nil, http.StatusOK, nil)),
	}
	var stream strings.Builder
	for _, e := range f.subscribe(conv, 1, "").All() {
		fmt.Fprintf(&stream, "%v\n", e.Data)
	}
	seen["stream"] = stream.String()
	for where, text := range seen {
		for name, leak := range leaks {
			if strings.Contains(text, leak) {
				t.Errorf("%s: %s leaked", where, name)
			}
		}
		if strings.Contains(text, ownSecret) {
			t.Errorf("%s: the daemon's own secret leaked", where)
		}
		if !strings.Contains(text, "[masked:") {
			t.Errorf("%s has no [masked:<rule>] marker", where)
		}
	}
	for _, where := range []string{"turn", "transcript", "stream"} {
		for _, keep := range lookAlikes {
			if !strings.Contains(seen[where], keep) {
				t.Errorf("%s: look-alike %s was masked", where, keep)
			}
		}
	}
}
