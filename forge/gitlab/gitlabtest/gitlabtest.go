// Package gitlabtest is a fake of the parts of GitLab's REST API (v4) that
// prchat calls, for tests that drive the real GitLab client against it:
// merge requests, discussions and their notes, award emoji and the current
// user, and git over HTTP for private projects. It records every call and
// can be scripted to fail (package forgetest, the core the forges' fakes
// share).
package gitlabtest

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strconv"
	"sync"
	"testing"

	"github.com/prchat/prchat/forge/forgetest"
)

// Call is one request the fake received; its Path is escaped (a project
// id is owner%2Fname).
type Call = forgetest.Call

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

// Server is a fake GitLab API; the API's base URL is URL + "/api/v4".
type Server struct {
	*httptest.Server
	// Core records the calls and answers the failures scripted with Fail.
	*forgetest.Core

	// Token is the access token the fake accepts (PRIVATE-TOKEN), owned by
	// Username.
	Token    string
	Username string

	mu          sync.Mutex
	mrs         map[string][2]string         // project!iid -> head, base
	discussions map[string]map[string][]Note // project!iid -> discussion -> notes
	awards      []Award
	nextID      int64
	access      map[string]int // project/user id -> access level
}

// New starts a fake GitLab API, closed when the test ends.
func New(t *testing.T) *Server {
	t.Helper()
	s := &Server{
		Core: &forgetest.Core{EscapedPaths: true}, Token: "glpat-fake0123456789", Username: "prchat-bot",
		mrs: map[string][2]string{}, discussions: map[string]map[string][]Note{}, nextID: 500000, access: map[string]int{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /api/v4/user", s.user)
	mux.HandleFunc("GET /api/v4/projects/{project}/merge_requests/{iid}", s.getMR)
	mux.HandleFunc("POST /api/v4/projects/{project}/merge_requests/{iid}/notes/{note}/award_emoji", s.award)
	mux.HandleFunc("GET /api/v4/projects/{project}/members/all/{user}", s.member)
	mux.HandleFunc("GET /api/v4/projects/{project}/merge_requests/{iid}/discussions/{d}", s.getDiscussion)
	mux.HandleFunc("POST /api/v4/projects/{project}/merge_requests/{iid}/discussions/{d}/notes", s.addNote)
	s.Server = httptest.NewServer(s.Handler(s.authorized(mux)))
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

// SetAccess sets the access level of user id in project (10 Guest, 20
// Reporter, 30 Developer, 40 Maintainer, 50 Owner; 0: not a member). A
// user with none set is a Developer.
func (s *Server) SetAccess(project string, user int64, level int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.access[fmt.Sprintf("%s/%d", project, user)] = level
}

func (s *Server) member(w http.ResponseWriter, r *http.Request) {
	project, err := url.PathUnescape(r.PathValue("project"))
	if err != nil {
		forgetest.WriteJSON(w, http.StatusBadRequest, map[string]string{"message": "bad project"})
		return
	}
	s.mu.Lock()
	level, ok := s.access[project+"/"+r.PathValue("user")]
	s.mu.Unlock()
	if !ok {
		level = 30
	}
	if level == 0 {
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "404 Not found"})
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("user"), 10, 64)
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "access_level": level})
}

// ServeGit serves the bare repositories under root over git's smart HTTP
// protocol (git http-backend) to clients that authenticate with the fake's
// token as the password (user oauth2), as GitLab does for a private
// project. It returns the server's base URL; a project's clone URL is
// base/<path with namespace>.git, nested groups included.
func (s *Server) ServeGit(t *testing.T, root string) string {
	t.Helper()
	return s.Core.ServeGit(t, root, func(r *http.Request) (string, string) {
		if user, pass, ok := r.BasicAuth(); !ok || user != "oauth2" || pass != s.Token {
			return "GitLab", "HTTP Basic: Access denied."
		}
		return "", ""
	})
}

// Awards returns the emoji awarded.
func (s *Server) Awards() []Award {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Award(nil), s.awards...)
}

// authorized answers 401 to a request without the fake's token.
func (s *Server) authorized(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("PRIVATE-TOKEN") != s.Token {
			forgetest.WriteJSON(w, http.StatusUnauthorized, map[string]string{"message": "401 Unauthorized"})
			return
		}
		next.ServeHTTP(w, r)
	})
}

func mrKey(r *http.Request) string {
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	return key(r.PathValue("project"), iid)
}

func (s *Server) user(w http.ResponseWriter, _ *http.Request) {
	forgetest.WriteJSON(w, http.StatusOK, User{ID: 1, Username: s.Username})
}

func (s *Server) getMR(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	mr, ok := s.mrs[mrKey(r)]
	s.mu.Unlock()
	if !ok {
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "404 Not found"})
		return
	}
	iid, _ := strconv.Atoi(r.PathValue("iid"))
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"iid": iid, "sha": mr[0],
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
	forgetest.WriteJSON(w, http.StatusCreated, map[string]any{"id": 1, "name": in.Name})
}

func (s *Server) getDiscussion(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	notes, ok := s.discussions[mrKey(r)][r.PathValue("d")]
	s.mu.Unlock()
	if !ok {
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "404 Discussion Not Found"})
		return
	}
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"id": r.PathValue("d"), "individual_note": len(notes) == 1, "notes": notes})
}

func (s *Server) addNote(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		forgetest.WriteJSON(w, http.StatusBadRequest, map[string]string{"message": "body is missing"})
		return
	}
	k, d := mrKey(r), r.PathValue("d")
	s.mu.Lock()
	if _, ok := s.discussions[k][d]; !ok {
		s.mu.Unlock()
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "404 Discussion Not Found"})
		return
	}
	s.nextID++
	n := Note{ID: s.nextID, Body: in.Body, Author: User{ID: 1, Username: s.Username}}
	s.discussions[k][d] = append(s.discussions[k][d], n)
	s.mu.Unlock()
	s.Held(r)
	forgetest.WriteJSON(w, http.StatusCreated, n)
}
