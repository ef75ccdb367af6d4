package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/cdproto/cdp"
	"github.com/chromedp/cdproto/page"
	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

var readmeScreenshot = flag.Bool("readme-screenshot", false, "write TestDashboardConversationScreenshot's page to docs/dashboard-conversation.png")

// browser is a headless Chromium driven by chromedp, or nil with the test
// skipped when none is installed and CI is unset.
type browser struct {
	t        *testing.T
	ctx      context.Context
	shots    string
	mu       sync.Mutex
	problems []string // console errors, exceptions and log errors seen
}

func findChromium() string {
	if p := os.Getenv("PRCHAT_TEST_CHROMIUM"); p != "" {
		return p
	}
	for _, name := range []string{"chromium", "chromium-browser", "google-chrome"} {
		if p, err := exec.LookPath(name); err == nil {
			return p
		}
	}
	return ""
}

// chromium is the one headless Chromium the package's browser tests share
// (a start costs seconds of CPU); each test has its own browser context
// (cookies, storage, cache) in it. TestMain stops it.
var chromium struct {
	once sync.Once
	ctx  context.Context // the browser's first tab
	err  error
	stop func()
}

// startChromium starts the shared Chromium once, with the flags every
// browser test needs (host-resolver-rules maps rebound.example, the DNS
// rebinding test's host name, to loopback).
func startChromium(bin string) (context.Context, error) {
	chromium.once.Do(func() {
		profile, err := os.MkdirTemp("", "prchat-chromium-")
		if err != nil {
			chromium.err = err
			return
		}
		opts := append(chromedp.DefaultExecAllocatorOptions[:],
			chromedp.ExecPath(bin),
			chromedp.NoSandbox,
			chromedp.DisableGPU,
			chromedp.Flag("disable-quic", true),
			chromedp.Flag("disable-background-networking", true),
			chromedp.Flag("disable-component-update", true),
			chromedp.Flag("disable-sync", true),
			chromedp.Flag("host-resolver-rules", "MAP rebound.example 127.0.0.1"),
			chromedp.UserDataDir(profile),
			chromedp.WindowSize(1280, 900),
		)
		actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
		ctx, cancelCtx := chromedp.NewContext(actx)
		chromium.ctx = ctx
		chromium.stop = func() { cancelCtx(); cancelAlloc(); _ = os.RemoveAll(profile) }
		if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
			chromium.err = fmt.Errorf("start Chromium: %w", err)
		}
	})
	return chromium.ctx, chromium.err
}

// stopChromium stops the shared Chromium, if it was started; TestMain
// calls it once every test has ended.
func stopChromium() {
	if chromium.stop != nil {
		chromium.stop()
		chromium.stop = nil
	}
}

// newBrowser opens a tab for the test in a browser context of its own in
// the shared headless Chromium.
func newBrowser(t *testing.T) *browser {
	t.Helper()
	bin := findChromium()
	if bin == "" {
		if os.Getenv("CI") != "" {
			t.Fatal("no Chromium found and CI is set: .ci/run installs Debian's chromium")
		}
		t.Skip("no Chromium installed (apt-get install chromium)")
	}
	parent, err := startChromium(bin)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancelCtx := chromedp.NewContext(parent, chromedp.WithNewBrowserContext())
	ctx, cancelTimeout := context.WithTimeout(ctx, chattest.Within(3*time.Minute))
	t.Cleanup(func() { cancelTimeout(); cancelCtx() })
	shots, err := os.MkdirTemp("", "prchat-dashboard-shots-")
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshots of the dashboard's pages: %s", shots)
	b := &browser{t: t, ctx: ctx, shots: shots}
	if err := chromedp.Do(ctx, chromedp.Navigate("about:blank")); err != nil {
		t.Fatalf("open a tab: %v", err)
	}
	msgs := chromedp.Console(ctx)
	go func() {
		for m, err := range msgs {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.Type == chromedp.ConsoleException {
				b.problem(m.String())
			}
		}
	}()
	return b
}

func (b *browser) problem(s string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.problems = append(b.problems, s)
}

// run runs actions, failing the test with what was being done.
func (b *browser) run(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	if err := chromedp.Do(b.ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	v, err := chromedp.Run(b.ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// poll waits until a JavaScript expression is true.
func (b *browser) poll(what, expr string) {
	b.t.Helper()
	if _, err := chromedp.Run(b.ctx, chromedp.Poll[bool](expr, chromedp.WithPollingTimeout(chattest.Within(10*time.Second)))); err != nil {
		main, _ := chromedp.Run(b.ctx, chromedp.Evaluate[string](`document.querySelector("main").innerHTML`))
		b.t.Fatalf("%s (%s): %v\nthe page's main:\n%s", what, expr, err, main)
	}
}

// shot saves a full-page screenshot as name.png and returns its path.
func (b *browser) shot(name string) string {
	b.t.Helper()
	png, err := chromedp.Run(b.ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	p := filepath.Join(b.shots, name+".png")
	if err := os.WriteFile(p, png, 0o644); err != nil {
		b.t.Fatal(err)
	}
	return p
}

// noProblems fails the test for any console error seen so far.
func (b *browser) noProblems(page string) {
	b.t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, p := range b.problems {
		b.t.Errorf("%s: %s", page, p)
	}
	b.problems = nil
}

func (b *browser) text(sel string) string {
	b.t.Helper()
	s, err := chromedp.Run(b.ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		b.t.Fatalf("read %s: %v", sel, err)
	}
	return strings.TrimSpace(s)
}

// TestDashboardInABrowser drives the dashboard in a real Chromium against a
// serve daemon: the pages, a conversation whose answer streams in with a
// tool step, a citation opening its lines, a question about a selected line
// range asked from the keyboard alone, cancelling a running turn, and the
// team page's figures against GET /api/v1/stats; no page logs an error.
func TestDashboardInABrowser(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("scripted", map[string]any{
		"markdown": "# Review\n\nLoad now refuses an **empty path**.\n\n<script>document.title='pwned'</script>",
		"sections": []map[string]any{{"id": "s1", "title": "Empty path", "markdown": "See `Load`.",
			"anchors": []map[string]any{{"path": "settings/settings.go", "start_line": 8, "end_line": 12}}}},
	})
	release := make(chan struct{})
	e.scripted.Push(scripted.Step{
		Events: []chat.Event{
			{Type: chat.EventToolStart, ToolID: "t1", ToolName: "Read", Input: json.RawMessage(`{"path":"settings/settings.go"}`)},
			{Type: chat.EventTextDelta, Text: "Load refuses "},
		},
		Wait: release,
		Answer: &chat.Answer{
			AnswerMarkdown: "Load refuses an **empty path** <img src=x onerror=alert(1)>.",
			Citations:      []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}},
			SuggestsFix:    &chat.Fix{Summary: "Check the path in `main`."},
		},
	})
	conv, _ := e.ask(v, "Why does Load refuse an empty path?")
	base := e.url

	// The pages from the repositories down.
	for _, p := range []struct{ name, path, want string }{
		{"repositories", "/", e.repo},
		{"pulls", "/ui/repos/" + e.repo, "#7"},
		{"pull", "/ui/repos/" + e.repo + "/pulls/7", "version 1"},
	} {
		b.run("open "+p.name, chromedp.Navigate(base+p.path), chromedp.WaitVisible(chromedp.CSS("main")))
		if got := b.text("main"); !strings.Contains(got, p.want) {
			t.Errorf("%s page: %q does not show %q", p.name, got, p.want)
		}
		b.shot(p.name)
		b.noProblems(p.name)
	}
	b.run("open review", chromedp.Navigate(fmt.Sprintf("%s/ui/repos/%s/pulls/7/reviews/%d", base, e.repo, v)),
		chromedp.WaitVisible(chromedp.CSS("#review")))
	title, err := chromedp.Run(b.ctx, chromedp.Title())
	if err != nil {
		t.Fatal(err)
	}
	if title == "pwned" || !strings.Contains(b.text("#review"), "<script>") {
		t.Errorf("the review's <script> ran or vanished: title %q, review %q", title, b.text("#review"))
	}
	b.shot("review")
	b.noProblems("review")

	// The conversation: the tool step appears while the turn runs, then the
	// answer replaces the stream.
	b.run("open conversation", chromedp.Navigate(base+"/ui/conversations/"+conv),
		chromedp.WaitVisible(chromedp.CSS("#turn-1 .steps details")))
	if got := b.text("#turn-1 .steps summary"); got != "Read" {
		t.Errorf("tool step = %q, want Read", got)
	}
	b.poll("stream text", `document.querySelector("#turn-1 .stream")?.textContent.startsWith("Load")`)
	close(release)
	b.run("answer", chromedp.WaitVisible(chromedp.CSS("#turn-1 .answer")))
	if got := b.text("#turn-1 .answer"); !strings.Contains(got, "<img src=x onerror=alert(1)>") {
		t.Errorf("answer %q: the raw tag should stay text", got)
	}
	if imgs := eval[int](b, `document.querySelectorAll("#turn-1 .answer img").length`); imgs != 0 {
		t.Errorf("the answer's <img> became an element")
	}
	if got := b.text("#turn-1 .fix"); !strings.Contains(got, "Check the path") {
		t.Errorf("suggested fix = %q", got)
	}
	if got := b.text("#turn-1 .meta"); !strings.Contains(got, "scripted") || !strings.Contains(got, "session") {
		t.Errorf("turn footer = %q, want backend and session", got)
	}
	if eval[bool](b, `document.querySelector("#turn-1 .steps details").open`) {
		t.Error("the tool step stays open after the turn settled")
	}

	// A citation opens its lines, numbered, the cited ones marked.
	b.run("open citation", chromedp.Click(chromedp.CSS("#turn-1 a.cite")),
		chromedp.WaitVisible(chromedp.CSS("#viewer tr.cited")))
	cited := eval[[]string](b, `[...document.querySelectorAll("#viewer tr.cited td.num")].map(td => td.textContent)`)
	if strings.Join(cited, ",") != "8,9,10,11,12" {
		t.Errorf("cited line numbers = %v, want 8..12", cited)
	}
	if got := b.text("#viewer tr[data-line='8'] td.code"); got != "func Load(path string) error {" {
		t.Errorf("line 8 = %q", got)
	}

	// Select lines 9..11 and ask about them from the keyboard: type, Tab to
	// the Ask button, Enter.
	hang := make(chan struct{})
	defer close(hang)
	e.scripted.Push(scripted.Step{Events: []chat.Event{{Type: chat.EventTextDelta, Text: "Looking"}}, Wait: hang})
	b.run("select lines",
		chromedp.Click(chromedp.CSS("#viewer tr[data-line='9'] td.num button")),
		chromedp.Func(func(ctx context.Context, t *chromedp.Target) error {
			_, err := chromedp.Evaluate[bool](`document.querySelector("#viewer tr[data-line='11'] td.num button").dispatchEvent(new MouseEvent("click", {bubbles: true, shiftKey: true}))`)(ctx, t)
			return err
		}),
		chromedp.Click(chromedp.CSS("#ask-lines")),
		chromedp.WaitVisible(chromedp.CSS("#focus")))
	if got := b.text("#focus span"); got != "About settings/settings.go:9-11" {
		t.Errorf("focus = %q", got)
	}
	b.run("ask from the keyboard",
		chromedp.Click(chromedp.CSS("#viewer-close")),
		chromedp.Focus(chromedp.CSS("#question")),
		chromedp.SendKeys(chromedp.CSS("#question"), "What if path is only spaces?"),
		chromedp.KeyEvent(kb.Tab),
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.CSS("#turn-2 .cancel")))
	var second struct {
		Focus *chat.Focus `json:"focus"`
		State string      `json:"state"`
	}
	e.do("GET", "/api/v1/conversations/"+conv+"/turns/2", nil, http.StatusOK, &second)
	if second.Focus == nil || len(second.Focus.Anchors) != 1 || second.Focus.Anchors[0] != (chat.Anchor{Path: "settings/settings.go", StartLine: 9, EndLine: 11}) {
		t.Errorf("second turn's focus = %+v, want settings/settings.go:9-11", second.Focus)
	}
	// The masker holds back a delta's tail that could still be the start of
	// a secret or a keyword until more text comes, so while the turn runs the
	// stream shows a start of "Looking" (how much is the masker's concern).
	b.poll("running", `((t) => t.length > 0 && "Looking".startsWith(t))(document.querySelector("#turn-2 .stream")?.textContent ?? "")`)
	b.shot("conversation")

	// Cancel the running turn.
	b.run("cancel", chromedp.Click(chromedp.CSS("#turn-2 .cancel")))
	b.poll("cancelled", `document.querySelector("#turn-2 .state")?.textContent === "cancelled"`)
	if got := e.wait(conv, 2); got.State != "cancelled" {
		t.Errorf("turn 2 = %s, want cancelled", got.State)
	}
	b.noProblems("conversation")

	// The team page shows what /api/v1/stats says.
	var st chat.Stats
	e.do("GET", "/api/v1/stats?since=7d", nil, http.StatusOK, &st)
	b.run("open team", chromedp.Navigate(base+"/ui/team?since=7d"), chromedp.WaitVisible(chromedp.CSS("#figures")))
	for stat, want := range map[string]string{
		"turns":   strconv.Itoa(st.Turns),
		"p50":     fmt.Sprintf("%.1f", st.TimeToAnswer.P50),
		"repairs": strconv.Itoa(st.Repairs),
		"seeded":  strconv.Itoa(st.Seeded),
		"queued":  strconv.Itoa(st.Queue.Queued),
		"running": strconv.Itoa(st.Queue.Running),
	} {
		if got := b.text(`dd[data-stat="` + stat + `"]`); got != want {
			t.Errorf("team page %s = %q, /api/v1/stats says %q", stat, got, want)
		}
	}
	if st.Turns != 2 {
		t.Errorf("stats count %d turns, want 2", st.Turns)
	}
	if bars := eval[int](b, `document.querySelectorAll("#chart rect.bar").length`); bars == 0 {
		t.Error("the team chart has no bars")
	}
	b.shot("team")
	b.noProblems("team")
}

func copyFile(t *testing.T, from, to string) {
	t.Helper()
	data, err := os.ReadFile(from)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(to, data, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("wrote %s", to)
}

// TestDashboardSignIn: once tokens exist the dashboard asks for one, keeps
// it in a cookie scripts cannot read, shows a read token no ask box, signs
// out, and lets an ask token ask (its requests carry the CSRF token); the
// cookie alone cannot change anything.
func TestDashboardSignIn(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := setup(t, mode{name: "embedded"}, nil)
	conv, _ := e.ask(e.review("local", nil), "Why does Load refuse an empty path?")
	e.wait(conv, 1)
	access, err := chat.NewAccess(chat.AccessConfig{}, e.d.store)
	if err != nil {
		t.Fatal(err)
	}
	_, reader, err := access.CreateToken(t.Context(), "reader", chat.ScopeRead, nil)
	if err != nil {
		t.Fatal(err)
	}
	_, asker, err := access.CreateToken(t.Context(), "asker", chat.ScopeAsk, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := e.url
	// The API notices the first token within a second or so.
	chattest.Eventually(t, "the API to close once a token was made", func() bool {
		resp, err := http.Get(base + "/api/v1/repos")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusUnauthorized
	})

	signIn := func(token string) {
		t.Helper()
		b.run("sign in", chromedp.Navigate(base+"/ui/conversations/"+conv), chromedp.WaitVisible(chromedp.CSS("#token")),
			chromedp.SendKeys(chromedp.CSS("#token"), token), chromedp.Click(chromedp.CSS("#signin")),
			chromedp.WaitVisible(chromedp.CSS("#turn-1")))
	}
	b.run("wrong token", chromedp.Navigate(base+"/"), chromedp.WaitVisible(chromedp.CSS("#token")),
		chromedp.SendKeys(chromedp.CSS("#token"), "prc_not-a-token"), chromedp.Click(chromedp.CSS("#signin")),
		chromedp.WaitVisible(chromedp.CSS("p.error")))
	b.shot("signin")
	// The console shows the 401 of the refused sign-in: not a page error.
	b.mu.Lock()
	b.problems = nil
	b.mu.Unlock()

	signIn(reader)
	if n := eval[int](b, `document.querySelectorAll("#ask").length`); n != 0 {
		t.Error("a read token gets an ask box")
	}
	if c := eval[string](b, `document.cookie`); strings.Contains(c, "prchat_session") {
		t.Errorf("scripts can read the session cookie: %q", c)
	}
	b.run("sign out", chromedp.Click(chromedp.CSS("#signout")), chromedp.WaitVisible(chromedp.CSS("#token")))

	signIn(asker)
	b.run("ask", chromedp.SendKeys(chromedp.CSS("#question"), "And a nil path?"), chromedp.Click(chromedp.CSS("#send")),
		chromedp.WaitVisible(chromedp.CSS("#turn-2")))
	if got := e.waitAs(asker, conv, 2); got.State != "succeeded" {
		t.Errorf("turn asked from the dashboard = %s %s", got.State, got.Reason)
	}
	b.noProblems("signed in")

	// The session cookie without its CSRF token changes nothing.
	session := signInHTTP(t, base, asker)
	if session == asker || strings.Contains(session, asker[4:]) {
		t.Fatal("the session cookie holds the API token")
	}
	req, _ := http.NewRequest("POST", base+"/api/v1/conversations/"+conv+"/turns", strings.NewReader(`{"question":"forged?"}`))
	req.Header.Set("Content-Type", "application/json")
	req.AddCookie(&http.Cookie{Name: "prchat_session", Value: session})
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusForbidden {
		t.Errorf("a cookie-only POST = %d, want 403", resp.StatusCode)
	}
	// A token is no session: as a cookie it is refused.
	if got := getWithCookie(t, base+"/api/v1/repos", asker); got != http.StatusUnauthorized {
		t.Errorf("the API token as the session cookie = %d, want 401", got)
	}
}

// noRedirects is an HTTP client that shows redirects instead of following
// them.
var noRedirects = &http.Client{CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }}

// signInHTTP signs in with token as a browser would (the form's CSRF value
// and its cookie, then the post) and returns the session cookie's value.
func signInHTTP(t *testing.T, base, token string) string {
	t.Helper()
	resp, err := noRedirects.Get(base + "/ui/signin")
	if err != nil {
		t.Fatal(err)
	}
	page, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	var csrf *http.Cookie
	for _, c := range resp.Cookies() {
		if c.Name == "prchat_signin" {
			csrf = c
		}
	}
	if csrf == nil || !strings.Contains(string(page), csrf.Value) {
		t.Fatalf("the sign-in form has no CSRF value: %v", resp.Cookies())
	}
	form := url.Values{"token": {token}, "next": {"/"}, "signin_csrf": {csrf.Value}}
	req, _ := http.NewRequest("POST", base+"/ui/signin", strings.NewReader(form.Encode()))
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.AddCookie(csrf)
	resp, err = noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusSeeOther {
		t.Fatalf("sign in = %d", resp.StatusCode)
	}
	for _, c := range resp.Cookies() {
		if c.Name == "prchat_session" {
			if !c.HttpOnly || c.SameSite != http.SameSiteStrictMode {
				t.Errorf("the session cookie is %+v, want HttpOnly and SameSite=Strict", c)
			}
			return c.Value
		}
	}
	t.Fatal("sign in set no session cookie")
	return ""
}

// getWithCookie GETs u with the session cookie and returns the status.
func getWithCookie(t *testing.T, u, session string) int {
	t.Helper()
	req, _ := http.NewRequest("GET", u, nil)
	req.AddCookie(&http.Cookie{Name: "prchat_session", Value: session})
	resp, err := noRedirects.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode == http.StatusSeeOther && !strings.HasPrefix(resp.Header.Get("Location"), "/ui/signin") {
		t.Errorf("GET %s redirects to %s", u, resp.Header.Get("Location"))
	}
	return resp.StatusCode
}

// waitAs long-polls a turn with token until it settles.
func (e *env) waitAs(token, conv string, n int) turnJSON {
	e.t.Helper()
	var got turnJSON
	chattest.Eventually(e.t, fmt.Sprintf("turn %s/%d to settle", conv, n), func() bool {
		req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/conversations/%s/turns/%d?wait=5s", e.url, conv, n), nil)
		req.Header.Set("Authorization", "Bearer "+token)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			e.t.Fatal(err)
		}
		var t turnJSON
		err = json.NewDecoder(resp.Body).Decode(&t)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			e.t.Fatalf("poll turn %d: %d %v", n, resp.StatusCode, err)
		}
		got = t
		return chat.State(t.State).Final()
	})
	return got
}

// holdEventStreams makes each event stream the page opens wait until the
// test sets window.__lastEventID, and then send it as Last-Event-ID: a
// client that reconnects with that id. It holds for every page opened
// after it.
const holdEventStreams = `(() => {
  const fetch0 = window.fetch;
  window.fetch = async function (url, init) {
    if (String(url).endsWith("/events")) {
      while (window.__lastEventID === undefined) await new Promise((r) => setTimeout(r, 20));
      init = Object.assign({}, init);
      init.headers = Object.assign({}, init.headers, { "Last-Event-ID": window.__lastEventID });
    }
    return fetch0.call(this, url, init);
  };
})();`

// TestDashboardSettlesAfterAnEmptyStream: a conversation page whose event
// stream reconnects with the final event's id, and so gets a stream with
// no event (the server sends nothing twice), shows the settled turn at
// once instead of reconnecting until it gives up.
func TestDashboardSettlesAfterAnEmptyStream(t *testing.T) {
	t.Parallel()
	b := newBrowser(t)
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("scripted", nil)
	release := make(chan struct{})
	e.scripted.Push(scripted.Step{Wait: release, Answer: &chat.Answer{
		AnswerMarkdown: "Load refuses an empty path.",
		Citations:      []chat.Citation{{Path: "settings/settings.go", StartLine: 8, EndLine: 12}},
	}})
	conv, _ := e.ask(v, "Why does Load refuse an empty path?")
	b.run("hold event streams", chromedp.Func(func(ctx context.Context, tg *chromedp.Target) error {
		_, err := cdp.Call(ctx, tg, page.AddScriptToEvaluateOnNewDocument, page.AddScriptToEvaluateOnNewDocumentParams{Source: holdEventStreams})
		return err
	}))
	b.run("open conversation", chromedp.Navigate(e.url+"/ui/conversations/"+conv),
		chromedp.WaitVisible(chromedp.CSS("#turn-1[data-pending]")))
	close(release)
	e.wait(conv, 1)
	var tr struct {
		Events []struct {
			Type string `json:"type"`
			Seq  int64  `json:"seq"`
		} `json:"events"`
	}
	e.do("GET", "/api/v1/conversations/"+conv+"/turns/1/transcript", nil, http.StatusOK, &tr)
	final := tr.Events[len(tr.Events)-1]
	if final.Type != chat.EventDone {
		t.Fatalf("last stored event %+v, want done", final)
	}
	start := time.Now()
	eval[string](b, fmt.Sprintf(`window.__lastEventID = "%d"`, final.Seq))
	b.poll("the answer", `document.querySelector("#turn-1 .answer")?.textContent.includes("Load refuses")`)
	t.Logf("the page showed the answer %v after its stream reconnected past the final event", time.Since(start).Round(time.Millisecond))
	b.noProblems("conversation")
}
