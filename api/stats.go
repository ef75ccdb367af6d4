package api

import (
	"net/http"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// parseWindow reads ?since=: a Go duration (36h) or a number of days (7d).
// Empty is 7 days.
func parseWindow(v string) (time.Duration, error) {
	if v == "" {
		return 7 * 24 * time.Hour, nil
	}
	if days, ok := strings.CutSuffix(v, "d"); ok {
		n, err := strconv.Atoi(days)
		if err != nil || n < 1 {
			return 0, chat.Errorf(chat.CodeInvalid, "since must be a number of days such as 7d, or a duration such as 36h, not %q", v)
		}
		return time.Duration(n) * 24 * time.Hour, nil
	}
	d, err := time.ParseDuration(v)
	if err != nil || d <= 0 {
		return 0, chat.Errorf(chat.CodeInvalid, "since must be a number of days such as 7d, or a duration such as 36h, not %q", v)
	}
	return d, nil
}

// stats answers GET /api/v1/stats?since=7d&repo=owner/name.
func (s *Server) stats(c echo.Context) error {
	window, err := parseWindow(c.QueryParam("since"))
	if err != nil {
		return err
	}
	repo := c.QueryParam("repo")
	if repo != "" {
		if err := chat.CheckRepoName(repo); err != nil {
			return chat.Errorf(chat.CodeRepositoryNotFound, "no repository %q", repo)
		}
	}
	st, err := s.domain.Reports.Stats(c.Request().Context(), window, repo)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, st)
}

// listPulls answers GET /api/v1/repos/{owner}/{repo}/pulls.
func (s *Server) listPulls(c echo.Context) error {
	prs, err := s.domain.Reports.PullRequests(c.Request().Context(), repoName(c))
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, map[string]any{"pulls": nonNil(prs)})
}

// fileLines answers GET .../reviews/{version}/files?path=&start=&end=: lines
// of a file at the review's head commit.
func (s *Server) fileLines(c echo.Context) error {
	repo, pr, v, err := reviewParams(c)
	if err != nil {
		return err
	}
	path := c.QueryParam("path") // required: checked once the repository is known
	start, end := 1, 0
	for name, p := range map[string]*int{"start": &start, "end": &end} {
		if q := c.QueryParam(name); q != "" {
			n, err := strconv.Atoi(q)
			if err != nil || n < 1 {
				return chat.Errorf(chat.CodeInvalid, "%s must be a positive line number, not %q", name, q)
			}
			*p = n
		}
	}
	if end != 0 && end < start {
		return chat.Errorf(chat.CodeInvalid, "end %d is before start %d", end, start)
	}
	fl, err := s.domain.Reports.FileLines(c.Request().Context(), repo, pr, v, path, start, end)
	if err != nil {
		return err
	}
	return c.JSON(http.StatusOK, fl)
}
