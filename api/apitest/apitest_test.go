package apitest_test

import (
	"net/http"
	"net/http/httptest"
	"testing"

	"github.com/prchat/prchat/api/apitest"
)

// TestCheck: a response the document allows passes; an undocumented
// status, a missing request id, a body of the wrong shape and an event of
// no known type fail.
func TestCheck(t *testing.T) {
	t.Parallel()
	v, err := apitest.NewValidator()
	if err != nil {
		t.Fatal(err)
	}
	withID := http.Header{"X-Request-Id": {"abcdefgh1234"}, "Content-Type": {"application/json"}}
	errBody := []byte(`{"error":{"code":"not_found","message":"no such repository","trace_id":"abcdefgh1234"}}`)
	for _, tt := range []struct {
		name   string
		method string
		path   string
		status int
		header http.Header
		body   string
		ok     bool
	}{
		{"documented", "GET", "/healthz", 200, withID, `{"status":"ok"}`, true},
		{"documented error", "GET", "/api/v1/repos/a/b", 404, withID, string(errBody), true},
		{"undocumented status", "GET", "/healthz", 201, withID, `{"status":"ok"}`, false},
		{"no request id", "GET", "/healthz", 200, http.Header{"Content-Type": {"application/json"}}, `{"status":"ok"}`, false},
		{"wrong body", "GET", "/healthz", 200, withID, `{"status":"fine"}`, false},
		{"unknown field", "GET", "/api/v1/repos/a/b", 404, withID, `{"error":{"code":"not_found","message":"m","trace_id":"abcdefgh1234","extra":1}}`, false},
		{"undocumented route with the error JSON", "GET", "/nothing", 404, withID, string(errBody), true},
		{"undocumented route answering 200", "GET", "/nothing", 200, withID, `{}`, false},
	} {
		req := httptest.NewRequest(tt.method, "http://127.0.0.1:9"+tt.path, nil)
		err := v.Check(req, tt.status, tt.header, []byte(tt.body))
		if (err == nil) != tt.ok {
			t.Errorf("%s: Check = %v, want ok %v", tt.name, err, tt.ok)
		}
	}
	if err := v.CheckSchema("TurnEvent", []byte(`{"type":"state","seq":1,"at":"2026-01-02T03:04:05Z","state":"running"}`)); err != nil {
		t.Errorf("a state event: %v", err)
	}
	if err := v.CheckSchema("TurnEvent", []byte(`{"type":"thought","seq":1,"at":"2026-01-02T03:04:05Z"}`)); err == nil {
		t.Error("an event of no known type passed")
	}
}
