package main

import (
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/prchat/prchat/api/dashboard"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// tokensRequired makes an admin token and waits until the daemon asks for
// tokens; it returns the token's value and the access that made it.
func tokensRequired(t *testing.T, e *env) (string, *chat.Access) {
	t.Helper()
	access, err := chat.NewAccess(chat.AccessConfig{}, e.d.store)
	if err != nil {
		t.Fatal(err)
	}
	_, admin, err := access.CreateToken(t.Context(), "admin", chat.ScopeAdmin, nil)
	if err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "the API to close once a token was made", func() bool { return getWithCookie(t, e.url+"/api/v1/repos", "") == http.StatusUnauthorized })
	return admin, access
}

func sessionRows(t *testing.T, e *env) int64 {
	t.Helper()
	var n int64
	if err := e.d.store.DB().Raw("SELECT count(*) FROM dashboard_sessions").Scan(&n).Error; err != nil {
		t.Fatal(err)
	}
	return n
}

// postForm posts a form to the daemon with the session cookie ("" for
// none) and further cookies and headers (name, value pairs).
func postForm(t *testing.T, u string, form url.Values, session string, cookies []*http.Cookie, headers ...string) *http.Response {
	t.Helper()
	req, _ := http.NewRequest("POST", u, strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	if session != "" {
		req.AddCookie(&http.Cookie{Name: dashboard.CookieName, Value: session})
	}
	for _, c := range cookies {
		req.AddCookie(c)
	}
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestDashboardSessions (issue: the cookie was the API token itself, so
// signing out ended nothing): the cookie holds a session id stored only as
// a hash; signing out deletes the session, after which the old cookie gets
// the sign-in page and the API's 401; revoking the token ends its sessions.
func TestDashboardSessions(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	admin, access := tokensRequired(t, e)

	session := signInHTTP(t, e.url, admin)
	if sessionRows(t, e) != 1 {
		t.Fatalf("%d sessions stored after one sign-in", sessionRows(t, e))
	}
	var stored int64
	if err := e.d.store.DB().Raw("SELECT count(*) FROM dashboard_sessions WHERE hash = ?", []byte(session)).Scan(&stored).Error; err != nil {
		t.Fatal(err)
	}
	if stored != 0 {
		t.Error("the session id is stored as it is, not hashed")
	}
	for _, p := range []string{"/", "/api/v1/repos", "/ui/team"} {
		if got := getWithCookie(t, e.url+p, session); got != http.StatusOK {
			t.Errorf("GET %s signed in = %d", p, got)
		}
	}
	// Sign-out needs the session's CSRF token.
	if r := postForm(t, e.url+"/ui/signout", url.Values{}, session, nil); r.StatusCode != http.StatusForbidden {
		t.Errorf("sign-out without the CSRF token = %d, want 403", r.StatusCode)
	}
	if r := postForm(t, e.url+"/ui/signout", url.Values{"csrf": {dashboard.CSRFToken(session)}}, session, nil); r.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign out = %d", r.StatusCode)
	}
	if got := getWithCookie(t, e.url+"/", session); got != http.StatusSeeOther {
		t.Errorf("the old cookie after sign-out gets %d, want the sign-in page (303)", got)
	}
	if got := getWithCookie(t, e.url+"/api/v1/repos", session); got != http.StatusUnauthorized {
		t.Errorf("the old cookie after sign-out gets %d from the API, want 401", got)
	}
	if n := sessionRows(t, e); n != 0 {
		t.Errorf("%d sessions stored after sign-out", n)
	}

	// Revoking the token ends its sessions.
	_, value, err := access.CreateToken(t.Context(), "to revoke", chat.ScopeRead, nil)
	if err != nil {
		t.Fatal(err)
	}
	tokens, _ := access.Tokens(t.Context())
	session = signInHTTP(t, e.url, value)
	if _, err := access.RevokeToken(t.Context(), tokens[len(tokens)-1].ID); err != nil {
		t.Fatal(err)
	}
	if got := getWithCookie(t, e.url+"/api/v1/repos", session); got != http.StatusUnauthorized {
		t.Errorf("the session of a revoked token gets %d, want 401", got)
	}
}

// TestSignInIsGuarded (issue: sign-in took cross-site posts, had no rate
// limit, and next=/%09/evil.example/ led away): a sign-in needs the form's
// CSRF value and its cookie and a post of this site; after 10 failures a
// minute an address gets 429 with Retry-After; next leads only to a path
// here. With an https:// PRCHAT_PUBLIC_URL the cookies are Secure.
func TestSignInIsGuarded(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, func(c *Config) { c.PublicURL = "https://prchat.example.com" })
	admin, _ := tokensRequired(t, e)

	resp, err := noRedirects.Get(e.url + "/ui/signin")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	var csrf *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "prchat_signin" {
			csrf = c
		}
	}
	if csrf == nil || !csrf.Secure || !csrf.HttpOnly || csrf.SameSite != http.SameSiteStrictMode {
		t.Fatalf("the sign-in form's cookie is %+v, want Secure, HttpOnly, SameSite=Strict", csrf)
	}
	good := url.Values{"token": {admin}, "signin_csrf": {csrf.Value}}
	for name, r := range map[string]*http.Response{
		"no CSRF value":          postForm(t, e.url+"/ui/signin", url.Values{"token": {admin}}, "", []*http.Cookie{csrf}),
		"no CSRF cookie":         postForm(t, e.url+"/ui/signin", good, "", nil),
		"another site's post":    postForm(t, e.url+"/ui/signin", good, "", []*http.Cookie{csrf}, "Origin", "https://evil.example"),
		"a cross-site frame":     postForm(t, e.url+"/ui/signin", good, "", []*http.Cookie{csrf}, "Sec-Fetch-Site", "cross-site"),
		"a wrong CSRF value":     postForm(t, e.url+"/ui/signin", url.Values{"token": {admin}, "signin_csrf": {strings.Repeat("x", 32)}}, "", []*http.Cookie{csrf}),
		"a CSRF value too short": postForm(t, e.url+"/ui/signin", url.Values{"token": {admin}, "signin_csrf": {"x"}}, "", []*http.Cookie{{Name: "prchat_signin", Value: "x"}}),
	} {
		if r.StatusCode != http.StatusForbidden {
			t.Errorf("sign-in with %s = %d, want 403", name, r.StatusCode)
		}
		for _, c := range r.Cookies() {
			if c.Name == dashboard.CookieName && c.Value != "" {
				t.Errorf("sign-in with %s made a session", name)
			}
		}
	}

	// next is a path here, or "/".
	for next, want := range map[string]string{
		"/%09/evil.example/":       "/",
		"/\t/evil.example/":        "/",
		"//evil.example":           "/",
		"/\\evil.example":          "/",
		"/%5Cevil.example":         "/",
		"/%2F/evil.example":        "/",
		"https://evil.example/":    "/",
		"javascript:alert(1)":      "/",
		"/ui/team?since=7d":        "/ui/team?since=7d",
		"/ui/repos/acme/demo":      "/ui/repos/acme/demo",
		"/ui/conversations/x%20y":  "/ui/conversations/x%20y",
		"/ui/x?next=%0d%0aSet-Foo": "/",
	} {
		form := url.Values{"token": {admin}, "signin_csrf": {csrf.Value}, "next": {next}}
		r := postForm(t, e.url+"/ui/signin", form, "", []*http.Cookie{csrf})
		if r.StatusCode != http.StatusSeeOther || r.Header.Get("Location") != want {
			t.Errorf("sign-in with next=%q = %d to %q, want 303 to %q", next, r.StatusCode, r.Header.Get("Location"), want)
		}
		for _, c := range r.Cookies() {
			if c.Name == dashboard.CookieName && !c.Secure {
				t.Errorf("the session cookie is not Secure behind an https:// PRCHAT_PUBLIC_URL")
			}
		}
	}

	// 10 failures a minute, then 429 with Retry-After, the right token too.
	bad := url.Values{"token": {"prc_" + strings.Repeat("0", 43)}, "signin_csrf": {csrf.Value}}
	for i := range 10 {
		if r := postForm(t, e.url+"/ui/signin", bad, "", []*http.Cookie{csrf}); r.StatusCode != http.StatusUnauthorized {
			t.Fatalf("failed sign-in %d = %d, want 401", i+1, r.StatusCode)
		}
	}
	for _, form := range []url.Values{bad, good} {
		r := postForm(t, e.url+"/ui/signin", form, "", []*http.Cookie{csrf})
		if r.StatusCode != http.StatusTooManyRequests || r.Header.Get("Retry-After") == "" {
			t.Errorf("sign-in after 10 failures = %d (Retry-After %q), want 429 with Retry-After", r.StatusCode, r.Header.Get("Retry-After"))
		}
	}
	// Another address is not held up by this one's failures.
	if r := postForm(t, e.url+"/ui/signin", good, "", []*http.Cookie{csrf}, "X-Forwarded-For", "203.0.113.9"); r.StatusCode != http.StatusSeeOther {
		t.Errorf("sign-in from another client behind a local proxy = %d, want 303", r.StatusCode)
	}
}
