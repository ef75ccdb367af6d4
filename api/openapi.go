package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"net/http"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// openAPIWritten is the API document as written by hand: the paths
// outside /api/v1, the components, and the text of each /api/v1 operation
// (x-prchat-operations, by operationId), but not where those operations
// are nor what they need, which apiRoutes gives.
//
//go:embed openapi.json
var openAPIWritten []byte

// openAPIDocument is the document served, made from openAPIWritten and
// apiRoutes by buildDocument.
var openAPIDocument = sync.OnceValue(func() []byte {
	doc, err := buildDocument(openAPIWritten, apiRoutes)
	if err != nil {
		panic(fmt.Sprintf("api: the embedded openapi.json: %v", err)) // the tests build it
	}
	return doc
})

// pathParameters names the components.parameters entry of each path
// parameter of apiRoutes: by "segment/:name" where the segment before it
// tells what an id is, by ":name" otherwise.
var pathParameters = map[string]string{
	":owner":            "Owner",
	":repo":             "Repo",
	":pr":               "PR",
	":version":          "Version",
	":n":                "TurnNumber",
	"conversations/:id": "ConversationID",
	"providers/:id":     "ProviderID",
	"tokens/:id":        "TokenID",
}

// buildDocument returns the written document with the /api/v1 paths of
// routes: each route's operation (x-prchat-operations[route.op]) under its
// path and method, marked with the scope it needs (x-prchat-scope, and
// x-prchat-all-repositories for a route not about one repository); each
// path with its path parameters and an OPTIONS operation. An operation no
// route names, or a route naming none, is an error.
func buildDocument(written []byte, routes []apiRoute) ([]byte, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(written))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	ops, _ := doc["x-prchat-operations"].(map[string]any)
	delete(doc, "x-prchat-operations")
	paths, _ := doc["paths"].(map[string]any)
	if paths == nil {
		return nil, errors.New("no paths")
	}
	used := make(map[string]bool, len(routes))
	for _, r := range routes {
		op, ok := ops[r.op].(map[string]any)
		if !ok {
			return nil, fmt.Errorf("%s %s: no operation %q in x-prchat-operations", r.method, r.path, r.op)
		}
		if used[r.op] {
			return nil, fmt.Errorf("%s %s: operation %q is another route's", r.method, r.path, r.op)
		}
		used[r.op] = true
		path, params, err := documentPath(r.path)
		if err != nil {
			return nil, err
		}
		item, _ := paths[path].(map[string]any)
		if item == nil {
			item = map[string]any{"options": map[string]any{
				"operationId": "options" + strings.ToUpper(r.op[:1]) + r.op[1:],
				"security":    []any{},
				"summary":     "The methods " + path + " serves (Allow)",
				"responses":   map[string]any{"204": map[string]any{"$ref": "#/components/responses/Options"}},
			}}
			if len(params) > 0 {
				item["parameters"] = params
			}
			paths[path] = item
		}
		method := strings.ToLower(r.method)
		if item[method] != nil {
			return nil, fmt.Errorf("%s %s is in apiRoutes twice", r.method, r.path)
		}
		o := maps.Clone(op)
		o["operationId"] = r.op
		o["x-prchat-scope"] = string(r.access.scope)
		if r.access.allRepos {
			o["x-prchat-all-repositories"] = true
		}
		item[method] = o
	}
	for name := range ops {
		if !used[name] {
			return nil, fmt.Errorf("operation %q of x-prchat-operations is no route's", name)
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

// documentPath returns the document's path of an /api/v1 route
// (/api/v1/conversations/{id}) and references to its path parameters.
func documentPath(route string) (string, []any, error) {
	segs := strings.Split(strings.TrimPrefix(route, "/"), "/")
	var params []any
	for i, seg := range segs {
		name, ok := strings.CutPrefix(seg, ":")
		if !ok {
			continue
		}
		component, ok := "", false
		if i > 0 {
			component, ok = pathParameters[segs[i-1]+"/"+seg]
		}
		if !ok {
			component, ok = pathParameters[seg]
		}
		if !ok {
			return "", nil, fmt.Errorf("%s: no component for the path parameter %s (pathParameters)", route, seg)
		}
		segs[i] = "{" + name + "}"
		params = append(params, map[string]any{"$ref": "#/components/parameters/" + component})
	}
	return "/api/v1/" + strings.Join(segs, "/"), params, nil
}

// OpenAPI returns the OpenAPI 3.1 document of the API's routes, as served
// at /openapi.json.
func OpenAPI() []byte { return bytes.Clone(openAPIDocument()) }

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDocument())
}
