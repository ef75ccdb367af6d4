package main

import (
	"encoding/json"
	"io"
	"net/http"
	"path"
	"regexp"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestAdminQueuesOnEveryRedis: asynqmon, mounted at /admin/queues, serves
// its page and reads the daemon's queues through asynq's Inspector, on the
// embedded Redis and on a real one.
func TestAdminQueuesOnEveryRedis(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := setup(t, m, nil)
			conv, _ := e.ask(e.review("local", nil), "Why does Load refuse an empty path?")
			e.wait(conv, 1)
			get := func(path string) []byte {
				t.Helper()
				resp, err := http.Get(e.url + path)
				if err != nil {
					t.Fatal(err)
				}
				defer resp.Body.Close()
				body, _ := io.ReadAll(resp.Body)
				if resp.StatusCode != http.StatusOK {
					t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
				}
				return body
			}
			if page := get("/admin/queues"); !strings.Contains(string(page), "Asynq") {
				t.Errorf("/admin/queues is not asynqmon's page: %.200s", page)
			}
			// asynq counts a task processed when its handler has returned,
			// just after the turn it ran is stored as settled.
			chattest.Eventually(t, "asynqmon's count of the processed turn", func() bool {
				var queues struct {
					Queues []struct {
						Queue     string `json:"queue"`
						Processed int    `json:"processed"`
					} `json:"queues"`
				}
				if err := json.Unmarshal(get("/admin/queues/api/queues"), &queues); err != nil {
					t.Fatalf("asynqmon's queue list: %v", err)
				}
				processed := 0
				for _, q := range queues.Queues {
					processed += q.Processed
				}
				return len(queues.Queues) > 0 && processed > 0
			})
		})
	}
}

// TestAdminQueuesContentTypes: every file asynqmon's page loads (its
// scripts, icons, manifest and the logo its script draws), its API's JSON,
// and the dashboard's own script and style sheet arrive with their own
// Content-Type (asynqmon sniffs all but its scripts: JSON and the manifest
// came as text/plain, the SVG logo as text/xml), as the API document says.
func TestAdminQueuesContentTypes(t *testing.T) {
	t.Parallel()
	e := setup(t, modes(t)[0], nil)
	get := func(path string) (string, []byte) {
		t.Helper()
		req, _ := http.NewRequest(http.MethodGet, e.url+path, nil)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		body, _ := io.ReadAll(resp.Body)
		if resp.StatusCode != http.StatusOK {
			t.Fatalf("GET %s = %d %s", path, resp.StatusCode, body)
		}
		checkResponse(t, req, resp, body)
		return resp.Header.Get("Content-Type"), body
	}
	typ, page := get("/admin/queues")
	if !strings.HasPrefix(typ, "text/html") {
		t.Errorf("/admin/queues is %s, want text/html", typ)
	}
	want := map[string]string{".js": "text/javascript", ".png": "image/png", ".ico": "image/x-icon", ".json": "application/json", ".svg": "image/svg+xml"}
	files := regexp.MustCompile(`(?:src|href)="(/admin/queues/[^"]+)"`).FindAllStringSubmatch(string(page), -1)
	_, manifest := get("/admin/queues/asset-manifest.json")
	var assets struct{ Files map[string]string }
	if err := json.Unmarshal(manifest, &assets); err != nil {
		t.Fatalf("asynqmon's asset manifest: %v", err)
	}
	for _, f := range assets.Files {
		if strings.HasSuffix(f, ".svg") { // the page's script fills in its root path
			files = append(files, []string{"", strings.Replace(f, "/[[.RootPath]]", "/admin/queues", 1)})
		}
	}
	seen := map[string]bool{}
	for _, m := range files {
		typ, _ := get(m[1])
		seen[path.Ext(m[1])] = true
		if w := want[path.Ext(m[1])]; !strings.HasPrefix(typ, w) {
			t.Errorf("%s is %s, want %s", m[1], typ, w)
		}
	}
	for ext := range want {
		if !seen[ext] {
			t.Errorf("asynqmon's page loads no %s file; the test checks nothing of that kind", ext)
		}
	}
	if typ, _ := get("/admin/queues/api/queues"); !strings.HasPrefix(typ, "application/json") {
		t.Errorf("asynqmon's queue list is %s, want application/json", typ)
	}
	for file, w := range map[string]string{"/ui/assets/app.js": "text/javascript", "/ui/assets/style.css": "text/css"} {
		if typ, _ := get(file); !strings.HasPrefix(typ, w) {
			t.Errorf("%s is %s, want %s", file, typ, w)
		}
	}
}

// TestAdminQueuesAreForAdmins: once tokens exist, /admin/queues needs an
// admin token for every repository (a read token and an admin token
// limited to repositories are refused, no token is sent to sign in).
func TestAdminQueuesAreForAdmins(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	access, err := chat.NewAccess(chat.AccessConfig{}, e.d.store)
	if err != nil {
		t.Fatal(err)
	}
	_, reader, err := access.CreateToken(t.Context(), "reader", chat.ScopeRead, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err := access.CreateToken(t.Context(), "admin", chat.ScopeAdmin, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, limited, err := access.CreateToken(t.Context(), "demo admin", chat.ScopeAdmin, []string{"acme/demo"})
	if err != nil {
		t.Fatal(err)
	}
	var call func(token, method, path string) int
	noRedirect := &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}
	status := func(token string) int { return call(token, "GET", "/admin/queues/api/queues") }
	call = func(token, method, path string) int {
		req, _ := http.NewRequest(method, e.url+path, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := noRedirect.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	chattest.Eventually(t, "/admin/queues to close once a token exists", func() bool { return status("") == http.StatusSeeOther })
	if got := status(reader); got != http.StatusForbidden {
		t.Errorf("a read token gets %d from /admin/queues, want 403", got)
	}
	if got := status(admin); got != http.StatusOK {
		t.Errorf("an admin token gets %d from /admin/queues, want 200", got)
	}
	// A token limited to repositories reaches none of it: the queues are
	// every repository's, and pausing one pauses them all.
	for _, r := range [][2]string{{"GET", "/admin/queues"}, {"GET", "/admin/queues/api/queues"}, {"POST", "/admin/queues/api/queues/turns:pause"}} {
		if got := call(limited, r[0], r[1]); got != http.StatusForbidden {
			t.Errorf("an admin token of acme/demo gets %d from %s %s, want 403", got, r[0], r[1])
		}
	}
	req, _ := http.NewRequest("GET", e.url+"/admin/queues/api/queues", nil)
	req.Header.Set("Authorization", "Bearer "+admin)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var list struct {
		Queues []struct {
			Queue  string `json:"queue"`
			Paused bool   `json:"paused"`
		} `json:"queues"`
	}
	if err := json.NewDecoder(resp.Body).Decode(&list); err != nil {
		t.Fatal(err)
	}
	for _, q := range list.Queues {
		if q.Paused {
			t.Errorf("queue %s was paused by a refused request", q.Queue)
		}
	}
}

// TestAdminQueuesInABrowser (issue: /admin/queues sent none of the
// dashboard's security headers): asynqmon's page comes with a
// Content-Security-Policy that allows its inline scripts by hash only, may
// not be framed, and runs in Chromium under that policy without one
// violation.
func TestAdminQueuesInABrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := setup(t, mode{name: "embedded"}, nil)
	resp, err := http.Get(e.url + "/admin/queues")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	csp := resp.Header.Get("Content-Security-Policy")
	for _, want := range []string{"default-src 'none'", "script-src 'self' 'sha256-", "frame-ancestors 'none'", "connect-src 'self'"} {
		if !strings.Contains(csp, want) {
			t.Errorf("asynqmon's Content-Security-Policy %q lacks %q", csp, want)
		}
	}
	if strings.Contains(csp, "script-src 'self' 'unsafe-inline'") {
		t.Errorf("asynqmon's policy allows every inline script: %q", csp)
	}
	for name, want := range map[string]string{"X-Frame-Options": "DENY", "X-Content-Type-Options": "nosniff", "Referrer-Policy": "same-origin"} {
		if got := resp.Header.Get(name); got != want {
			t.Errorf("asynqmon's %s = %q, want %q", name, got, want)
		}
	}
	b.run("open the queues", chromedp.Navigate(e.url+"/admin/queues"))
	b.poll("asynqmon renders", `document.querySelector("#root") && document.querySelector("#root").children.length > 0 && document.body.innerText.includes("Queues")`)
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		if strings.Contains(p, "Content Security Policy") || strings.Contains(p, "Refused to") {
			t.Errorf("asynqmon breaks its policy: %s", p)
		}
	}
}
