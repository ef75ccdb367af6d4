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

// toDomain turns echo's own errors (unknown route, wrong method, body too
// large) into domain errors.
func toDomain(err error) error {
	var he *echo.HTTPError
	if !errors.As(err, &he) {
		var mbe *http.MaxBytesError
		if errors.As(err, &mbe) {
			return chat.Errorf(chat.CodeInvalid, "request body is larger than %d bytes", mbe.Limit)
		}
		return err
	}
	switch he.Code {
	case http.StatusNotFound:
		return chat.Errorf(chat.CodeNotFound, "no such route")
	case http.StatusMethodNotAllowed:
		return chat.Errorf(chat.CodeInvalid, "method not allowed on this route")
	case http.StatusRequestEntityTooLarge:
		return chat.Errorf(chat.CodeInvalid, "request body is too large")
	case http.StatusServiceUnavailable:
		return chat.Errorf(chat.CodeUnavailable, "service unavailable")
	case http.StatusBadRequest:
		return chat.Errorf(chat.CodeInvalid, "bad request")
	}
	return err
}

// errorHandler writes err as the contract's error JSON.
func (s *Server) errorHandler(err error, c echo.Context) {
	if c.Response().Committed {
		return
	}
	err = toDomain(err)
	code := chat.ErrorCode(err)
	status, ok := statusOf[code]
	if !ok {
		status = http.StatusInternalServerError
	}
	id := requestID(c)
	if status >= 500 {
		s.log.ErrorContext(c.Request().Context(), "request failed", slog.String("request_id", id),
			slog.String("route", c.Path()), slog.Any("err", err))
	}
	body := ErrorBody{Error: ErrorDetail{Code: code, Message: chat.ErrorMessage(err), TraceID: id}}
	if c.Request().Method == http.MethodHead {
		_ = c.NoContent(status)
		return
	}
	_ = c.JSON(status, body)
}
