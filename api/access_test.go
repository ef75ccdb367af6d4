package api_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// tokens are the tokens of an access fixture, by what they are.
type tokens struct {
	admin, read, ask, revoked, unknown string
	// widget may only see repoName; other only acme/other.
	widget, other string
	otherID       string
}

func (f *fixture) token(name string, scope chat.Scope, repos ...string) (string, string) {
	f.t.Helper()
	t, value, err := f.access.CreateToken(context.Background(), name, scope, repos)
	if err != nil {
		f.t.Fatal(err)
	}
	return value, t.ID
}

func (f *fixture) makeTokens() tokens {
	f.t.Helper()
	var ts tokens
	ts.admin, _ = f.token("admin", chat.ScopeAdmin)
	ts.read, _ = f.token("reader", chat.ScopeRead)
	ts.ask, _ = f.token("asker", chat.ScopeAsk)
	ts.widget, _ = f.token("widget admin", chat.ScopeAdmin, repoName)
	ts.other, ts.otherID = f.token("other admin", chat.ScopeAdmin, "acme/other")
	var id string
	ts.revoked, id = f.token("gone", chat.ScopeAdmin)
	if _, err := f.access.RevokeToken(context.Background(), id); err != nil {
		f.t.Fatal(err)
	}
	ts.unknown = "prc_" + strings.Repeat("Z", 43)
	return ts
}

// as sends a request with a bearer token ("" for none).
func (f *fixture) as(t *testing.T, token, method, path string, body any) response {
	t.Helper()
	if token == "" {
		return f.c.send(t, method, path, body)
	}
	return f.c.send(t, method, path, body, "Authorization", "Bearer "+token)
}

// counts are the rows of every table a request could write, and the
// states of the turns, so that a test sees that refused requests changed
// nothing.
func (f *fixture) counts() map[string]int64 {
	f.t.Helper()
	out := map[string]int64{}
	for _, q := range []string{
		"SELECT count(*) FROM repositories", "SELECT count(*) FROM reviews", "SELECT count(*) FROM conversations",
		"SELECT count(*) FROM turns", "SELECT count(*) FROM turn_events", "SELECT count(*) FROM api_tokens",
		"SELECT count(*) FROM api_tokens WHERE revoked_at IS NOT NULL", "SELECT count(*) FROM provider_keys",
		"SELECT count(*) FROM settings", "SELECT count(*) FROM turns WHERE state = 'cancelled'",
	} {
		var n int64
		if err := f.store.DB().Raw(q).Scan(&n).Error; err != nil {
			f.t.Fatalf("%s: %v", q, err)
		}
		out[q] = n
	}
	return out
}

var echoParamRE = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestEveryRouteRefusesWithoutTheRightToken reads the /api routes from the
// server (so that a new route cannot be left out) and sends each with no
// token, an unknown, a revoked and a wrong-scope token, and a token for
// another repository. Each is refused with 401, 403 or 404 as the contract
// says, and nothing is created, changed or deleted.
func TestEveryRouteRefusesWithoutTheRightToken(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.access = true })
	other := agentsessiontest.NewRepo(t, map[string]string{"x.go": "package x\n"})
	f.do("POST", "/api/v1/repos", map[string]any{"name": "acme/other", "clone_path": other.Dir}, http.StatusCreated, nil)
	v := f.review("local", nil)
	conv := f.ask(v, "Is Load safe?")
	f.settle(conv, 1)
	ts := f.makeTokens()

	params := map[string]string{"owner": "acme", "repo": "widget", "pr": "7", "version": "1", "n": "1"}
	bodies := map[string]any{
		"POST /api/v1/repos": map[string]any{"name": "acme/new", "clone_path": f.repo.Dir},
		"POST /api/v1/repos/:owner/:repo/pulls/:pr/reviews":                        map[string]any{"head_sha": f.repo.Head(), "markdown": "again"},
		"POST /api/v1/repos/:owner/:repo/pulls/:pr/reviews/:version/conversations": map[string]any{"question": "Why?"},
		"POST /api/v1/conversations/:id/turns":                                     map[string]any{"question": "And then?"},
		"POST /api/v1/conversations/:id/turns/:n/cancel":                           nil,
		"PATCH /api/v1/providers/active":                                           map[string]any{"provider": "ollama"},
		"POST /api/v1/providers/:id/key":                                           map[string]any{"key": "sk-test-0123456789abcdef"},
		"POST /api/v1/tokens":                                                      map[string]any{"name": "more", "scope": "admin"},
	}
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		t.Fatal(err)
	}
	before := f.counts()
	var routes int
	for _, r := range f.srv.Routes() {
		if !strings.HasPrefix(r.Path, "/api/") {
			continue
		}
		routes++
		key := r.Method + " " + r.Path
		path := echoParamRE.ReplaceAllStringFunc(r.Path, func(m string) string {
			name := m[1:]
			if name == "id" {
				switch {
				case strings.HasPrefix(r.Path, "/api/v1/conversations/"):
					return conv
				case strings.HasPrefix(r.Path, "/api/v1/providers/"):
					return "openai"
				case strings.HasPrefix(r.Path, "/api/v1/tokens/"):
					return ts.otherID
				}
			}
			v, ok := params[name]
			if !ok {
				t.Fatalf("route %s has a parameter :%s this test does not know", key, name)
			}
			return v
		})
		body, ok := bodies[key]
		if (r.Method == "POST" || r.Method == "PATCH") && !ok {
			t.Fatalf("route %s takes a body this test does not know: add one", key)
		}
		op := doc.Paths.Find(echoParamRE.ReplaceAllString(r.Path, "{$1}"))
		if op == nil || op.GetOperation(r.Method) == nil {
			t.Fatalf("route %s is not in openapi.json", key)
		}
		ext := op.GetOperation(r.Method).Extensions
		need, _ := ext["x-prchat-scope"].(string)
		allRepos, _ := ext["x-prchat-all-repositories"].(bool)

		type attempt struct {
			who, token string
			status     int
			code       string
		}
		attempts := []attempt{
			{"no token", "", 401, "unauthorized"},
			{"unknown token", ts.unknown, 401, "unauthorized"},
			{"revoked token", ts.revoked, 401, "unauthorized"},
			{"not a prchat token", "sk-not-ours", 401, "unauthorized"},
		}
		switch need {
		case "ask":
			attempts = append(attempts, attempt{"read token", ts.read, 403, "forbidden"})
		case "admin":
			attempts = append(attempts, attempt{"ask token", ts.ask, 403, "forbidden"}, attempt{"read token", ts.read, 403, "forbidden"})
		}
		switch {
		case allRepos || key == "POST /api/v1/repos":
			attempts = append(attempts, attempt{"token of another repository", ts.other, 403, "forbidden"})
		case key == "GET /api/v1/repos", key == "GET /api/v1/stats":
			// answered, without the repository: checked below
		case strings.Contains(r.Path, ":owner"):
			attempts = append(attempts, attempt{"token of another repository", ts.other, 404, "repository_not_found"})
		default:
			attempts = append(attempts, attempt{"token of another repository", ts.other, 404, "not_found"})
		}
		for _, a := range attempts {
			got := f.as(t, a.token, r.Method, path, body)
			if got.status != a.status || !strings.Contains(string(got.body), `"code":"`+a.code+`"`) {
				t.Errorf("%s %s with %s = %d %s, want %d %s", r.Method, path, a.who, got.status, got.body, a.status, a.code)
			}
			if a.status == 401 && got.header.Get("WWW-Authenticate") == "" {
				t.Errorf("%s %s with %s: 401 without WWW-Authenticate", r.Method, path, a.who)
			}
		}
	}
	if routes < 20 {
		t.Fatalf("the server lists %d /api routes; the route list is not read right", routes)
	}
	if diff := cmp.Diff(before, f.counts()); diff != "" {
		t.Errorf("refused requests changed the database (-before +after):\n%s", diff)
	}

	// A token limited to repositories lists only those; the probes need no
	// token at all.
	var list struct{ Repositories []struct{ Name string } }
	if err := json.Unmarshal(f.as(t, ts.other, "GET", "/api/v1/repos", nil).body, &list); err != nil {
		t.Fatal(err)
	}
	if len(list.Repositories) != 1 || list.Repositories[0].Name != "acme/other" {
		t.Errorf("a token of acme/other lists %+v", list.Repositories)
	}
	// ... and counts only their turns in the team figures.
	var mine, others struct{ Turns int }
	if err := json.Unmarshal(f.as(t, ts.admin, "GET", "/api/v1/stats", nil).body, &mine); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(f.as(t, ts.other, "GET", "/api/v1/stats", nil).body, &others); err != nil {
		t.Fatal(err)
	}
	if mine.Turns == 0 || others.Turns != 0 {
		t.Errorf("stats count %d turns for an admin and %d for a token of acme/other, want some and none", mine.Turns, others.Turns)
	}
	for _, p := range []string{"/healthz", "/readyz", "/metrics", "/openapi.json"} {
		if r := f.c.send(t, "GET", p, nil); r.status != 200 {
			t.Errorf("GET %s without a token = %d", p, r.status)
		}
	}
}

// TestScopesAndRepositoriesAllow: each scope can do what it covers, a
// token of one repository works on it, and the token routes work.
func TestScopesAndRepositoriesAllow(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.access = true })
	v := f.review("local", nil)
	conv := f.ask(v, "Is Load safe?")
	f.settle(conv, 1)
	ts := f.makeTokens()

	pr := "/api/v1/repos/" + repoName + "/pulls/7"
	for _, c := range []struct {
		token, method, path string
		body                any
		status              int
	}{
		{ts.read, "GET", "/api/v1/repos/" + repoName, nil, 200},
		{ts.read, "GET", "/api/v1/conversations/" + conv, nil, 200},
		{ts.read, "GET", "/api/v1/conversations/" + conv + "/turns/1", nil, 200},
		{ts.read, "GET", "/api/v1/conversations/" + conv + "/turns/1/transcript", nil, 200},
		{ts.ask, "POST", "/api/v1/conversations/" + conv + "/turns", map[string]any{"question": "Next?"}, 202},
		{ts.ask, "POST", "/api/v1/conversations/" + conv + "/turns/2/cancel", nil, 202},
		{ts.widget, "GET", pr + "/conversations", nil, 200},
		{ts.widget, "POST", pr + "/reviews", map[string]any{"head_sha": f.repo.Head(), "markdown": "v2"}, 201},
		{ts.admin, "POST", "/api/v1/repos", map[string]any{"name": repoName, "clone_path": f.repo.Dir}, 200},
		{ts.admin, "GET", "/api/v1/tokens", nil, 200},
		{ts.admin, "PATCH", "/api/v1/providers/active", map[string]any{"provider": "ollama"}, 200},
	} {
		if got := f.as(t, c.token, c.method, c.path, c.body); got.status != c.status {
			t.Errorf("%s %s = %d %s, want %d", c.method, c.path, got.status, got.body, c.status)
		}
	}

	// Tokens through the API: made (value shown once), listed, revoked.
	var made struct {
		ID    string
		Token string
		Scope string
	}
	if err := json.Unmarshal(f.as(t, ts.admin, "POST", "/api/v1/tokens", map[string]any{"name": "ci", "scope": "read", "repos": []string{repoName}}).body, &made); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(made.Token, "prc_") || made.Scope != "read" {
		t.Fatalf("made token = %+v", made)
	}
	if r := f.as(t, made.Token, "GET", "/api/v1/repos/"+repoName, nil); r.status != 200 {
		t.Errorf("the new token: %d %s", r.status, r.body)
	}
	list := f.as(t, ts.admin, "GET", "/api/v1/tokens", nil)
	if strings.Contains(string(list.body), made.Token) || strings.Contains(string(list.body), ts.admin) {
		t.Error("the token list shows token values")
	}
	if r := f.as(t, ts.admin, "DELETE", "/api/v1/tokens/"+made.ID, nil); r.status != 204 {
		t.Errorf("revoke: %d %s", r.status, r.body)
	}
	if r := f.as(t, made.Token, "GET", "/api/v1/repos/"+repoName, nil); r.status != 401 {
		t.Errorf("a revoked token: %d, want 401", r.status)
	}
	if r := f.as(t, ts.admin, "DELETE", "/api/v1/tokens/00000000-0000-0000-0000-000000000000", nil); r.status != 404 {
		t.Errorf("revoke an unknown token: %d, want 404", r.status)
	}
	if r := f.as(t, ts.admin, "DELETE", "/api/v1/conversations/"+conv, nil); r.status != 204 {
		t.Errorf("delete: %d %s", r.status, r.body)
	}
}

// fakeClock is a clock that moves only when told.
type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

// TestRateLimits drives the per-token request limit (in the process) and
// the per-repository question limit (in Redis) with a fake clock: over the
// limit a request is 429 rate_limited with Retry-After and creates
// nothing; once the clock moves on it passes.
func TestRateLimits(t *testing.T) {
	t.Parallel()
	clock := &fakeClock{now: time.Date(2026, 3, 1, 9, 0, 0, 0, time.UTC)}
	f := setup(t, func(o *options) {
		o.access = true
		o.api.RequestRate = chat.Rate{Count: 3, Per: time.Second}
		o.api.Now = clock.Now
		o.chat.QuestionsPerRepo = chat.Rate{Count: 1, Per: time.Minute}
		o.now = clock.Now
	})
	v := f.review("local", nil)
	ts := f.makeTokens()
	path := "/api/v1/repos/" + repoName
	for i := range 3 {
		if r := f.as(t, ts.read, "GET", path, nil); r.status != 200 {
			t.Fatalf("request %d: %d %s", i+1, r.status, r.body)
		}
	}
	r := f.as(t, ts.read, "GET", path, nil)
	if r.status != 429 || !strings.Contains(string(r.body), `"code":"rate_limited"`) || r.header.Get("Retry-After") != "1" {
		t.Fatalf("4th request in a second = %d %s (Retry-After %q), want 429 rate_limited, Retry-After 1", r.status, r.body, r.header.Get("Retry-After"))
	}
	if r := f.as(t, ts.admin, "GET", path, nil); r.status != 200 {
		t.Errorf("another token is limited too: %d", r.status)
	}
	clock.Add(time.Second / 3)
	if r := f.as(t, ts.read, "GET", path, nil); r.status != 200 {
		t.Errorf("a third of a second later: %d, want 200", r.status)
	}

	ask := fmt.Sprintf("/api/v1/repos/%s/pulls/7/reviews/%d/conversations", repoName, v)
	if r := f.as(t, ts.ask, "POST", ask, map[string]any{"question": "First?"}); r.status != 202 {
		t.Fatalf("first question: %d %s", r.status, r.body)
	}
	before := f.counts()
	r = f.as(t, ts.admin, "POST", ask, map[string]any{"question": "Second?"})
	if r.status != 429 || !strings.Contains(string(r.body), "questions about "+repoName) || r.header.Get("Retry-After") != "60" {
		t.Fatalf("second question in a minute (another token) = %d %s (Retry-After %q), want 429 with Retry-After 60", r.status, r.body, r.header.Get("Retry-After"))
	}
	if diff := cmp.Diff(before, f.counts()); diff != "" {
		t.Errorf("the refused question changed the database:\n%s", diff)
	}
	clock.Add(time.Minute)
	if r := f.as(t, ts.admin, "POST", ask, map[string]any{"question": "Second?"}); r.status != 202 {
		t.Errorf("a minute later: %d %s", r.status, r.body)
	}
}

// TestOpenUntilATokenExists: with no token every route is open; the
// first token (made on the store, as prchat token create does) is
// enforced from the next second on.
func TestOpenUntilATokenExists(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.access = true })
	f.do("GET", "/api/v1/repos", nil, 200, nil)
	cli, err := chat.NewAccess(chat.AccessConfig{}, f.store)
	if err != nil {
		t.Fatal(err)
	}
	if _, _, err := cli.CreateToken(context.Background(), "first", chat.ScopeAdmin, nil); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "a token made by another process to be enforced", func() bool { return f.c.send(t, "GET", "/api/v1/repos", nil).status == 401 })
}

// TestRegistrationChecks: clone paths must be git repositories under the
// roots, clone URLs must reach another host.
func TestRegistrationChecks(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	inside := agentsessiontest.NewRepo(t, map[string]string{"a.go": "package a\n"})
	// Put a repository under the root, a plain folder and a link out.
	dst := filepath.Join(root, "good")
	if err := os.Rename(inside.Dir, dst); err != nil {
		t.Fatal(err)
	}
	if err := os.Mkdir(filepath.Join(root, "plain"), 0o755); err != nil {
		t.Fatal(err)
	}
	outside, err := os.MkdirTemp("", "prchat-outside-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(outside) })
	if err := os.Symlink(outside, filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	f := setup(t, func(o *options) { o.chat.AnyPath = false; o.chat.ReposRoots = []string{root, f0Dir(t)} })
	for _, c := range []struct {
		name   string
		body   map[string]any
		status int
		msg    string
	}{
		{"git repository under the root", map[string]any{"clone_path": dst}, 201, ""},
		{"relative path", map[string]any{"clone_path": "../.."}, 400, "absolute"},
		{"outside the roots", map[string]any{"clone_path": "/etc"}, 400, "not under a repository root"},
		{"a link out of the root", map[string]any{"clone_path": filepath.Join(root, "link")}, 400, "not under a repository root"},
		{"not a git repository", map[string]any{"clone_path": filepath.Join(root, "plain")}, 400, "not a git repository"},
		{"missing", map[string]any{"clone_path": filepath.Join(root, "nope")}, 400, "does not exist"},
		{"file URL", map[string]any{"clone_url": "file:///etc"}, 400, "PRCHAT_ALLOW_FILE_URLS"},
		{"local path URL", map[string]any{"clone_url": "/srv/git/x.git"}, 400, "PRCHAT_ALLOW_FILE_URLS"},
		{"ext transport", map[string]any{"clone_url": "ext::sh -c touch% /tmp/pwned"}, 400, "clone_url"},
		{"option", map[string]any{"clone_url": "--upload-pack=touch /tmp/x"}, 400, "clone_url"},
		{"plain http", map[string]any{"clone_url": "http://example.com/x.git"}, 400, "PRCHAT_ALLOW_FILE_URLS"},
		{"https", map[string]any{"clone_url": "https://example.com/acme/x.git"}, 201, ""},
		{"ssh", map[string]any{"clone_url": "ssh://git@example.com/acme/x.git"}, 201, ""},
		{"scp-like", map[string]any{"clone_url": "git@example.com:acme/x.git"}, 201, ""},
		// Hosts that resolve to addresses of this host or its network.
		{"loopback", map[string]any{"clone_url": "https://127.0.0.1/acme/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"loopback of 127.0.0.0-8", map[string]any{"clone_url": "https://127.1.2.3:8443/acme/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"localhost", map[string]any{"clone_url": "https://localhost/acme/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"cloud metadata", map[string]any{"clone_url": "https://169.254.169.254/latest/meta-data"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"private ssh", map[string]any{"clone_url": "ssh://git@10.0.0.7/acme/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"private scp-like", map[string]any{"clone_url": "git@192.168.1.20:acme/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"IPv6 loopback", map[string]any{"clone_url": "https://[::1]/acme/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"IPv4 mapped in IPv6", map[string]any{"clone_url": "https://[::ffff:169.254.169.254]/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"unique local IPv6", map[string]any{"clone_url": "ssh://git@[fd00::1]/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"unspecified", map[string]any{"clone_url": "https://0.0.0.0/x.git"}, 400, "PRCHAT_CLONE_ALLOW_PRIVATE"},
		{"public address", map[string]any{"clone_url": "https://140.82.112.3/acme/x.git"}, 201, ""},
		{"public IPv6 address", map[string]any{"clone_url": "https://[2606:50c0:8000::153]/acme/x.git"}, 201, ""},
	} {
		c.body["name"] = "acme/" + strings.ReplaceAll(c.name, " ", "-")
		r := f.c.send(t, "POST", "/api/v1/repos", c.body)
		if r.status != c.status || !strings.Contains(string(r.body), c.msg) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, r.status, r.body, c.status, c.msg)
		}
		// Errors echo the path the client gave, never what it resolves to
		// on the server.
		if strings.Contains(string(r.body), outside) {
			t.Errorf("%s: the error names where the link leads: %s", c.name, r.body)
		}
	}
}

// f0Dir is the parent of the test's temporary folders, a root that holds
// the fixture's own repository, so that setup can register it.
func f0Dir(t *testing.T) string {
	return filepath.Dir(t.TempDir())
}

// TestReviewChecks: a review's commits must be in the clone (422 naming
// the commit), an abbreviated one is stored in full, and session ids must
// have their backend's form.
func TestReviewChecks(t *testing.T) {
	t.Parallel()
	f := setup(t)
	pr := "/api/v1/repos/" + repoName + "/pulls/7/reviews"
	missing := strings.Repeat("ab", 20)
	before := f.counts()
	for _, c := range []struct {
		name   string
		body   map[string]any
		status int
		msg    string
	}{
		{"head not in the clone", map[string]any{"head_sha": missing}, 422, "head_sha " + missing + " is not a commit of " + repoName},
		{"base not in the clone", map[string]any{"head_sha": f.repo.Head(), "base_sha": "deadbeef"}, 422, "base_sha deadbeef is not a commit"},
		{"claude session not a uuid", map[string]any{"head_sha": f.repo.Head(), "backend": "claude-code", "session_id": "../../etc"}, 400, "session_id"},
		{"codex session not a uuid", map[string]any{"head_sha": f.repo.Head(), "backend": "codex", "session_id": "latest"}, 400, "session_id"},
		{"relative run dir", map[string]any{"head_sha": f.repo.Head(), "run_dir": "runs/x"}, 400, "run_dir must be an absolute path"},
		{"session host a path", map[string]any{"head_sha": f.repo.Head(), "session_host": "../../x\n"}, 400, "session_host must be a worker id"},
		{"session host with a space", map[string]any{"head_sha": f.repo.Head(), "session_host": "build box"}, 400, "session_host must be a worker id"},
		{"session host a queue name", map[string]any{"head_sha": f.repo.Head(), "session_host": "host:x"}, 400, "session_host must be a worker id"},
	} {
		r := f.c.send(t, "POST", pr, c.body)
		if r.status != c.status || !strings.Contains(string(r.body), c.msg) {
			t.Errorf("%s: %d %s, want %d with %q", c.name, r.status, r.body, c.status, c.msg)
		}
		if strings.Contains(string(r.body), f.repo.Dir) || strings.Contains(string(r.body), f.dataDir) || strings.Contains(string(r.body), "git ") {
			t.Errorf("%s: the error shows a server path or a git command: %s", c.name, r.body)
		}
	}
	if diff := cmp.Diff(before, f.counts()); diff != "" {
		t.Errorf("refused reviews changed the database:\n%s", diff)
	}
	var r struct {
		HeadSHA string `json:"head_sha"`
		BaseSHA string `json:"base_sha"`
	}
	f.do("POST", pr, map[string]any{"head_sha": f.repo.Head()[:10], "base_sha": f.repo.Commits[0][:8], "backend": "claude-code",
		"session_id": "0b7c6a3e-7a8f-4c1e-9a3e-2f1d5c9b8a71", "session_host": "build-7.ci_pool.example", "run_dir": f.repo.Dir}, http.StatusCreated, &r)
	if r.HeadSHA != f.repo.Head() || r.BaseSHA != f.repo.Commits[0] {
		t.Errorf("stored commits %s, %s; want the full ids", r.HeadSHA, r.BaseSHA)
	}
}

// TestRunDirUnderTheRoots: with roots configured, a review's run
// directory must lie under one.
func TestRunDirUnderTheRoots(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.chat.AnyPath = false; o.chat.ReposRoots = []string{f0Dir(t)} })
	pr := "/api/v1/repos/" + repoName + "/pulls/7/reviews"
	for _, body := range []map[string]any{
		{"run_dir": "/etc"},
		{"run_dir": "/var/lib/elsewhere/run", "session_host": "w1"},
		{"session_cwd": "/var/lib/elsewhere/run", "session_host": "w1"},
	} {
		body["head_sha"] = f.repo.Head()
		if r := f.c.send(t, "POST", pr, body); r.status != 400 || !strings.Contains(string(r.body), "not under a repository root") {
			t.Errorf("%v: %d %s, want 400", body, r.status, r.body)
		}
	}
	f.do("POST", pr, map[string]any{"head_sha": f.repo.Head(), "run_dir": f.repo.Dir}, http.StatusCreated, nil)
	// A directory on another machine with no worker named to run there
	// (a laptop's, a CI runner's: the session's file is uploaded) is only
	// where the session ran, never a place an agent runs in.
	f.do("POST", pr, map[string]any{"head_sha": f.repo.Head(), "session_cwd": "/home/runner/work/widget"}, http.StatusCreated, nil)
}

// TestNULIsRefused: a NUL byte in any string of a body, in the path or in
// the query is 400 invalid and stores nothing, on either store.
func TestNULIsRefused(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("local", nil)
	conv := f.ask(v, "Is Load safe?")
	f.settle(conv, 1)
	pr := "/api/v1/repos/" + repoName + "/pulls/7"
	before := f.counts()
	for _, c := range []struct {
		method, path string
		body         any
	}{
		{"POST", pr + "/reviews/1/conversations", `{"question":"why\u0000?"}`},
		{"POST", "/api/v1/conversations/" + conv + "/turns", `{"question":"ok","focus":{"kind":"stop","anchors":[{"path":"a\u0000.go"}]}}`},
		{"POST", pr + "/reviews", `{"head_sha":"` + f.repo.Head() + `","markdown":"x\u0000y"}`},
		{"POST", pr + "/reviews", `{"head_sha":"` + f.repo.Head() + `","model":"\u0000"}`},
		{"POST", "/api/v1/repos", `{"name":"acme/nul","clone_url":"https://example.com/\u0000"}`},
		{"POST", "/api/v1/repos", `{"name":"acme/nul\u0000"}`},
		{"GET", "/api/v1/conversations/%00", nil},
		{"GET", "/api/v1/conversations/" + conv + "/turns/1?wait=1%00", nil},
	} {
		r := f.c.send(t, c.method, c.path, c.body)
		if r.status != 400 || !strings.Contains(string(r.body), `"code":"invalid"`) {
			t.Errorf("%s %s %v: %d %s, want 400 invalid", c.method, c.path, c.body, r.status, r.body)
		}
	}
	if diff := cmp.Diff(before, f.counts()); diff != "" {
		t.Errorf("requests with NUL changed the database:\n%s", diff)
	}
	// An escaped backslash before u0000 is text, not a NUL.
	f.do("POST", pr+"/reviews/1/conversations", `{"question":"what does \\u0000 mean?"}`, http.StatusAccepted, nil)
}

// TestConversationsNeverWriteIntoTheClone: a conversation's run directory
// is a worktree of prchat's own repository under the data folder; the
// registered clone's worktree list stays as it was, also after the
// conversation is deleted.
func TestConversationsNeverWriteIntoTheClone(t *testing.T) {
	t.Parallel()
	f := setup(t)
	list := func() string { return agentsessiontest.Git(t, f.repo.Dir, "worktree", "list", "--porcelain") }
	before := list()
	v := f.review("local", nil)
	var convs []string
	for _, q := range []string{"Is Load safe?", "Where is errEmptyPath?"} {
		conv := f.ask(v, q)
		if got := f.settle(conv, 1); got.State != "succeeded" {
			t.Fatalf("turn = %+v", got)
		}
		convs = append(convs, conv)
	}
	if after := list(); after != before {
		t.Errorf("the clone's worktree list changed:\n%s\nwas\n%s", after, before)
	}
	runs, _ := filepath.Glob(filepath.Join(f.dataDir, "runs", "*"))
	if len(runs) != 2 {
		t.Fatalf("run directories = %v, want 2", runs)
	}
	common := agentsessiontest.Git(t, runs[0], "rev-parse", "--path-format=absolute", "--git-common-dir")
	if !strings.HasPrefix(common, f.dataDir) {
		t.Errorf("the run directory belongs to %s, not to prchat's data folder", common)
	}
	for _, c := range convs {
		f.do("DELETE", "/api/v1/conversations/"+c, nil, http.StatusNoContent, nil)
	}
	if after := list(); after != before {
		t.Errorf("after deleting, the clone's worktree list is\n%s\nwas\n%s", after, before)
	}
}

// TestFailureNotesShowNoServerPaths: a turn that fails for want of its
// commit says so without a path of the server or a git command line.
func TestFailureNotesShowNoServerPaths(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("local", nil)
	// The repository moves to a clone that lacks the review's head.
	other := agentsessiontest.NewRepo(t, map[string]string{"x.go": "package x\n"})
	f.do("POST", "/api/v1/repos", map[string]any{"name": repoName, "clone_path": other.Dir}, http.StatusOK, nil)
	conv := f.ask(v, "Is Load safe?")
	got := f.settle(conv, 1)
	if got.State != "failed" || got.Reason != "needs_clone" {
		t.Fatalf("turn = %+v, want failed needs_clone", got)
	}
	for _, leak := range []string{other.Dir, f.repo.Dir, f.dataDir, "git ", "rev-parse"} {
		if strings.Contains(got.Note, leak) {
			t.Errorf("the note %q shows %q", got.Note, leak)
		}
	}
	if !strings.Contains(got.Note, "is not in the clone of "+repoName) {
		t.Errorf("note = %q, want it to say the commit is not in the clone", got.Note)
	}
}

// syncBuffer is a buffer that a logger and a test share.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// TestAdminActionsAreAudited: every admin action is logged with the
// token's name and id, never the token's value or a key's.
func TestAdminActionsAreAudited(t *testing.T) {
	t.Parallel()
	var logs syncBuffer
	f := setup(t, func(o *options) {
		o.access = true
		o.api.Logger = slog.New(slog.NewJSONHandler(&logs, nil))
	})
	v := f.review("local", nil)
	conv := f.ask(v, "Is Load safe?")
	f.settle(conv, 1)
	value, id := f.token("release admin", chat.ScopeAdmin)
	const key = "sk-test-secretkey-0123456789"
	for _, c := range []struct {
		method, path string
		body         any
		status       int
	}{
		{"POST", "/api/v1/repos", map[string]any{"name": "acme/more", "clone_url": "https://example.com/acme/more.git"}, 201},
		{"PATCH", "/api/v1/providers/active", map[string]any{"provider": "ollama"}, 200},
		{"POST", "/api/v1/providers/openai/key", map[string]any{"key": key}, 204},
		{"POST", "/api/v1/tokens", map[string]any{"name": "bot", "scope": "read"}, 201},
		{"DELETE", "/api/v1/conversations/" + conv, nil, 204},
	} {
		if r := f.as(t, value, c.method, c.path, c.body); r.status != c.status {
			t.Fatalf("%s %s = %d %s", c.method, c.path, r.status, r.body)
		}
	}
	var audits []map[string]any
	for _, line := range strings.Split(logs.String(), "\n") {
		var m map[string]any
		if json.Unmarshal([]byte(line), &m) != nil || m["msg"] != "audit" {
			continue
		}
		if m["token_id"] == "" {
			// setup's own registration, while no token existed
			if m["token_name"] != "(open: no token exists)" {
				t.Errorf("an open admin action is logged as %v", m)
			}
			continue
		}
		audits = append(audits, m)
	}
	if len(audits) != 5 {
		t.Fatalf("audit lines = %d, want 5:\n%s", len(audits), logs.String())
	}
	for _, a := range audits {
		if a["token_id"] != id || a["token_name"] != "release admin" || a["route"] == "" || a["status"] == nil {
			t.Errorf("audit line %v lacks the token's name, id, route or status", a)
		}
	}
	if out := logs.String(); strings.Contains(out, value) || strings.Contains(out, key) {
		t.Error("the log holds a token's value or a provider key")
	}
}

// TestLimitedTokensStayInside (issue: an admin token of one repository
// re-pointed it at another's clone, then read that clone's code): a token
// limited to repositories, admin or not, registers nothing and cannot
// change where its own repository is cloned from, and its team figures
// hold its repositories only, the queue too.
func TestLimitedTokensStayInside(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.access = true })
	other := agentsessiontest.NewRepo(t, map[string]string{"secret.go": "package secret\n"})
	f.do("POST", "/api/v1/repos", map[string]any{"name": "acme/other", "clone_path": other.Dir}, http.StatusCreated, nil)
	f.review("local", nil)
	ts := f.makeTokens()

	for _, body := range []map[string]any{
		{"name": repoName, "clone_path": other.Dir},
		{"name": repoName, "clone_url": "https://example.com/acme/other.git"},
		{"name": repoName, "clone_path": f.repo.Dir},
		{"name": "acme/new", "clone_path": other.Dir},
	} {
		got := f.as(t, ts.widget, "POST", "/api/v1/repos", body)
		if got.status != 403 || !strings.Contains(string(got.body), `"code":"forbidden"`) {
			t.Errorf("an admin token of %s registering %v = %d %s, want 403", repoName, body, got.status, got.body)
		}
	}
	var repo struct {
		ClonePath string `json:"clone_path"`
	}
	if err := json.Unmarshal(f.as(t, ts.admin, "GET", "/api/v1/repos/"+repoName, nil).body, &repo); err != nil {
		t.Fatal(err)
	}
	if repo.ClonePath != f.repo.Dir {
		t.Errorf("%s is cloned from %s, want %s", repoName, repo.ClonePath, f.repo.Dir)
	}
	// A deployment-wide admin still registers.
	if got := f.as(t, ts.admin, "POST", "/api/v1/repos", map[string]any{"name": "acme/third", "clone_path": other.Dir}); got.status != 201 {
		t.Errorf("an admin token for every repository registering = %d %s", got.status, got.body)
	}

	// A queued turn of acme/widget is not in acme/other's figures.
	if got := f.as(t, ts.admin, "POST", "/api/v1/repos/"+repoName+"/pulls/7/reviews/1/conversations", map[string]any{"question": "Queued for a while?"}); got.status != 202 {
		t.Fatalf("ask = %d %s", got.status, got.body)
	}
	var st struct {
		Turns int
		Queue struct{ Queued int }
	}
	if err := json.Unmarshal(f.as(t, ts.other, "GET", "/api/v1/stats", nil).body, &st); err != nil {
		t.Fatal(err)
	}
	if st.Turns != 0 || st.Queue.Queued != 0 {
		t.Errorf("a token of acme/other sees %d turns and %d queued, want none of %s's", st.Turns, st.Queue.Queued, repoName)
	}
	if got := f.as(t, ts.other, "GET", "/api/v1/stats?repo="+repoName, nil); got.status != 404 {
		t.Errorf("a token of acme/other asking for %s's figures = %d %s, want 404", repoName, got.status, got.body)
	}
}
