package api

import (
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// TestEveryCodeHasItsStatus checks the one table that maps domain errors to
// HTTP statuses against the contract (DESIGN §6).
func TestEveryCodeHasItsStatus(t *testing.T) {
	t.Parallel()
	want := map[chat.Code]int{
		chat.CodeInvalid: 400, chat.CodeUnauthorized: 401, chat.CodeForbidden: 403,
		chat.CodeRepositoryNotFound: 404, chat.CodeNoReview: 404, chat.CodeNotFound: 404,
		chat.CodeBusy: 409, chat.CodeNeedsClone: 409, chat.CodeConflict: 409, chat.CodeUnsupportedBackend: 422,
		chat.CodeRateLimited: 429, chat.CodeUnavailable: 503, chat.CodeInternal: 500,
	}
	if len(statusOf) != len(want) {
		t.Errorf("statusOf has %d codes, want %d", len(statusOf), len(want))
	}
	for code, status := range want {
		if got := statusOf[code]; got != status {
			t.Errorf("%s -> %d, want %d", code, got, status)
		}
	}
}

// TestErrorHandlerHidesInternals: a non-domain error is a 500 "internal"
// whose message says nothing of the cause; echo's own errors become codes.
func TestErrorHandlerHidesInternals(t *testing.T) {
	t.Parallel()
	s := &Server{log: Config{}.withDefaults().Logger}
	for _, tc := range []struct {
		err    error
		status int
		code   chat.Code
	}{
		{errors.New("pq: password authentication failed for user secret"), 500, chat.CodeInternal},
		{echo.ErrNotFound, 404, chat.CodeNotFound},
		{echo.ErrMethodNotAllowed, 405, chat.CodeInvalid},
		{echo.ErrStatusRequestEntityTooLarge, 413, chat.CodeInvalid},
		{chat.Errorf(chat.CodeBusy, "still answering"), 409, chat.CodeBusy},
	} {
		e := echo.New()
		rec := httptest.NewRecorder()
		c := e.NewContext(httptest.NewRequest(http.MethodGet, "/", nil), rec)
		c.Set(requestIDKey, "req-123456789")
		s.errorHandler(tc.err, c)
		if rec.Code != tc.status {
			t.Errorf("%v: status %d, want %d", tc.err, rec.Code, tc.status)
		}
		body := rec.Body.String()
		if !strings.Contains(body, `"code":"`+string(tc.code)+`"`) || !strings.Contains(body, `"trace_id":"req-123456789"`) {
			t.Errorf("%v: body %s", tc.err, body)
		}
		if strings.Contains(body, "password") {
			t.Errorf("an internal error leaked its cause: %s", body)
		}
	}
}
