package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// apiRoute is one route under /api/v1: its method and path (echo's :name
// parameters), the operation that documents it, what a token needs for it,
// and its handler. apiRoutes is the one table of the API's routes: the
// server registers them, authorize checks their access, and the API
// document's /api/v1 paths are made from them (each operation's text is in
// openapi.json's x-prchat-operations under its name), so that a route, its
// scope and its place in the document are written once.
type apiRoute struct {
	method, path string
	op           string // its operationId
	access       routeAccess
	handle       func(s *Server, c echo.Context) error
}

// What the /api routes need of a token.
var (
	readAccess  = routeAccess{scope: chat.ScopeRead}
	askAccess   = routeAccess{scope: chat.ScopeAsk}
	adminAccess = routeAccess{scope: chat.ScopeAdmin}
	// adminAll needs an admin token for every repository: routes not
	// about one repository.
	adminAll = routeAccess{scope: chat.ScopeAdmin, allRepos: true}
)

// apiRoutes are the routes under /api/v1, in the order they are registered.
var apiRoutes = []apiRoute{
	{http.MethodPost, "/repos", "registerRepository", adminAll, (*Server).registerRepository},
	{http.MethodGet, "/repos", "listRepositories", readAccess, (*Server).listRepositories},
	{http.MethodGet, "/repos/:owner/:repo", "getRepository", readAccess, (*Server).getRepository},
	{http.MethodPost, "/repos/:owner/:repo/pulls/:pr/reviews", "recordReview", adminAccess, (*Server).recordReview},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/reviews", "listReviews", readAccess, (*Server).listReviews},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/reviews/:version", "getReview", readAccess, (*Server).getReview},
	{http.MethodPut, sessionRoute, "putReviewSession", adminAccess, (*Server).putReviewSession},
	{http.MethodPost, "/repos/:owner/:repo/pulls/:pr/reviews/:version/conversations", "ask", askAccess, (*Server).ask},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/conversations", "listConversations", readAccess, (*Server).listConversations},
	{http.MethodGet, "/conversations/:id", "getConversation", readAccess, (*Server).getConversation},
	{http.MethodDelete, "/conversations/:id", "deleteConversation", adminAccess, (*Server).deleteConversation},
	{http.MethodPost, "/conversations/:id/turns", "continueConversation", askAccess, (*Server).continueConversation},
	{http.MethodGet, "/conversations/:id/turns/:n", "getTurn", readAccess, (*Server).getTurn},
	{http.MethodPost, "/conversations/:id/turns/:n/cancel", "cancelTurn", askAccess, (*Server).cancelTurn},
	{http.MethodGet, "/conversations/:id/turns/:n/events", "turnEvents", readAccess, (*Server).turnEvents},
	{http.MethodGet, "/conversations/:id/turns/:n/transcript", "transcript", readAccess, (*Server).transcript},
	{http.MethodGet, "/repos/:owner/:repo/events", "repositoryEvents", readAccess, (*Server).repoEvents},
	{http.MethodGet, "/repos/:owner/:repo/pulls", "listPulls", readAccess, (*Server).listPulls},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/reviews/:version/files", "fileLines", readAccess, (*Server).fileLines},
	{http.MethodGet, "/stats", "stats", readAccess, (*Server).stats},
	{http.MethodGet, "/providers", "listProviders", adminAll, (*Server).listProviders},
	{http.MethodGet, "/providers/active", "getActiveProvider", adminAll, (*Server).getActiveProvider},
	{http.MethodPatch, "/providers/active", "setActiveProvider", adminAll, (*Server).setActiveProvider},
	{http.MethodPost, "/providers/:id/key", "setProviderKey", adminAll, (*Server).setProviderKey},
	{http.MethodDelete, "/providers/:id/key", "deleteProviderKey", adminAll, (*Server).deleteProviderKey},
	{http.MethodGet, "/tokens", "listTokens", adminAll, (*Server).listTokens},
	{http.MethodPost, "/tokens", "createToken", adminAll, (*Server).createToken},
	{http.MethodDelete, "/tokens/:id", "revokeToken", adminAll, (*Server).revokeToken},
}

// routeScopes maps "METHOD /api/v1/path" of every /api route to what it
// needs, from apiRoutes.
var routeScopes = func() map[string]routeAccess {
	m := make(map[string]routeAccess, len(apiRoutes))
	for _, r := range apiRoutes {
		m[r.method+" /api/v1"+r.path] = r.access
	}
	return m
}()

// registerAPIRoutes registers apiRoutes on g, each behind mw (its own
// middleware, not the group's: that would register catch-all routes and
// turn a 405 into a 404).
func (s *Server) registerAPIRoutes(g *echo.Group, mw echo.MiddlewareFunc) {
	for _, r := range apiRoutes {
		g.Add(r.method, r.path, func(c echo.Context) error { return r.handle(s, c) }, mw)
	}
}
