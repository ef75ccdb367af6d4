package api

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"sync/atomic"
	"time"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Config holds the API server's settings.
type Config struct {
	// BodyLimit caps request bodies in bytes. Default 2 MiB.
	BodyLimit int64
	// MaxSessionBytes caps the body of a review's session upload instead
	// (PRCHAT_MAX_SESSION_BYTES). Default chat.DefaultMaxSessionBytes.
	MaxSessionBytes int64
	// MaxWait caps a long-poll's ?wait=. Default 60s.
	MaxWait time.Duration
	// PingInterval is how often an idle SSE stream gets a ": ping"
	// comment. Default 15s.
	PingInterval time.Duration
	// EndSpread is the longest a taken-over stream whose turn is over
	// waits, its final event sent, before it ends (spreadEnd). Default
	// 500ms; negative: it ends at once.
	EndSpread time.Duration
	// Registry collects the metrics served at /metrics. Default a new one.
	Registry *prometheus.Registry
	// Dashboard, if set, mounts the web dashboard's pages (package
	// api/dashboard) beside the API.
	Dashboard interface{ Register(e *echo.Echo) }
	Logger    *slog.Logger
	// Access checks API tokens on every /api route (once any token
	// exists). Nil: no tokens, every route open (tests of other parts).
	Access Access
	// Sessions checks the dashboard's session cookie (a session id) on the
	// /api routes; nil: the cookie is not accepted.
	Sessions interface {
		Authenticate(ctx context.Context, id string) (chat.Token, error)
	}
	// RequestRate limits the requests of one token (of one client address
	// while the API is open) in this process. Zero: no limit.
	RequestRate chat.Rate
	// Now tells the time to the rate limits; default time.Now.
	Now func() time.Time
	// GitHub and GitLab read the deliveries of the webhook routes; nil:
	// the route answers unavailable.
	GitHub WebhookReader
	GitLab WebhookReader
	// PublicURL is the address a deployment is reached at
	// (PRCHAT_PUBLIC_URL, e.g. https://prchat.example.com behind a TLS
	// proxy): its origin is prchat's own, and its host is served while the
	// API is open (see guardBrowsers).
	PublicURL string
}

func (c Config) withDefaults() Config {
	c.BodyLimit = cmp.Or(c.BodyLimit, 2<<20)
	c.MaxSessionBytes = cmp.Or(c.MaxSessionBytes, chat.DefaultMaxSessionBytes)
	c.MaxWait = cmp.Or(c.MaxWait, 60*time.Second)
	c.PingInterval = cmp.Or(c.PingInterval, 15*time.Second)
	c.EndSpread = cmp.Or(c.EndSpread, 500*time.Millisecond)
	if c.Registry == nil {
		c.Registry = prometheus.NewRegistry()
	}
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	if c.Now == nil {
		c.Now = time.Now
	}
	return c
}

func (s *Server) now() time.Time { return s.cfg.Now() }

// Server is prchat's HTTP API.
type Server struct {
	cfg     Config
	domain  Domain
	limits  *requestLimits
	log     *slog.Logger
	echo    *echo.Echo
	metrics *metrics
	frames  frames // the SSE frames of live events

	webhookMetrics *webhookMetrics

	// publicOrigin and publicHost are Config.PublicURL's.
	publicOrigin, publicHost string

	mu       sync.Mutex
	http     *http.Server
	cancel   context.CancelFunc // ends the requests in flight (SSE streams)
	shut     bool               // Shutdown was called: a later Serve serves nothing
	stopping context.Context    // ends when Shutdown begins: streams say goodbye
	stop     context.CancelFunc // of stopping
	stopOnce sync.Once
	streams  atomic.Int64 // open event streams
}

// New returns a Server answering every route of the contract for the
// domain's roles d.
func New(cfg Config, d Domain) (*Server, error) {
	if err := d.validate(); err != nil {
		return nil, err
	}
	if _, _, err := parsePublicURL(cfg.PublicURL); err != nil {
		return nil, fmt.Errorf("api: %w", err)
	}
	s := newServer(cfg, d)
	s.probeRoutes()
	s.routes()
	return s, nil
}

// NewProbe returns a Server of the probes alone, for a process without
// the API (prchat worker): /healthz and /metrics, with request ids, metrics
// and the contract's errors like the API's own.
func NewProbe(cfg Config) *Server {
	s := newServer(cfg, Domain{})
	s.probeRoutes()
	return s
}

func newServer(cfg Config, d Domain) *Server {
	cfg = cfg.withDefaults()
	s := &Server{cfg: cfg, domain: d, log: cfg.Logger, echo: echo.New(), limits: newRequestLimits(cfg.RequestRate)}
	s.stopping, s.stop = context.WithCancel(context.Background())
	s.metrics = newMetrics(cfg.Registry)
	s.webhookMetrics = newWebhookMetrics(cfg.Registry)
	s.publicOrigin, s.publicHost, _ = parsePublicURL(cfg.PublicURL)
	e := s.echo
	e.HideBanner, e.HidePort = true, true
	e.HTTPErrorHandler = s.errorHandler
	e.Use(requestIDs, s.observe, s.recoverPanics, s.guardBrowsers, bodyLimit(cfg.BodyLimit, map[string]int64{"/api/v1" + sessionRoute: cfg.MaxSessionBytes}))
	return s
}

// Route is a registered route: its method and path, with echo's :name
// parameters.
type Route struct {
	Method, Path string
}

// Routes lists the routes the server registered.
func (s *Server) Routes() []Route {
	var out []Route
	for _, r := range s.echo.Routes() {
		out = append(out, Route{Method: r.Method, Path: r.Path})
	}
	return out
}

// Handler returns the server's HTTP handler.
func (s *Server) Handler() http.Handler { return s.echo }

// Serve serves HTTP on ln until Shutdown. Called after Shutdown (a stop
// that came while the process started), it closes ln and returns at once.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.shut {
		// Stopped before it served (a signal during the start): never serve.
		s.mu.Unlock()
		_ = ln.Close()
		return nil
	}
	base, cancel := context.WithCancel(context.Background())
	s.cancel = cancel
	s.http = &http.Server{
		Handler:           s.echo,
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       2 * time.Minute,
		BaseContext:       func(net.Listener) context.Context { return base },
	}
	srv := s.http
	s.mu.Unlock()
	if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("serve http: %w", err)
	}
	return nil
}

// streamGoodbyeWait is how long Shutdown lets event streams write their
// reconnect hint before it ends them.
const streamGoodbyeWait = time.Second

// Shutdown stops the server: each event stream is told to reconnect (a
// short retry: and a ": reconnect" comment, see the README) and ends, other
// requests in flight may finish until ctx ends. Safe to call twice.
func (s *Server) Shutdown(ctx context.Context) error {
	s.mu.Lock()
	s.shut = true
	srv, cancel := s.http, s.cancel
	s.mu.Unlock()
	s.stopOnce.Do(s.stop)
	if srv == nil {
		return nil
	}
	// New connections are refused from here; open streams write their hint.
	srv.SetKeepAlivesEnabled(false)
	for deadline := time.Now().Add(streamGoodbyeWait); s.streams.Load() > 0 && time.Now().Before(deadline) && ctx.Err() == nil; {
		time.Sleep(5 * time.Millisecond)
	}
	cancel()
	return srv.Shutdown(ctx)
}

// probeRoutes are the routes of every prchat process that serves HTTP.
func (s *Server) probeRoutes() {
	e := s.echo
	e.GET("/healthz", s.healthz)
	e.GET("/metrics", echo.WrapHandler(promhttp.HandlerFor(s.cfg.Registry, promhttp.HandlerOpts{})))
}

// routes are the API's own routes: the probes' aside, the API document,
// the webhooks and apiRoutes. A route added is added to openapi.json too
// (see the package doc).
func (s *Server) routes() {
	e := s.echo
	e.GET("/readyz", s.readyz)
	e.GET("/openapi.json", s.openAPI)

	// Webhooks are authenticated by their signature, not by API tokens,
	// and read their own (larger) bodies.
	e.POST("/webhooks/github", s.webhook(chat.ForgeGitHub, s.cfg.GitHub))
	e.POST("/webhooks/gitlab", s.webhook(chat.ForgeGitLab, s.cfg.GitLab))

	s.registerAPIRoutes(e.Group("/api/v1"), s.authorize)
	if s.cfg.Dashboard != nil {
		s.cfg.Dashboard.Register(e)
	}
}
