package main

import (
	"net/http"
	"strings"
	"testing"

	"github.com/prchat/prchat/agentsession/scripted"
)

// TestErrorCodes checks each error code the API's routes can produce, with
// its status and the contract's error JSON.
func TestErrorCodes(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("local", nil)
	conv, _ := e.ask(v, "Is Load safe?")
	e.wait(conv, 1)
	pr := "/api/v1/repos/" + e.repo + "/pulls/7"
	e.do("POST", "/api/v1/repos", map[string]any{"name": "acme/noclone"}, http.StatusCreated, nil)
	e.do("POST", "/api/v1/repos/acme/noclone/pulls/1/reviews", map[string]any{"head_sha": e.head}, http.StatusCreated, nil)

	hold := make(chan struct{})
	defer close(hold)
	e.scripted.Push(scripted.Step{Wait: hold, Answer: goodAnswer("x")})
	sv := e.review("scripted", nil)
	busyConv, _ := e.ask(sv, "Hold on?")
	e.waitState(busyConv, 1, "running")

	tests := []struct {
		name         string
		method, path string
		body         any
		status       int
		code         string
	}{
		{"malformed json", "POST", pr + "/reviews/1/conversations", `{"question":`, 400, "invalid"},
		{"invalid utf8", "POST", pr + "/reviews/1/conversations", []byte("{\"question\":\"why \xff\"}"), 400, "invalid"},
		{"unknown field", "POST", pr + "/reviews/1/conversations", `{"question":"q","qestion":"x"}`, 400, "invalid"},
		{"empty question", "POST", pr + "/reviews/1/conversations", `{"question":""}`, 400, "invalid"},
		{"question too long", "POST", pr + "/reviews/1/conversations", map[string]any{"question": strings.Repeat("a", 4001)}, 400, "invalid"},
		{"bad focus kind", "POST", pr + "/reviews/1/conversations", map[string]any{"question": "q", "focus": map[string]any{"kind": "file"}}, 400, "invalid"},
		{"absolute anchor", "POST", pr + "/reviews/1/conversations", map[string]any{"question": "q", "focus": map[string]any{"kind": "stop", "anchors": []any{map[string]any{"path": "/etc/passwd"}}}}, 400, "invalid"},
		{"body too large", "POST", pr + "/reviews", map[string]any{"head_sha": e.head, "markdown": strings.Repeat("x", 3<<20)}, 400, "invalid"},
		{"bad pr number", "GET", "/api/v1/repos/" + e.repo + "/pulls/zero/reviews", nil, 400, "invalid"},
		{"bad head sha", "POST", pr + "/reviews", map[string]any{"head_sha": "main"}, 400, "invalid"},
		{"bad repo name", "POST", "/api/v1/repos", map[string]any{"name": "no-slash"}, 400, "invalid"},
		{"bad wait", "GET", "/api/v1/conversations/" + conv + "/turns/1?wait=soon", nil, 400, "invalid"},
		{"unknown repository", "GET", "/api/v1/repos/acme/nope", nil, 404, "repository_not_found"},
		{"ask unknown repository", "POST", "/api/v1/repos/acme/nope/pulls/7/reviews/1/conversations", map[string]any{"question": "q"}, 404, "repository_not_found"},
		{"no review version", "GET", pr + "/reviews/99", nil, 404, "no_review"},
		{"no review on pr", "POST", "/api/v1/repos/" + e.repo + "/pulls/8/reviews/latest/conversations", map[string]any{"question": "q"}, 404, "no_review"},
		{"unknown conversation", "GET", "/api/v1/conversations/00000000-0000-0000-0000-000000000000", nil, 404, "not_found"},
		{"unknown turn", "GET", "/api/v1/conversations/" + conv + "/turns/9", nil, 404, "not_found"},
		{"unknown route", "GET", "/api/v1/nothing", nil, 404, "not_found"},
		{"busy", "POST", "/api/v1/conversations/" + busyConv + "/turns", map[string]any{"question": "again?"}, 409, "busy"},
		{"needs clone", "POST", "/api/v1/repos/acme/noclone/pulls/1/reviews/1/conversations", map[string]any{"question": "q"}, 409, "needs_clone"},
		{"unsupported backend", "POST", pr + "/reviews", map[string]any{"head_sha": e.head, "backend": "gemini"}, 422, "unsupported_backend"},
		{"unsupported provider", "POST", "/api/v1/conversations/" + conv + "/turns", map[string]any{"question": "q", "provider": "gemini"}, 422, "unsupported_backend"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body struct {
				Error struct {
					Code    string `json:"code"`
					Message string `json:"message"`
					TraceID string `json:"trace_id"`
				} `json:"error"`
			}
			doAt(t, e.url, tt.method, tt.path, tt.body, tt.status, &body)
			if body.Error.Code != tt.code || body.Error.Message == "" || body.Error.TraceID == "" {
				t.Fatalf("error = %+v, want code %s with a message and trace id", body.Error, tt.code)
			}
		})
	}

	// Nothing was lost or created by the bad requests.
	var list struct{ Conversations []struct{ ID string } }
	e.do("GET", pr+"/conversations", nil, http.StatusOK, &list)
	if len(list.Conversations) != 2 {
		t.Errorf("conversations after bad requests = %d, want 2", len(list.Conversations))
	}
}

// TestNotReadyWithoutRedis checks /readyz answers 503 unavailable when Redis
// is gone.
func TestNotReadyWithoutRedis(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	e.do("GET", "/readyz", nil, http.StatusOK, nil)
	e.d.embedded.Close()
	var body struct{ Error struct{ Code string } }
	e.do("GET", "/readyz", nil, http.StatusServiceUnavailable, &body)
	if body.Error.Code != "unavailable" {
		t.Fatalf("code = %q, want unavailable", body.Error.Code)
	}
	e.do("GET", "/healthz", nil, http.StatusOK, nil)
}
