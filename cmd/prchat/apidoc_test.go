package main

import (
	"net/http"
	"sync"
	"testing"

	"github.com/prchat/prchat/api/apitest"
)

// validator checks the responses the daemon tests receive against the
// API document, as the api package's own tests do.
var validator = sync.OnceValues(apitest.NewValidator)

// checkResponse fails t when a response breaks openapi.json; body nil
// skips the body of a stream.
func checkResponse(t *testing.T, req *http.Request, resp *http.Response, body []byte) {
	t.Helper()
	v, err := validator()
	if err != nil {
		t.Fatal(err)
	}
	if err := v.Check(req, resp.StatusCode, resp.Header, body); err != nil {
		t.Error(err)
	}
}
