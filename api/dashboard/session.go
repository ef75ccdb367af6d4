package dashboard

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"net/http"
	"net/url"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

// CookieName is the dashboard's session cookie. It holds the API token the
// visitor signed in with; HttpOnly keeps it from the page's scripts.
const CookieName = "prchat_session"

// CSRFHeader carries the session's CSRF token on requests that change
// something (the dashboard's script sets it from the page's meta tag).
const CSRFHeader = "X-CSRF-Token"

// sessionLifetime is how long a sign-in lasts.
const sessionLifetime = 12 * time.Hour

// SessionToken returns the request's API token: the Authorization bearer
// token, else the session cookie's (fromCookie true).
func SessionToken(r *http.Request) (token string, fromCookie bool) {
	if h := r.Header.Get("Authorization"); h != "" {
		if t, ok := strings.CutPrefix(h, "Bearer "); ok {
			return strings.TrimSpace(t), false
		}
		return "", false
	}
	if c, err := r.Cookie(CookieName); err == nil && c.Value != "" {
		return c.Value, true
	}
	return "", false
}

// CSRFToken is the CSRF token of a session: an HMAC of a fixed label keyed
// by the session's token, so it needs no storage and cannot be made without
// the token, which the cookie keeps from scripts.
func CSRFToken(token string) string {
	m := hmac.New(sha256.New, []byte(token))
	m.Write([]byte("prchat dashboard csrf"))
	return hex.EncodeToString(m.Sum(nil))
}

// CheckCSRF reports whether a request authenticated by the session cookie
// may proceed: safe methods always, others only with the session's CSRF
// token in the X-CSRF-Token header or the csrf form field. Requests with an
// Authorization header carry no ambient credential and need none.
func CheckCSRF(r *http.Request) bool {
	tok, fromCookie := SessionToken(r)
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
	return sent != "" && hmac.Equal([]byte(sent), []byte(CSRFToken(tok)))
}

func setSession(c echo.Context, token string) {
	c.SetCookie(&http.Cookie{
		Name: CookieName, Value: token, Path: "/",
		MaxAge: int(sessionLifetime / time.Second), HttpOnly: true,
		Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

func clearSession(c echo.Context) {
	c.SetCookie(&http.Cookie{
		Name: CookieName, Value: "", Path: "/", MaxAge: -1, HttpOnly: true,
		Secure: c.Request().TLS != nil, SameSite: http.SameSiteStrictMode,
	})
}

func urlQueryEscape(s string) string { return url.QueryEscape(s) }

// safeNext keeps a sign-in's return address on this site.
func safeNext(next string) string {
	if !strings.HasPrefix(next, "/") || strings.HasPrefix(next, "//") || strings.Contains(next, "\\") {
		return "/"
	}
	return next
}
