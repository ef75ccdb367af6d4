package worker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/worker/workertest"
)

// env is what most tests need: a Redis of their own and the parts on it.
type env struct {
	rdb   redis.UniversalClient
	queue *Queue
	hosts *Hosts
}

func testLogger(t testing.TB) *slog.Logger {
	if os.Getenv("PRCHAT_TEST_LOG") == "" {
		return slog.New(slog.DiscardHandler)
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With(slog.String("test", t.Name()))
}

func setup(t *testing.T) env {
	return setupQueue(t, QueueConfig{})
}

func setupQueue(t *testing.T, cfg QueueConfig) env {
	t.Helper()
	rdb, err := NewRedisClient(workertest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	cfg.Logger = testLogger(t)
	q, err := NewQueue(rdb, cfg)
	if err != nil {
		t.Fatal(err)
	}
	return env{rdb: rdb, queue: q, hosts: NewHosts(rdb, HostsConfig{})}
}

// startServer starts a Server for worker id that runs turns with runner,
// stopped when the test ends.
func (e env) startServer(t *testing.T, id string, runner TurnRunner, tweak func(*ServerConfig)) *Server {
	t.Helper()
	cfg := ServerConfig{
		Identity:                 NewIdentity(id),
		Concurrency:              2,
		DelayedTaskCheckInterval: 50 * time.Millisecond,
		Policy:                   chat.TurnPolicy{JobRetry: chat.Backoff{First: 20 * time.Millisecond, Max: 50 * time.Millisecond}},
		ShutdownGrace:            time.Second,
		Logger:                   testLogger(t),
	}
	if tweak != nil {
		tweak(&cfg)
	}
	s, err := NewServer(e.rdb, runner, cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(s.Stop)
	return s
}

// startHeartbeat makes identity alive until the test ends.
func (e env) startHeartbeat(t *testing.T, id Identity) *Heartbeat {
	t.Helper()
	h, err := NewHeartbeat(e.rdb, HeartbeatConfig{Identity: id, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(h.Stop)
	return h
}

// crashed makes id a worker run that beat and stopped beating (as one that
// crashed, or stopped, does): Redis remembers it, without a heartbeat.
func (e env) crashed(t *testing.T, id Identity) {
	t.Helper()
	h, err := NewHeartbeat(e.rdb, HeartbeatConfig{Identity: id, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	h.Stop()
}

// tasks returns the turn's jobs, failing the test on error.
func (e env) tasks(t *testing.T, turnID string) []Task {
	t.Helper()
	ts, err := e.queue.Tasks(t.Context(), turnID)
	if err != nil {
		t.Fatal(err)
	}
	return ts
}

// where lists a turn's jobs as "<task id>@<queue>:<state>", sorted.
func (e env) where(t *testing.T, turnID string) []string {
	t.Helper()
	var out []string
	for _, task := range e.tasks(t, turnID) {
		out = append(out, fmt.Sprintf("%s@%s:%s", task.ID, task.Queue, task.State))
	}
	slices.Sort(out)
	return out
}

// call is one TurnRunner.Run.
type call struct {
	turnID, runner string
}

// recorder is a TurnRunner that records its calls and runs fn (nil = return
// nil at once).
type recorder struct {
	fn func(ctx context.Context, turnID string, n int) error

	mu       sync.Mutex
	calls    []call
	released int
	seen     chan call
}

func newRecorder(fn func(ctx context.Context, turnID string, n int) error) *recorder {
	return &recorder{fn: fn, seen: make(chan call, 1000)}
}

func (r *recorder) Run(ctx context.Context, turnID, runner string) error {
	r.mu.Lock()
	r.calls = append(r.calls, call{turnID, runner})
	n := 0
	for _, c := range r.calls {
		if c.turnID == turnID {
			n++
		}
	}
	r.mu.Unlock()
	r.seen <- call{turnID, runner}
	if r.fn == nil {
		return nil
	}
	return r.fn(ctx, turnID, n)
}

// Release counts the turns handed on.
func (r *recorder) Release(context.Context, string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.released++
	return nil
}

func (r *recorder) Calls() []call {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.calls)
}

func (r *recorder) count(turnID string) int {
	n := 0
	for _, c := range r.Calls() {
		if c.turnID == turnID {
			n++
		}
	}
	return n
}

// next waits for the next call.
func (r *recorder) next(t *testing.T) call {
	t.Helper()
	return chattest.Receive(t, "the next turn to run", r.seen)
}

var errBoom = errors.New("model endpoint answered 502")
