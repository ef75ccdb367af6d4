// Package api is prchat's HTTP API: an echo server with the routes of the
// contract (DESIGN §6), JSON errors with codes mapped from chat's domain
// errors in one place, request ids, body limits, request metrics and logs.
//
// Lists are returned as objects ({"repositories": [...]}) so that fields can
// be added later. A review version in a path may be a number or "latest".
package api
