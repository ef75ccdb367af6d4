package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/redis/go-redis/v9"
)

// defaultHeartbeatTTL is the default of HeartbeatConfig.TTL and HostsConfig.TTL.
// Nine seconds (a beat every three) lets the reconciler, passing every 5s,
// hand a crashed worker's turns on within 15s of the crash, while a worker
// must miss three beats in a row to be taken for dead.
const defaultHeartbeatTTL = 9 * time.Second

// HeartbeatConfig configures a Heartbeat.
type HeartbeatConfig struct {
	// Identity is the worker run that beats. Required.
	Identity Identity
	// TTL is how long one beat keeps the worker alive: a worker that stops
	// beating counts as dead this long after its last beat. Default 9s.
	TTL time.Duration
	// Interval is the time between beats. Default TTL/3; at most TTL/2.
	Interval time.Duration
	// CheckInterval is how often the heartbeat checks between beats that
	// its key is still there, and beats at once when it is gone (Redis was
	// flushed or restarted). Default the smaller of Interval and 500ms.
	CheckInterval time.Duration
	// OnLost, if set, is called (in the heartbeat's goroutine; it must not
	// block) when the heartbeat finds that Redis lost its key: Redis was
	// flushed or restarted, and lost the queues' jobs too. prchat reconciles
	// at once then.
	OnLost func()
	// Logger receives failed beats. Default: discard.
	Logger *slog.Logger
}

func (c HeartbeatConfig) withDefaults() HeartbeatConfig {
	c.TTL = cmp.Or(c.TTL, defaultHeartbeatTTL)
	c.Interval = cmp.Or(c.Interval, c.TTL/3)
	c.CheckInterval = cmp.Or(c.CheckInterval, min(c.Interval, 500*time.Millisecond))
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
	case c.CheckInterval <= 0 || c.CheckInterval > c.Interval:
		return fmt.Errorf("heartbeat check interval %v must be positive and at most the interval %v", c.CheckInterval, c.Interval)
	}
	return nil
}

// delScript deletes KEYS[1] if it holds ARGV[1].
var delScript = redis.NewScript(`if redis.call("GET", KEYS[1]) == ARGV[1] then return redis.call("DEL", KEYS[1]) end return 0`)

// Heartbeat tells other processes that a worker run is alive: every
// Interval it sets the key prchat:worker:<id> to the run's instance id with
// a TTL, and prchat:worker-known:<id> to the same for a day, so that Hosts
// tells a worker that stopped beating from one whose keys a flush took.
// Between beats it checks every CheckInterval that its key is there and
// writes it again at once when it is not. Hosts reads these keys.
type Heartbeat struct {
	rdb redis.UniversalClient
	cfg HeartbeatConfig
	log *slog.Logger
	lc  *lifecycle
	ctx context.Context // Start's, without its cancel, for Stop's cleanup
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
	return &Heartbeat{rdb: rdb, cfg: cfg, log: cfg.Logger.With(slog.String("worker", cfg.Identity.ID)), lc: newLifecycle("worker heartbeat")}, nil
}

// Runner is the runner id of the beating worker run.
func (h *Heartbeat) Runner() string { return h.cfg.Identity.Runner() }

// Start sends the first beat, returning its error, and keeps beating in the
// background until Stop or until ctx ends (then the key expires after TTL).
func (h *Heartbeat) Start(ctx context.Context) error {
	return h.lc.start(ctx, func(ctx context.Context) error {
		if err := h.beat(ctx); err != nil {
			return err
		}
		h.ctx = context.WithoutCancel(ctx)
		h.log.InfoContext(ctx, "heartbeat started", slog.String("runner", h.Runner()), slog.Duration("ttl", h.cfg.TTL))
		return nil
	}, h.loop)
}

func (h *Heartbeat) loop(ctx context.Context) {
	t := time.NewTicker(h.cfg.CheckInterval)
	defer t.Stop()
	last := time.Now()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		if time.Since(last) < h.cfg.Interval-h.cfg.CheckInterval/2 {
			n, err := h.rdb.Exists(ctx, heartbeatKey(h.cfg.Identity.ID)).Result()
			if err != nil || n > 0 {
				continue // a failed check is retried at the next tick or beat
			}
		}
		lost, err := h.beatLost(ctx)
		if err != nil {
			if ctx.Err() == nil {
				h.log.WarnContext(ctx, "heartbeat failed", slog.Any("err", err))
			}
			continue
		}
		last = time.Now()
		if lost {
			h.log.WarnContext(ctx, "heartbeat key was gone (Redis flushed or restarted); written again")
			if h.cfg.OnLost != nil {
				h.cfg.OnLost()
			}
		}
	}
}

// beat sets the keys, warning when another run of the same worker id held
// the heartbeat.
func (h *Heartbeat) beat(ctx context.Context) error {
	_, err := h.beatLost(ctx)
	return err
}

// beatLost is beat, and reports whether the heartbeat key was gone.
func (h *Heartbeat) beatLost(ctx context.Context) (bool, error) {
	id := h.cfg.Identity
	pipe := h.rdb.TxPipeline()
	prevCmd := pipe.SetArgs(ctx, heartbeatKey(id.ID), id.Instance, redis.SetArgs{TTL: h.cfg.TTL, Get: true})
	pipe.Set(ctx, knownKey(id.ID), id.Instance, knownTTL)
	if _, err := pipe.Exec(ctx); err != nil && !errors.Is(err, redis.Nil) {
		return false, fmt.Errorf("heartbeat of worker %s: %w", id.ID, err)
	}
	prev := prevCmd.Val()
	if prev != "" && prev != id.Instance {
		h.log.WarnContext(ctx, "another run of this worker id was beating; two processes may share one PRCHAT_WORKER_ID",
			slog.String("instance", id.Instance), slog.String("other_instance", prev))
	}
	return prev == "", nil
}

// Stop stops beating and deletes the heartbeat if it still names this run,
// so the worker counts as dead at once. It is safe to call twice, and before
// Start.
func (h *Heartbeat) Stop() {
	h.lc.stop(nil, func() {
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
