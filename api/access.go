package api

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"math"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/prchat/prchat/api/dashboard"
	"github.com/prchat/prchat/chat"
)

// Access is what the API asks of prchat's API tokens. *chat.Access
// implements it.
type Access interface {
	// Required reports whether requests need a token (once any exists).
	Required(ctx context.Context) (bool, error)
	// Authenticate returns the live token of a value, or an error with
	// chat.CodeUnauthorized.
	Authenticate(ctx context.Context, value string) (chat.Token, error)
	CreateToken(ctx context.Context, name string, scope chat.Scope, repos []string) (chat.Token, string, error)
	Tokens(ctx context.Context) ([]chat.Token, error)
	RevokeToken(ctx context.Context, id string) (chat.Token, error)
}

// routeAccess is what a route needs of a token: a scope, and for routes
// that are not about one repository or that say where one is cloned from
// (registering, providers, tokens), a token for every repository.
type routeAccess struct {
	scope    chat.Scope
	allRepos bool
}

// accessOf is what the route of method and path needs; a route missing
// from apiRoutes needs an admin token for every repository.
func accessOf(method, path string) routeAccess {
	if a, ok := routeScopes[method+" "+path]; ok {
		return a
	}
	return routeAccess{scope: chat.ScopeAdmin, allRepos: true}
}

// authorize guards the /api routes: it refuses strings with NUL bytes in
// the path and query, checks the bearer token once any token exists (401
// without a valid one, 403 without the route's scope), applies the
// per-token request rate, hands the token to the service in the request's
// context (so that a token limited to repositories sees only those, and
// its questions count against the question limits), and
// logs admin actions with the token's name and id.
func (s *Server) authorize(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		if strings.ContainsRune(r.URL.Path, 0) || strings.ContainsRune(r.URL.RawQuery, 0) || strings.Contains(strings.ToLower(r.URL.RawQuery), "%00") || strings.Contains(strings.ToLower(r.URL.RawPath), "%00") {
			return chat.Errorf(chat.CodeInvalid, "the path and query must not hold NUL bytes")
		}
		if s.cfg.Access == nil {
			return next(c)
		}
		ctx := r.Context()
		need := accessOf(r.Method, c.Path())
		required, err := s.cfg.Access.Required(ctx)
		if err != nil {
			return &chat.Error{Code: chat.CodeUnavailable, Message: "cannot check API tokens", Err: err}
		}
		var tok chat.Token
		authed := false
		if required {
			value, ok := bearer(r)
			session, fromCookie := "", false
			if !ok && s.cfg.Sessions != nil {
				// The dashboard's session cookie stands for the token it
				// was signed in with; what it changes needs the session's
				// CSRF token.
				session, fromCookie = dashboard.SessionID(r)
			}
			if fromCookie && !dashboard.CheckCSRF(r) {
				return chat.Errorf(chat.CodeForbidden, "a request made with the dashboard's session needs its CSRF token (the %s header)", dashboard.CSRFHeader)
			}
			if !ok && !fromCookie {
				c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="prchat"`)
				return chat.Errorf(chat.CodeUnauthorized, "this route needs an API token: Authorization: Bearer <token>")
			}
			if fromCookie {
				tok, err = s.cfg.Sessions.Authenticate(ctx, session)
			} else {
				tok, err = s.cfg.Access.Authenticate(ctx, value)
			}
			if err != nil {
				if chat.ErrorCode(err) == chat.CodeUnauthorized {
					c.Response().Header().Set(echo.HeaderWWWAuthenticate, `Bearer realm="prchat", error="invalid_token"`)
				}
				return err
			}
			authed = true
			if !tok.Scope.Includes(need.scope) {
				return chat.Errorf(chat.CodeForbidden, "this route needs a token of scope %s; this one is %s", need.scope, tok.Scope)
			}
			if need.allRepos && tok.Limited() {
				return chat.Errorf(chat.CodeForbidden, "this route needs a token that is not limited to repositories")
			}
		}
		if authed {
			if wait := s.limits.take(tok.ID, s.now()); wait > 0 {
				return chat.RateLimited("requests with this token", wait)
			}
			c.SetRequest(r.WithContext(chat.WithToken(ctx, tok)))
		}
		err = next(c)
		if need.scope == chat.ScopeAdmin && r.Method != http.MethodGet {
			s.audit(c, tok, authed, err)
		}
		return err
	}
}

// bearer returns the token of an Authorization: Bearer header.
func bearer(r *http.Request) (string, bool) {
	h := r.Header.Get(echo.HeaderAuthorization)
	scheme, value, ok := strings.Cut(h, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	value = strings.TrimSpace(value)
	return value, value != ""
}

// audit logs an admin action: who (the token's name and id, never its
// value), what (method, route, the path's repository or id) and how it
// ended.
func (s *Server) audit(c echo.Context, tok chat.Token, authed bool, err error) {
	status := c.Response().Status
	if err != nil {
		status = statusOfError(toDomain(err))
	}
	attrs := []slog.Attr{
		slog.String("request_id", requestID(c)),
		slog.String("method", c.Request().Method),
		slog.String("route", c.Path()),
		slog.Int("status", status),
	}
	if authed {
		attrs = append(attrs, slog.String("token_id", tok.ID), slog.String("token_name", tok.Name))
	} else {
		attrs = append(attrs, slog.String("token_id", ""), slog.String("token_name", "(open: no token exists)"))
	}
	for _, name := range c.ParamNames() {
		attrs = append(attrs, slog.String(name, c.Param(name)))
	}
	s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "audit", attrs...)
}

// requestLimits keeps a token bucket (x/time/rate) per API token in this
// process. Requests without a token (an open API) are not limited.
type requestLimits struct {
	limit rate.Limit
	burst int

	mu       sync.Mutex
	limiters map[string]*rate.Limiter
}

func newRequestLimits(r chat.Rate) *requestLimits {
	l := &requestLimits{limiters: map[string]*rate.Limiter{}}
	if !r.Off() {
		l.limit = rate.Limit(float64(r.Count) / r.Per.Seconds())
		l.burst = r.Count
	}
	return l
}

// take takes one request of key at now, or returns how long until one is
// allowed.
func (l *requestLimits) take(key string, now time.Time) time.Duration {
	if l.burst == 0 {
		return 0
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	lim, ok := l.limiters[key]
	if !ok {
		if len(l.limiters) > 100_000 {
			clear(l.limiters)
		}
		lim = rate.NewLimiter(l.limit, l.burst)
		l.limiters[key] = lim
	}
	if lim.AllowN(now, 1) {
		return 0
	}
	res := lim.ReserveN(now, 1)
	wait := res.DelayFrom(now)
	res.CancelAt(now)
	return max(wait, time.Millisecond)
}

// retryAfter is the Retry-After header of a wait: whole seconds, at least 1.
func retryAfter(wait time.Duration) string {
	return strconv.Itoa(max(1, int(math.Ceil(wait.Seconds()))))
}

// rejectNUL refuses a JSON body with a NUL character in any string or key.
func rejectNUL(body []byte) error {
	if !bytes.Contains(bytes.ToLower(body), []byte(`\u0000`)) {
		return nil
	}
	var v any
	if err := json.Unmarshal(body, &v); err != nil {
		return nil // the decode that follows reports it
	}
	if hasNUL(v) {
		return chat.Errorf(chat.CodeInvalid, "strings in the request must not hold NUL bytes")
	}
	return nil
}

func hasNUL(v any) bool {
	switch v := v.(type) {
	case string:
		return strings.ContainsRune(v, 0)
	case []any:
		for _, e := range v {
			if hasNUL(e) {
				return true
			}
		}
	case map[string]any:
		for k, e := range v {
			if strings.ContainsRune(k, 0) || hasNUL(e) {
				return true
			}
		}
	}
	return false
}

type createTokenRequest struct {
	Name  string     `json:"name"`
	Scope chat.Scope `json:"scope"`
	Repos []string   `json:"repos"`
}

// createdToken is a new token with its value, shown this once.
type createdToken struct {
	chat.Token
	Value string `json:"token"`
}

// errNoTokens answers the token routes of a server without a token store.
var errNoTokens = chat.Errorf(chat.CodeUnavailable, "this server keeps no API tokens")

func (s *Server) listTokens(c echo.Context) error {
	if s.cfg.Access == nil {
		return errNoTokens
	}
	ts, err := s.cfg.Access.Tokens(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"tokens": nonNil(ts)})
}

func (s *Server) createToken(c echo.Context) error {
	if s.cfg.Access == nil {
		return errNoTokens
	}
	var req createTokenRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	t, value, err := s.cfg.Access.CreateToken(c.Request().Context(), req.Name, req.Scope, req.Repos)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, createdToken{Token: t, Value: value})
}

func (s *Server) revokeToken(c echo.Context) error {
	if s.cfg.Access == nil {
		return errNoTokens
	}
	if _, err := s.cfg.Access.RevokeToken(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
