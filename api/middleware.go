package api

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"net/http"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/labstack/echo/v4"
)

const requestIDKey = "request_id"

var goodRequestID = regexp.MustCompile(`^[A-Za-z0-9._-]{8,128}$`)

// requestIDs gives every request an id (the client's X-Request-Id when it
// is sane), sets it on the response, and makes it the errors' trace id.
func requestIDs(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		id := c.Request().Header.Get(echo.HeaderXRequestID)
		if !goodRequestID.MatchString(id) {
			var b [12]byte
			_, _ = rand.Read(b[:])
			id = hex.EncodeToString(b[:])
		}
		c.Set(requestIDKey, id)
		c.Response().Header().Set(echo.HeaderXRequestID, id)
		return next(c)
	}
}

func requestID(c echo.Context) string {
	id, _ := c.Get(requestIDKey).(string)
	return id
}

// bodyLimit caps request bodies: a body announced larger is refused at
// once, and reading past the cap fails the decode; both answer 413.
// Webhook routes cap their own (WebhookBodyLimit); the routes in own
// (by route path) have a limit of their own instead of limit.
func bodyLimit(limit int64, own map[string]int64) echo.MiddlewareFunc {
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(c echo.Context) error {
			if strings.HasPrefix(c.Path(), "/webhooks/") {
				return next(c)
			}
			limit := limit
			if l, ok := own[c.Path()]; ok {
				limit = l
			}
			r := c.Request()
			if r.ContentLength > limit {
				return tooLarge(limit)
			}
			r.Body = http.MaxBytesReader(c.Response(), r.Body, limit)
			return next(c)
		}
	}
}

// recoverPanics turns a handler's panic into a 500 and a log line.
func (s *Server) recoverPanics(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) (err error) {
		defer func() {
			if v := recover(); v != nil {
				if v == http.ErrAbortHandler {
					panic(v)
				}
				err = fmt.Errorf("panic: %v", v)
			}
		}()
		return next(c)
	}
}

// observe logs each request (never its body) and counts it in the metrics.
func (s *Server) observe(next echo.HandlerFunc) echo.HandlerFunc {
	return func(c echo.Context) error {
		start := time.Now()
		err := next(c)
		if err != nil {
			c.Error(err)
		}
		route := c.Path()
		if route == "" {
			route = "unmatched"
		}
		status := c.Response().Status
		elapsed := time.Since(start)
		if s.metrics != nil {
			s.metrics.requests.WithLabelValues(c.Request().Method, route, strconv.Itoa(status)).Inc()
			s.metrics.latency.WithLabelValues(c.Request().Method, route).Observe(elapsed.Seconds())
		}
		if route != "/healthz" && route != "/metrics" {
			s.log.LogAttrs(c.Request().Context(), slog.LevelInfo, "request",
				slog.String("request_id", requestID(c)), slog.String("method", c.Request().Method),
				slog.String("route", route), slog.Int("status", status),
				slog.Int64("bytes", c.Response().Size), slog.Duration("elapsed", elapsed))
		}
		return nil
	}
}
