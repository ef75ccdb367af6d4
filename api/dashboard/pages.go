package dashboard

import (
	"fmt"
	"html/template"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"

	"github.com/prchat/prchat/chat"
)

var pageNames = []string{"error", "repositories", "pulls", "pull", "review", "conversation", "team", "signin"}

func (d *Dashboard) parse() error {
	funcs := template.FuncMap{
		"markdown": d.md.HTML,
		"when":     func(t time.Time) string { return t.UTC().Format("2006-01-02 15:04 UTC") },
		"short":    func(s string) string { return s[:min(len(s), 10)] },
		"cost":     formatCost,
		"reviewURL": func(repo string, pr, v int) string {
			return fmt.Sprintf("/ui/repos/%s/pulls/%d/reviews/%d", repo, pr, v)
		},
		"filesAPI": func(repo string, pr, v int) string {
			return fmt.Sprintf("/api/v1/repos/%s/pulls/%d/reviews/%d/files", repo, pr, v)
		},
	}
	d.pages = make(map[string]*template.Template, len(pageNames))
	for _, name := range pageNames {
		t, err := template.New(name).Funcs(funcs).ParseFS(templateFiles,
			"templates/layout.html", "templates/turn.html", "templates/"+name+".html")
		if err != nil {
			return fmt.Errorf("dashboard: parse page %s: %w", name, err)
		}
		d.pages[name] = t
	}
	return nil
}

func formatCost(u chat.Usage) string {
	if u.CostUSD != nil {
		return fmt.Sprintf("$%.4f", *u.CostUSD)
	}
	if u.CostReason != "" {
		return "cost unknown"
	}
	return "—"
}

func (d *Dashboard) repositories(c echo.Context) error {
	p, ok := d.who(c)
	if !ok {
		return d.signinRedirect(c)
	}
	rs, err := d.reads.Repositories.Repositories(c.Request().Context())
	if err != nil {
		return d.fail(c, p, err)
	}
	p.Title, p.Data = "Repositories", rs
	return d.render(c, http.StatusOK, "repositories", p)
}

func (d *Dashboard) pulls(c echo.Context) error {
	p, ok := d.who(c)
	if !ok {
		return d.signinRedirect(c)
	}
	repo := repoParam(c)
	prs, err := d.reads.Reports.PullRequests(c.Request().Context(), repo)
	if err != nil {
		return d.fail(c, p, err)
	}
	p.Title = repo
	p.Crumbs = []crumb{{"Repositories", "/"}, {repo, ""}}
	p.Data = struct {
		Repository string
		Pulls      []chat.PullRequest
	}{repo, prs}
	return d.render(c, http.StatusOK, "pulls", p)
}

func (d *Dashboard) pull(c echo.Context) error {
	p, ok := d.who(c)
	if !ok {
		return d.signinRedirect(c)
	}
	repo := repoParam(c)
	pr, err := positive(c, "pr")
	if err != nil {
		return d.fail(c, p, err)
	}
	ctx := c.Request().Context()
	reviews, err := d.reads.Repositories.Reviews(ctx, repo, pr)
	if err != nil {
		return d.fail(c, p, err)
	}
	if len(reviews) == 0 {
		return d.fail(c, p, chat.Errorf(chat.CodeNoReview, "%s#%d has no recorded review", repo, pr))
	}
	convs, err := d.reads.Conversations.Conversations(ctx, repo, pr)
	if err != nil {
		return d.fail(c, p, err)
	}
	slices.Reverse(reviews) // newest first
	p.Title = fmt.Sprintf("%s#%d", repo, pr)
	p.Crumbs = []crumb{{"Repositories", "/"}, {repo, "/ui/repos/" + repo}, {fmt.Sprintf("#%d", pr), ""}}
	p.Data = struct {
		Repository    string
		PR            int
		Reviews       []chat.Review
		Conversations []chat.Conversation
	}{repo, pr, reviews, convs}
	return d.render(c, http.StatusOK, "pull", p)
}

func (d *Dashboard) review(c echo.Context) error {
	p, ok := d.who(c)
	if !ok {
		return d.signinRedirect(c)
	}
	repo := repoParam(c)
	pr, err := positive(c, "pr")
	if err != nil {
		return d.fail(c, p, err)
	}
	v := 0
	if c.Param("version") != "latest" {
		if v, err = positive(c, "version"); err != nil {
			return d.fail(c, p, err)
		}
	}
	ctx := c.Request().Context()
	rv, err := d.reads.Repositories.Review(ctx, repo, pr, v)
	if err != nil {
		return d.fail(c, p, err)
	}
	convs, err := d.reads.Conversations.Conversations(ctx, repo, pr)
	if err != nil {
		return d.fail(c, p, err)
	}
	convs = slices.DeleteFunc(convs, func(cv chat.Conversation) bool { return cv.ReviewVersion != rv.Version })
	p.Title = fmt.Sprintf("%s#%d review %d", repo, pr, rv.Version)
	p.Crumbs = []crumb{{"Repositories", "/"}, {repo, "/ui/repos/" + repo},
		{fmt.Sprintf("#%d", pr), fmt.Sprintf("/ui/repos/%s/pulls/%d", repo, pr)}, {fmt.Sprintf("review %d", rv.Version), ""}}
	p.Data = struct {
		Review        chat.Review
		Conversations []chat.Conversation
	}{rv, convs}
	return d.render(c, http.StatusOK, "review", p)
}

// turnView is a turn as the conversation page shows it.
type turnView struct {
	chat.Turn
	Repository string
	PR         int
	Version    int
	Pending    bool
	Took       string
}

func viewTurns(conv chat.Conversation) []turnView {
	out := make([]turnView, len(conv.Turns))
	for i, t := range conv.Turns {
		out[i] = viewTurn(conv, t)
	}
	return out
}

func viewTurn(conv chat.Conversation, t chat.Turn) turnView {
	v := turnView{Turn: t, Repository: conv.Repository, PR: conv.PR, Version: conv.ReviewVersion, Pending: !t.State.Final()}
	if t.FinishedAt != nil {
		v.Took = t.FinishedAt.Sub(t.CreatedAt).Round(100 * time.Millisecond).String()
	}
	return v
}

func (d *Dashboard) loadConversation(c echo.Context, p page) (chat.Conversation, error) {
	conv, err := d.reads.Conversations.Conversation(c.Request().Context(), c.Param("id"))
	if err != nil {
		return conv, err
	}
	return conv, nil
}

func (d *Dashboard) conversation(c echo.Context) error {
	p, ok := d.who(c)
	if !ok {
		return d.signinRedirect(c)
	}
	conv, err := d.loadConversation(c, p)
	if err != nil {
		return d.fail(c, p, err)
	}
	p.Title = conv.Title
	p.Crumbs = []crumb{{"Repositories", "/"}, {conv.Repository, "/ui/repos/" + conv.Repository},
		{fmt.Sprintf("#%d", conv.PR), fmt.Sprintf("/ui/repos/%s/pulls/%d", conv.Repository, conv.PR)},
		{fmt.Sprintf("review %d", conv.ReviewVersion), fmt.Sprintf("/ui/repos/%s/pulls/%d/reviews/%d", conv.Repository, conv.PR, conv.ReviewVersion)},
		{"conversation", ""}}
	p.Data = struct {
		Conversation chat.Conversation
		Turns        []turnView
	}{conv, viewTurns(conv)}
	return d.render(c, http.StatusOK, "conversation", p)
}

// turnFragment renders one turn alone, for the script to swap in when the
// turn settles.
func (d *Dashboard) turnFragment(c echo.Context) error {
	p, ok := d.who(c)
	if !ok {
		return c.NoContent(http.StatusUnauthorized)
	}
	n, err := positive(c, "n")
	if err != nil {
		return c.String(http.StatusBadRequest, chat.ErrorMessage(err))
	}
	conv, err := d.loadConversation(c, p)
	if err != nil {
		return c.String(http.StatusNotFound, chat.ErrorMessage(err))
	}
	i := slices.IndexFunc(conv.Turns, func(t chat.Turn) bool { return t.Number == n })
	if i < 0 {
		return c.String(http.StatusNotFound, "no such turn")
	}
	var b strings.Builder
	if err := d.pages["conversation"].ExecuteTemplate(&b, "turn", viewTurn(conv, conv.Turns[i])); err != nil {
		return err
	}
	return c.HTML(http.StatusOK, b.String())
}

// teamView is the team page: the figures and the charts drawn from them.
type teamView struct {
	Stats  chat.Stats
	Window string
	Chart  dayChart
}

func (d *Dashboard) team(c echo.Context) error {
	p, ok := d.who(c)
	if !ok {
		return d.signinRedirect(c)
	}
	window := c.QueryParam("since")
	days := 7
	if w, ok := strings.CutSuffix(window, "d"); ok {
		if n, err := strconv.Atoi(w); err == nil && n >= 1 && n <= 366 {
			days = n
		}
	}
	repo := c.QueryParam("repo")
	st, err := d.reads.Reports.Stats(c.Request().Context(), time.Duration(days)*24*time.Hour, repo)
	if err != nil {
		return d.fail(c, p, err)
	}
	p.Title = "Team"
	p.Crumbs = []crumb{{"Repositories", "/"}, {"Team", ""}}
	p.Data = teamView{Stats: st, Window: strconv.Itoa(days) + "d", Chart: chartOf(st)}
	return d.render(c, http.StatusOK, "team", p)
}

// signinView is the sign-in page's data.
type signinView struct{ Next, Error, CSRF string }

func (d *Dashboard) signinForm(c echo.Context) error {
	p, _ := d.who(c)
	p.Title = "Sign in"
	p.Data = signinView{Next: safeNext(c.QueryParam("next")), CSRF: d.signinCSRF(c)}
	return d.render(c, http.StatusOK, "signin", p)
}

func (d *Dashboard) signin(c echo.Context) error {
	p := page{Title: "Sign in", Auth: d.cfg.Access != nil}
	next := safeNext(c.FormValue("next"))
	view := signinView{Next: next, CSRF: d.signinCSRF(c)}
	if required, err := d.accessRequired(c); !required || err != nil {
		view.Error = "This server has no API tokens: no sign-in is needed."
		p.Data = view
		return d.render(c, http.StatusBadRequest, "signin", p)
	}
	addr, now := clientAddr(c.Request()), d.cfg.Now()
	if wait := d.signins.wait(addr, now); wait > 0 {
		c.Response().Header().Set("Retry-After", strconv.Itoa(int((wait+time.Second-1)/time.Second)))
		view.Error = fmt.Sprintf("Too many failed sign-ins from your address; try again in %s.", wait.Round(time.Second))
		p.Data = view
		return d.render(c, http.StatusTooManyRequests, "signin", p)
	}
	if !checkSigninCSRF(c) {
		view.Error = "The sign-in form expired or did not come from this site; try again."
		p.Data = view
		return d.render(c, http.StatusForbidden, "signin", p)
	}
	tok := strings.TrimSpace(c.FormValue("token"))
	id, _, err := d.cfg.Sessions.SignIn(c.Request().Context(), tok)
	if err != nil {
		if chat.ErrorCode(err) != chat.CodeUnauthorized {
			return d.fail(c, p, err)
		}
		d.signins.failed(addr, now)
		view.Error = "That token is not valid."
		p.Data = view
		return d.render(c, http.StatusUnauthorized, "signin", p)
	}
	d.setSession(c, id, d.cfg.Sessions.Lifetime())
	return c.Redirect(http.StatusSeeOther, next)
}

func (d *Dashboard) signout(c echo.Context) error {
	if !CheckCSRF(c.Request()) {
		return c.String(http.StatusForbidden, "missing or wrong CSRF token")
	}
	if id, ok := SessionID(c.Request()); ok && d.cfg.Sessions != nil {
		if err := d.cfg.Sessions.SignOut(c.Request().Context(), id); err != nil {
			return d.fail(c, page{Title: "Sign out"}, err)
		}
	}
	d.clearSession(c)
	return c.Redirect(http.StatusSeeOther, "/ui/signin")
}

func (d *Dashboard) requireAdmin(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		p, ok := d.who(c)
		if !ok {
			return d.signinRedirect(c)
		}
		if p.Scope != string(chat.ScopeAdmin) || p.Limited {
			// The queues are shared by every repository: pausing one
			// stops them all.
			return d.fail(c, p, chat.Errorf(chat.CodeForbidden, "queue internals are for admins of every repository"))
		}
		if !CheckCSRF(c.Request()) {
			return c.String(http.StatusForbidden, "missing or wrong CSRF token")
		}
		return next(c)
	}
}

// accessRequired reports whether the API needs tokens now.
func (d *Dashboard) accessRequired(c echo.Context) (bool, error) {
	if d.cfg.Access == nil {
		return false, nil
	}
	return d.cfg.Access.Required(c.Request().Context())
}
