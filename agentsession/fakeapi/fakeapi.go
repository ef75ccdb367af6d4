// Package fakeapi is what prchat's fakes of model APIs share: the script of
// replies a test pushes and the record of the requests received (Script),
// the HTTP server that is closed when the test ends and releases hanging
// replies (Server), server-sent events (Events), JSON and OpenAI-style
// error bodies, and the splitting of a text into streamed pieces.
//
// Each API has its fake in a sub-package, all made the same way:
//
//	api := anthropic.New(t)     // or chatcompletions.New(t), responses.New(t)
//	api.Push(reply1, reply2)    // each request takes the next reply
//	api.Handle(func(r Request) Reply { ... }) // when none is left
//	... point the client at api.URL ...
//	api.Requests()              // what the client sent
//
// and closed when the test ends.
package fakeapi

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"sync"
	"testing"
	"time"
	"unicode/utf8"
)

// Script is a fake API's script: replies queued for the requests to come,
// a handler that answers when the queue is empty, and the requests
// received. Its methods are safe for concurrent use; the zero Script is
// empty and ready.
type Script[Req, Rep any] struct {
	// Number, if set, stores a request's number (1 for the first) in it as
	// it is recorded, before a handler sees it.
	Number func(req *Req, n int)

	mu       sync.Mutex
	queue    []Rep
	handler  func(Req) Rep
	requests []Req
}

// Push appends replies to the queue; each request that reaches the model
// takes the next one.
func (s *Script[Req, Rep]) Push(replies ...Rep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.queue = append(s.queue, replies...)
}

// Handle sets the function that answers a request when the queue is empty
// (nil removes it). It may be called concurrently.
func (s *Script[Req, Rep]) Handle(f func(Req) Rep) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.handler = f
}

// Pending returns how many pushed replies no request has taken yet.
func (s *Script[Req, Rep]) Pending() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.queue)
}

// Requests returns the requests recorded so far, in the order they
// arrived.
func (s *Script[Req, Rep]) Requests() []Req {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.requests)
}

// Record adds req to the requests received, for a request that takes no
// reply, and returns its number, 1 for the first.
func (s *Script[Req, Rep]) Record(req Req) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := len(s.requests) + 1
	if s.Number != nil {
		s.Number(&req, n)
	}
	s.requests = append(s.requests, req)
	return n
}

// Take records req and returns its number and its reply: the next queued
// one (taken in the order the requests were recorded), else the handler's
// (called without the script's lock held); ok is false when there is
// neither.
func (s *Script[Req, Rep]) Take(req Req) (n int, reply Rep, ok bool) {
	s.mu.Lock()
	n = len(s.requests) + 1
	if s.Number != nil {
		s.Number(&req, n)
	}
	s.requests = append(s.requests, req)
	if len(s.queue) > 0 {
		reply = s.queue[0]
		s.queue = s.queue[1:]
		s.mu.Unlock()
		return n, reply, true
	}
	h := s.handler
	s.mu.Unlock()
	if h == nil {
		return n, reply, false
	}
	return n, h(req), true
}

// Amend changes the record of request n (as Record numbered it).
func (s *Script[Req, Rep]) Amend(n int, f func(*Req)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if n >= 1 && n <= len(s.requests) {
		f(&s.requests[n-1])
	}
}

// Server is a fake API's HTTP server on a loopback port.
type Server struct {
	// Base is the server's address, http://127.0.0.1:port.
	Base string

	srv  *httptest.Server
	done chan struct{}
	once sync.Once
}

// Start starts a server answering with h; it is closed when tb's test
// ends.
func Start(tb testing.TB, h http.Handler) *Server {
	tb.Helper()
	s := NewServer(h)
	tb.Cleanup(s.Close)
	return s
}

// NewServer starts a server answering with h, for callers that close it
// themselves.
func NewServer(h http.Handler) *Server {
	s := &Server{done: make(chan struct{})}
	s.srv = httptest.NewServer(h)
	s.Base = s.srv.URL
	return s
}

// Close releases hanging replies and stops the server. It is safe to call
// twice.
func (s *Server) Close() {
	s.once.Do(func() {
		close(s.done)
		s.srv.CloseClientConnections()
		s.srv.Close()
	})
}

// Done is closed when Close starts.
func (s *Server) Done() <-chan struct{} { return s.done }

// Wait waits before a reply: d, or with hang until the request or the
// server ends. It reports false when the request or the server ended
// first (then nothing more is to be sent).
func (s *Server) Wait(r *http.Request, d time.Duration, hang bool) bool {
	var timer <-chan time.Time
	switch {
	case hang:
	case d > 0:
		t := time.NewTimer(d)
		defer t.Stop()
		timer = t.C
	default:
		return true
	}
	select {
	case <-timer:
		return true
	case <-r.Context().Done():
	case <-s.done:
	}
	return false
}

// Split cuts s into pieces of at most size bytes (at least one), on rune
// boundaries; none for an empty s.
func Split(s string, size int) []string {
	size = max(size, 1)
	var out []string
	for len(s) > 0 {
		n := min(size, len(s))
		for n < len(s) && !utf8.RuneStart(s[n]) {
			n++
		}
		out = append(out, s[:n])
		s = s[n:]
	}
	return out
}

// SplitN cuts s into at most n pieces of about equal length, on rune
// boundaries; none for an empty s.
func SplitN(s string, n int) []string {
	if s == "" {
		return nil
	}
	runes := []rune(s)
	size := (len(runes) + n - 1) / max(n, 1)
	var out []string
	for len(runes) > 0 {
		k := min(size, len(runes))
		out = append(out, string(runes[:k]))
		runes = runes[k:]
	}
	return out
}

// WriteJSON answers with status and v as JSON.
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		status, b = http.StatusInternalServerError, []byte(fmt.Sprintf(`{"error":{"message":%q}}`, "fake API: marshal the reply: "+err.Error()))
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_, _ = w.Write(append(b, '\n'))
}

// OpenAIError is the error body of OpenAI's APIs (and of the compatible
// ones): {"error": {"message", "type", "param", "code"}}. An empty code is
// null, and so is a nil param.
func OpenAIError(message, typ, code string, param *string) map[string]any {
	var c any
	if code != "" {
		c = code
	}
	return map[string]any{"error": map[string]any{"message": message, "type": typ, "param": param, "code": c}}
}

// Events writes server-sent events, flushing each. After a failed write
// every further one is skipped and Err reports it.
type Events struct {
	w   http.ResponseWriter
	err error
}

// StartEvents answers with 200 and an event stream.
func StartEvents(w http.ResponseWriter) *Events {
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	return &Events{w: w}
}

// Send writes one event: "event: name" (left out when name is empty) and
// data as JSON.
func (e *Events) Send(name string, data any) error {
	raw, err := json.Marshal(data)
	if err != nil {
		if e.err == nil {
			e.err = err
		}
		return e.err
	}
	if name != "" {
		return e.Raw("event: " + name + "\ndata: " + string(raw))
	}
	return e.Raw("data: " + string(raw))
}

// Raw writes one event as it is given (without the blank line that ends
// it), such as "data: [DONE]".
func (e *Events) Raw(event string) error {
	if e.err != nil {
		return e.err
	}
	if _, e.err = fmt.Fprint(e.w, event+"\n\n"); e.err == nil {
		if f, ok := e.w.(http.Flusher); ok {
			f.Flush()
		}
	}
	return e.err
}

// Err returns the first failed write, or nil.
func (e *Events) Err() error { return e.err }
