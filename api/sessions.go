package api

import (
	"errors"
	"io"
	"mime"
	"net/http"

	"github.com/labstack/echo/v4"

	"github.com/prchat/prchat/chat"
)

// sessionRoute is the route that uploads a review's agent session file,
// under /api/v1. Its body limit is Config.MaxSessionBytes, not BodyLimit.
const sessionRoute = "/repos/:owner/:repo/pulls/:pr/reviews/:version/session"

// sessionMediaType is the media type of an uploaded session file: JSON
// lines.
const sessionMediaType = "application/x-ndjson"

// putReviewSession stores the raw session file of a review version
// (DESIGN §5, Sessions travel) -> 204. The file is never returned by any
// route nor logged; the log has its size.
func (s *Server) putReviewSession(c echo.Context) error {
	repo, pr, v, err := reviewParams(c)
	if err != nil {
		return err
	}
	// A review the token may not see is not found, whatever is sent.
	if _, err := s.domain.Repositories.Review(c.Request().Context(), repo, pr, v); err != nil {
		return err
	}
	if mt, _, err := mime.ParseMediaType(c.Request().Header.Get(echo.HeaderContentType)); err != nil || mt != sessionMediaType {
		return &statusError{status: http.StatusUnsupportedMediaType, err: chat.Errorf(chat.CodeInvalid, "a session file is sent as %s", sessionMediaType)}
	}
	data, err := io.ReadAll(c.Request().Body)
	if err != nil {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return chat.Errorf(chat.CodeInvalid, "read the session file: %v", err)
	}
	if err := s.domain.Repositories.PutReviewSession(c.Request().Context(), repo, pr, v, data); err != nil {
		return err
	}
	return c.NoContent(http.StatusNoContent)
}
