package chat

import (
	"errors"
	"fmt"
	"time"
)

// Code is the category of a domain error. The API maps each code to one HTTP
// status; clients see it as error.code.
type Code string

// The error codes of the HTTP contract.
const (
	CodeInvalid            Code = "invalid"
	CodeUnauthorized       Code = "unauthorized"
	CodeForbidden          Code = "forbidden"
	CodeRepositoryNotFound Code = "repository_not_found"
	CodeNoReview           Code = "no_review"
	CodeNotFound           Code = "not_found"
	CodeBusy               Code = "busy"
	CodeConflict           Code = "conflict"
	CodeNeedsClone         Code = "needs_clone"
	CodeUnsupportedBackend Code = "unsupported_backend"
	CodeRateLimited        Code = "rate_limited"
	CodeUnavailable        Code = "unavailable"
	// CodeInternal is any error that is not a domain error.
	CodeInternal Code = "internal"
)

// Error is a domain error: a code for machines and a message for people.
type Error struct {
	Code    Code
	Message string
	Err     error // the cause, if any; never shown to clients
	// RetryAfter is, for CodeRateLimited, how long until a retry can pass.
	RetryAfter time.Duration
}

func (e *Error) Error() string {
	if e.Err != nil {
		return fmt.Sprintf("%s: %s: %v", e.Code, e.Message, e.Err)
	}
	return fmt.Sprintf("%s: %s", e.Code, e.Message)
}

func (e *Error) Unwrap() error { return e.Err }

// Errorf returns an *Error with code and a formatted message.
func Errorf(code Code, format string, args ...any) *Error {
	return &Error{Code: code, Message: fmt.Sprintf(format, args...)}
}

// ErrorCode returns the code of the first *Error in err's chain, or
// CodeInternal when there is none (and "" for a nil err).
func ErrorCode(err error) Code {
	if err == nil {
		return ""
	}
	var e *Error
	if errors.As(err, &e) {
		return e.Code
	}
	return CodeInternal
}

// ErrorMessage returns the message of the first *Error in err's chain, or a
// generic text for other errors, so internals never reach a client.
func ErrorMessage(err error) string {
	var e *Error
	if errors.As(err, &e) {
		return e.Message
	}
	return "internal error"
}

// Sentinel errors that stores and runs report; check them with errors.Is.
var (
	// ErrFenced means a run no longer holds the turn's fencing token: another
	// run took the turn over, or the turn was settled (cancelled) under it.
	ErrFenced = errors.New("turn is fenced: another run holds it or it was settled")
	// ErrSettled means the turn already reached a final state.
	ErrSettled = errors.New("turn already settled")
	// ErrSessionGone means the session to fork or resume is not available.
	ErrSessionGone = errors.New("session is gone")
)

// Failure is how a run reports why a turn failed: the reason category that
// the turn is settled with, and the cause.
type Failure struct {
	Reason Reason
	Err    error
}

func (f *Failure) Error() string {
	if f.Err == nil {
		return string(f.Reason)
	}
	return fmt.Sprintf("%s: %v", f.Reason, f.Err)
}

func (f *Failure) Unwrap() error { return f.Err }

// Fail returns a *Failure with the given reason and cause.
func Fail(reason Reason, err error) *Failure { return &Failure{Reason: reason, Err: err} }

// FailureReason returns the reason of the first *Failure in err's chain, or
// def when there is none.
func FailureReason(err error, def Reason) Reason {
	var f *Failure
	if errors.As(err, &f) {
		return f.Reason
	}
	return def
}
