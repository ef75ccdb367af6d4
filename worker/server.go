package worker

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
)

// TurnRunner runs one turn; implemented by *chat.Runner.
//
// Run returns nil when the turn needs no more runs (it settled it, found it
// settled, or another live run holds it) and an error when the turn should
// be run again (transient trouble, this worker shutting down).
type TurnRunner interface {
	Run(ctx context.Context, turnID, runner string) error
	// Release hands a turn this process runs but cannot finish to the next
	// run at once (it goes back to queued); see chat.Runner.Release.
	Release(ctx context.Context, turnID string) error
}

// DefaultTaskCheckInterval is how long a worker whose queues just emptied
// waits for a wake-up before it looks at them again. A turn enqueued by a
// Queue wakes it at once; 5ms bounds the wait of a job whose wake-up was
// lost at one or two Redis script calls per look.
const DefaultTaskCheckInterval = 5 * time.Millisecond

// ServerConfig configures a Server.
type ServerConfig struct {
	// Identity is the worker run: its ID names the host queue consumed
	// (host:<id>), its Runner is passed to the TurnRunner. Required.
	Identity Identity
	// Concurrency is how many turns run at once. Default 4.
	Concurrency int
	// TaskCheckInterval is how long a worker whose queues just emptied
	// waits before it looks at them again, unless a wake-up (a job
	// enqueued by a Queue, see WakeChannel) ends the wait at once. Default
	// 5ms; every look is one Redis script call per queue consumed.
	TaskCheckInterval time.Duration
	// IdlePollInterval replaces TaskCheckInterval once the queues have
	// been empty for a second: an idle worker looks this often, and at
	// once on a wake-up. It bounds the wait of a job whose wake-up was
	// lost (the subscription down) or never sent (a job that asynq itself
	// moved back to pending). Default 1s, at most 10s.
	IdlePollInterval time.Duration
	// Policy is the turns' policy, as chat.Turns and chat.Runner have it. A sole
	// worker (prchat serve's, on its embedded Redis), to which chat routes
	// no turn by host, consumes the shared queue alone: one queue is one
	// script call less per poll and per job. Its JobRetry spaces the
	// retries of a failed job.
	Policy chat.TurnPolicy
	// DelayedTaskCheckInterval is how often jobs waiting for a retry are
	// made ready. Default 500ms.
	DelayedTaskCheckInterval time.Duration
	// ShutdownGrace is how long Stop lets running turns finish
	// (PRCHAT_SHUTDOWN_GRACE); then it hands the rest on to a live worker at
	// once (each goes back to queued, with a job on the shared queue) and
	// cancels their runs. Hurry ends the grace early. Default 10s.
	ShutdownGrace time.Duration
	// RemoveRunDir, if set, removes a run directory on this worker's disk:
	// the server runs the rundir:remove jobs of its host queue with it.
	RemoveRunDir func(ctx context.Context, dir string) error
	// Events, if set, are the Events this process publishes the turns'
	// events with: the publish of a turn's final events in a job's handler
	// then rides with the script call that ends the job, one round trip to
	// Redis for both.
	Events *Events
	// Logger receives the server's and asynq's logs. Default: discard.
	Logger *slog.Logger
}

func (c ServerConfig) withDefaults() ServerConfig {
	c.Concurrency = cmp.Or(c.Concurrency, 4)
	c.TaskCheckInterval = cmp.Or(c.TaskCheckInterval, DefaultTaskCheckInterval)
	c.IdlePollInterval = cmp.Or(c.IdlePollInterval, DefaultIdlePollInterval)
	c.DelayedTaskCheckInterval = cmp.Or(c.DelayedTaskCheckInterval, 500*time.Millisecond)
	c.Policy = c.Policy.WithDefaults()
	c.ShutdownGrace = cmp.Or(c.ShutdownGrace, 10*time.Second)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c ServerConfig) validate() error {
	if err := c.Identity.validate(); err != nil {
		return err
	}
	switch {
	case c.Concurrency < 1 || c.Concurrency > 1000:
		return fmt.Errorf("worker concurrency %d is outside 1..1000", c.Concurrency)
	case c.TaskCheckInterval < time.Millisecond:
		return fmt.Errorf("task check interval %v is under 1ms", c.TaskCheckInterval)
	case c.IdlePollInterval < c.TaskCheckInterval || c.IdlePollInterval > 10*time.Second:
		return fmt.Errorf("idle poll interval %v is outside the task check interval %v..10s", c.IdlePollInterval, c.TaskCheckInterval)
	case c.DelayedTaskCheckInterval < 10*time.Millisecond:
		return fmt.Errorf("delayed task check interval %v is under 10ms", c.DelayedTaskCheckInterval)
	case c.ShutdownGrace <= 0:
		return fmt.Errorf("shutdown grace %v must be positive", c.ShutdownGrace)
	}
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("worker server: %w", err)
	}
	return nil
}

// Server runs the turn jobs of one worker: it consumes the worker's own
// queue host:<id> first and the shared queue "turns" when that is empty, and
// hands each turn:run job to the TurnRunner.
type Server struct {
	rdb    redis.UniversalClient
	runner TurnRunner
	cfg    ServerConfig
	log    *slog.Logger

	lc       *lifecycle
	queue    *Queue             // for the jobs of turns handed on
	srv      *asynq.Server      // set by Start
	poller   *idlePoller        // asynq's client; set by Start
	cancel   context.CancelFunc // of the handlers' base context
	hurry    chan struct{}      // closed by Hurry
	hurried  sync.Once
	mu       sync.Mutex
	draining bool
	running  map[string]int // turn id -> handlers running it
	handlers sync.WaitGroup
}

// NewServer returns a Server that runs turns with runner.
func NewServer(rdb redis.UniversalClient, runner TurnRunner, cfg ServerConfig) (*Server, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker server config: %w", err)
	}
	if rdb == nil || runner == nil {
		return nil, errors.New("worker server: a Redis client and a TurnRunner are required")
	}
	queue, err := NewQueue(rdb, QueueConfig{Policy: cfg.Policy, Logger: cfg.Logger})
	if err != nil {
		return nil, err
	}
	return &Server{
		rdb:     rdb,
		runner:  runner,
		cfg:     cfg,
		log:     cfg.Logger.With(slog.String("worker", cfg.Identity.ID)),
		lc:      newLifecycle("worker server"),
		queue:   queue,
		hurry:   make(chan struct{}),
		running: map[string]int{},
	}, nil
}

// Runner is the runner id the Server passes to the TurnRunner.
func (s *Server) Runner() string { return s.cfg.Identity.Runner() }

// queues are the asynq queues the server consumes with their priorities:
// its host queue before the shared one, or the shared one alone for a
// sole worker.
func (s *Server) queues() map[string]int {
	if s.cfg.Policy.SoleWorker {
		return map[string]int{SharedQueue: 1}
	}
	return map[string]int{HostQueue(s.cfg.Identity.ID): 2, SharedQueue: 1}
}

// pollOrder is the order in which asynq polls the queues (strict
// priority).
func (s *Server) pollOrder() []string {
	if s.cfg.Policy.SoleWorker {
		return []string{SharedQueue}
	}
	return []string{HostQueue(s.cfg.Identity.ID), SharedQueue}
}

// Start starts taking jobs. Handlers run under a context that keeps ctx's
// values but not its cancellation; when ctx ends, the Server stops as if
// Stop were called.
func (s *Server) Start(ctx context.Context) error {
	return s.lc.start(ctx, s.begin, func(ctx context.Context) {
		<-ctx.Done()
		go s.Stop() // ctx ended, or Stop began: one Stop does the work
	})
}

// begin starts the asynq server.
func (s *Server) begin(ctx context.Context) error {
	base, cancel := context.WithCancel(context.WithoutCancel(ctx))
	// asynq polls through the idlePoller, which does the waiting between
	// polls (TaskCheckInterval, IdlePollInterval) and ends it on a wake-up.
	poller := newIdlePoller(s.rdb, s.pollOrder(), s.cfg.TaskCheckInterval, s.cfg.IdlePollInterval, s.log)
	if s.cfg.Events != nil {
		poller.finals = s.cfg.Events.finals
		poller.finals.on.Store(true)
	}
	poller.listen()
	// The script that takes a job ahead runs in pipelines, which cannot
	// load it: loaded now, and again whenever Redis answers NOSCRIPT.
	if err := prefetchAny.Load(ctx, s.rdb).Err(); err != nil {
		s.log.DebugContext(ctx, "load the prefetch script", slog.Any("err", err))
	}
	srv := asynq.NewServerFromRedisClient(poller, asynq.Config{
		Concurrency:              s.cfg.Concurrency,
		BaseContext:              func() context.Context { return base },
		TaskCheckInterval:        asynqCheckInterval,
		DelayedTaskCheckInterval: s.cfg.DelayedTaskCheckInterval,
		RetryDelayFunc:           s.retryDelay,
		// A run that ended because the database was unreachable has not
		// failed: its job is retried without counting towards MaxRetry,
		// so an outage never archives it.
		IsFailure:      func(err error) bool { return !chat.Unavailable(err) },
		Queues:         s.queues(),
		StrictPriority: true,
		// Stop waits out the grace itself and cancels what still runs; the
		// handlers then return at once.
		ShutdownTimeout: handlerExit,
		Logger:          asynqLogger{s.log.With(slog.String("component", "asynq"))},
		LogLevel:        asynqLevel(s.log),
		HealthCheckFunc: func(err error) {
			if err != nil {
				s.log.Warn("redis health check failed", slog.Any("err", err))
			}
		},
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(TaskType, s.handle)
	mux.HandleFunc(RemoveRunDirType, s.removeRunDir)
	if err := srv.Start(mux); err != nil {
		cancel()
		poller.release()
		return fmt.Errorf("start worker server: %w", err)
	}
	s.srv, s.cancel, s.poller = srv, cancel, poller
	s.log.InfoContext(ctx, "worker server started",
		slog.String("runner", s.Runner()), slog.Int("concurrency", s.cfg.Concurrency),
		slog.Any("queues", slices.Sorted(maps.Keys(s.queues()))),
		slog.Duration("poll_interval", s.cfg.TaskCheckInterval), slog.Duration("idle_poll_interval", s.cfg.IdlePollInterval))
	return nil
}

// retryDelay is asynq's wait before the retry of a job that failed n times
// before (0 for the first retry): the policy's JobRetry.
func (s *Server) retryDelay(n int, _ error, _ *asynq.Task) time.Duration {
	return s.cfg.Policy.JobRetry.Delay(n + 1)
}

// handle runs one turn:run job.
func (s *Server) handle(ctx context.Context, t *asynq.Task) error {
	var p payload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.TurnID == "" {
		id, _ := asynq.GetTaskID(ctx)
		s.log.ErrorContext(ctx, "malformed turn job; archived", slog.String("task", id), slog.Int("payload_bytes", len(t.Payload())))
		return fmt.Errorf("turn job %s: payload is not {\"turn_id\": ...}: %w", id, asynq.SkipRetry)
	}
	if !s.track(p.TurnID) {
		return fmt.Errorf("turn %s: worker is shutting down", p.TurnID)
	}
	defer s.untrack(p.TurnID)

	taskID, _ := asynq.GetTaskID(ctx)
	queue, _ := asynq.GetQueueName(ctx)
	retried, _ := asynq.GetRetryCount(ctx)
	log := s.log.With(slog.String("turn", p.TurnID), slog.String("task", taskID), slog.String("queue", queue))
	log.DebugContext(ctx, "turn job started", slog.Int("retried", retried))
	start := time.Now()
	err := s.runner.Run(ctx, p.TurnID, s.Runner())
	if err != nil {
		log.WarnContext(ctx, "turn job failed; it will be retried", slog.Any("err", err), slog.Int("retried", retried), slog.Duration("took", time.Since(start)))
		return err
	}
	log.DebugContext(ctx, "turn job done", slog.Duration("took", time.Since(start)))
	return nil
}

// removeRunDir runs one rundir:remove job.
func (s *Server) removeRunDir(ctx context.Context, t *asynq.Task) error {
	var p removePayload
	if err := json.Unmarshal(t.Payload(), &p); err != nil || p.Dir == "" {
		return fmt.Errorf("remove run directory: payload is not {\"dir\": ...}: %w", asynq.SkipRetry)
	}
	if s.cfg.RemoveRunDir == nil {
		return fmt.Errorf("remove run directory: this worker keeps no run directories: %w", asynq.SkipRetry)
	}
	return s.cfg.RemoveRunDir(ctx, p.Dir)
}

// handlerExit is how long Stop waits for handlers to return once their
// runs are cancelled.
const handlerExit = 5 * time.Second

// track counts a running handler of a turn, unless the Server is draining.
func (s *Server) track(turnID string) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.draining {
		return false
	}
	s.handlers.Add(1)
	s.running[turnID]++
	return true
}

func (s *Server) untrack(turnID string) {
	s.mu.Lock()
	if s.running[turnID]--; s.running[turnID] <= 0 {
		delete(s.running, turnID)
	}
	s.mu.Unlock()
	s.handlers.Done()
}

// Hurry ends Stop's grace at once (a second SIGTERM): the running turns are
// handed on now. Safe to call at any time and more than once.
func (s *Server) Hurry() { s.hurried.Do(func() { close(s.hurry) }) }

// Stop stops taking jobs at once, lets running turns finish for
// ShutdownGrace (or until Hurry), then hands each turn still running to a
// live worker at once: the turn goes back to queued and gets a job on the
// shared queue, and its run here is cancelled (fenced off by the next
// claim). Stop returns once the handlers have returned. It is safe to call
// twice, and before Start.
func (s *Server) Stop() {
	s.lc.stop(nil, func() {
		s.poller.release() // asynq's Stop waits for a poll held under way
		s.srv.Stop()       // take no more jobs
		s.poller.putBackAll()
		s.mu.Lock()
		s.draining = true
		s.mu.Unlock()
		done := make(chan struct{})
		go func() { s.handlers.Wait(); close(done) }()
		grace := time.NewTimer(s.cfg.ShutdownGrace)
		defer grace.Stop()
		select {
		case <-done:
		case <-grace.C:
			s.handOn()
		case <-s.hurry:
			s.handOn()
		}
		s.cancel()
		s.srv.Shutdown()
		select {
		case <-done:
		case <-time.After(handlerExit):
			s.log.Warn("turn handlers still running after shutdown")
		}
		// asynq ended every job it will end: what no end took goes now.
		s.poller.finals.flushAll()
		s.log.Info("worker server stopped", slog.String("runner", s.Runner()))
	})
}

// handOn hands every turn still running here to the next run.
func (s *Server) handOn() {
	s.mu.Lock()
	turns := slices.Sorted(maps.Keys(s.running))
	s.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), handlerExit)
	defer cancel()
	for _, id := range turns {
		if err := s.runner.Release(ctx, id); err != nil {
			s.log.WarnContext(ctx, "hand turn on", slog.String("turn", id), slog.Any("err", err))
			continue
		}
		if err := s.queue.HandOn(ctx, id); err != nil {
			// The turn is queued: a reconciler enqueues it.
			s.log.WarnContext(ctx, "enqueue handed-on turn", slog.String("turn", id), slog.Any("err", err))
			continue
		}
		s.log.InfoContext(ctx, "turn handed on to a live worker", slog.String("turn", id))
	}
}
