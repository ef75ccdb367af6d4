package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/local"
	"github.com/prchat/prchat/agentsession/openai"
	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/api/dashboard"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/worker"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/redis/go-redis/v9"
)

var (
	_ openai.Sessions = (*store.AgentSessions)(nil)
	_ api.Service     = (*chat.Service)(nil)
)

// role says which parts a process runs.
type role struct {
	api, worker bool
	// embedded allows the in-process Redis (serve only: other processes
	// could not reach it).
	embedded bool
}

func roleOf(cmd string) role {
	switch cmd {
	case "api":
		return role{api: true}
	case "worker":
		return role{worker: true}
	}
	return role{api: true, worker: true, embedded: true}
}

// options are what tests add to a daemon.
type options struct {
	logger *slog.Logger
	// backends are added to the built-in ones (tests add a scripted agent).
	backends []chat.Backend
	// heartbeatTTL and reconcileGrace shorten timings in tests.
	heartbeatTTL   time.Duration
	reconcileGrace time.Duration
	// outboxInterval and commentPoll shorten the webhook replies' timings.
	outboxInterval time.Duration
	commentPoll    time.Duration
	commentBackoff time.Duration
	commentLease   time.Duration
}

// daemon is a running prchat process.
type daemon struct {
	log        *slog.Logger
	store      *store.Store
	embedded   *worker.EmbeddedRedis
	rdb        redis.UniversalClient
	queue      *worker.Queue
	events     *worker.Events
	svc        *chat.Service
	api        *api.Server // the API, or the probes of a worker alone
	ln         net.Listener
	heartbeat  *worker.Heartbeat
	server     *worker.Server
	reconciler *worker.Reconciler
	outbox     *worker.Outbox
	runner     string
	// lock is the data directory's lock file (lockDataDir), if taken.
	lock *os.File

	failed   chan error
	stopOnce sync.Once
	served   sync.WaitGroup
}

func newLogger(cfg Config, w io.Writer) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(cfg.LogLevel)); err != nil {
		return nil, fmt.Errorf("PRCHAT_LOG_LEVEL: %w", err)
	}
	opts := &slog.HandlerOptions{Level: level}
	switch cfg.LogFormat {
	case "json":
		return slog.New(slog.NewJSONHandler(w, opts)), nil
	case "text", "":
		return slog.New(slog.NewTextHandler(w, opts)), nil
	}
	return nil, fmt.Errorf("PRCHAT_LOG_FORMAT must be text or json, not %q", cfg.LogFormat)
}

// openStore opens the database (the embedded SQLite file when no URL is
// set) and applies the migrations.
func openStore(ctx context.Context, cfg Config, log *slog.Logger) (*store.Store, error) {
	sc := store.Config{DatabaseURL: cfg.DatabaseURL, Logger: log}
	if cfg.DatabaseURL == "" {
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("data directory: %w", err)
		}
		sc.SQLitePath = filepath.Join(cfg.DataDir, "prchat.db")
	}
	st, err := store.Open(ctx, sc)
	if err != nil {
		return nil, err
	}
	if err := st.Migrate(ctx); err != nil {
		st.Close()
		return nil, err
	}
	return st, nil
}

// start starts the parts of r and returns once they run.
func start(ctx context.Context, cfg Config, r role, o options) (_ *daemon, err error) {
	log := o.logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	d := &daemon{log: log, failed: make(chan error, 2)}
	defer func() {
		if err != nil {
			d.Stop()
		}
	}()
	if cfg.RedisURL == "" && !r.embedded {
		return nil, errors.New("PRCHAT_REDIS_URL is required: only `prchat serve` can run an embedded Redis")
	}

	if d.store, err = openStore(ctx, cfg, log); err != nil {
		return nil, err
	}
	if cfg.RedisURL == "" {
		if d.embedded, err = worker.StartEmbeddedRedis(); err != nil {
			return nil, err
		}
		log.InfoContext(ctx, "using the embedded Redis; it keeps nothing across restarts")
		// In-memory connections: TCP loopback's syscalls were much of an
		// idle serve's CPU.
		d.rdb, err = d.embedded.Client(ctx)
	} else {
		d.rdb, err = worker.OpenRedis(ctx, cfg.RedisURL)
	}
	if err != nil {
		return nil, err
	}
	// One policy of a turn's life for every part. The embedded Redis lives
	// in this process: no other worker can take a turn.
	policy := chat.TurnPolicy{TurnTimeout: cfg.TurnTimeout, SoleWorker: d.embedded != nil}
	if d.queue, err = worker.NewQueue(d.rdb, worker.QueueConfig{
		Policy: policy,
		Logger: log,
	}); err != nil {
		return nil, err
	}
	hosts := worker.NewHosts(d.rdb, worker.HostsConfig{TTL: o.heartbeatTTL})
	d.events = worker.NewEvents(d.rdb, worker.EventsConfig{Logger: log})

	secret, err := cfg.secretKey()
	if err != nil {
		return nil, err
	}
	sealer, err := chat.NewSealer(secret)
	if err != nil {
		return nil, fmt.Errorf("PRCHAT_SECRET_KEY: %w", err)
	}
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	metrics := worker.NewMetrics(reg, d.queue)
	masker := mask.New(append(cfg.secrets(), appKeySecrets(cfg.GitHubAppPrivateKeyFile)...)...)
	fg, err := newForges(cfg, log)
	if err != nil {
		return nil, err
	}
	deps := chat.Deps{
		Settings:  d.store,
		Histories: d.store,
		// Agent CLI sessions travel in the database, sealed.
		SessionFiles: d.store,
		SessionCheckers: map[string]chat.SessionChecker{
			chat.BackendClaudeCode: claude.CheckSessionFile,
			chat.BackendCodex:      codex.CheckSessionFile,
		},
		Observer:  metrics,
		Sealer:    sealer,
		Store:     d.store,
		Queue:     d.queue,
		Hosts:     hosts,
		Masker:    masker,
		Logger:    log,
		Backends:  o.backends,
		Publisher: d.events,
		Follower:  d.events,
		Reports:   d.store,
		// Questions from PR comments, answered back on their forge.
		Comments:        d.store,
		Forges:          fg.list(),
		CommentObserver: worker.NewReplyMetrics(reg),
	}
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: cfg.DataDir, Secrets: cfg.secrets(), Logger: log, Credentials: fg.credentials, ClonePrivate: cfg.CloneAllowPrivate})
	if err != nil {
		return nil, err
	}
	// Registration and review checks read clones, and the dashboard shows
	// their files, wherever the API runs; only a worker prepares run
	// directories.
	deps.Clones = ws
	deps.Files = ws
	deps.Limiter = worker.NewRateLimiter(d.rdb)
	if r.worker {
		deps.Workspaces = ws
		oa, err := openai.New(openai.Config{
			BaseURL:  cfg.OpenAIBaseURL,
			APIKey:   cfg.OpenAIAPIKey,
			Model:    cfg.OpenAIModel,
			Sessions: d.store.AgentSessions(chat.BackendOpenAI),
			// With the stored keys, as the service learns them.
			Mask:   func(s string) string { return d.svc.MaskString(s) },
			Logger: log,
		})
		if err != nil {
			return nil, err
		}
		cl, err := claude.New(claude.Config{Bin: cfg.ClaudeBin, Secrets: cfg.secrets(), ExtraEnv: cfg.AgentEnv, Logger: log})
		if err != nil {
			return nil, err
		}
		cx, err := codex.New(codex.Config{Bin: cfg.CodexBin, Secrets: cfg.secrets(), ExtraEnv: cfg.AgentEnv, Logger: log})
		if err != nil {
			return nil, err
		}
		// Backends given in options come last and replace built-ins of the same name.
		deps.Backends = append([]chat.Backend{local.New(local.Config{}), oa, cl, cx}, deps.Backends...)
	}
	roots, err := cfg.roots()
	if err != nil {
		return nil, err
	}
	if d.svc, err = chat.NewService(chat.Config{
		WorkerID:        cfg.WorkerID,
		Policy:          policy,
		MaxRepairs:      cfg.MaxRepairs,
		MaxSessionBytes: cfg.MaxSessionBytes,
		MaxCalls:        cfg.MaxCalls,
		MaxTokens:       cfg.MaxTokens,
		DefaultBackend:  cfg.DefaultBackend,
		Providers:       cfg.providers(),
		DefaultProvider: "openai",
		ReposRoots:      roots,
		// With no roots configured, a loopback daemon's own users may
		// register any path; a reachable one takes none.
		AnyPath:           len(roots) == 0 && loopback(cfg.Listen),
		AllowFileURLs:     cfg.AllowFileURLs,
		CloneAllowPrivate: cfg.CloneAllowPrivate,
		QuestionsPerRepo:  cfg.RateQuestionsRepo,
		QuestionsPerToken: cfg.RateQuestionsToken,
		CommentPoll:       o.commentPoll,
		CommentBackoff:    o.commentBackoff,
		CommentLease:      o.commentLease,
	}, deps); err != nil {
		return nil, err
	}
	access, err := chat.NewAccess(chat.AccessConfig{Logger: log}, d.store)
	if err != nil {
		return nil, err
	}
	if r.api {
		if err := checkOpenAPI(ctx, cfg, access, log); err != nil {
			return nil, err
		}
	}

	if r.worker {
		id := worker.NewIdentity(cfg.WorkerID)
		d.runner = id.Runner()
		if d.reconciler, err = worker.NewReconciler(d.svc, d.queue, hosts, worker.ReconcilerConfig{
			Interval: cfg.ReconcileInterval,
			Grace:    o.reconcileGrace,
			Policy:   policy,
			Holder:   id.Runner(),
			Logger:   log,
		}); err != nil {
			return nil, err
		}
		// A heartbeat that finds its key gone (Redis flushed or restarted)
		// has the reconciler enqueue the lost jobs at once.
		if d.heartbeat, err = worker.NewHeartbeat(d.rdb, worker.HeartbeatConfig{Identity: id, TTL: o.heartbeatTTL, OnLost: d.reconciler.Kick, Logger: log}); err != nil {
			return nil, err
		}
		// The long-lived parts outlive ctx (a SIGTERM): Stop stops them, in
		// their order, with the worker's grace.
		run := context.WithoutCancel(ctx)
		if err = d.heartbeat.Start(run); err != nil {
			return nil, err
		}
		if d.server, err = worker.NewServer(d.rdb, d.svc, worker.ServerConfig{
			Identity:          id,
			Concurrency:       cfg.Concurrency,
			TaskCheckInterval: cfg.PollInterval,
			IdlePollInterval:  max(cfg.IdlePollInterval, cfg.PollInterval),
			Policy:            policy,
			ShutdownGrace:     cfg.ShutdownGrace,
			RemoveRunDir:      deps.Workspaces.Remove,
			Logger:            log,
		}); err != nil {
			return nil, err
		}
		if err = d.server.Start(run); err != nil {
			return nil, err
		}
		// The deployment's reconciler (the one holding its lease) reconciles
		// what an earlier run left queued or running, then keeps at it.
		if err = d.reconciler.Start(run); err != nil {
			return nil, err
		}
		if d.reconciler.Holds() {
			if _, err := d.reconciler.ReconcileOnce(ctx); err != nil {
				log.WarnContext(ctx, "reconcile at start", slog.Any("err", err))
			}
		}
		// Webhook questions exist only where a webhook or a forge is set up;
		// elsewhere the outbox's poll would be idle work.
		if fg.enabled(cfg) {
			if d.outbox, err = worker.NewOutbox(d.svc, worker.OutboxConfig{Interval: o.outboxInterval, Logger: log}); err != nil {
				return nil, err
			}
			if err = d.outbox.Start(ctx); err != nil {
				return nil, err
			}
		}
	}

	// A worker alone serves its liveness and metrics on the same address.
	if r.api {
		sessions, err := chat.NewSessions(access, d.store, 0)
		if err != nil {
			return nil, err
		}
		dash, err := dashboard.New(dashboard.Config{
			Access:        access,
			Sessions:      sessions,
			SecureCookies: strings.HasPrefix(cfg.PublicURL, "https://"),
			Logger:        log,
			AdminQueues:   worker.NewQueueMonitor(d.rdb, "/admin/queues"),
		}, d.svc)
		if err != nil {
			return nil, err
		}
		ghHooks, glHooks := fg.webhooks(cfg)
		d.api, err = api.New(api.Config{Registry: reg, Logger: log, Access: access, RequestRate: cfg.RateRequests, MaxSessionBytes: cfg.MaxSessionBytes, Dashboard: dash, GitHub: ghHooks, GitLab: glHooks, PublicURL: cfg.PublicURL, Sessions: sessions}, d.svc)
		if err != nil {
			return nil, err
		}
	} else {
		d.api = api.NewProbe(api.Config{Registry: reg, Logger: log})
	}
	if d.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return nil, fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	d.served.Add(1)
	go func() {
		defer d.served.Done()
		if err := d.api.Serve(d.ln); err != nil {
			d.failed <- err
		}
	}()
	return d, nil
}

// appKeySecrets are the values of a GitHub App's private key file that are
// masked: the whole PEM text and each line of its body, so that a part of
// the key shown alone is masked too.
func appKeySecrets(file string) []string {
	if file == "" {
		return nil
	}
	pem, err := os.ReadFile(file)
	if err != nil {
		return nil // newForges reports it
	}
	out := []string{strings.TrimSpace(string(pem))}
	for _, line := range strings.Split(string(pem), "\n") {
		if line = strings.TrimSpace(line); len(line) >= 16 && !strings.HasPrefix(line, "-----") {
			out = append(out, line)
		}
	}
	return out
}

// Addr is the address the API listens on ("" without an API).
func (d *daemon) Addr() string {
	if d.ln == nil {
		return ""
	}
	return d.ln.Addr().String()
}

// URL is the API's base URL.
func (d *daemon) URL() string {
	a := d.Addr()
	if strings.HasPrefix(a, "[::]") || strings.HasPrefix(a, "0.0.0.0") {
		_, port, _ := net.SplitHostPort(a)
		a = net.JoinHostPort("127.0.0.1", port)
	}
	return "http://" + a
}

// Failed reports a part that stopped by itself.
func (d *daemon) Failed() <-chan error { return d.failed }

// Hurry ends the worker's shutdown grace at once (a second signal): its
// running turns are handed on now.
func (d *daemon) Hurry() {
	if d.server != nil {
		d.server.Hurry()
	}
}

// Stop stops every part. The worker stops taking turns at once and lets its
// running ones finish within its grace while the API shuts down; then the
// reconciler, the heartbeat and the rest stop. Safe to call twice.
func (d *daemon) Stop() {
	d.stopOnce.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		serverStopped := make(chan struct{})
		go func() {
			defer close(serverStopped)
			if d.server != nil {
				d.server.Stop()
			}
		}()
		if d.api != nil {
			_ = d.api.Shutdown(ctx)
		}
		d.served.Wait()
		if d.outbox != nil {
			d.outbox.Stop()
		}
		if d.reconciler != nil {
			d.reconciler.Stop()
		}
		<-serverStopped
		if d.heartbeat != nil {
			d.heartbeat.Stop()
		}
		if d.events != nil {
			d.events.Stop()
		}
		if d.rdb != nil {
			_ = d.rdb.Close()
		}
		if d.embedded != nil {
			d.embedded.Close()
		}
		if d.store != nil {
			_ = d.store.Close()
		}
		if d.lock != nil {
			_ = d.lock.Close()
		}
	})
}
