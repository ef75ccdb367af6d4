package main

import (
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"strings"
	"testing"

	"github.com/chromedp/chromedp"
)

// TestOtherSitesCannotDrivePrchatInABrowser: while the quick-start daemon
// is open (no token yet), a page of another site that the user visits
// cannot register a repository or create a token through the user's
// browser, and a page reaching prchat under a rebound host name (DNS
// rebinding) reads nothing.
func TestOtherSitesCannotDrivePrchatInABrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t) // the shared browser maps rebound.example to loopback
	e := setup(t, mode{name: "embedded"}, nil)

	// The other site: a page on another origin that posts to prchat the
	// way a page can without a preflight (text/plain and a form).
	evil := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html; charset=utf-8")
		fmt.Fprint(w, `<!doctype html><title>a page</title><p>hello</p>`)
	})}
	ln, err := net.Listen("tcp", "127.0.0.2:0")
	if err != nil {
		ln, err = net.Listen("tcp", "127.0.0.1:0") // another port is another origin too
		if err != nil {
			t.Fatal(err)
		}
	}
	go func() { _ = evil.Serve(ln) }()
	t.Cleanup(func() { _ = evil.Close() })
	evilURL := "http://" + ln.Addr().String() + "/"

	register, _ := json.Marshal(map[string]string{"name": "evil/stolen", "clone_path": e.repoDir})
	token, _ := json.Marshal(map[string]string{"name": "evil", "scope": "admin"})
	attack := fmt.Sprintf(`(async () => {
		const api = %q;
		const sent = [];
		for (const [path, body] of [["/api/v1/repos", %q], ["/api/v1/tokens", %q]]) {
			for (const type of ["text/plain", "application/x-www-form-urlencoded"]) {
				try {
					await fetch(api + path, {method: "POST", mode: "no-cors", headers: {"Content-Type": type}, body: body});
					sent.push(path + " " + type);
				} catch (e) { sent.push(path + " " + type + " " + e); }
			}
		}
		window.attackDone = sent;
	})()`, e.url, string(register), string(token))
	b.run("open the other site", chromedp.Navigate(evilURL))
	b.run("post to prchat from it", chromedp.Evaluate[chromedp.Void](attack))
	b.poll("the page sent its posts", `Array.isArray(window.attackDone) && window.attackDone.length === 4`)

	var repos struct {
		Repositories []struct {
			Name string `json:"name"`
		} `json:"repositories"`
	}
	e.do("GET", "/api/v1/repos", nil, http.StatusOK, &repos)
	if len(repos.Repositories) != 1 {
		t.Errorf("repositories = %+v, want only %s", repos.Repositories, e.repo)
	}
	for _, r := range repos.Repositories {
		if r.Name == "evil/stolen" {
			t.Errorf("a page of another site registered %s through the browser", r.Name)
		}
	}
	var tokens struct {
		Tokens []json.RawMessage `json:"tokens"`
	}
	e.do("GET", "/api/v1/tokens", nil, http.StatusOK, &tokens)
	if len(tokens.Tokens) != 0 {
		t.Errorf("a page of another site created %d token(s) through the browser: %s", len(tokens.Tokens), tokens.Tokens)
	}

	// DNS rebinding: rebound.example resolves to prchat's loopback address,
	// so a page of that name is same-origin with what it fetches there.
	u, err := url.Parse(e.url)
	if err != nil {
		t.Fatal(err)
	}
	rebound := "http://rebound.example:" + u.Port()
	b.run("open prchat under a rebound name", chromedp.Navigate(rebound+"/api/v1/repos"))
	body := eval[string](b, `document.body.innerText`)
	if strings.Contains(body, e.repo) || !strings.Contains(body, "forbidden") {
		t.Errorf("prchat under the host name rebound.example answered %q; want a refusal that shows no repository", body)
	}
	read := `fetch("/api/v1/repos").then(r => r.text().then(t => r.status + " " + t)).catch(e => "error " + e)`
	got, err := chromedp.Run(b.ctx, chromedp.Evaluate[string](read, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("read prchat from the rebound page: %v", err)
	}
	if strings.Contains(got, e.repo) || !strings.HasPrefix(got, "403 ") {
		t.Errorf("a rebound page read prchat's repositories: %q; want 403 and nothing of them", got)
	}
	// The same daemon under its own loopback name still answers.
	e.do("GET", "/api/v1/repos/"+e.repo, nil, http.StatusOK, nil)
}
