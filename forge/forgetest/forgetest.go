// Package forgetest is the core that the fakes of the forges' REST APIs
// (forge/github/githubtest, forge/gitlab/gitlabtest) share: it records every
// call a fake receives with the status it answered, and answers scripted
// failures in place of the fake's routes, or after them: a request that
// the fake carries out (a reply stored) and whose answer is then lost.
package forgetest

import (
	"encoding/json"
	"io"
	"net/http"
	"net/http/cgi"
	"net/http/httptest"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"
)

// Call is one request a fake received.
type Call struct {
	Method string
	// Path is the request's path; escaped (a GitLab project id is
	// owner%2Fname) when the Core is made with escaped paths.
	Path string
	// Auth is the Authorization header's scheme and credential.
	Auth string
	Body string
	// Status is the status the fake answered: 0 while it is answering (a
	// call is recorded when it arrives, so that what its handler stores is
	// never seen before the call is), or when its answer was lost.
	Status int
}

type failure struct {
	method, prefix string
	status, left   int
	after          Loss // non-zero: the request is carried out first
}

// Loss is how the answer to a request that the fake carried out is lost.
type Loss int

// The ways an answer is lost after the request was carried out.
const (
	// LoseToBadGateway answers 502 (a proxy in front of the forge lost the
	// answer).
	LoseToBadGateway Loss = iota + 1
	// LoseToDrop closes the connection without an answer.
	LoseToDrop
	// LoseToTimeout answers nothing until the client gives up.
	LoseToTimeout
)

// String names the loss, for test names.
func (l Loss) String() string {
	switch l {
	case LoseToBadGateway:
		return "502 after storing"
	case LoseToDrop:
		return "connection dropped after storing"
	case LoseToTimeout:
		return "timeout after storing"
	}
	return "no loss"
}

// Losses are the ways an answer can be lost, for table tests.
var Losses = []Loss{LoseToBadGateway, LoseToDrop, LoseToTimeout}

// Core records the calls of a fake and answers its scripted failures. Its
// zero value records unescaped paths; it is safe for concurrent use.
type Core struct {
	// EscapedPaths records and matches paths escaped.
	EscapedPaths bool

	mu       sync.Mutex
	calls    []Call
	failures []*failure
	hold     chan struct{} // non-nil: posts wait for it after storing
	gitCalls []Call
}

// GitAuth is a fake's check of a git request: "" lets it through, else
// the realm and message of its 401.
type GitAuth func(r *http.Request) (realm, refusal string)

// ServeGit serves the bare repositories under root over git's smart HTTP
// protocol (git http-backend) to the requests auth lets through, and
// records each request (GitCalls). It returns the server's base URL.
func (c *Core) ServeGit(t *testing.T, root string, auth GitAuth) string {
	t.Helper()
	git, err := exec.LookPath("git")
	if err != nil {
		t.Fatal(err)
	}
	backend := &cgi.Handler{Path: git, Args: []string{"http-backend"}, Env: []string{"GIT_PROJECT_ROOT=" + root, "GIT_HTTP_EXPORT_ALL=1"}}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		call := Call{Method: r.Method, Path: r.URL.Path, Auth: r.Header.Get("Authorization"), Status: http.StatusOK}
		if realm, refusal := auth(r); refusal != "" {
			call.Status = http.StatusUnauthorized
			w.Header().Set("WWW-Authenticate", `Basic realm="`+realm+`"`)
			http.Error(w, refusal, http.StatusUnauthorized)
		} else {
			backend.ServeHTTP(w, r)
		}
		c.mu.Lock()
		c.gitCalls = append(c.gitCalls, call)
		c.mu.Unlock()
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// GitCalls returns the requests the git server received.
func (c *Core) GitCalls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.gitCalls...)
}

// HoldPosts makes every post store what it posts and then wait, without
// answering, until ReleasePosts or the client gives up: a client that
// stops meanwhile has posted without knowing it. A fake's post handlers
// call Held once they have stored the post.
func (c *Core) HoldPosts() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hold = make(chan struct{})
}

// ReleasePosts lets held posts answer, and posts answer at once again.
func (c *Core) ReleasePosts() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.hold != nil {
		close(c.hold)
		c.hold = nil
	}
}

// Held waits while posts are held (HoldPosts), or until r is given up.
func (c *Core) Held(r *http.Request) {
	c.mu.Lock()
	h := c.hold
	c.mu.Unlock()
	if h == nil {
		return
	}
	select {
	case <-h:
	case <-r.Context().Done():
	}
}

// Fail makes the next n requests whose method is method and whose path
// starts with prefix answer status.
func (c *Core) Fail(method, prefix string, status, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, &failure{method: method, prefix: prefix, status: status, left: n})
}

// LoseAfter makes the fake carry out the next n requests whose method is
// method and whose path starts with prefix (a reply is stored) and then
// lose their answers as loss says. A Call of a lost answer has Status 0,
// or 502.
func (c *Core) LoseAfter(method, prefix string, loss Loss, n int) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.failures = append(c.failures, &failure{method: method, prefix: prefix, left: n, after: loss})
}

// Calls returns the requests received so far.
func (c *Core) Calls() []Call {
	c.mu.Lock()
	defer c.mu.Unlock()
	return append([]Call(nil), c.calls...)
}

// CallsTo returns the calls of method to paths starting with prefix.
func (c *Core) CallsTo(method, prefix string) []Call {
	var out []Call
	for _, call := range c.Calls() {
		if call.Method == method && strings.HasPrefix(call.Path, prefix) {
			out = append(out, call)
		}
	}
	return out
}

// Handler records each request to next, answering a scripted failure (a
// JSON message, as the forges answer errors) in its place when one is due.
func (c *Core) Handler(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		path := r.URL.Path
		if c.EscapedPaths {
			path = r.URL.EscapedPath()
		}
		c.mu.Lock()
		c.calls = append(c.calls, Call{Method: r.Method, Path: path, Auth: r.Header.Get("Authorization"), Body: string(body)})
		n := len(c.calls) - 1
		c.mu.Unlock()
		cw := &callWriter{ResponseWriter: w, core: c, n: n}
		switch f := c.due(r.Method, path); {
		case f == nil:
			next.ServeHTTP(cw, r)
			cw.WriteHeader(http.StatusOK) // a handler that wrote nothing answered 200
		case f.after != 0:
			next.ServeHTTP(httptest.NewRecorder(), r)
			lose(cw, r, f.after)
		default:
			WriteJSON(cw, f.status, map[string]string{"message": "scripted failure"})
		}
	})
}

// callWriter records the status of the Core's call n as the handler
// writes it, before the client can read the answer.
type callWriter struct {
	http.ResponseWriter
	core    *Core
	n       int
	written bool
}

func (w *callWriter) WriteHeader(code int) {
	if w.written {
		return
	}
	w.written = true
	w.core.mu.Lock()
	w.core.calls[w.n].Status = code
	w.core.mu.Unlock()
	w.ResponseWriter.WriteHeader(code)
}

func (w *callWriter) Write(b []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection (LoseToDrop).
func (w *callWriter) Unwrap() http.ResponseWriter { return w.ResponseWriter }

// due takes one of the failures scripted for a request, or returns nil.
func (c *Core) due(method, path string) *failure {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, f := range c.failures {
		if f.left > 0 && f.method == method && strings.HasPrefix(path, f.prefix) {
			f.left--
			return f
		}
	}
	return nil
}

// lose loses the answer to a request carried out.
func lose(w http.ResponseWriter, r *http.Request, loss Loss) {
	switch loss {
	case LoseToBadGateway:
		WriteJSON(w, http.StatusBadGateway, map[string]string{"message": "502 Bad Gateway"})
	case LoseToDrop:
		if conn, _, err := http.NewResponseController(w).Hijack(); err == nil {
			_ = conn.Close()
		}
	case LoseToTimeout:
		select {
		case <-r.Context().Done():
		case <-time.After(time.Minute):
		}
	}
}

// StatusWriter remembers the status a handler wrote.
type StatusWriter struct {
	http.ResponseWriter
	Status int
}

// WriteHeader records code and writes it.
func (w *StatusWriter) WriteHeader(code int) {
	w.Status = code
	w.ResponseWriter.WriteHeader(code)
}

// WriteJSON answers status with v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}
