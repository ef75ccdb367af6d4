package api

import (
	"context"
	"mime"
	"net"
	"net/http"
	"net/url"
	"strings"

	"github.com/labstack/echo/v4"

	"github.com/prchat/prchat/chat"
)

// Browsers cannot be used against prchat (DESIGN §6 "Access"). A web page
// the user visits can make the browser send requests to prchat: a form
// post, a fetch with a "simple" content type, or, after rebinding a name
// of its own to 127.0.0.1, requests that it may also read. guardBrowsers
// refuses each of them, for every route, before any handler runs:
//
//   - a state-changing request (any method but GET, HEAD and OPTIONS)
//     whose Origin is not prchat's own, or whose Sec-Fetch-Site is
//     cross-site: 403 forbidden. prchat's own origin is PublicURL's, or
//     the origin of the Host the request was sent to (a same-origin
//     request of the dashboard). Clients that are not browsers (prchat
//     ask, curl, forges) send neither header and pass.
//   - a body sent to a JSON route (/api/... and asynqmon's API) as anything
//     but application/json: 415 with the code invalid (the contract's error
//     table has no code of its own for 415). A browser cannot send
//     application/json to another origin without a CORS preflight, which
//     prchat never grants.
//     The one exception is a review's session upload, sent as
//     application/x-ndjson: not a type a page may send to another origin
//     without a preflight either.
//   - while the API is open (no token exists yet), a request whose Host is
//     not a loopback address, localhost or PublicURL's host: 403
//     forbidden. That is what DNS rebinding sends: the page's own name,
//     resolved to 127.0.0.1.
//
// The probes (/healthz, /readyz, /metrics) answer any Host, so that
// orchestrators may call them by a pod's address; they change nothing and
// show no data. The webhook routes take what the forges send (GitHub may
// send form-encoded payloads, to any Host a tunnel or proxy names): they
// are authenticated by their signature, which no web page can make.
func (s *Server) guardBrowsers(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		r := c.Request()
		path := r.URL.Path
		if isProbe(path) {
			return next(c)
		}
		webhook := strings.HasPrefix(path, "/webhooks/")
		if !webhook && !s.hostAllowed(r.Context(), r.Host) {
			return chat.Errorf(chat.CodeForbidden, "while no API token exists prchat serves only requests to a loopback address or localhost (Host %q is neither); set PRCHAT_PUBLIC_URL to the address it is reached at, or create a token", r.Host)
		}
		if stateChanging(r.Method) {
			if site := r.Header.Get("Sec-Fetch-Site"); strings.EqualFold(site, "cross-site") {
				return chat.Errorf(chat.CodeForbidden, "requests from another site's pages cannot change anything here (Sec-Fetch-Site: cross-site)")
			}
			if origin, ok := r.Header["Origin"]; ok && !s.ownOrigin(origin[0], r.Host) {
				return chat.Errorf(chat.CodeForbidden, "requests from another origin's pages cannot change anything here (Origin %q)", origin[0])
			}
			if !webhook && jsonRoute(path) && hasBody(r) && !isJSON(r.Header.Get(echo.HeaderContentType)) && !isSessionUpload(c) {
				return unsupportedMedia(r.Header.Get(echo.HeaderContentType))
			}
		}
		return next(c)
	}
}

// unsupportedMedia is 415 with the code invalid.
func unsupportedMedia(got string) error {
	if got == "" {
		got = "none"
	}
	return &statusError{status: http.StatusUnsupportedMediaType, err: chat.Errorf(chat.CodeInvalid, "a request body must be sent as Content-Type: application/json (this one is %s)", got)}
}

func isProbe(path string) bool {
	return path == "/healthz" || path == "/readyz" || path == "/metrics"
}

func stateChanging(method string) bool {
	switch method {
	case http.MethodGet, http.MethodHead, http.MethodOptions:
		return false
	}
	return true
}

// jsonRoute reports whether path's bodies are JSON: the API's and the
// queue monitor's API.
func jsonRoute(path string) bool {
	return strings.HasPrefix(path, "/api/") || strings.HasPrefix(path, "/admin/queues/api/")
}

// hasBody reports whether a request carries a body (or may: chunked).
func hasBody(r *http.Request) bool {
	return r.ContentLength > 0 || r.ContentLength < 0 || len(r.TransferEncoding) > 0
}

// isSessionUpload reports whether c is a review's session upload sent as
// application/x-ndjson.
func isSessionUpload(c echo.Context) bool {
	mt, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType))
	return err == nil && mt == sessionMediaType && c.Path() == "/api/v1"+sessionRoute
}

func isJSON(contentType string) bool {
	mt, _, err := mime.ParseMediaType(contentType)
	return err == nil && mt == "application/json"
}

// ownOrigin reports whether an Origin header names prchat: PublicURL's
// origin, or the scheme-less host the request was sent to. "null" (a
// sandboxed frame, a file) is never prchat's.
func (s *Server) ownOrigin(origin, host string) bool {
	if s.publicOrigin != "" && strings.EqualFold(origin, s.publicOrigin) {
		return true
	}
	u, err := url.Parse(origin)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.Path != "" {
		return false
	}
	return sameHost(u, host)
}

// sameHost compares an origin's host and port with a Host header, the
// scheme's default port filled in on both sides.
func sameHost(origin *url.URL, host string) bool {
	def := "80"
	if origin.Scheme == "https" {
		def = "443"
	}
	oh, op := splitHostPort(origin.Host, def)
	hh, hp := splitHostPort(host, def)
	return oh != "" && strings.EqualFold(oh, hh) && op == hp
}

// splitHostPort splits host[:port], giving def when the port is missing.
func splitHostPort(hostport, def string) (string, string) {
	if h, p, err := net.SplitHostPort(hostport); err == nil {
		return strings.Trim(h, "[]"), p
	}
	return strings.Trim(hostport, "[]"), def
}

// hostAllowed reports whether a request to host is served: always once
// tokens are required; while the API is open only for loopback hosts and
// PublicURL's.
func (s *Server) hostAllowed(ctx context.Context, host string) bool {
	h, _ := splitHostPort(host, "")
	if loopbackHost(h) || (s.publicHost != "" && strings.EqualFold(h, s.publicHost)) {
		return true
	}
	if s.cfg.Access == nil {
		return false // no tokens at all: always open
	}
	required, err := s.cfg.Access.Required(ctx)
	// A failed check refuses: the routes would answer 503 anyway.
	return err == nil && required
}

// loopbackHost reports whether a Host header's name is localhost (or a
// name under it) or an address of 127.0.0.0/8 or ::1.
func loopbackHost(h string) bool {
	h = strings.TrimSuffix(strings.ToLower(h), ".")
	if h == "localhost" || strings.HasSuffix(h, ".localhost") {
		return true
	}
	ip := net.ParseIP(h)
	return ip != nil && ip.IsLoopback()
}

// parsePublicURL checks Config.PublicURL and returns its origin and host.
func parsePublicURL(raw string) (origin, host string, err error) {
	if raw == "" {
		return "", "", nil
	}
	u, err := url.Parse(raw)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return "", "", chat.Errorf(chat.CodeInvalid, "the public URL must be http(s)://host[:port][/path], not %q", raw)
	}
	h, _ := splitHostPort(u.Host, "")
	return strings.ToLower(u.Scheme + "://" + u.Host), strings.ToLower(h), nil
}
