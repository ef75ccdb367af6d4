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

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/claude"
	"github.com/prchat/prchat/agentsession/codex"
	"github.com/prchat/prchat/agentsession/local"
	"github.com/prchat/prchat/agentsession/openai"
	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/api/dashboard"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/mask"
	"github.com/prchat/prchat/forge/github"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/worker"
)

// The wiring of a daemon's parts, in the order start calls them: openCore
// (every process), startWorker (serve and worker), mountAPI (serve and api)
// and listen.

// openCore opens what every process has: the database, Redis, the queue,
// the live events, and chat's roles with the backends of r; an API
// checks that it is not open to anyone.
func (d *daemon) openCore(ctx context.Context, cfg Config, r role, o options) (err error) {
	if cfg.RedisURL == "" && !r.embedded {
		return errors.New("PRCHAT_REDIS_URL is required: only `prchat serve` can run an embedded Redis")
	}
	if d.store, err = openStore(ctx, cfg, d.log); err != nil {
		return err
	}
	if err := d.openRedis(ctx, cfg); err != nil {
		return err
	}
	// One policy of a turn's life for every part. The embedded Redis lives
	// in this process: no other worker can take a turn.
	d.policy = chat.TurnPolicy{TurnTimeout: cfg.TurnTimeout, SoleWorker: d.embedded != nil}
	d.events = worker.NewEvents(d.rdb, worker.EventsConfig{Logger: d.log})
	if d.queue, err = worker.NewQueue(d.rdb, worker.QueueConfig{Policy: d.policy, Feeds: d.events, Logger: d.log}); err != nil {
		return err
	}
	d.hosts = worker.NewHosts(d.rdb, worker.HostsConfig{TTL: o.heartbeatTTL})
	d.registry = prometheus.NewRegistry()
	d.registry.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	if d.forges, err = newForges(cfg, o.forgeTimeout, d.log); err != nil {
		return err
	}
	if d.workspaces, err = agentsession.NewWorkspaces(agentsession.Config{DataDir: cfg.DataDir, Secrets: cfg.secrets(), Logger: d.log, Credentials: d.forges.credentials, ClonePrivate: cfg.CloneAllowPrivate}); err != nil {
		return err
	}
	masker := mask.New(append(cfg.secrets(), github.KeyFileSecrets(cfg.GitHubAppPrivateKeyFile)...)...)
	backends := o.backends
	if r.worker {
		// Backends given in options come last and replace built-ins of the same name.
		builtIn, err := agentBackends(cfg, d, d.log)
		if err != nil {
			return err
		}
		backends = append(builtIn, backends...)
	}
	if d.domain, err = d.newDomain(cfg, r, o, masker, backends); err != nil {
		return err
	}
	if d.access, err = chat.NewAccess(chat.AccessConfig{Logger: d.log}, d.store); err != nil {
		return err
	}
	if r.api {
		// Refused before a worker's parts start.
		return checkOpenAPI(ctx, cfg, d.access, d.log)
	}
	return nil
}

// openRedis connects to PRCHAT_REDIS_URL, or starts the embedded Redis.
func (d *daemon) openRedis(ctx context.Context, cfg Config) (err error) {
	if cfg.RedisURL != "" {
		d.rdb, err = worker.OpenRedis(ctx, cfg.RedisURL)
		return err
	}
	if d.embedded, err = worker.StartEmbeddedRedis(); err != nil {
		return err
	}
	d.log.InfoContext(ctx, "using the embedded Redis; it keeps nothing across restarts")
	// In-memory connections: TCP loopback's syscalls were much of an idle
	// serve's CPU.
	d.rdb, err = d.embedded.Client(ctx)
	return err
}

// agentBackends are the built-in agent backends of a worker.
func agentBackends(cfg Config, d *daemon, log *slog.Logger) ([]chat.Backend, error) {
	oa, err := openai.New(openai.Config{
		BaseURL:  cfg.OpenAIBaseURL,
		APIKey:   cfg.OpenAIAPIKey,
		Model:    cfg.OpenAIModel,
		Sessions: d.store.AgentSessions(chat.BackendOpenAI),
		// With the stored keys, as the roles learn them.
		Mask:   func(s string) string { return d.domain.masker.MaskString(s) },
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
	return []chat.Backend{local.New(local.Config{}), oa, cl, cx}, nil
}

// newDomain makes chat's roles on the core's parts.
func (d *daemon) newDomain(cfg Config, r role, o options, base *mask.Masker, backends []chat.Backend) (*domain, error) {
	secret, err := cfg.secretKey()
	if err != nil {
		return nil, err
	}
	sealer, err := chat.NewSealer(secret)
	if err != nil {
		return nil, fmt.Errorf("PRCHAT_SECRET_KEY: %w", err)
	}
	roots, err := cfg.roots()
	if err != nil {
		return nil, err
	}
	// A turn settled here wakes this process's outbox to post its answer.
	var observer chat.Observer
	d.outboxWake, observer = worker.Waker(worker.NewMetrics(d.registry, d.queue))
	parts := domainParts{
		store: d.store, queue: d.queue, pinger: d.queue, hosts: d.hosts,
		publisher: d.events, follower: d.events,
		observer: observer, sealer: sealer, log: d.log,
		// Masked: the configured secrets, the App key and the stored keys.
		masker: chat.NewMasker(base, d.store, sealer, d.log, nil),
		// Agent CLI sessions travel in the database, sealed.
		sessionFiles: d.store,
		checkers: map[string]chat.SessionChecker{
			chat.BackendClaudeCode: claude.CheckSessionFile,
			chat.BackendCodex:      codex.CheckSessionFile,
		},
		backends: backends,
		// Registration and review checks read clones, and the dashboard
		// shows their files, wherever the API runs; only a worker prepares
		// run directories.
		clones: d.workspaces, files: d.workspaces,
		limiter: worker.NewRateLimiter(d.rdb),
		// Questions from PR comments, answered back on their forge.
		forges: d.forges.list, replies: worker.NewReplyMetrics(d.registry),
	}
	if r.worker {
		parts.workspaces = d.workspaces
	}
	return newDomain(domainSettings{
		workerID:        cfg.WorkerID,
		policy:          d.policy,
		maxRepairs:      cfg.MaxRepairs,
		maxSessionBytes: cfg.MaxSessionBytes,
		maxCalls:        cfg.MaxCalls,
		maxTokens:       cfg.MaxTokens,
		defaultBackend:  cfg.DefaultBackend,
		providers:       cfg.providers(),
		reposRoots:      roots,
		// With no roots configured, a loopback daemon's own users may
		// register any path; a reachable one takes none.
		anyPath:           len(roots) == 0 && loopback(cfg.Listen),
		allowFileURLs:     cfg.AllowFileURLs,
		cloneAllowPrivate: cfg.CloneAllowPrivate,
		questionsPerRepo:  cfg.RateQuestionsRepo,
		questionsPerToken: cfg.RateQuestionsToken,
		commentPoll:       o.commentPoll,
		commentBackoff:    o.commentBackoff,
		commentLease:      o.commentLease,
		webhookAskers:     cfg.WebhookAskers,
	}, parts)
}

// startWorker starts a worker's parts: its heartbeat, the asynq server
// that runs turns, the reconciler and, where a forge is set up, the
// outbox of webhook replies.
func (d *daemon) startWorker(ctx context.Context, cfg Config, o options) (err error) {
	id := worker.NewIdentity(cfg.WorkerID)
	d.runner = id.Runner()
	if d.reconciler, err = worker.NewReconciler(d.domain.turns, d.queue, d.hosts, worker.ReconcilerConfig{
		Interval: cfg.ReconcileInterval, Grace: o.reconcileGrace, Policy: d.policy, Holder: id.Runner(), Logger: d.log,
		BeforePass: o.beforePass,
	}); err != nil {
		return err
	}
	// A heartbeat that finds its key gone (Redis flushed or restarted) has
	// the reconciler enqueue the lost jobs at once.
	if d.heartbeat, err = worker.NewHeartbeat(d.rdb, worker.HeartbeatConfig{Identity: id, TTL: o.heartbeatTTL, OnLost: d.reconciler.Kick, Logger: d.log}); err != nil {
		return err
	}
	// The long-lived parts outlive ctx (a SIGTERM): Stop stops them, in
	// their order, with the worker's grace.
	run := context.WithoutCancel(ctx)
	if err = d.heartbeat.Start(run); err != nil {
		return err
	}
	if d.server, err = worker.NewServer(d.rdb, d.domain.runner, worker.ServerConfig{
		Identity:          id,
		Concurrency:       cfg.Concurrency,
		TaskCheckInterval: cfg.PollInterval,
		IdlePollInterval:  max(cfg.IdlePollInterval, cfg.PollInterval),
		Policy:            d.policy,
		ShutdownGrace:     cfg.ShutdownGrace,
		RemoveRunDir:      d.workspaces.Remove,
		Events:            d.events,
		Logger:            d.log,
	}); err != nil {
		return err
	}
	if err = d.server.Start(run); err != nil {
		return err
	}
	// The deployment's reconciler (the one holding its lease) reconciles
	// what an earlier run left queued or running, then keeps at it. Its
	// first pass runs in its own loop: the process serves meanwhile (for
	// serve, its API opens at once, whatever the backlog).
	if err = d.reconciler.Start(run); err != nil {
		return err
	}
	// Webhook questions exist only where a webhook or a forge is set up;
	// elsewhere the outbox's poll would be idle work.
	if !d.forges.enabled(cfg) {
		return nil
	}
	if d.outbox, err = worker.NewOutbox(d.domain.webhooks, worker.OutboxConfig{Interval: o.outboxInterval, Wake: d.outboxWake, Logger: d.log}); err != nil {
		return err
	}
	return d.outbox.Start(run)
}

// mountAPI makes the HTTP API: the routes, the dashboard and the webhooks.
func (d *daemon) mountAPI(cfg Config) error {
	sessions, err := chat.NewSessions(d.access, d.store, 0)
	if err != nil {
		return err
	}
	dash, err := dashboard.New(dashboard.Config{
		Access:        d.access,
		Sessions:      sessions,
		SecureCookies: strings.HasPrefix(cfg.PublicURL, "https://"),
		Logger:        d.log,
		AdminQueues:   worker.NewQueueMonitor(d.rdb, "/admin/queues"),
	}, d.domain.dashboard())
	if err != nil {
		return err
	}
	gh, gl := d.forges.webhooks(cfg, d.log)
	d.api, err = api.New(api.Config{Registry: d.registry, Logger: d.log, Access: d.access, RequestRate: cfg.RateRequests, MaxSessionBytes: cfg.MaxSessionBytes,
		Dashboard: dash, GitHub: gh, GitLab: gl, PublicURL: cfg.PublicURL, Sessions: sessions}, d.domain.api())
	return err
}

// listen serves the API (or a worker's probes) on PRCHAT_LISTEN.
func (d *daemon) listen(cfg Config) (err error) {
	if d.ln, err = net.Listen("tcp", cfg.Listen); err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	d.served.Add(1)
	go func() {
		defer d.served.Done()
		if err := d.api.Serve(d.ln); err != nil {
			d.failed <- err
		}
	}()
	return nil
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
