package api

import (
	"bytes"
	"cmp"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strconv"
	"time"
	"unicode/utf8"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// decode reads a JSON body into v: valid UTF-8, one object, no unknown fields.
func decode(c echo.Context, v any) error {
	body, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return chat.Errorf(chat.CodeInvalid, "read request body: %v", err)
	}
	if !utf8.Valid(body) {
		return chat.Errorf(chat.CodeInvalid, "request body is not valid UTF-8")
	}
	if err := rejectNUL(body); err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		return chat.Errorf(chat.CodeInvalid, "request body is not the expected JSON: %v", err)
	}
	if dec.More() {
		return chat.Errorf(chat.CodeInvalid, "request body has data after the JSON object")
	}
	return nil
}

func repoName(c echo.Context) string { return c.Param("owner") + "/" + c.Param("repo") }

func positiveParam(c echo.Context, name string) (int, error) {
	n, err := strconv.Atoi(c.Param(name))
	if err != nil || n < 1 {
		return 0, chat.Errorf(chat.CodeInvalid, "%s must be a positive number, not %q", name, c.Param(name))
	}
	return n, nil
}

func prParam(c echo.Context) (string, int, error) {
	repo := repoName(c)
	if err := chat.CheckRepoName(repo); err != nil {
		return "", 0, chat.Errorf(chat.CodeRepositoryNotFound, "no repository %q", repo)
	}
	pr, err := positiveParam(c, "pr")
	return repo, pr, err
}

// reviewParams reads the repository, pull request and review version of a
// review's path; the version is a number, or "latest" (0).
func reviewParams(c echo.Context) (repo string, pr, version int, err error) {
	if repo, pr, err = prParam(c); err != nil {
		return "", 0, 0, err
	}
	if c.Param("version") == "latest" {
		return repo, pr, 0, nil
	}
	version, err = positiveParam(c, "version")
	return repo, pr, version, err
}

func (s *Server) healthz(c echo.Context) error {
	return c.JSON(http.StatusOK, map[string]string{"status": "ok"})
}

func (s *Server) readyz(c echo.Context) error {
	if err := s.domain.Ready.Ready(c.Request().Context()); err != nil {
		return &chat.Error{Code: chat.CodeUnavailable, Message: "not ready: " + chat.ErrorMessage(err), Err: err}
	}
	return c.JSON(http.StatusOK, map[string]string{"status": "ready"})
}

type registerRequest struct {
	Name      string `json:"name"`
	ClonePath string `json:"clone_path"`
	CloneURL  string `json:"clone_url"`
	// ForgeProject is the project's path on its forge when it is not Name.
	ForgeProject string `json:"forge_project"`
}

func (s *Server) registerRepository(c echo.Context) error {
	var req registerRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	r, created, err := s.domain.Repositories.RegisterRepository(c.Request().Context(),
		chat.Repository{Name: req.Name, ClonePath: req.ClonePath, CloneURL: req.CloneURL, ForgeProject: req.ForgeProject})
	if err != nil {
		return err
	}
	if created {
		return c.JSON(http.StatusCreated, r)
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) listRepositories(c echo.Context) error {
	rs, err := s.domain.Repositories.Repositories(c.Request().Context())
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"repositories": nonNil(rs)})
}

func (s *Server) getRepository(c echo.Context) error {
	r, err := s.domain.Repositories.Repository(c.Request().Context(), repoName(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

type reviewRequest struct {
	HeadSHA     string `json:"head_sha"`
	BaseSHA     string `json:"base_sha"`
	Backend     string `json:"backend"`
	Model       string `json:"model"`
	SessionID   string `json:"session_id"`
	SessionHost string `json:"session_host"`
	// SessionCwd is the directory the review's session ran in; RunDir is
	// its older name, still accepted.
	SessionCwd string         `json:"session_cwd"`
	RunDir     string         `json:"run_dir"`
	Markdown   string         `json:"markdown"`
	Sections   []chat.Section `json:"sections"`
	// SessionHistory is the message history of an openai-backend review.
	SessionHistory json.RawMessage `json:"session_history"`
}

func (s *Server) recordReview(c echo.Context) error {
	repo, pr, err := prParam(c)
	if err != nil {
		return err
	}
	var req reviewRequest
	if err := decode(c, &req); err != nil {
		return err
	}
	if req.SessionCwd != "" && req.RunDir != "" && req.SessionCwd != req.RunDir {
		return chat.Errorf(chat.CodeInvalid, "session_cwd and run_dir (its older name) differ; give one")
	}
	r, err := s.domain.Repositories.RecordReview(c.Request().Context(), repo, chat.Review{
		PR: pr, HeadSHA: req.HeadSHA, BaseSHA: req.BaseSHA, Backend: req.Backend, Model: req.Model,
		SessionID: req.SessionID, SessionHost: req.SessionHost, RunDir: cmp.Or(req.SessionCwd, req.RunDir),
		Markdown: req.Markdown, Sections: req.Sections, History: req.SessionHistory,
	})
	if err != nil {
		return err
	}
	return c.JSON(http.StatusCreated, r)
}

func (s *Server) listReviews(c echo.Context) error {
	repo, pr, err := prParam(c)
	if err != nil {
		return err
	}
	rs, err := s.domain.Repositories.Reviews(c.Request().Context(), repo, pr)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"reviews": nonNil(rs)})
}

func (s *Server) getReview(c echo.Context) error {
	repo, pr, v, err := reviewParams(c)
	if err != nil {
		return err
	}
	r, err := s.domain.Repositories.Review(c.Request().Context(), repo, pr, v)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, r)
}

func (s *Server) ask(c echo.Context) error {
	repo, pr, v, err := reviewParams(c)
	if err != nil {
		return err
	}
	var a chat.Ask
	if err := decode(c, &a); err != nil {
		return err
	}
	conv, t, err := s.domain.Turns.Ask(c.Request().Context(), repo, pr, v, a)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"conversation": conv, "turn": t})
}

func (s *Server) listConversations(c echo.Context) error {
	repo, pr, err := prParam(c)
	if err != nil {
		return err
	}
	cs, err := s.domain.Turns.Conversations(c.Request().Context(), repo, pr)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"conversations": nonNil(cs)})
}

func (s *Server) getConversation(c echo.Context) error {
	conv, err := s.domain.Turns.Conversation(c.Request().Context(), c.Param("id"))
	if err != nil {
		return err
	}
	if conv.Turns == nil {
		conv.Turns = []chat.Turn{}
	}
	return c.JSON(http.StatusOK, conv)
}

func (s *Server) deleteConversation(c echo.Context) error {
	if err := s.domain.Turns.DeleteConversation(c.Request().Context(), c.Param("id")); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}

func (s *Server) continueConversation(c echo.Context) error {
	var a chat.Ask
	if err := decode(c, &a); err != nil {
		return err
	}
	t, err := s.domain.Turns.Continue(c.Request().Context(), c.Param("id"), a)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"turn": t})
}

func (s *Server) getTurn(c echo.Context) error {
	n, err := positiveParam(c, "n")
	if err != nil {
		return err
	}
	var wait time.Duration
	if w := c.QueryParam("wait"); w != "" {
		if wait, err = time.ParseDuration(w); err != nil || wait < 0 {
			if secs, err2 := strconv.Atoi(w); err2 == nil && secs >= 0 {
				wait = time.Duration(secs) * time.Second
			} else {
				return chat.Errorf(chat.CodeInvalid, "wait must be a duration such as 30s, not %q", w)
			}
		}
		wait = min(wait, s.cfg.MaxWait)
	}
	t, err := s.domain.Subscriptions.WaitTurn(c.Request().Context(), c.Param("id"), n, wait)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, t)
}

func (s *Server) cancelTurn(c echo.Context) error {
	n, err := positiveParam(c, "n")
	if err != nil {
		return err
	}
	t, err := s.domain.Turns.Cancel(c.Request().Context(), c.Param("id"), n)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusAccepted, map[string]any{"turn": t})
}

// nonNil makes an empty list marshal as [] rather than null.
func nonNil[T any](s []T) []T {
	if s == nil {
		return []T{}
	}
	return s
}
