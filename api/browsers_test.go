package api_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/chat"
)

// routeCase is one registered route with a path and body to send it with.
type routeCase struct {
	api.Route
	path string
	body any
}

// routeCases lists every route the server registers, with its parameters
// filled in (conv a conversation of repoName's review 1, tokenID a token)
// and a good body for each route that takes one.
func (f *fixture) routeCases(t *testing.T, conv, tokenID string) []routeCase {
	t.Helper()
	params := map[string]string{"owner": "acme", "repo": "widget", "pr": "7", "version": "1", "n": "1"}
	bodies := map[string]any{
		"POST /api/v1/repos": map[string]any{"name": "acme/new", "clone_path": f.repo.Dir},
		"POST /api/v1/repos/:owner/:repo/pulls/:pr/reviews":                        map[string]any{"head_sha": f.repo.Head(), "markdown": "again"},
		"POST /api/v1/repos/:owner/:repo/pulls/:pr/reviews/:version/conversations": map[string]any{"question": "Why?"},
		"PUT /api/v1/repos/:owner/:repo/pulls/:pr/reviews/:version/session":        map[string]any{"type": "user", "sessionId": reviewSession},
		"POST /api/v1/conversations/:id/turns":                                     map[string]any{"question": "And then?"},
		"POST /api/v1/conversations/:id/turns/:n/cancel":                           map[string]any{},
		"PATCH /api/v1/providers/active":                                           map[string]any{"provider": "ollama"},
		"POST /api/v1/providers/:id/key":                                           map[string]any{"key": "sk-test-0123456789abcdef"},
		"POST /api/v1/tokens":                                                      map[string]any{"name": "more", "scope": "admin"},
		"POST /webhooks/github":                                                    map[string]any{"zen": "hello"},
		"POST /webhooks/gitlab":                                                    map[string]any{"object_kind": "note"},
	}
	var out []routeCase
	for _, r := range f.srv.Routes() {
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
					return tokenID
				}
			}
			v, ok := params[name]
			if !ok {
				t.Fatalf("route %s has a parameter :%s this test does not know", key, name)
			}
			return v
		})
		body, ok := bodies[key]
		if (r.Method == "POST" || r.Method == "PATCH" || r.Method == "PUT") && !ok {
			t.Fatalf("route %s takes a body this test does not know: add one", key)
		}
		out = append(out, routeCase{Route: r, path: path, body: body})
	}
	if len(out) < 30 {
		t.Fatalf("the server lists %d routes; the route list is not read right", len(out))
	}
	return out
}

func changes(method string) bool {
	return method != http.MethodGet && method != http.MethodHead && method != http.MethodOptions
}

func isProbe(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

// TestBrowsersCannotDrivePrchat (issue: any web page could take over the
// quick-start daemon) sends every route of the server, while the API is
// open, as a page of another site could: with a foreign Origin, with
// Sec-Fetch-Site: cross-site, as text/plain and as a form post, and to a
// rebound host name. Each is refused (403 forbidden, 415 invalid) and
// nothing is created. The same requests as prchat ask and curl send them
// (no Origin, application/json) and as the dashboard's pages send them
// (their own origin, same-origin) work.
func TestBrowsersCannotDrivePrchat(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.access = true }) // no token yet: open
	v := f.review("local", nil)
	conv := f.ask(v, "Is Load safe?")
	f.settle(conv, 1)
	host := strings.TrimPrefix(f.url, "http://")
	_, port, _ := strings.Cut(host, ":")
	cases := f.routeCases(t, conv, "no-such-token")

	raw := func(body any) string {
		if body == nil {
			return ""
		}
		b, _ := json.Marshal(body)
		return string(b)
	}
	type attempt struct {
		name    string
		headers []string
		// only routes for which it applies
		applies func(rc routeCase) bool
		status  int
		code    string
	}
	stateChanging := func(rc routeCase) bool { return changes(rc.Method) }
	jsonBody := func(rc routeCase) bool {
		return changes(rc.Method) && rc.body != nil && strings.HasPrefix(rc.Path, "/api/")
	}
	servedWhileOpen := func(rc routeCase) bool { return !isProbe(rc.Path) && !strings.HasPrefix(rc.Path, "/webhooks/") }
	attempts := []attempt{
		{"foreign Origin", []string{"Origin", "http://evil.example"}, stateChanging, 403, "forbidden"},
		{"Origin of another port", []string{"Origin", "http://127.0.0.1:1"}, stateChanging, 403, "forbidden"},
		{"Origin null", []string{"Origin", "null"}, stateChanging, 403, "forbidden"},
		{"Sec-Fetch-Site cross-site", []string{"Sec-Fetch-Site", "cross-site"}, stateChanging, 403, "forbidden"},
		{"text/plain", []string{"Content-Type", "text/plain"}, jsonBody, 415, "invalid"},
		{"form post", []string{"Content-Type", "application/x-www-form-urlencoded"}, jsonBody, 415, "invalid"},
		{"multipart", []string{"Content-Type", "multipart/form-data; boundary=x"}, jsonBody, 415, "invalid"},
		{"no content type", []string{"Content-Type", ""}, jsonBody, 415, "invalid"},
		{"rebound host name", []string{"Host", "rebind.evil.example:" + port}, servedWhileOpen, 403, "forbidden"},
		{"rebound host name, own Origin", []string{"Host", "rebind.evil.example:" + port, "Origin", "http://rebind.evil.example:" + port}, servedWhileOpen, 403, "forbidden"},
		{"an address of this host that is not loopback", []string{"Host", "192.168.1.20:" + port}, servedWhileOpen, 403, "forbidden"},
	}
	before := f.counts()
	tried := map[string]int{}
	for _, rc := range cases {
		for _, a := range attempts {
			if !a.applies(rc) {
				continue
			}
			tried[a.name]++
			got := f.c.send(t, rc.Method, rc.path, raw(rc.body), append([]string{"Content-Type", "application/json"}, a.headers...)...)
			if got.status != a.status || !strings.Contains(string(got.body), `"code":"`+a.code+`"`) {
				t.Errorf("%s %s with %s = %d %s, want %d %s", rc.Method, rc.path, a.name, got.status, got.body, a.status, a.code)
			}
		}
	}
	for _, a := range attempts {
		if tried[a.name] < 2 {
			t.Errorf("%s was tried on %d routes", a.name, tried[a.name])
		}
	}
	if diff := cmp.Diff(before, f.counts()); diff != "" {
		t.Errorf("refused requests changed the database (-before +after):\n%s", diff)
	}

	// Routes a browser page may not reach are still there for the probes
	// and the forges, whatever their Host or content type.
	for _, p := range []string{"/healthz", "/readyz", "/metrics"} {
		if r := f.c.send(t, "GET", p, nil, "Host", "10.1.2.3:"+port); r.status != 200 {
			t.Errorf("GET %s to a pod address = %d, want 200", p, r.status)
		}
	}
	for _, p := range []string{"/webhooks/github", "/webhooks/gitlab"} {
		r := f.c.send(t, "POST", p, "payload=%7B%7D", "Content-Type", "application/x-www-form-urlencoded", "Host", "hooks.example.com")
		if r.status == 403 || r.status == 415 {
			t.Errorf("POST %s form-encoded through a tunnel = %d %s: a forge's request was refused as a browser's", p, r.status, r.body)
		}
	}

	// The clients that are not browsers (prchat ask and curl send no
	// Origin) and the dashboard's own pages (their origin, same-origin)
	// are served.
	clients := []struct {
		name    string
		headers []string
	}{
		{"curl", []string{"User-Agent", "curl/8.5.0"}},
		{"the dashboard", []string{"Origin", f.url, "Sec-Fetch-Site", "same-origin", "Sec-Fetch-Mode", "cors"}},
		{"localhost", []string{"Host", "localhost:" + port, "Origin", "http://localhost:" + port}},
		{"IPv6 loopback name", []string{"Host", "[::1]:" + port}},
	}
	for _, cl := range clients {
		for _, path := range []string{"/api/v1/repos", "/openapi.json"} {
			if r := f.c.send(t, "GET", path, nil, cl.headers...); r.status != 200 {
				t.Errorf("GET %s as %s = %d %s", path, cl.name, r.status, r.body)
			}
		}
		var c struct{ Conversation struct{ ID string } }
		r := f.c.send(t, "POST", "/api/v1/repos/acme/widget/pulls/7/reviews/1/conversations", map[string]any{"question": "As " + cl.name + "?"}, cl.headers...)
		if r.status != 202 || json.Unmarshal(r.body, &c) != nil {
			t.Fatalf("ask as %s = %d %s", cl.name, r.status, r.body)
		}
		if r := f.c.send(t, "POST", "/api/v1/conversations/"+c.Conversation.ID+"/turns/1/cancel", nil, cl.headers...); r.status != 202 {
			t.Errorf("cancel without a body as %s = %d %s", cl.name, r.status, r.body)
		}
		if r := f.c.send(t, "DELETE", "/api/v1/conversations/"+c.Conversation.ID, nil, cl.headers...); r.status != 204 {
			t.Errorf("delete as %s = %d %s", cl.name, r.status, r.body)
		}
	}
	if r := f.c.send(t, "PATCH", "/api/v1/providers/active", map[string]any{"provider": "ollama"}, "Content-Type", "application/json; charset=utf-8"); r.status != 200 {
		t.Errorf("application/json with a charset = %d %s", r.status, r.body)
	}

	// Once a token exists, any Host is served (the token is the guard).
	admin, _ := f.token("admin", chat.ScopeAdmin)
	if r := f.c.send(t, "GET", "/api/v1/repos", nil, "Authorization", "Bearer "+admin, "Host", "prchat.internal.example:"+port); r.status != 200 {
		t.Errorf("GET /api/v1/repos to a name of the deployment with a token = %d %s", r.status, r.body)
	}
	// ... and the foreign Origin is still refused, token or not.
	if r := f.c.send(t, "POST", "/api/v1/tokens", map[string]any{"name": "x", "scope": "admin"}, "Authorization", "Bearer "+admin, "Origin", "https://evil.example"); r.status != 403 {
		t.Errorf("a token made from another origin's page = %d %s", r.status, r.body)
	}
}

// TestPublicURL: behind a TLS proxy the pages' origin is the public URL's,
// and while the API is open its host is served too.
func TestPublicURL(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.access = true; o.api.PublicURL = "https://prchat.example.com" })
	body := map[string]any{"name": "acme/public", "clone_path": f.repo.Dir}
	if r := f.c.send(t, "POST", "/api/v1/repos", body, "Host", "prchat.example.com", "Origin", "https://prchat.example.com", "Sec-Fetch-Site", "same-origin"); r.status != 201 {
		t.Errorf("a post from the public URL's page = %d %s", r.status, r.body)
	}
	// The proxy may pass on its upstream's Host: the Origin still counts.
	if r := f.c.send(t, "PATCH", "/api/v1/providers/active", map[string]any{"provider": "ollama"}, "Origin", "https://prchat.example.com"); r.status != 200 {
		t.Errorf("a post from the public URL's page with the upstream Host = %d %s", r.status, r.body)
	}
	for _, origin := range []string{"http://prchat.example.com", "https://prchat.example.com.evil.example", "https://evil.example"} {
		if r := f.c.send(t, "PATCH", "/api/v1/providers/active", map[string]any{"provider": "ollama"}, "Origin", origin); r.status != 403 {
			t.Errorf("a post from %s = %d %s, want 403", origin, r.status, r.body)
		}
	}
	if r := f.c.send(t, "GET", "/api/v1/repos", nil, "Host", "other.example.com"); r.status != 403 {
		t.Errorf("a foreign Host while open, with a public URL = %d %s, want 403", r.status, r.body)
	}
	if _, err := api.New(api.Config{PublicURL: "ftp://x"}, apiDomain(f.svc)); err == nil {
		t.Error("api.New took the public URL ftp://x")
	}
}
