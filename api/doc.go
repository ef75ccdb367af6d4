// Package api is prchat's HTTP API: an echo server with the routes of the
// contract (DESIGN §6), JSON errors with codes mapped from chat's domain
// errors in one place, request ids, body limits, request metrics and logs.
// It reaches the domain through Domain: one small interface per role of
// chat that its routes use (repositories, turns, subscriptions, providers,
// reports, webhooks, readiness), each declared here and implemented by
// chat's role of that name.
// NewProbe serves the probes alone (/healthz, /metrics) for a process
// without the API.
//
// Access: every /api route passes authorize (access.go). Once any API
// token exists a request needs Authorization: Bearer <token> (401
// unauthorized), a token of the route's scope (apiRoutes; 403
// forbidden), and is held to the per-token request rate (429 rate_limited
// with Retry-After). The token travels to the service in the request's
// context, which shows a token limited to repositories only those. Admin
// requests are logged as "audit" with the token's name and id.
//
// Webhooks: POST /webhooks/github and /webhooks/gitlab (webhooks.go) need
// no API token: each forge's WebhookReader (packages forge/github and
// forge/gitlab) authenticates a delivery by the forge's signature (GitHub's
// HMAC-SHA256 of the raw body) or secret token (GitLab's X-Gitlab-Token)
// before it is parsed, and reads its question; a body may be up to 25 MB.
// The routes count deliveries and hand /ask comments to
// Webhooks.ReceiveComment.
//
// Event streams (events.go): an HTTP/1.1 stream is taken over from the
// HTTP server and written in chunks of its own. When a turn's events are
// over, its final event goes out at once, and the stream ends (last chunk,
// close) a random part of Config.EndSpread (500 ms) later, so that the
// thousands of streams of one turn do not all close in the same instant
// (DESIGN §6 says the server closes the connection after the final event;
// this is when). A server that stops ends them at once.
//
// Lists are returned as objects ({"repositories": [...]}) so that fields can
// be added later. A review version in a path may be a number or "latest".
// A wrong method on a known path is 405 with an Allow header and a body
// over Config.BodyLimit is 413, both with the code invalid: DESIGN §6 has
// no code of their own, and the status tells a client what to change.
//
// # The API document
//
// GET /openapi.json serves an OpenAPI 3.1 document made once from two
// sources (buildDocument, openapi.go): apiRoutes (routes.go), the one
// table of the /api routes, which gives each /api path, its methods, path
// parameters, OPTIONS operation and scope; and openapi.json, embedded in
// the binary and written by hand, which gives the paths outside /api, the
// components, and the text of each /api operation under its operationId
// (x-prchat-operations: summary, body, responses). The tests keep it
// true: TestDocumentHasEveryRoute fails when a route registered with echo
// is missing from it or a documented operation is not registered, and every
// response the api tests (and cmd/prchat's end-to-end tests) receive is
// checked against it by package apitest: its status must be listed for
// the operation, its headers and JSON body must match, each SSE event's
// data must match the TurnEvent or FeedEvent schema.
//
// Every path also documents OPTIONS (204, Allow naming its methods; echo
// answers it on every path, with no token), and components.responses'
// MethodNotAllowed is the answer to any method a path does not list (405,
// the same Allow, the error JSON): apitest checks a 405 against it, and
// TestOptionsAndWrongMethods asks both of every documented path. A path
// parameter marked x-prchat-wildcard (/ui/assets/{path},
// /admin/queues/{path}) is the rest of the path, slashes included, which
// an OpenAPI path template cannot say by itself. Content types are those
// served: the dashboard's script and style sheet are text/javascript and
// text/css, asynqmon's answers are typed by what they are (queueTypes in
// package dashboard), never the text/plain its sniffing gives.
//
// To add a route:
//
//  1. Add an /api route to apiRoutes (routes.go): its method, path, the
//     scope a token needs and its handler, in one entry that both
//     registers it and guards it (a route not there needs an admin token
//     for every repository). Register any other route in routes (or
//     probeRoutes).
//  2. Add its operation to openapi.json's x-prchat-operations under the
//     operationId its apiRoutes entry names (the path, its parameters and
//     its OPTIONS come from the entry; a new kind of path parameter gets
//     its component in pathParameters): a tag, every status it can answer
//     (2xx and the errors; point to components.responses for the error
//     ones, which carry X-Request-Id), its request body and response
//     schemas under components.schemas. A route that takes a body
//     lists 413. Every /api route needs a token (the document's top-level
//     security, bearerAuth): it lists 400, 401, 403 and 429; the served
//     document names its scope (x-prchat-scope, and
//     x-prchat-all-repositories for a route not about one repository)
//     from apiRoutes, so the file does not. Routes outside /api are
//     written under paths, with their options operation; those that need
//     no token say "security": [].
//  3. The document is not built (TestDocumentIsMadeFromTheRoutes) while
//     a route names no written operation or an operation no route, and
//     TestEveryRouteRefusesWithoutTheRightToken until it knows the
//     route's body.
//  4. Test it in this package with the fixture of setup_test.go (f.do,
//     f.c.send, f.golden): the test client then checks its answers against
//     the document, and go test ./api -update writes its golden files
//     under testdata/.
package api
