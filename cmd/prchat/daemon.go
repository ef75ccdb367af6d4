package main

import (
	"cmp"
	"context"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/openai"
	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/store"
	"github.com/prchat/prchat/worker"
)

var _ openai.Sessions = (*store.AgentSessions)(nil)

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
	// forgeTimeout bounds each call of a forge's API (default 30 s).
	forgeTimeout time.Duration
	// beforePass runs before each pass of a worker's reconciler (a test
	// holds its pass at start there).
	beforePass func()
}

// daemon is a running prchat process. start fills it in, part by part
// (wire.go).
type daemon struct {
	log        *slog.Logger
	store      *store.Store
	embedded   *worker.EmbeddedRedis
	rdb        redis.UniversalClient
	queue      *worker.Queue
	events     *worker.Events
	hosts      *worker.Hosts
	domain     *domain
	api        *api.Server // the API, or the probes of a worker alone
	ln         net.Listener
	heartbeat  *worker.Heartbeat
	server     *worker.Server
	reconciler *worker.Reconciler
	outbox     *worker.Outbox
	// outboxWake wakes the outbox when a turn settles here.
	outboxWake <-chan struct{}
	runner     string
	// lock is the data directory's lock file (lockDataDir), if taken.
	lock *os.File

	// What the parts share while they are wired.
	policy     chat.TurnPolicy
	registry   *prometheus.Registry
	forges     forges
	workspaces *agentsession.Workspaces
	access     *chat.Access

	failed   chan error
	stopOnce sync.Once
	served   sync.WaitGroup
}

// start starts the parts of r and returns once they run: the core every
// process has (store, Redis, queue, the chat service), a worker alone's
// probes and their listener, a worker's parts, then the API and its
// listener.
func start(ctx context.Context, cfg Config, r role, o options) (_ *daemon, err error) {
	d := &daemon{log: cmp.Or(o.logger, slog.New(slog.DiscardHandler)), failed: make(chan error, 2)}
	defer func() {
		if err != nil {
			d.Stop()
		}
	}()
	if err := d.openCore(ctx, cfg, r, o); err != nil {
		return nil, err
	}
	if !r.api {
		// A worker alone serves its liveness and metrics from before its
		// parts start (its reconciler's first pass, in the background,
		// takes seconds with many turns pending): a liveness probe must not
		// kill it meanwhile.
		d.api = api.NewProbe(api.Config{Registry: d.registry, Logger: d.log})
		if err := d.listen(cfg); err != nil {
			return nil, err
		}
	}
	if r.worker {
		if err := d.startWorker(ctx, cfg, o); err != nil {
			return nil, err
		}
	}
	if !r.api {
		return d, nil
	}
	if err := d.mountAPI(cfg); err != nil {
		return nil, err
	}
	return d, d.listen(cfg)
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
