package main

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/store/storetest"
)

// TestPostgresOutage: while the database is unreachable every route that
// needs it answers 503 unavailable with a trace id and a message that names
// no host, port, user or database (never 500); a turn that was running
// when the database went away is answered once it is back, not failed.
func TestPostgresOutage(t *testing.T) {
	if os.Getenv("PRCHAT_TEST_DATABASE_URL") == "" || os.Getenv("PRCHAT_TEST_REDIS_URL") == "" {
		t.Skip("needs Postgres and Redis")
	}
	t.Parallel()
	e := prepare(t, mode{name: "postgres+redis", real: true}, nil)
	u, err := url.Parse(e.cfg.DatabaseURL)
	if err != nil {
		t.Fatal(err)
	}
	proxy := storetest.NewProxy(t, u.Host)
	e.cfg.DatabaseURL = proxy.URL(e.cfg.DatabaseURL)
	e.serve(roleOf("serve"))
	v := e.review("scripted", nil)

	release := make(chan struct{})
	e.scripted.Push(scripted.Step{Wait: release, Answer: goodAnswer("answered after the outage")})
	conv, _ := e.ask(v, "What does Load do?")
	e.waitState(conv, 1, "running")

	proxy.Cut()
	forbidden := []string{u.Hostname(), u.Port(), u.User.Username(), strings.TrimPrefix(u.Path, "/"), "127.0.0.1", "dial", "pgx", "sql"}
	// Reads the API holds in its cache may still answer 200.
	cached := map[string]bool{"/api/v1/repos/" + e.repo: true, fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d", e.repo, v): true}
	for _, r := range []struct{ method, path, body string }{
		{"GET", "/readyz", ""},
		{"GET", "/api/v1/repos", ""},
		{"GET", "/api/v1/repos/" + e.repo, ""},
		{"GET", "/api/v1/repos/" + e.repo + "/pulls/7/reviews", ""},
		{"GET", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d", e.repo, v), ""},
		{"GET", "/api/v1/repos/" + e.repo + "/pulls/7/conversations", ""},
		{"GET", "/api/v1/conversations/" + conv, ""},
		{"GET", "/api/v1/conversations/" + conv + "/turns/1", ""},
		{"GET", "/api/v1/conversations/" + conv + "/turns/1?wait=1s", ""},
		{"GET", "/api/v1/conversations/" + conv + "/turns/1/transcript", ""},
		{"GET", "/api/v1/conversations/" + conv + "/turns/1/events", ""},
		{"POST", "/api/v1/conversations/" + conv + "/turns", `{"question":"And then?"}`},
		{"POST", fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/conversations", e.repo, v), `{"question":"Another?"}`},
		{"POST", "/api/v1/repos", `{"name":"acme/other","clone_path":"` + e.repoDir + `"}`},
		{"GET", "/api/v1/providers", ""},
	} {
		req, err := http.NewRequest(r.method, e.url+r.path, strings.NewReader(r.body))
		if err != nil {
			t.Fatal(err)
		}
		req.Header.Set("Content-Type", "application/json")
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatalf("%s %s: %v", r.method, r.path, err)
		}
		raw, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		var body struct {
			Error struct {
				Code    string `json:"code"`
				TraceID string `json:"trace_id"`
			} `json:"error"`
		}
		_ = json.Unmarshal(raw, &body)
		if r.path == "/readyz" {
			body.Error.Code, body.Error.TraceID = "unavailable", resp.Header.Get("X-Request-Id") // its own body
		}
		if cached[r.path] && resp.StatusCode == http.StatusOK {
			continue
		}
		if resp.StatusCode != http.StatusServiceUnavailable || body.Error.Code != "unavailable" || body.Error.TraceID == "" {
			t.Errorf("%s %s during the outage: %d %s, want 503 unavailable with a trace id", r.method, r.path, resp.StatusCode, raw)
		}
		// The trace id is random hex: it may hold the port's digits.
		text := strings.ToLower(string(raw))
		if body.Error.TraceID != "" {
			text = strings.ReplaceAll(text, strings.ToLower(body.Error.TraceID), "")
		}
		for _, f := range forbidden {
			if f != "" && strings.Contains(text, strings.ToLower(f)) {
				t.Errorf("%s %s: answer %s names %q", r.method, r.path, raw, f)
			}
		}
	}

	// The agent answers while the database is away; the run keeps the
	// answer until it is back.
	close(release)
	time.Sleep(1500 * time.Millisecond) // the outage lasts a while: the behaviour under test
	proxy.Restore()
	got := e.wait(conv, 1)
	if got.State != "succeeded" || got.Answer == nil || got.Answer.AnswerMarkdown != "answered after the outage" {
		t.Fatalf("turn after the outage: %+v, want succeeded with the agent's answer", got)
	}
}
