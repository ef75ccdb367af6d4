package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// HeartbeatConfig configures a Heartbeat.
type HeartbeatConfig struct {
	// Identity is the worker run that beats. Required.
	Identity Identity
	// TTL is how long one beat keeps the worker alive: a worker that stops
	// beating counts as dead this long after its last beat. Default 15s.
	TTL time.Duration
	// Interval is the time between beats. Default TTL/3; at most TTL/2.
	Interval time.Duration
	// Logger receives failed beats. Default: discard.
	Logger *slog.Logger
}

func (c HeartbeatConfig) withDefaults() HeartbeatConfig {
	c.TTL = cmp.Or(c.TTL, 15*time.Second)
	c.Interval = cmp.Or(c.Interval, c.TTL/3)
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c HeartbeatConfig) validate() error {
	if err := c.Identity.validate(); err != nil {
		return err
	}
	switch {
	case c.TTL < 10*time.Millisecond:
		return fmt.Errorf("heartbeat TTL %v is under 10ms", c.TTL)
	case c.Interval <= 0 || c.Interval > c.TTL/2:
		return fmt.Errorf("heartbeat interval %v must be positive and at most half the TTL %v", c.Interval, c.TTL)
	}
	return nil
}

// delScript deletes KEYS[1] if it holds ARGV[1].
var delScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Heartbeat tells other processes that a worker run is alive: every
// Interval it sets the key prchat:worker:<id> to the run's instance id with
// a TTL. Hosts reads these keys.
type Heartbeat struct {
	rdb redis.UniversalClient
	cfg HeartbeatConfig
	log *slog.Logger

	mu      sync.Mutex
	started bool
	stopped bool
	ctx     context.Context // Start's, without its cancel, for Stop's cleanup
	cancel  context.CancelFunc
	done    chan struct{}
	stop    sync.Once
}

// NewHeartbeat returns a Heartbeat for cfg.Identity on rdb.
func NewHeartbeat(rdb redis.UniversalClient, cfg HeartbeatConfig) (*Heartbeat, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker heartbeat config: %w", err)
	}
	if rdb == nil {
		return nil, errors.New("worker heartbeat: a Redis client is required")
	}
	return &Heartbeat{rdb: rdb, cfg: cfg, log: cfg.Logger.With(slog.String("worker", cfg.Identity.ID))}, nil
}

// Runner is the runner id of the beating worker run.
func (h *Heartbeat) Runner() string { return h.cfg.Identity.Runner() }

// Start sends the first beat, returning its error, and keeps beating in the
// background until Stop or until ctx ends (then the key expires after TTL).
func (h *Heartbeat) Start(ctx context.Context) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	switch {
	case h.stopped:
		return errors.New("worker heartbeat: stopped")
	case h.started:
		return errors.New("worker heartbeat: already started")
	}
	if err := h.beat(ctx); err != nil {
		return err
	}
	h.started = true
	h.ctx = context.WithoutCancel(ctx)
	ctx, h.cancel = context.WithCancel(ctx)
	h.done = make(chan struct{})
	go h.loop(ctx)
	h.log.InfoContext(ctx, "heartbeat started", slog.String("runner", h.Runner()), slog.Duration("ttl", h.cfg.TTL))
	return nil
}

func (h *Heartbeat) loop(ctx context.Context) {
	defer close(h.done)
	t := time.NewTicker(h.cfg.Interval)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if err := h.beat(ctx); err != nil && ctx.Err() == nil {
			h.log.WarnContext(ctx, "heartbeat failed", slog.Any("err", err))
		}
	}
}

// beat sets the key, warning when another run of the same worker id held it.
func (h *Heartbeat) beat(ctx context.Context) error {
	id := h.cfg.Identity
	prev, err := h.rdb.SetArgs(ctx, heartbeatKey(id.ID), id.Instance, redis.SetArgs{TTL: h.cfg.TTL, Get: true}).Result()
	if err != nil && !errors.Is(err, redis.Nil) {
		return fmt.Errorf("heartbeat of worker %s: %w", id.ID, err)
	}
	if prev != "" && prev != id.Instance {
		h.log.WarnContext(ctx, "another run of this worker id was beating; two processes may share one PRCHAT_WORKER_ID",
			slog.String("instance", id.Instance), slog.String("other_instance", prev))
	}
	return nil
}

// Stop stops beating and deletes the key if it still names this run, so the
// worker counts as dead at once. It is safe to call twice, and before Start.
func (h *Heartbeat) Stop() {
	h.stop.Do(func() {
		h.mu.Lock()
		started := h.started
		h.stopped = true // a Heartbeat does not start again
		h.mu.Unlock()
		if !started {
			return
		}
		h.cancel()
		<-h.done
		ctx, cancel := context.WithTimeout(h.ctx, 5*time.Second)
		defer cancel()
		id := h.cfg.Identity
		if err := delScript.Run(ctx, h.rdb, []string{heartbeatKey(id.ID)}, id.Instance).Err(); err != nil {
			h.log.WarnContext(ctx, "delete heartbeat", slog.Any("err", err))
			return
		}
		h.log.InfoContext(ctx, "heartbeat stopped", slog.String("runner", h.Runner()))
	})
}
