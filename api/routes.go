package api

import (
	"net/http"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// apiRoute is one route under /api/v1: its method and path (echo's :name
// parameters), what a token needs for it, and its handler. The server
// registers the routes of apiRoutes and authorize checks their access from
// the same entries, so that a route and its scope are written once; the
// API document (openapi.json) is checked against them by the tests.
type apiRoute struct {
	method, path string
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
	{http.MethodPost, "/repos", adminAll, (*Server).registerRepository},
	{http.MethodGet, "/repos", readAccess, (*Server).listRepositories},
	{http.MethodGet, "/repos/:owner/:repo", readAccess, (*Server).getRepository},
	{http.MethodPost, "/repos/:owner/:repo/pulls/:pr/reviews", adminAccess, (*Server).recordReview},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/reviews", readAccess, (*Server).listReviews},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/reviews/:version", readAccess, (*Server).getReview},
	{http.MethodPut, sessionRoute, adminAccess, (*Server).putReviewSession},
	{http.MethodPost, "/repos/:owner/:repo/pulls/:pr/reviews/:version/conversations", askAccess, (*Server).ask},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/conversations", readAccess, (*Server).listConversations},
	{http.MethodGet, "/conversations/:id", readAccess, (*Server).getConversation},
	{http.MethodDelete, "/conversations/:id", adminAccess, (*Server).deleteConversation},
	{http.MethodPost, "/conversations/:id/turns", askAccess, (*Server).continueConversation},
	{http.MethodGet, "/conversations/:id/turns/:n", readAccess, (*Server).getTurn},
	{http.MethodPost, "/conversations/:id/turns/:n/cancel", askAccess, (*Server).cancelTurn},
	{http.MethodGet, "/conversations/:id/turns/:n/events", readAccess, (*Server).turnEvents},
	{http.MethodGet, "/conversations/:id/turns/:n/transcript", readAccess, (*Server).transcript},
	{http.MethodGet, "/repos/:owner/:repo/events", readAccess, (*Server).repoEvents},
	{http.MethodGet, "/repos/:owner/:repo/pulls", readAccess, (*Server).listPulls},
	{http.MethodGet, "/repos/:owner/:repo/pulls/:pr/reviews/:version/files", readAccess, (*Server).fileLines},
	{http.MethodGet, "/stats", readAccess, (*Server).stats},
	{http.MethodGet, "/providers", adminAll, (*Server).listProviders},
	{http.MethodGet, "/providers/active", adminAll, (*Server).getActiveProvider},
	{http.MethodPatch, "/providers/active", adminAll, (*Server).setActiveProvider},
	{http.MethodPost, "/providers/:id/key", adminAll, (*Server).setProviderKey},
	{http.MethodDelete, "/providers/:id/key", adminAll, (*Server).deleteProviderKey},
	{http.MethodGet, "/tokens", adminAll, (*Server).listTokens},
	{http.MethodPost, "/tokens", adminAll, (*Server).createToken},
	{http.MethodDelete, "/tokens/:id", adminAll, (*Server).revokeToken},
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
