package api

import (
	"errors"
	"log/slog"
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// statusOf maps each domain error code to its HTTP status.
var statusOf = map[chat.Code]int{
	chat.CodeInvalid:            http.StatusBadRequest,
	chat.CodeUnauthorized:       http.StatusUnauthorized,
	chat.CodeForbidden:          http.StatusForbidden,
	chat.CodeRepositoryNotFound: http.StatusNotFound,
	chat.CodeNoReview:           http.StatusNotFound,
	chat.CodeNotFound:           http.StatusNotFound,
	chat.CodeBusy:               http.StatusConflict,
	chat.CodeConflict:           http.StatusConflict,
	chat.CodeNeedsClone:         http.StatusConflict,
	chat.CodeUnsupportedBackend: http.StatusUnprocessableEntity,
	chat.CodeRateLimited:        http.StatusTooManyRequests,
	chat.CodeUnavailable:        http.StatusServiceUnavailable,
	chat.CodeInternal:           http.StatusInternalServerError,
}

// ErrorBody is the JSON of every error response.
type ErrorBody struct {
	Error ErrorDetail `json:"error"`
}

// ErrorDetail says what went wrong.
type ErrorDetail struct {
	Code    chat.Code `json:"code"`
	Message string    `json:"message"`
	TraceID string    `json:"trace_id"`
}

// statusError is a domain error answered with a status other than its
// code's: 405 and 413 keep the code invalid (DESIGN §6 has no code of their
// own) but tell a client by their status what to change.
type statusError struct {
	status int
	err    error
}

func (e *statusError) Error() string { return e.err.Error() }
func (e *statusError) Unwrap() error { return e.err }

// tooLarge is the error of a request body over the limit: 413 invalid.
func tooLarge(limit int64) error {
	return &statusError{status: http.StatusRequestEntityTooLarge, err: chat.Errorf(chat.CodeInvalid, "request body is larger than %d bytes", limit)}
}

// toDomain turns echo's own errors (unknown route, wrong method, body too
// large) into domain errors.
func toDomain(err error) error {
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return tooLarge(mbe.Limit)
		}
		return err
	}
	switch he.Code {
	case http.StatusNotFound:
		return chat.Errorf(chat.CodeNotFound, "no such route")
	case http.StatusMethodNotAllowed:
		return &statusError{status: http.StatusMethodNotAllowed, err: chat.Errorf(chat.CodeInvalid, "method not allowed on this route")}
	case http.StatusRequestEntityTooLarge:
		return &statusError{status: http.StatusRequestEntityTooLarge, err: chat.Errorf(chat.CodeInvalid, "request body is too large")}
	case http.StatusServiceUnavailable:
		return chat.Errorf(chat.CodeUnavailable, "service unavailable")
	case http.StatusBadRequest:
		return chat.Errorf(chat.CodeInvalid, "bad request")
	}
	return err
}

// statusOfError is the HTTP status of err: its statusError's, else its
// code's.
func statusOfError(err error) int {
	var se *statusError
	if errors.As(err, &se) {
		return se.status
	}
	if errors.Is(err, chat.ErrUnknownCommit) && chat.ErrorCode(err) == chat.CodeInvalid {
		return http.StatusUnprocessableEntity // a review naming a commit its clone lacks
	}
	if status, ok := statusOf[chat.ErrorCode(err)]; ok {
		return status
	}
	return http.StatusInternalServerError
}

// errorHandler writes err as the contract's error JSON.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	err = toDomain(err)
	code := chat.ErrorCode(err)
	status := statusOfError(err)
	id := requestID(c)
	if status >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", slog.String("request_id", id),
			slog.String("route", c.Path()), slog.Any("err", err))
	}
	var de *chat.Error
	if errors.As(err, &de) && de.Code == chat.CodeRateLimited && de.RetryAfter > 0 {
		c.Response().Header().Set("Retry-After", retryAfter(de.RetryAfter))
	}
	body := ErrorBody{Error: ErrorDetail{Code: code, Message: chat.ErrorMessage(err), TraceID: id}}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}
