// Package gitlabtest is a fake of the parts of GitLab's REST API (v4) that
// prchat calls, for tests that drive the real GitLab client against it:
// merge requests, discussions and their notes, award emoji and the current
// user. It records every call and can be scripted to fail.
package gitlabtest

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// Call is one request the fake received.
type Call struct {
	Method string
	// Path is the escaped path (a project id is owner%2Fname).
	Path   string
	Body   string
	Status int
}

// Note is a note of a discussion.
type Note struct {
	ID     int64  `json:"id"`
	Body   string `json:"body"`
	Author User   `json:"author"`
	System bool   `json:"system"`
}

// User is an account.
type User struct {
	ID       int64  `json:"id"`
	Username string `json:"username"`
}

// Award is an emoji awarded to a note.
type Award struct {
	NoteID int64
	Name   string
}

type failure struct {
	method, prefix string
	status, left   int
}

// Server is a fake GitLab API; the API's base URL is URL + "/api/v4".
type Server struct {
	*httptest.Server

	// Token is the access token the fake accepts (PRIVATE-TOKEN), owned by
	// Username.
	Token    string
	Username string

	mu          sync.Mutex
	calls       []Call
	failures    []*failure
	mrs         map[string][2]string         // project!iid -> head, base
	discussions map[string]map[string][]Note // project!iid -> discussion -> notes
	awards      []Award
	nextID      int64
}

// New starts a fake GitLab API, closed when the test ends.
func New(t *testing.T) *Server {
	t.Helper()
	s := &Server{
		Token: "glpat-fake0123456789", Username: "prchat-bot",
		mrs: map[string][2]string{}, discussions: map[string]map[string][]Note{}, nextID: 500000,
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/user", s.user)
	mux.HandleFunc("GET /api/v4/projects/{project}/merge_requests/{iid}", s.getMR)
	mux.HandleFunc("POST /api/v4/projects/{project}/merge_requests/{iid}/notes/{note}/award_emoji", s.award)
	mux.HandleFunc("GET /api/v4/projects/{project}/merge_requests/{iid}/discussions/{d}", s.getDiscussion)
	mux.HandleFunc("POST /api/v4/projects/{project}/merge_requests/{iid}/discussions/{d}/notes", s.addNote)
	s.Server = httptest.NewServer(s.record(mux))
	t.Cleanup(s.Close)
	return s
}

// APIURL is the API's base URL.
func (s *Server) APIURL() string { return s.URL + "/api/v4" }

func key(project string, iid int) string { return fmt.Sprintf("%s!%d", project, iid) }

// AddMR makes a merge request the fake knows.
func (s *Server) AddMR(project string, iid int, head, base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.mrs[key(project, iid)] = [2]string{head, base}
}

// AddDiscussion makes a discussion with its first note.
func (s *Server) AddDiscussion(project string, iid int, id string, first Note) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := key(project, iid)
	if s.discussions[k] == nil {
		s.discussions[k] = map[string][]Note{}
	}
	s.discussions[k][id] = append(s.discussions[k][id], first)
}

// Notes returns the notes of a discussion.
func (s *Server) Notes(project string, iid int, discussion string) []Note {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Note(nil), s.discussions[key(project, iid)][discussion]...)
}

// Awards returns the emoji awarded.
func (s *Server) Awards() []Award {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Award(nil), s.awards...)
}

// Fail makes the next n requests of method whose escaped path starts with
// prefix answer status.
func (s *Server) Fail(method, prefix string, status, n int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.failures = append(s.failures, &failure{method, prefix, status, n})
}

// CallsTo returns the calls of method to escaped paths starting with prefix.
func (s *Server) CallsTo(method, prefix string) []Call {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []Call
	for _, c := range s.calls {
		if c.Method == method && strings.HasPrefix(c.Path, prefix) {
			out = append(out, c)
		}
	}
	return out
}

type statusWriter struct {
	http.ResponseWriter
	status int
}

func (w *statusWriter) WriteHeader(code int) {
	w.status = code
	w.ResponseWriter.WriteHeader(code)
}

func (s *Server) record(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		body, _ := io.ReadAll(r.Body)
		r.Body = io.NopCloser(strings.NewReader(string(body)))
		c := Call{Method: r.Method, Path: r.URL.EscapedPath(), Body: string(body)}
		s.mu.Lock()
		var fail *failure
		for _, f := range s.failures {
			if f.left > 0 && f.method == r.Method && strings.HasPrefix(c.Path, f.prefix) {
				f.left--
				fail = f
				break
			}
		}
		s.mu.Unlock()
		sw := &statusWriter{ResponseWriter: w, status: http.StatusOK}
		switch {
		case fail != nil:
			writeJSON(sw, fail.status, map[string]string{"message": "scripted failure"})
		case r.Header.Get("PRIVATE-TOKEN") != s.Token:
			writeJSON(sw, http.StatusUnauthorized, map[string]string{"message": "401 Unauthorized"})
		default:
			next.ServeHTTP(sw, r)
		}
		c.Status = sw.status
		s.mu.Lock()
		s.calls = append(s.calls, c)
		s.mu.Unlock()
	})
}

func writeJSON(w http.ResponseWriter, status int, v any) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(v)
}

func mrKey(r *http.Request) string {
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	return key(r.PathValue("project"), iid)
}

func (s *Server) user(w http.ResponseWriter, _ *http.Request) {
	writeJSON(w, http.StatusOK, User{ID: 1, Username: s.Username})
}

func (s *Server) getMR(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	mr, ok := s.mrs[mrKey(r)]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Not found"})
		return
	}
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	writeJSON(w, http.StatusOK, map[string]any{"iid": iid, "sha": mr[0],
		"diff_refs": map[string]string{"head_sha": mr[0], "base_sha": mr[1], "start_sha": mr[1]}})
}

func (s *Server) award(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Name string `json:"name"`
	}
	_ = json.NewDecoder(r.Body).Decode(&in)
	id, _ := strconv.ParseInt(r.PathValue("note"), 10, 64)
	s.mu.Lock()
	s.awards = append(s.awards, Award{NoteID: id, Name: in.Name})
	s.mu.Unlock()
	writeJSON(w, http.StatusCreated, map[string]any{"id": 1, "name": in.Name})
}

func (s *Server) getDiscussion(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	notes, ok := s.discussions[mrKey(r)][r.PathValue("d")]
	s.mu.Unlock()
	if !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Discussion Not Found"})
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("d"), "individual_note": len(notes) == 1, "notes": notes})
}

func (s *Server) addNote(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		writeJSON(w, http.StatusBadRequest, map[string]string{"message": "body is missing"})
		return
	}
	k, d := mrKey(r), r.PathValue("d")
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.discussions[k][d]; !ok {
		writeJSON(w, http.StatusNotFound, map[string]string{"message": "404 Discussion Not Found"})
		return
	}
	s.nextID++
	n := Note{ID: s.nextID, Body: in.Body, Author: User{ID: 1, Username: s.Username}}
	s.discussions[k][d] = append(s.discussions[k][d], n)
	writeJSON(w, http.StatusCreated, n)
}
