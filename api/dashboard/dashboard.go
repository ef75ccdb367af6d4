// Package dashboard is prchat's web dashboard: pages rendered on the server
// with html/template from the same service the JSON API answers for, and one
// small script (static/app.js) for the live parts: asking, streaming a
// turn's events over the SSE contract with a fetch reader (it resumes with
// Last-Event-ID after a dropped connection), tool steps, cancelling, and
// opening a citation's lines.
//
// Everything it serves is embedded in the binary; no Node build step is
// needed to run or test it. Answer and review markdown is rendered on the
// server and sanitised (see Markdown). Every page is sent with a strict
// Content-Security-Policy: scripts and styles only from the dashboard's own
// files, no inline script, no frames, connections only to the same origin.
//
// Pages:
//
//	/                                                 repositories
//	/ui/repos/{owner}/{repo}                          its reviewed pull requests
//	/ui/repos/{owner}/{repo}/pulls/{pr}               review versions and conversations
//	/ui/repos/{owner}/{repo}/pulls/{pr}/reviews/{v}   the saved review, ask a first question
//	/ui/conversations/{id}                            a conversation: ask, watch, cite
//	/ui/conversations/{id}/turns/{n}                  one turn, as a fragment the script swaps in
//	/ui/team                                          the team figures of GET /api/v1/stats
//	/ui/signin, /ui/signout                           sign in with a token, sign out
//
// Signing in takes an API token once and makes a session (chat.Sessions):
// the cookie (HttpOnly, SameSite=Strict, Secure when PRCHAT_PUBLIC_URL is
// https:// or the request came over TLS) holds its random id, never the
// token, and the API accepts it like an Authorization header with that
// token. Signing out deletes the session. Requests that change something
// and carry the cookie must also carry the session's CSRF token (the
// X-CSRF-Token header, or a csrf form field): see SessionID and CheckCSRF.
// The sign-in form is CSRF-protected itself (a double-submit value in a
// SameSite=Strict cookie of its own), allows 10 failed sign-ins a minute
// per client address (then 429 with Retry-After), and its next parameter
// only ever leads to a path on prchat (safeNext).
package dashboard

import (
	"cmp"
	"context"
	"embed"
	"errors"
	"fmt"
	"html/template"
	"io/fs"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/prchat/prchat/chat"
)

//go:embed templates/*.html
var templateFiles embed.FS

//go:embed static
var staticFiles embed.FS

// Reads are what the dashboard reads, one interface per role of chat.
type Reads struct {
	Repositories  Repositories
	Conversations Conversations
	Reports       Reports
}

// Repositories reads repositories and reviews. *chat.Admin implements it.
type Repositories interface {
	Repositories(ctx context.Context) ([]chat.Repository, error)
	Repository(ctx context.Context, name string) (chat.Repository, error)
	Reviews(ctx context.Context, repo string, pr int) ([]chat.Review, error)
	Review(ctx context.Context, repo string, pr, version int) (chat.Review, error)
}

// Conversations reads conversations. *chat.Turns implements it.
type Conversations interface {
	Conversations(ctx context.Context, repo string, pr int) ([]chat.Conversation, error)
	Conversation(ctx context.Context, id string) (chat.Conversation, error)
}

// Reports are the pull request lists and the team figures. *chat.Reports
// implements it.
type Reports interface {
	PullRequests(ctx context.Context, repo string) ([]chat.PullRequest, error)
	Stats(ctx context.Context, window time.Duration, repo string) (chat.Stats, error)
}

var (
	_ Repositories  = (*chat.Admin)(nil)
	_ Conversations = (*chat.Turns)(nil)
	_ Reports       = (*chat.Reports)(nil)
)

// Access is how the dashboard learns who is signed in. *chat.Access
// implements it; nil means the API is open (no tokens).
type Access interface {
	// Required reports whether requests need a token (once any exists).
	Required(ctx context.Context) (bool, error)
	// Authenticate returns the live token of a value, or an error.
	Authenticate(ctx context.Context, value string) (chat.Token, error)
}

var _ Access = (*chat.Access)(nil)

// Config holds the dashboard's settings.
type Config struct {
	// Access checks tokens; nil: the API is open and sign-in is not needed.
	Access Access
	// Sessions keeps sign-ins; required when Access is set.
	Sessions Sessions
	// SecureCookies marks the cookies Secure (PRCHAT_PUBLIC_URL is
	// https://: behind a TLS proxy prchat itself sees plain HTTP). They are
	// Secure anyway on a request that came over TLS.
	SecureCookies bool
	// AdminQueues, if set, is the queue-internals handler mounted at
	// /admin/queues (admins only when tokens are in use).
	AdminQueues http.Handler
	Logger      *slog.Logger
	// Now tells the time to the sign-in limit; default time.Now.
	Now func() time.Time
}

// Dashboard serves the pages.
type Dashboard struct {
	cfg   Config
	reads Reads
	md    *Markdown
	log   *slog.Logger
	pages map[string]*template.Template
	// signins counts failed sign-ins per client address.
	signins signinLimits
	// queues is asynqmon's Content-Security-Policy.
	queues queuePolicy
}

// New returns a Dashboard reading from r.
func New(cfg Config, r Reads) (*Dashboard, error) {
	if r.Repositories == nil || r.Conversations == nil || r.Reports == nil {
		return nil, errors.New("dashboard: repositories, conversations and reports are required")
	}
	if cfg.Access != nil && cfg.Sessions == nil {
		return nil, errors.New("dashboard: sessions are required with access")
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	d := &Dashboard{cfg: cfg, reads: r, md: NewMarkdown(), log: cmp.Or(cfg.Logger, slog.New(slog.DiscardHandler))}
	if err := d.parse(); err != nil {
		return nil, err
	}
	return d, nil
}

// ContentSecurityPolicy is sent with every page and asset.
const ContentSecurityPolicy = "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; " +
	"connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

// Register mounts the dashboard's routes on e. Each route carries its own
// middleware (no echo groups, whose middleware would register catch-all
// routes of their own).
func (d *Dashboard) Register(e *echo.Echo) {
	page := func(method, path string, h echo.HandlerFunc) { e.Add(method, path, h, d.secureHeaders) }
	page(http.MethodGet, "/", d.repositories)
	page(http.MethodGet, "/ui/repos/:owner/:repo", d.pulls)
	page(http.MethodGet, "/ui/repos/:owner/:repo/pulls/:pr", d.pull)
	page(http.MethodGet, "/ui/repos/:owner/:repo/pulls/:pr/reviews/:version", d.review)
	page(http.MethodGet, "/ui/conversations/:id", d.conversation)
	page(http.MethodGet, "/ui/conversations/:id/turns/:n", d.turnFragment)
	page(http.MethodGet, "/ui/team", d.team)
	page(http.MethodGet, "/ui/signin", d.signinForm)
	page(http.MethodPost, "/ui/signin", d.signin)
	page(http.MethodPost, "/ui/signout", d.signout)
	static, _ := fs.Sub(staticFiles, "static")
	page(http.MethodGet, "/ui/assets/*", echo.WrapHandler(http.StripPrefix("/ui/assets/", http.FileServer(http.FS(static)))))
	if d.cfg.AdminQueues != nil {
		h := echo.WrapHandler(queueTypes(d.cfg.AdminQueues, "/admin/queues"))
		headers := d.queueHeaders(d.cfg.AdminQueues, "/admin/queues")
		e.GET("/admin/queues", h, headers, d.requireAdmin)
		// asynqmon's own pages and the API its page calls.
		for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodDelete} {
			e.Add(m, "/admin/queues/*", h, headers, d.requireAdmin)
		}
	}
}

func (d *Dashboard) secureHeaders(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		h := c.Response().Header()
		h.Set("Content-Security-Policy", ContentSecurityPolicy)
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("Referrer-Policy", "same-origin")
		h.Set("X-Frame-Options", "DENY")
		return next(c)
	}
}

// page is what every page's layout needs.
type page struct {
	Title    string
	CSRF     string
	SignedIn bool
	Scope    string
	// CanAsk is false for a read token: the ask box is not shown.
	CanAsk bool
	// Limited is true for a token limited to repositories: it never sees
	// deployment-wide pages (the queue internals).
	Limited bool
	// Auth is true when tokens are in use.
	Auth   bool
	Crumbs []crumb
	Data   any
}

type crumb struct {
	Label, Href string
}

// who reads the request's session: its token's scope and the session's
// CSRF token. The token goes into the request's context, so that the
// service shows a token limited to repositories only those. A request that
// needs a token and has no valid one gets false: send it to sign in.
func (d *Dashboard) who(c echo.Context) (page, bool) {
	var p page
	ctx := c.Request().Context()
	required := false
	if d.cfg.Access != nil {
		var err error
		if required, err = d.cfg.Access.Required(ctx); err != nil {
			d.log.WarnContext(ctx, "dashboard: cannot check API tokens", slog.Any("err", err))
			required = true
		}
	}
	if !required {
		p.CanAsk, p.Scope = true, string(chat.ScopeAdmin)
		return p, true
	}
	p.Auth = true
	var tok chat.Token
	var err error
	id, fromCookie := SessionID(c.Request())
	switch {
	case fromCookie:
		tok, err = d.cfg.Sessions.Authenticate(ctx, id)
		p.CSRF = CSRFToken(id)
	case bearerToken(c.Request()) != "":
		tok, err = d.cfg.Access.Authenticate(ctx, bearerToken(c.Request()))
	default:
		return p, false
	}
	if err != nil {
		return p, false
	}
	c.SetRequest(c.Request().WithContext(chat.WithToken(ctx, tok)))
	p.SignedIn, p.Scope, p.Limited = fromCookie, string(tok.Scope), tok.Limited()
	p.CanAsk = tok.Scope.Includes(chat.ScopeAsk)
	return p, true
}

// render writes page name with status.
func (d *Dashboard) render(c echo.Context, status int, name string, p page) error {
	t, ok := d.pages[name]
	if !ok {
		return fmt.Errorf("dashboard: no page %q", name)
	}
	var b strings.Builder
	if err := t.ExecuteTemplate(&b, "layout", p); err != nil {
		d.log.ErrorContext(c.Request().Context(), "render page", slog.String("page", name), slog.Any("err", err))
		return c.String(http.StatusInternalServerError, "the page could not be rendered")
	}
	return c.HTML(status, b.String())
}

// fail renders err as an error page with the API's status for its code.
func (d *Dashboard) fail(c echo.Context, p page, err error) error {
	status := http.StatusInternalServerError
	switch chat.ErrorCode(err) {
	case chat.CodeInvalid:
		status = http.StatusBadRequest
	case chat.CodeUnauthorized:
		status = http.StatusUnauthorized
	case chat.CodeForbidden:
		status = http.StatusForbidden
	case chat.CodeNotFound, chat.CodeRepositoryNotFound, chat.CodeNoReview:
		status = http.StatusNotFound
	case chat.CodeRateLimited:
		status = http.StatusTooManyRequests
	case chat.CodeUnavailable:
		status = http.StatusServiceUnavailable
	}
	msg := chat.ErrorMessage(err)
	if status == http.StatusInternalServerError {
		d.log.ErrorContext(c.Request().Context(), "dashboard page failed", slog.String("path", c.Path()), slog.Any("err", err))
		msg = "Something went wrong on the server; try again."
	}
	p.Title = http.StatusText(status)
	p.Data = msg
	return d.render(c, status, "error", p)
}

// signinRedirect sends a visitor without a valid session to sign in.
func (d *Dashboard) signinRedirect(c echo.Context) error {
	return c.Redirect(http.StatusSeeOther, "/ui/signin?next="+urlQueryEscape(c.Request().URL.RequestURI()))
}

func repoParam(c echo.Context) string { return c.Param("owner") + "/" + c.Param("repo") }

func positive(c echo.Context, name string) (int, error) {
	n, err := strconv.Atoi(c.Param(name))
	if err != nil || n < 1 {
		return 0, chat.Errorf(chat.CodeInvalid, "%s must be a positive number, not %q", name, c.Param(name))
	}
	return n, nil
}
