package api_test

import (
	"io"
	"net/http"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/scripted"
)

// TestErrorCodes checks each error the API's routes can answer: its status,
// code and message (testdata/errors/), and that the bad requests created
// nothing.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("local", nil)
	conv := f.ask(v, "Is Load safe?")
	f.settle(conv, 1)
	pr := "/api/v1/repos/" + repoName + "/pulls/7"
	f.do("POST", "/api/v1/repos", map[string]any{"name": "acme/noclone"}, http.StatusCreated, nil)
	f.do("POST", "/api/v1/repos/acme/noclone/pulls/1/reviews", map[string]any{"head_sha": f.repo.Head()}, http.StatusCreated, nil)

	hold := make(chan struct{})
	defer close(hold)
	f.scripted.Push(scripted.Step{Wait: hold, Answer: goodAnswer("x")})
	sv := f.review("scripted", nil)
	busyConv := f.ask(sv, "Hold on?")
	f.run(busyConv, 1)
	f.waitCalls(1)
	history := []map[string]any{{"role": "user", "content": "Review it."}}

	tests := []struct {
		name         string
		method, path string
		body         any
		status       int
		code         string
	}{
		{"malformed_json", "POST", pr + "/reviews/1/conversations", `{"question":`, 400, "invalid"},
		{"invalid_utf8", "POST", pr + "/reviews/1/conversations", []byte("{\"question\":\"why \xff\"}"), 400, "invalid"},
		{"unknown_field", "POST", pr + "/reviews/1/conversations", `{"question":"q","qestion":"x"}`, 400, "invalid"},
		{"trailing_data", "POST", pr + "/reviews/1/conversations", `{"question":"q"} {}`, 400, "invalid"},
		{"empty_question", "POST", pr + "/reviews/1/conversations", `{"question":""}`, 400, "invalid"},
		{"question_too_long", "POST", pr + "/reviews/1/conversations", map[string]any{"question": strings.Repeat("a", 4001)}, 400, "invalid"},
		{"bad_focus_kind", "POST", pr + "/reviews/1/conversations", map[string]any{"question": "q", "focus": map[string]any{"kind": "file"}}, 400, "invalid"},
		{"absolute_anchor", "POST", pr + "/reviews/1/conversations", map[string]any{"question": "q", "focus": map[string]any{"kind": "stop", "anchors": []any{map[string]any{"path": "/etc/passwd"}}}}, 400, "invalid"},
		{"bad_anchor_side", "POST", pr + "/reviews/1/conversations", map[string]any{"question": "q", "focus": map[string]any{"kind": "stop", "anchors": []any{map[string]any{"path": "a.go", "start_line": 3, "side": "LEFT"}}}}, 400, "invalid"},
		{"body_too_large", "POST", pr + "/reviews", map[string]any{"head_sha": f.repo.Head(), "markdown": strings.Repeat("x", 3<<20)}, 413, "invalid"},
		{"streamed_body_too_large", "POST", pr + "/reviews", io.MultiReader(strings.NewReader(`{"markdown":"`), strings.NewReader(strings.Repeat("x", 3<<20))), 413, "invalid"},
		{"bad_pr_number", "GET", "/api/v1/repos/" + repoName + "/pulls/zero/reviews", nil, 400, "invalid"},
		{"bad_version", "GET", pr + "/reviews/first", nil, 400, "invalid"},
		{"bad_head_sha", "POST", pr + "/reviews", map[string]any{"head_sha": "main"}, 400, "invalid"},
		{"history_not_a_list", "POST", pr + "/reviews", map[string]any{"head_sha": f.repo.Head(), "backend": "openai", "session_history": map[string]any{"x": 1}}, 400, "invalid"},
		{"history_of_another_backend", "POST", pr + "/reviews", map[string]any{"head_sha": f.repo.Head(), "backend": "local", "session_history": history}, 400, "invalid"},
		{"bad_repo_name", "POST", "/api/v1/repos", map[string]any{"name": "no-slash"}, 400, "invalid"},
		{"bad_wait", "GET", "/api/v1/conversations/" + conv + "/turns/1?wait=soon", nil, 400, "invalid"},
		{"bad_turn_number", "GET", "/api/v1/conversations/" + conv + "/turns/0", nil, 400, "invalid"},
		{"bad_last_event_id", "GET", "/api/v1/conversations/" + conv + "/turns/1/events?last_event_id=x", nil, 400, "invalid"},
		{"wrong_method", "PUT", "/api/v1/repos", map[string]any{"name": repoName}, 405, "invalid"},
		{"wrong_method_on_a_turn", "DELETE", "/api/v1/conversations/" + conv + "/turns/1", nil, 405, "invalid"},
		{"unknown_repository", "GET", "/api/v1/repos/acme/nope", nil, 404, "repository_not_found"},
		{"ask_unknown_repository", "POST", "/api/v1/repos/acme/nope/pulls/7/reviews/1/conversations", map[string]any{"question": "q"}, 404, "repository_not_found"},
		{"no_review_version", "GET", pr + "/reviews/99", nil, 404, "no_review"},
		{"no_review_on_pr", "POST", "/api/v1/repos/" + repoName + "/pulls/8/reviews/latest/conversations", map[string]any{"question": "q"}, 404, "no_review"},
		{"unknown_conversation", "GET", "/api/v1/conversations/00000000-0000-0000-0000-000000000000", nil, 404, "not_found"},
		{"unknown_turn", "GET", "/api/v1/conversations/" + conv + "/turns/9", nil, 404, "not_found"},
		{"unknown_route", "GET", "/api/v1/nothing", nil, 404, "not_found"},
		{"busy", "POST", "/api/v1/conversations/" + busyConv + "/turns", map[string]any{"question": "again?"}, 409, "busy"},
		{"needs_clone", "POST", "/api/v1/repos/acme/noclone/pulls/1/reviews/1/conversations", map[string]any{"question": "q"}, 409, "needs_clone"},
		{"unsupported_backend", "POST", pr + "/reviews", map[string]any{"head_sha": f.repo.Head(), "backend": "gemini"}, 422, "unsupported_backend"},
		{"unsupported_provider", "POST", "/api/v1/conversations/" + conv + "/turns", map[string]any{"question": "q", "provider": "gemini"}, 422, "unsupported_backend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := f.c.send(t, tt.method, tt.path, tt.body)
			if r.status != tt.status || !strings.Contains(string(r.body), `"code":"`+tt.code+`"`) {
				t.Fatalf("%s %s = %d %s, want %d %s", tt.method, tt.path, r.status, r.body, tt.status, tt.code)
			}
			if r.status == http.StatusMethodNotAllowed && r.header.Get("Allow") == "" {
				t.Error("405 without an Allow header")
			}
			f.golden(t, "errors/"+tt.name, r)
		})
	}

	// Nothing was lost or created by the bad requests.
	var list struct{ Conversations []struct{ ID string } }
	f.do("GET", pr+"/conversations", nil, http.StatusOK, &list)
	if len(list.Conversations) != 2 {
		t.Errorf("conversations after bad requests = %d, want 2", len(list.Conversations))
	}
	var reviews struct{ Reviews []struct{ Version int } }
	f.do("GET", pr+"/reviews", nil, http.StatusOK, &reviews)
	if len(reviews.Reviews) != 2 {
		t.Errorf("reviews after bad requests = %d, want 2", len(reviews.Reviews))
	}
	var turns struct{ Turns []turnJSON }
	f.do("GET", "/api/v1/conversations/"+busyConv, nil, http.StatusOK, &turns)
	if len(turns.Turns) != 1 {
		t.Errorf("turns of the busy conversation = %d, want 1", len(turns.Turns))
	}
}

// TestNotReadyWithoutRedis: /readyz answers 503 unavailable when Redis is
// gone; /healthz still answers.
func TestNotReadyWithoutRedis(t *testing.T) {
	t.Parallel()
	f := setup(t)
	f.do("GET", "/readyz", nil, http.StatusOK, nil)
	_ = f.rdb.Close()
	r := f.c.send(t, "GET", "/readyz", nil)
	if r.status != http.StatusServiceUnavailable || !strings.Contains(string(r.body), `"code":"unavailable"`) {
		t.Fatalf("readyz without Redis = %d %s", r.status, r.body)
	}
	f.do("GET", "/healthz", nil, http.StatusOK, nil)
}
