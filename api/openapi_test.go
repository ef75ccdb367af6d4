package api

import (
	"bytes"
	"context"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/google/go-cmp/cmp"
	"github.com/labstack/echo/v4"

	"github.com/prchat/prchat/api/dashboard"
	"github.com/prchat/prchat/chat"
)

// loadDocument loads and validates the API document as OpenAPI 3.1.
func loadDocument(t *testing.T) *openapi3.T {
	t.Helper()
	doc, err := openapi3.NewLoader().LoadFromData(OpenAPI())
	if err != nil {
		t.Fatalf("load openapi.json: %v", err)
	}
	if !doc.IsOpenAPI31OrLater() {
		t.Fatalf("openapi.json is OpenAPI %s, want 3.1", doc.OpenAPI)
	}
	if err := doc.Validate(context.Background()); err != nil {
		t.Fatalf("openapi.json is not a valid OpenAPI document: %v", err)
	}
	return doc
}

var echoParam = regexp.MustCompile(`:([A-Za-z0-9_]+)`)

// TestDocumentHasEveryRoute: every route the API server registers is in
// openapi.json, and every operation there is registered, with the same
// path parameters.
func TestDocumentHasEveryRoute(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	var documented []string
	for path, item := range doc.Paths.Map() {
		if item.Options == nil {
			t.Errorf("%s does not document OPTIONS", path)
		}
		for method := range item.Operations() {
			if method != http.MethodOptions { // echo answers OPTIONS on every path itself
				documented = append(documented, method+" "+path)
			}
		}
	}
	dash, err := dashboard.New(dashboard.Config{AdminQueues: http.NotFoundHandler()}, dashboard.Reads{Repositories: (*chat.Admin)(nil), Conversations: (*chat.Turns)(nil), Reports: (*chat.Reports)(nil)})
	if err != nil {
		t.Fatal(err)
	}
	s := newServer(Config{Dashboard: dash}, Domain{})
	s.probeRoutes()
	s.routes()
	var registered []string
	for _, r := range s.echo.Routes() {
		p := echoParam.ReplaceAllString(r.Path, "{$1}")
		p = strings.Replace(p, "/*", "/{path}", 1) // a wildcard is one documented path parameter
		registered = append(registered, r.Method+" "+p)
	}
	slices.Sort(documented)
	slices.Sort(registered)
	if diff := cmp.Diff(registered, documented); diff != "" {
		t.Errorf("routes registered (-) and documented in openapi.json (+) differ:\n%s", diff)
	}
}

// TestDocumentOfTheProbes: a worker's probe server registers a subset of
// the documented routes.
func TestDocumentOfTheProbes(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	for _, r := range NewProbe(Config{}).echo.Routes() {
		item := doc.Paths.Find(r.Path)
		if item == nil || item.GetOperation(r.Method) == nil {
			t.Errorf("probe route %s %s is not in openapi.json", r.Method, r.Path)
		}
	}
}

// TestDocumentConventions: every operation has an id and documents its
// X-Request-Id; the bearer scheme applies to every route but the probes
// and the document itself, whose security is empty.
func TestDocumentConventions(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	scheme := doc.Components.SecuritySchemes["bearerAuth"]
	if scheme == nil || scheme.Value.Type != "http" || scheme.Value.Scheme != "bearer" {
		t.Fatalf("components.securitySchemes.bearerAuth = %+v, want an HTTP bearer scheme", scheme)
	}
	if len(doc.Security) != 1 || doc.Security[0]["bearerAuth"] == nil {
		t.Errorf("the document's security is %v, want bearerAuth for every route", doc.Security)
	}
	ids := map[string]string{}
	for path, item := range doc.Paths.Map() {
		for method, op := range item.Operations() {
			where := method + " " + path
			if op.OperationID == "" {
				t.Errorf("%s has no operationId", where)
			} else if other, ok := ids[op.OperationID]; ok {
				t.Errorf("%s and %s share the operationId %s", where, other, op.OperationID)
			}
			ids[op.OperationID] = where
			if method == http.MethodOptions {
				if op.Security == nil || len(*op.Security) != 0 || op.Responses.Len() != 1 || op.Responses.Status(http.StatusNoContent) == nil {
					t.Errorf("%s must answer 204 only and need no token", where)
				}
				continue
			}
			open := !strings.HasPrefix(path, "/api/")
			if open && (op.Security == nil || len(*op.Security) != 0) {
				t.Errorf("%s needs no token, but its security is not empty", where)
			}
			if !open && op.Security != nil {
				t.Errorf("%s has security %v of its own", where, *op.Security)
			}
			if !open {
				for _, status := range []int{http.StatusUnauthorized, http.StatusForbidden, http.StatusTooManyRequests} {
					if op.Responses.Status(status) == nil {
						t.Errorf("%s does not document %d", where, status)
					}
				}
			}
			for status, resp := range op.Responses.Map() {
				if resp.Value.Headers["X-Request-Id"] == nil {
					t.Errorf("%s %s does not document X-Request-Id", where, status)
				}
			}
			if op.RequestBody != nil && strings.HasPrefix(path, "/api/") && op.Responses.Status(http.StatusRequestEntityTooLarge) == nil {
				t.Errorf("%s takes a body but does not document 413", where)
			}
			if method != http.MethodGet && strings.HasPrefix(path, "/api/") && op.Responses.Status(http.StatusUnsupportedMediaType) == nil {
				t.Errorf("%s changes something but does not document 415 (a body not sent as application/json)", where)
			}
		}
	}
}

// TestDocumentScopes: every /api operation names the scope it needs, the
// same as the server's own table (apiRoutes), and whether it needs a
// token for every repository.
func TestDocumentScopes(t *testing.T) {
	t.Parallel()
	doc := loadDocument(t)
	for path, item := range doc.Paths.Map() {
		if !strings.HasPrefix(path, "/api/") {
			continue
		}
		for method, op := range item.Operations() {
			if method == http.MethodOptions {
				continue // needs no token (TestDocumentConventions)
			}
			echoPath := regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`).ReplaceAllString(path, ":$1")
			want, ok := routeScopes[method+" "+echoPath]
			if !ok {
				t.Errorf("%s %s is not in routeScopes", method, path)
				continue
			}
			if got := op.Extensions["x-prchat-scope"]; got != string(want.scope) {
				t.Errorf("%s %s: x-prchat-scope %v, want %s", method, path, got, want.scope)
			}
			all, _ := op.Extensions["x-prchat-all-repositories"].(bool)
			if all != want.allRepos {
				t.Errorf("%s %s: x-prchat-all-repositories %v, want %v", method, path, all, want.allRepos)
			}
		}
	}
}

// TestScopesAreWrittenOnce: the /api/v1 paths of the served document and
// their scopes come from apiRoutes; the file written by hand names neither,
// so that the table and the document cannot disagree.
func TestScopesAreWrittenOnce(t *testing.T) {
	t.Parallel()
	for _, key := range []string{`"x-prchat-scope":`, `"x-prchat-all-repositories":`, `"/api/v1`} {
		if bytes.Contains(openAPIWritten, []byte(key)) {
			t.Errorf("openapi.json names %s by hand; apiRoutes gives it", key)
		}
	}
	served := OpenAPI()
	if n := bytes.Count(served, []byte(`"x-prchat-scope":`)); n != len(apiRoutes) {
		t.Errorf("the served document names %d scopes, want one for each of the %d routes of apiRoutes", n, len(apiRoutes))
	}
}

// TestDocumentIsMadeFromTheRoutes: every operation written for /api/v1 is
// one route's, and every route names one; a route that is not documented,
// an operation left over from a removed route, or a path parameter
// without a component fails the build of the document.
func TestDocumentIsMadeFromTheRoutes(t *testing.T) {
	t.Parallel()
	if _, err := buildDocument(openAPIWritten, apiRoutes); err != nil {
		t.Fatalf("the document of apiRoutes: %v", err)
	}
	noop := func(*Server, echo.Context) error { return nil }
	cases := map[string][]apiRoute{
		"a route whose operation is not written": append(slices.Clone(apiRoutes),
			apiRoute{http.MethodGet, "/widgets", "listWidgets", readAccess, noop}),
		"a route naming another route's operation": append(slices.Clone(apiRoutes),
			apiRoute{http.MethodGet, "/widgets", apiRoutes[0].op, readAccess, noop}),
		"an operation no route names": apiRoutes[1:],
		"a path parameter without a component": append(slices.Clone(apiRoutes[1:]),
			apiRoute{apiRoutes[0].method, "/repos/:widget", apiRoutes[0].op, adminAll, noop}),
	}
	for name, routes := range cases {
		if _, err := buildDocument(openAPIWritten, routes); err == nil {
			t.Errorf("%s: the document was built", name)
		} else {
			t.Logf("%s: %v", name, err)
		}
	}
}
