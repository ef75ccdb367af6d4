// Package apitest checks what prchat's HTTP API answers against its
// document (api.OpenAPI): a test client wraps its responses in Check, and
// the data of each Server-Sent Event in CheckSchema, so that every response
// a test receives is one the document allows.
package apitest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"sync"

	"github.com/getkin/kin-openapi/openapi3"
	"github.com/getkin/kin-openapi/openapi3filter"
	"github.com/getkin/kin-openapi/routers"
	"github.com/getkin/kin-openapi/routers/gorillamux"
	"github.com/santhosh-tekuri/jsonschema/v6"

	"github.com/prchat/prchat/api"
)

// Validator checks responses against the API document. It is safe for
// concurrent use.
type Validator struct {
	doc      *openapi3.T
	router   routers.Router
	compiler *jsonschema.Compiler
	// wildcards are the paths whose last parameter spans segments
	// (x-prchat-wildcard): its prefix, up to and with the last slash.
	wildcards []wildcard

	mu       sync.Mutex
	compiled map[string]*jsonschema.Schema
}

// NewValidator loads and validates the API document.
func NewValidator() (*Validator, error) {
	doc, err := openapi3.NewLoader().LoadFromData(api.OpenAPI())
	if err != nil {
		return nil, fmt.Errorf("load openapi.json: %w", err)
	}
	if err := doc.Validate(context.Background()); err != nil {
		return nil, fmt.Errorf("openapi.json: %w", err)
	}
	// Any host: tests serve on loopback ports.
	doc.Servers = nil
	router, err := gorillamux.NewRouter(doc)
	if err != nil {
		return nil, fmt.Errorf("route openapi.json: %w", err)
	}
	raw, err := jsonschema.UnmarshalJSON(bytes.NewReader(api.OpenAPI()))
	if err != nil {
		return nil, err
	}
	c := jsonschema.NewCompiler()
	if err := c.AddResource("openapi.json", raw); err != nil {
		return nil, err
	}
	return &Validator{doc: doc, router: router, compiler: c, compiled: map[string]*jsonschema.Schema{}, wildcards: wildcardsOf(doc)}, nil
}

// A wildcard is a documented path whose last segment is a parameter marked
// x-prchat-wildcard: it matches the rest of a request's path, slashes
// included, which an OpenAPI router cannot do by itself.
type wildcard struct {
	prefix string // "/admin/queues/"
	param  string // "path"
}

func wildcardsOf(doc *openapi3.T) []wildcard {
	var ws []wildcard
	for path, item := range doc.Paths.Map() {
		for _, p := range item.Parameters {
			if p.Value == nil || p.Value.In != openapi3.ParameterInPath || p.Value.Extensions["x-prchat-wildcard"] != true {
				continue
			}
			if last := "{" + p.Value.Name + "}"; strings.HasSuffix(path, "/"+last) {
				ws = append(ws, wildcard{prefix: strings.TrimSuffix(path, last), param: p.Value.Name})
			}
		}
	}
	return ws
}

// findRoute finds req's operation, matching a wildcard's rest of the path
// as one parameter.
func (v *Validator) findRoute(req *http.Request) (*routers.Route, map[string]string, error) {
	for _, w := range v.wildcards {
		rest, ok := strings.CutPrefix(req.URL.Path, w.prefix)
		if !ok || rest == "" || !strings.Contains(rest, "/") {
			continue
		}
		one := req.Clone(req.Context())
		one.URL.Path, one.URL.RawPath = w.prefix+"rest", ""
		route, params, err := v.router.FindRoute(one)
		if params != nil {
			params[w.param] = rest
		}
		return route, params, err
	}
	return v.router.FindRoute(req)
}

// checkMethodNotAllowed checks the answer to a method a documented path
// does not serve: 405, with Allow naming exactly the documented methods
// (and OPTIONS), and the error JSON.
func (v *Validator) checkMethodNotAllowed(req *http.Request, status int, header http.Header, body []byte) error {
	if status != http.StatusMethodNotAllowed {
		return fmt.Errorf("%s %s: %d for a method openapi.json does not list on a documented path, want 405", req.Method, req.URL.Path, status)
	}
	allowed := v.allowed(req)
	got := strings.Split(header.Get("Allow"), ", ")
	slices.Sort(got)
	if !slices.Equal(got, allowed) {
		return fmt.Errorf("%s %s: 405 with Allow %q, want the documented %q", req.Method, req.URL.Path, header.Get("Allow"), strings.Join(allowed, ", "))
	}
	return v.CheckSchema("Error", body)
}

// allowed returns the methods documented for req's path, sorted, with
// OPTIONS; nil when the path is not documented.
func (v *Validator) allowed(req *http.Request) []string {
	for _, m := range []string{http.MethodGet, http.MethodPost, http.MethodPut, http.MethodPatch, http.MethodDelete, http.MethodOptions} {
		probe := req.Clone(req.Context())
		probe.Method = m
		if route, _, err := v.findRoute(probe); err == nil {
			var ms []string
			for method := range route.PathItem.Operations() {
				ms = append(ms, method)
			}
			slices.Sort(ms)
			return ms
		}
	}
	return nil
}

// Check returns an error when a response breaks the document: a status the
// operation does not list, a missing X-Request-Id, headers or a JSON body
// that do not match. body nil skips the body (a stream: check its events
// with CheckSchema). A method a documented path does not list must be
// answered 405 with an Allow header naming the documented methods (the
// document's MethodNotAllowed response); a request to no documented path,
// with an error status and the error JSON. A path parameter marked
// x-prchat-wildcard matches the rest of the path, slashes included.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if header.Get("X-Request-Id") == "" {
		return fmt.Errorf("%s %s: no X-Request-Id", req.Method, req.URL.Path)
	}
	route, params, err := v.findRoute(req)
	if errors.Is(err, routers.ErrMethodNotAllowed) {
		return v.checkMethodNotAllowed(req, status, header, body)
	}
	if err != nil {
		if status < 400 {
			return fmt.Errorf("%s %s: status %d from an operation openapi.json does not have", req.Method, req.URL.Path, status)
		}
		return v.CheckSchema("Error", body)
	}
	in := &openapi3filter.ResponseValidationInput{
		RequestValidationInput: &openapi3filter.RequestValidationInput{Request: req, PathParams: params, Route: route},
		Status:                 status,
		Header:                 header,
		Options:                &openapi3filter.Options{IncludeResponseStatus: true, MultiError: true},
	}
	if body == nil {
		in.Options.ExcludeResponseBody = true
	} else {
		in.SetBodyBytes(body)
	}
	if err := openapi3filter.ValidateResponse(req.Context(), in); err != nil {
		return fmt.Errorf("%s %s: the %d response breaks openapi.json: %w\n%s", req.Method, req.URL.Path, status, err, excerpt(body))
	}
	return nil
}

// CheckSchema returns an error when raw is not JSON that the schema named
// in the document's components allows (JSON Schema 2020-12, as OpenAPI
// 3.1 has it), e.g. CheckSchema("TurnEvent", data).
func (v *Validator) CheckSchema(schema string, raw []byte) error {
	v.mu.Lock()
	sch, ok := v.compiled[schema]
	if !ok {
		var err error
		if sch, err = v.compiler.Compile("openapi.json#/components/schemas/" + schema); err != nil {
			v.mu.Unlock()
			return fmt.Errorf("openapi.json: schema %s: %w", schema, err)
		}
		v.compiled[schema] = sch
	}
	v.mu.Unlock()
	inst, err := jsonschema.UnmarshalJSON(bytes.NewReader(raw))
	if err != nil {
		return fmt.Errorf("not JSON: %w: %s", err, raw)
	}
	if err := sch.Validate(inst); err != nil {
		return fmt.Errorf("breaks the %s schema of openapi.json: %w\n%s", schema, err, raw)
	}
	return nil
}

// excerpt is the start of a body, for an error message.
func excerpt(body []byte) []byte {
	if len(body) > 2000 {
		return append(body[:2000:2000], "..."...)
	}
	return body
}
