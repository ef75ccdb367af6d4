package api

import (
	"bytes"
	_ "embed"
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"strings"
	"sync"

	"github.com/labstack/echo/v4"
)

// openAPIWritten is the API document as written by hand beside the routes:
// paths, operations and schemas, but not the scopes, which come from
// apiRoutes.
//
//go:embed openapi.json
var openAPIWritten []byte

// openAPIDocument is the document served: the written one, each /api
// operation with the scope apiRoutes gives it (x-prchat-scope, and
// x-prchat-all-repositories for a route not about one repository).
var openAPIDocument = sync.OnceValue(func() []byte {
	doc, err := withScopes(openAPIWritten)
	if err != nil {
		panic(fmt.Sprintf("api: the embedded openapi.json: %v", err)) // the tests load it
	}
	return doc
})

// pathParam is an OpenAPI path template's parameter ({id}).
var pathParam = regexp.MustCompile(`\{([A-Za-z0-9_]+)\}`)

// withScopes returns the document written, each /api operation marked
// with the scope its route in apiRoutes needs.
func withScopes(written []byte) ([]byte, error) {
	var doc map[string]any
	dec := json.NewDecoder(bytes.NewReader(written))
	dec.UseNumber()
	if err := dec.Decode(&doc); err != nil {
		return nil, err
	}
	paths, _ := doc["paths"].(map[string]any)
	for path, item := range paths {
		rest, ok := strings.CutPrefix(path, "/api/v1")
		if !ok {
			continue
		}
		ops, _ := item.(map[string]any)
		for method, op := range ops {
			o, ok := op.(map[string]any)
			if !ok {
				continue
			}
			need, ok := routeScopes[strings.ToUpper(method)+" /api/v1"+pathParam.ReplaceAllString(rest, ":$1")]
			if !ok {
				continue // OPTIONS, and what the tests report as not registered
			}
			o["x-prchat-scope"] = string(need.scope)
			if need.allRepos {
				o["x-prchat-all-repositories"] = true
			}
		}
	}
	return json.MarshalIndent(doc, "", "  ")
}

// OpenAPI returns the OpenAPI 3.1 document of the API's routes, as served
// at /openapi.json.
func OpenAPI() []byte { return bytes.Clone(openAPIDocument()) }

func (s *Server) openAPI(c echo.Context) error {
	return c.Blob(http.StatusOK, echo.MIMEApplicationJSON, openAPIDocument())
}
