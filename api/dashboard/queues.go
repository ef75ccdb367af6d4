package dashboard

import (
	"crypto/sha256"
	"encoding/base64"
	"net/http"
	"net/http/httptest"
	"path"
	"regexp"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// asynqmon's pages (/admin/queues) get the dashboard's security headers as
// far as asynqmon allows. Its page is a React build that needs, beyond the
// dashboard's policy:
//
//   - its two inline scripts (the root path flags and webpack's runtime):
//     allowed by their SHA-256 hashes, computed from the page it serves, not
//     by 'unsafe-inline';
//   - style-src 'unsafe-inline': Material-UI injects <style> elements at run
//     time;
//   - Google Fonts: the stylesheets of fonts.googleapis.com and the fonts of
//     fonts.gstatic.com (Roboto, Material Icons). Without them the page
//     works in the browser's default fonts, with icon names as text.
//
// Everything else is as strict as the dashboard's: no frames (it may not be
// framed either), connections to this origin only, no base or form target
// elsewhere.

var inlineScript = regexp.MustCompile(`(?s)<script>(.*?)</script>`)

// queuePolicy computes asynqmon's Content-Security-Policy once, from its
// page.
type queuePolicy struct {
	once   sync.Once
	policy string
}

func (q *queuePolicy) of(h http.Handler, path string) string {
	q.once.Do(func() {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
		var hashes []string
		for _, m := range inlineScript.FindAllStringSubmatch(rec.Body.String(), -1) {
			sum := sha256.Sum256([]byte(m[1]))
			hashes = append(hashes, "'sha256-"+base64.StdEncoding.EncodeToString(sum[:])+"'")
		}
		q.policy = "default-src 'none'; script-src 'self' " + strings.Join(hashes, " ") +
			"; style-src 'self' 'unsafe-inline' https://fonts.googleapis.com; font-src 'self' https://fonts.gstatic.com; " +
			"img-src 'self' data:; connect-src 'self'; manifest-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	})
	return q.policy
}

// queueHeaders sets asynqmon's policy and the dashboard's other headers.
func (d *Dashboard) queueHeaders(h http.Handler, path string) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			hd := c.Response().Header()
			hd.Set("Content-Security-Policy", d.queues.of(h, path))
			hd.Set("X-Content-Type-Options", "nosniff")
			hd.Set("Referrer-Policy", "same-origin")
			hd.Set("X-Frame-Options", "DENY")
			return next(c)
		}
	}
}

// queueTypes corrects the Content-Type of asynqmon's answers. asynqmon
// names only its scripts' type and sniffs the rest, so its API's JSON and
// its manifest arrive as text/plain and its SVG logo as text/xml, which a
// browser told nosniff will not draw. A successful answer gets the type of
// what it is: JSON under api/, else by its file's extension; anything else
// (its page, an error) keeps what asynqmon says.
func queueTypes(h http.Handler, root string) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rest := strings.TrimPrefix(r.URL.Path, root)
		typ := queueFileTypes[path.Ext(rest)]
		if strings.HasPrefix(rest, "/api/") {
			typ = "application/json"
		}
		if typ == "" {
			h.ServeHTTP(w, r)
			return
		}
		h.ServeHTTP(&typedWriter{ResponseWriter: w, typ: typ}, r)
	})
}

// queueFileTypes are the types of the files asynqmon's build holds.
var queueFileTypes = map[string]string{
	".js":   "text/javascript; charset=utf-8",
	".json": "application/json",
	".map":  "application/json",
	".svg":  "image/svg+xml",
	".png":  "image/png",
	".ico":  "image/x-icon",
	".txt":  "text/plain; charset=utf-8",
}

// typedWriter sets a successful answer's Content-Type as it is written.
type typedWriter struct {
	http.ResponseWriter
	typ   string
	wrote bool
}

func (w *typedWriter) WriteHeader(code int) {
	if !w.wrote {
		w.wrote = true
		if code == http.StatusOK {
			w.Header().Set("Content-Type", w.typ)
		}
	}
	w.ResponseWriter.WriteHeader(code)
}

func (w *typedWriter) Write(b []byte) (int, error) {
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection.
func (w *typedWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }
