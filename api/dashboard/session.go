package dashboard

import (
	"context"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"net"
	"net/http"
	"net/url"
	"strings"
	"sync"
	"time"
	"unicode"

	"github.com/labstack/echo/v4"
	"golang.org/x/time/rate"

	"github.com/prchat/prchat/chat"
)

// CookieName is the dashboard's session cookie. It holds a random session
// id (see chat.Sessions), never the API token; HttpOnly keeps it from the
// page's scripts.
const CookieName = "prchat_session"

// signinCookie holds the sign-in form's CSRF value (a double submit: the
// form's hidden field must match it, and a SameSite=Strict cookie never
// travels with another site's post).
const signinCookie = "prchat_signin"

// CSRFHeader carries the session's CSRF token on requests that change
// something (the dashboard's script sets it from the page's meta tag).
const CSRFHeader = "X-CSRF-Token"

// Sessions is what the dashboard needs of sign-ins. *chat.Sessions
// implements it.
type Sessions interface {
	SignIn(ctx context.Context, token string) (string, chat.Token, error)
	Authenticate(ctx context.Context, id string) (chat.Token, error)
	SignOut(ctx context.Context, id string) error
	Lifetime() time.Duration
}

var _ Sessions = (*chat.Sessions)(nil)

// SessionID returns the session id of a request's cookie, unless the
// request carries an Authorization header (which then speaks for it).
func SessionID(r *http.Request) (string, bool) {
	if r.Header.Get("Authorization") != "" {
		return "", false
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return c.Value, true
	}
	return "", false
}

// bearerToken returns the token of an Authorization: Bearer header.
func bearerToken(r *http.Request) string {
	t, _ := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
	return strings.TrimSpace(t)
}

// CSRFToken is the CSRF token of a session: an HMAC of a fixed label keyed
// by the session id, so it needs no storage and cannot be made without the
// id, which the cookie keeps from scripts.
func CSRFToken(session string) string {
	m := hmac.New(sha256.New, []byte(session))
	m.Write([]byte("prchat dashboard csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// CheckCSRF reports whether a request authenticated by the session cookie
// may proceed: safe methods always, others only with the session's CSRF
// token in the X-CSRF-Token header or the csrf form field. Requests with an
// Authorization header carry no ambient credential and need none.
func CheckCSRF(r *http.Request) bool {
	id, fromCookie := SessionID(r)
	if !fromCookie {
		return true
	}
	switch r.Method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return true
	}
	sent := r.Header.Get(CSRFHeader)
	if sent == "" && strings.HasPrefix(r.Header.Get("Content-Type"), "application/x-www-form-urlencoded") {
		sent = r.PostFormValue("csrf")
	}
	return sent != "" && hmac.Equal([]byte(sent), []byte(CSRFToken(id)))
}

func (d *Dashboard) cookie(name, value, path string, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name: name, Value: value, Path: path, MaxAge: maxAge, HttpOnly: true,
		// Behind a TLS proxy the request is plain HTTP: PRCHAT_PUBLIC_URL
		// says what the browser sees.
		Secure:   d.cfg.SecureCookies,
		SameSite: http.SameSiteStrictMode,
	}
}

func (d *Dashboard) setSession(c echo.Context, id string, lifetime time.Duration) {
	ck := d.cookie(CookieName, id, "/", int(lifetime/time.Second))
	ck.Secure = ck.Secure || c.Request().TLS != nil
	c.SetCookie(ck)
}

func (d *Dashboard) clearSession(c echo.Context) {
	ck := d.cookie(CookieName, "", "/", -1)
	ck.Secure = ck.Secure || c.Request().TLS != nil
	c.SetCookie(ck)
}

// signinCSRF returns the sign-in form's CSRF value: the request's cookie,
// or a new one that is set.
func (d *Dashboard) signinCSRF(c echo.Context) string {
	if ck, err := c.Cookie(signinCookie); err == nil && len(ck.Value) >= 32 {
		return ck.Value
	}
	var b [24]byte
	_, _ = rand.Read(b[:])
	v := base64.RawURLEncoding.EncodeToString(b[:])
	ck := d.cookie(signinCookie, v, "/ui/signin", 3600)
	ck.Secure = ck.Secure || c.Request().TLS != nil
	c.SetCookie(ck)
	return v
}

// checkSigninCSRF reports whether a sign-in post carries the form's CSRF
// value, matching its cookie.
func checkSigninCSRF(c echo.Context) bool {
	ck, err := c.Cookie(signinCookie)
	sent := c.FormValue("signin_csrf")
	return err == nil && len(ck.Value) >= 32 && hmac.Equal([]byte(sent), []byte(ck.Value))
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext keeps a sign-in's return address a path on this site: parsed
// as a URL it has no scheme, host or user, its path (decoded, too) starts
// with one slash, and no backslash, space or control character appears in
// it anywhere, raw or percent-decoded (browsers drop tabs and newlines and
// read a backslash as a slash, which would turn /%09/evil.example into
// //evil.example). Anything else leads to "/".
func safeNext(next string) string {
	const home = "/"
	bad := func(s string) bool {
		return !strings.HasPrefix(s, "/") || strings.HasPrefix(s, "//") ||
			strings.ContainsFunc(s, func(r rune) bool { return r == '\\' || unicode.IsSpace(r) || unicode.IsControl(r) })
	}
	if bad(next) {
		return home
	}
	u, err := url.Parse(next)
	// Decoded, a space is harmless (it is sent encoded again); a leading
	// "//", a backslash or a control character is not taken.
	if err != nil || u.Scheme != "" || u.Host != "" || u.User != nil || u.Opaque != "" ||
		bad(strings.ReplaceAll(u.Path, " ", "%20")) {
		return home
	}
	if q, err := url.QueryUnescape(u.RawQuery); err != nil || strings.ContainsFunc(q, unicode.IsControl) {
		return home
	}
	out := u.EscapedPath()
	if bad(out) {
		return home
	}
	if u.RawQuery != "" {
		out += "?" + u.RawQuery
	}
	return out
}

// Failed sign-ins allowed per client address: 10 a minute.
const (
	signinFailures = 10
	signinWindow   = time.Minute
)

// signinLimits counts the failed sign-ins of each client address in this
// process (a token bucket: 10, refilled over a minute).
type signinLimits struct {
	mu sync.Mutex
	by map[string]*rate.Limiter
}

func (l *signinLimits) limiter(addr string) *rate.Limiter {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.by == nil || len(l.by) > 100_000 {
		l.by = map[string]*rate.Limiter{}
	}
	lim, ok := l.by[addr]
	if !ok {
		lim = rate.NewLimiter(rate.Every(signinWindow/signinFailures), signinFailures)
		l.by[addr] = lim
	}
	return lim
}

// wait reports how long addr must wait before it may try again (0: now).
func (l *signinLimits) wait(addr string, now time.Time) time.Duration {
	lim := l.limiter(addr)
	if lim.TokensAt(now) >= 1 {
		return 0
	}
	r := lim.ReserveN(now, 1)
	defer r.CancelAt(now)
	return max(r.DelayFrom(now), time.Second)
}

// failed counts a failed sign-in of addr.
func (l *signinLimits) failed(addr string, now time.Time) { l.limiter(addr).AllowN(now, 1) }

// clientAddr is the address a sign-in is counted against: the connection's
// peer, or, when that peer is a proxy on this host or its network (a
// loopback or private address), the last address of X-Forwarded-For, the
// one that proxy added.
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		host = r.RemoteAddr
	}
	ip := net.ParseIP(host)
	if ip != nil && (ip.IsLoopback() || ip.IsPrivate()) {
		if xff := r.Header.Values("X-Forwarded-For"); len(xff) > 0 {
			parts := strings.Split(xff[len(xff)-1], ",")
			if last := net.ParseIP(strings.TrimSpace(parts[len(parts)-1])); last != nil {
				return last.String()
			}
		}
	}
	return host
}
