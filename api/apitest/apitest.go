// Package apitest checks what prchat's HTTP API answers against its
// document (api.OpenAPI): a test client wraps its responses in Check, and
// the data of each Server-Sent Event in CheckSchema, so that every response
// a test receives is one the document allows.
package apitest

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
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
	return &Validator{doc: doc, router: router, compiler: c, compiled: map[string]*jsonschema.Schema{}}, nil
}

// Check returns an error when a response breaks the document: a status the
// operation does not list, a missing X-Request-Id, headers or a JSON body
// that do not match. body nil skips the body (a stream: check its events
// with CheckSchema). A request to no documented operation (unknown route,
// wrong method) must be answered with an error status and the error JSON.
func (v *Validator) Check(req *http.Request, status int, header http.Header, body []byte) error {
	if header.Get("X-Request-Id") == "" {
		return fmt.Errorf("%s %s: no X-Request-Id", req.Method, req.URL.Path)
	}
	route, params, err := v.router.FindRoute(req)
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
		return fmt.Errorf("%s %s: the %d response breaks openapi.json: %w\n%s", req.Method, req.URL.Path, status, err, body)
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
