// Package githubtest is a fake of the parts of GitHub's REST API that
// prchat calls, for tests that drive the real go-github and ghinstallation
// clients against it: pull requests, issue and review comments, replies,
// reactions, the authenticated user, and a GitHub App's JWT-authenticated
// routes with installation tokens that expire. It records every call and
// can be scripted to fail (package forgetest, the core the forges' fakes
// share).
package githubtest

import (
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/golang-jwt/jwt/v4"

	"github.com/prchat/prchat/forge/forgetest"
)

// Call is one request the fake received.
type Call = forgetest.Call

// Comment is a comment the fake holds (issue or review comment).
type Comment struct {
	ID        int64  `json:"id"`
	Body      string `json:"body"`
	InReplyTo int64  `json:"in_reply_to_id,omitempty"`
	User      User   `json:"user"`
}

// User is an account.
type User struct {
	Login string `json:"login"`
	Type  string `json:"type"`
}

// Reaction is a reaction made to a comment.
type Reaction struct {
	CommentID int64
	Review    bool // on a review comment (else an issue comment)
	Content   string
}

type pull struct{ head, base string }

type token struct {
	installation int64
	expires      time.Time
}

// Server is a fake GitHub API. Its URL is the API's base URL.
type Server struct {
	*httptest.Server
	// Core records the calls and answers the failures scripted with Fail.
	*forgetest.Core
	t *testing.T

	// Token is the personal access token the fake accepts (Bearer).
	Token string
	// Login is the account the token belongs to (and the App's bot login
	// is Slug+"[bot]").
	Login string
	Slug  string
	// AppID and Key are the GitHub App whose JWTs the fake accepts.
	AppID int64
	Key   *rsa.PrivateKey
	// TokenTTL is how long an installation token lives. Default 1h.
	TokenTTL time.Duration

	mu        sync.Mutex
	pulls     map[string]pull
	issue     map[string][]Comment // repo#pr -> PR timeline comments
	review    map[string][]Comment // repo#pr -> review comments
	reactions []Reaction
	tokens    map[string]token
	installs  map[string]int64 // repo -> installation
	nextID    int64
	perms     map[string]string // repo/login -> permission
}

// New starts a fake GitHub API, closed when the test ends.
func New(t *testing.T) *Server {
	t.Helper()
	key, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	s := &Server{
		Core: &forgetest.Core{}, t: t, Token: "ghp_faketoken0123456789", Login: "prchat-bot", Slug: "prchat", AppID: 4242, Key: key,
		pulls: map[string]pull{}, issue: map[string][]Comment{}, review: map[string][]Comment{},
		tokens: map[string]token{}, installs: map[string]int64{}, nextID: 900000, perms: map[string]string{},
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /user", s.user)
	mux.HandleFunc("GET /app", s.app)
	mux.HandleFunc("GET /repos/{owner}/{repo}/installation", s.installation)
	mux.HandleFunc("POST /app/installations/{id}/access_tokens", s.accessToken)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{n}", s.getPull)
	mux.HandleFunc("GET /repos/{owner}/{repo}/collaborators/{user}/permission", s.permission)
	mux.HandleFunc("GET /repos/{owner}/{repo}/issues/{n}/comments", s.listIssueComments)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/{n}/comments", s.createIssueComment)
	mux.HandleFunc("GET /repos/{owner}/{repo}/pulls/{n}/comments", s.listReviewComments)
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls/{n}/comments/{id}/replies", s.reply)
	mux.HandleFunc("POST /repos/{owner}/{repo}/issues/comments/{id}/reactions", s.react(false))
	mux.HandleFunc("POST /repos/{owner}/{repo}/pulls/comments/{id}/reactions", s.react(true))
	s.Server = httptest.NewServer(s.Handler(mux))
	t.Cleanup(s.Close)
	return s
}

// PrivateKeyPEM returns the App's private key as PEM, for a key file.
func (s *Server) PrivateKeyPEM() []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(s.Key)})
}

// ServeGit serves the bare repositories under root over git's smart HTTP
// protocol (git http-backend), to clients that authenticate with an
// installation token of the repository's installation as the password
// (user x-access-token), as GitHub does for a private repository. It
// returns the server's base URL; a repository's clone URL is
// base/owner/name.git.
func (s *Server) ServeGit(t *testing.T, root string) string {
	t.Helper()
	return s.Core.ServeGit(t, root, func(r *http.Request) (string, string) {
		parts := strings.SplitN(strings.TrimPrefix(r.URL.Path, "/"), "/", 3)
		repo := ""
		if len(parts) >= 2 {
			repo = parts[0] + "/" + strings.TrimSuffix(parts[1], ".git")
		}
		user, pass, ok := r.BasicAuth()
		s.mu.Lock()
		tok, known := s.tokens[pass]
		inst := s.installs[repo]
		s.mu.Unlock()
		if !ok || user != "x-access-token" || !known || time.Now().After(tok.expires) || tok.installation != inst {
			return "GitHub", "Invalid username or token."
		}
		return "", ""
	})
}

// AddPull makes a pull request the fake knows.
func (s *Server) AddPull(repo string, n int, head, base string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.pulls[fmt.Sprintf("%s#%d", repo, n)] = pull{head, base}
}

// AddReviewComment records a review comment (the root of a thread).
func (s *Server) AddReviewComment(repo string, pr int, c Comment) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := fmt.Sprintf("%s#%d", repo, pr)
	s.review[k] = append(s.review[k], c)
}

// SetPermission sets login's collaborator permission on repo (admin,
// write, read or none); a user with none set has write.
func (s *Server) SetPermission(repo, login, permission string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.perms[repo+"/"+login] = permission
}

func (s *Server) permission(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, repoOf(r)) {
		return
	}
	s.mu.Lock()
	p, ok := s.perms[repoOf(r)+"/"+r.PathValue("user")]
	s.mu.Unlock()
	if !ok {
		p = "write"
	}
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"permission": p, "role_name": p, "user": map[string]string{"login": r.PathValue("user")}})
}

// Install makes repo reachable through App installation id.
func (s *Server) Install(repo string, id int64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.installs[repo] = id
}

// IssueComments returns the PR timeline comments of repo#pr.
func (s *Server) IssueComments(repo string, pr int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Comment(nil), s.issue[fmt.Sprintf("%s#%d", repo, pr)]...)
}

// ReviewComments returns the review comments of repo#pr.
func (s *Server) ReviewComments(repo string, pr int) []Comment {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Comment(nil), s.review[fmt.Sprintf("%s#%d", repo, pr)]...)
}

// Reactions returns the reactions made.
func (s *Server) Reactions() []Reaction {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]Reaction(nil), s.reactions...)
}

// authorized checks a token or installation token for repo (any repo when
// ""), and answers 401 when it is missing, unknown or expired.
func (s *Server) authorized(w http.ResponseWriter, r *http.Request, repo string) bool {
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") && !strings.EqualFold(scheme, "token") {
		forgetest.WriteJSON(w, http.StatusUnauthorized, map[string]string{"message": "Requires authentication"})
		return false
	}
	if cred == s.Token {
		return true
	}
	s.mu.Lock()
	tok, ok := s.tokens[cred]
	inst := s.installs[repo]
	s.mu.Unlock()
	switch {
	case !ok:
		forgetest.WriteJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials"})
		return false
	case time.Now().After(tok.expires):
		forgetest.WriteJSON(w, http.StatusUnauthorized, map[string]string{"message": "Bad credentials (token expired)"})
		return false
	case repo != "" && inst != tok.installation:
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return false
	}
	return true
}

// appAuthorized checks the App's JWT (RS256, signed with Key, issued by
// AppID, not expired).
func (s *Server) appAuthorized(w http.ResponseWriter, r *http.Request) bool {
	scheme, cred, _ := strings.Cut(r.Header.Get("Authorization"), " ")
	if !strings.EqualFold(scheme, "bearer") {
		forgetest.WriteJSON(w, http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"})
		return false
	}
	claims := &jwt.RegisteredClaims{}
	_, err := jwt.ParseWithClaims(cred, claims, func(t *jwt.Token) (any, error) {
		if _, ok := t.Method.(*jwt.SigningMethodRSA); !ok {
			return nil, fmt.Errorf("unexpected signing method %v", t.Header["alg"])
		}
		return &s.Key.PublicKey, nil
	})
	if err != nil || claims.Issuer != strconv.FormatInt(s.AppID, 10) {
		forgetest.WriteJSON(w, http.StatusUnauthorized, map[string]string{"message": "A JSON web token could not be decoded"})
		return false
	}
	return true
}

func repoOf(r *http.Request) string { return r.PathValue("owner") + "/" + r.PathValue("repo") }

func (s *Server) user(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, "") {
		return
	}
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"login": s.Login, "id": 1, "type": "User"})
}

func (s *Server) app(w http.ResponseWriter, r *http.Request) {
	if !s.appAuthorized(w, r) {
		return
	}
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"id": s.AppID, "slug": s.Slug, "name": s.Slug})
}

func (s *Server) installation(w http.ResponseWriter, r *http.Request) {
	if !s.appAuthorized(w, r) {
		return
	}
	s.mu.Lock()
	id, ok := s.installs[repoOf(r)]
	s.mu.Unlock()
	if !ok {
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"id": id, "app_id": s.AppID})
}

func (s *Server) accessToken(w http.ResponseWriter, r *http.Request) {
	if !s.appAuthorized(w, r) {
		return
	}
	id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	var b [16]byte
	_, _ = rand.Read(b[:])
	tok := "ghs_" + hex.EncodeToString(b[:])
	ttl := s.TokenTTL
	if ttl == 0 {
		ttl = time.Hour
	}
	exp := time.Now().Add(ttl)
	s.mu.Lock()
	s.tokens[tok] = token{installation: id, expires: exp}
	s.mu.Unlock()
	forgetest.WriteJSON(w, http.StatusCreated, map[string]any{"token": tok, "expires_at": exp.UTC().Format(time.RFC3339)})
}

// Tokens returns how many installation tokens were issued.
func (s *Server) Tokens() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.tokens)
}

func (s *Server) getPull(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, repoOf(r)) {
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	s.mu.Lock()
	p, ok := s.pulls[fmt.Sprintf("%s#%d", repoOf(r), n)]
	s.mu.Unlock()
	if !ok {
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	forgetest.WriteJSON(w, http.StatusOK, map[string]any{"number": n, "head": map[string]string{"sha": p.head}, "base": map[string]string{"sha": p.base}})
}

func (s *Server) poster(r *http.Request) User {
	if _, cred, _ := strings.Cut(r.Header.Get("Authorization"), " "); cred == s.Token {
		return User{Login: s.Login, Type: "User"}
	}
	return User{Login: s.Slug + "[bot]", Type: "Bot"}
}

func (s *Server) listIssueComments(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, repoOf(r)) {
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	forgetest.WriteJSON(w, http.StatusOK, s.IssueComments(repoOf(r), n))
}

func (s *Server) listReviewComments(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, repoOf(r)) {
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	forgetest.WriteJSON(w, http.StatusOK, s.ReviewComments(repoOf(r), n))
}

func (s *Server) body(w http.ResponseWriter, r *http.Request) (string, bool) {
	var in struct {
		Body string `json:"body"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil || in.Body == "" {
		forgetest.WriteJSON(w, http.StatusUnprocessableEntity, map[string]string{"message": "Validation Failed"})
		return "", false
	}
	return in.Body, true
}

func (s *Server) createIssueComment(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, repoOf(r)) {
		return
	}
	body, ok := s.body(w, r)
	if !ok {
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	s.mu.Lock()
	s.nextID++
	c := Comment{ID: s.nextID, Body: body, User: s.poster(r)}
	k := fmt.Sprintf("%s#%d", repoOf(r), n)
	s.issue[k] = append(s.issue[k], c)
	s.mu.Unlock()
	s.Held(r)
	forgetest.WriteJSON(w, http.StatusCreated, c)
}

func (s *Server) reply(w http.ResponseWriter, r *http.Request) {
	if !s.authorized(w, r, repoOf(r)) {
		return
	}
	body, ok := s.body(w, r)
	if !ok {
		return
	}
	n, _ := strconv.Atoi(r.PathValue("n"))
	root, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
	k := fmt.Sprintf("%s#%d", repoOf(r), n)
	s.mu.Lock()
	found := false
	for _, c := range s.review[k] {
		if c.ID == root {
			found = true
		}
	}
	if !found {
		s.mu.Unlock()
		forgetest.WriteJSON(w, http.StatusNotFound, map[string]string{"message": "Not Found"})
		return
	}
	s.nextID++
	c := Comment{ID: s.nextID, Body: body, InReplyTo: root, User: s.poster(r)}
	s.review[k] = append(s.review[k], c)
	s.mu.Unlock()
	s.Held(r)
	forgetest.WriteJSON(w, http.StatusCreated, c)
}

func (s *Server) react(review bool) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if !s.authorized(w, r, repoOf(r)) {
			return
		}
		var in struct {
			Content string `json:"content"`
		}
		_ = json.NewDecoder(r.Body).Decode(&in)
		id, _ := strconv.ParseInt(r.PathValue("id"), 10, 64)
		s.mu.Lock()
		s.reactions = append(s.reactions, Reaction{CommentID: id, Review: review, Content: in.Content})
		s.mu.Unlock()
		forgetest.WriteJSON(w, http.StatusCreated, map[string]any{"id": 1, "content": in.Content})
	}
}
