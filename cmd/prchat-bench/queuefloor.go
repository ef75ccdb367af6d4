package main

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime/pprof"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/worker"
)

// The queues of the asynq floor: a host queue that stays empty before the
// one its tasks are on, as a worker consumes its own queue before the
// shared one. No prchat worker consumes them (their names are not
// prchat's), and the bench deletes them when done.
const (
	queueFloorHost   = "bench:floor-host"
	queueFloorShared = "bench:floor"
	queueFloorType   = "bench:noop"
)

// queueFloorResult is what a run of the asynq floor measured.
type queueFloorResult struct {
	tasks  int64         // tasks handled in the window
	window time.Duration // the window
	// from and until are the usage at the window's ends.
	from, until usage
}

func (r queueFloorResult) perSecond() float64 {
	if r.window <= 0 {
		return 0
	}
	return float64(r.tasks) / r.window.Seconds()
}

// runQueueFloor measures asynq by itself on rdb: an asynq server set up as
// a prchat worker is (the same concurrency, poll interval, delayed-task
// interval and strict priority of an empty host queue over the one with
// the tasks) with a handler that does nothing, draining a queue that
// enqueuers loops keep backlog tasks deep, each task made as a turn's job
// is (a task id, a timeout, a retry allowance). sample, if set, reads the
// usage at the window's ends. It measures for dur after warm, and deletes
// its queues when done; what fails then is written to logs.
func runQueueFloor(ctx context.Context, rdb redis.UniversalClient, logs io.Writer, concurrency, enqueuers int, backlog int64, warm, dur time.Duration, sample func(context.Context) usage) (queueFloorResult, error) {
	var handled, enqueued atomic.Int64
	srv := asynq.NewServerFromRedisClient(rdb, asynq.Config{
		Concurrency:              concurrency,
		TaskCheckInterval:        worker.DefaultTaskCheckInterval,
		DelayedTaskCheckInterval: 500 * time.Millisecond,
		Queues:                   map[string]int{queueFloorHost: 2, queueFloorShared: 1},
		StrictPriority:           true,
		ShutdownTimeout:          5 * time.Second,
		Logger:                   &floorLog{w: logs},
		LogLevel:                 asynq.WarnLevel,
	})
	mux := asynq.NewServeMux()
	mux.HandleFunc(queueFloorType, func(context.Context, *asynq.Task) error {
		handled.Add(1)
		return nil
	})
	client := asynq.NewClientFromRedisClient(rdb)
	insp := asynq.NewInspectorFromRedisClient(rdb)
	defer func() {
		// The queues, then what asynq keeps of them beside (its counters).
		ctx := context.WithoutCancel(ctx)
		for _, q := range []string{queueFloorShared, queueFloorHost} {
			if err := insp.DeleteQueue(q, true); err != nil && !errors.Is(err, asynq.ErrQueueNotFound) {
				fmt.Fprintf(logs, "prchat-bench: delete the asynq floor's queue %s: %v\n", q, err)
			}
			iter := rdb.Scan(ctx, 0, "asynq:{"+q+"}:*", 100).Iterator()
			for iter.Next(ctx) {
				rdb.Del(ctx, iter.Val())
			}
		}
	}()
	body, _ := json.Marshal(map[string]string{"turn_id": "bench-floor"})
	timeout := chat.TurnPolicy{}.Windows().Job
	enqueue := func(ctx context.Context) error {
		for enqueued.Load()-handled.Load() >= backlog {
			if err := chat.Sleep(ctx, 2*time.Millisecond); err != nil {
				return err
			}
		}
		var id [16]byte
		_, _ = rand.Read(id[:])
		enqueued.Add(1)
		_, err := client.EnqueueContext(ctx, asynq.NewTask(queueFloorType, body),
			asynq.TaskID(hex.EncodeToString(id[:])), asynq.Queue(queueFloorShared), asynq.MaxRetry(3), asynq.Timeout(timeout))
		return err
	}
	// The backlog is full before the server starts.
	for range backlog {
		if err := enqueue(ctx); err != nil {
			return queueFloorResult{}, fmt.Errorf("asynq floor: enqueue: %w", err)
		}
	}
	if err := srv.Start(mux); err != nil {
		return queueFloorResult{}, fmt.Errorf("asynq floor: start the server: %w", err)
	}
	defer srv.Shutdown()

	var r queueFloorResult
	var t0 time.Time
	var n0 int64
	marks := window(ctx, warm, dur, func() error {
		t0, n0 = time.Now(), handled.Load()
		if sample != nil {
			r.from = sample(ctx)
		}
		return nil
	}, func() error {
		r.window, r.tasks = time.Since(t0), handled.Load()-n0
		if sample != nil {
			r.until = sample(ctx)
		}
		return nil
	})
	load := runLoad(ctx, enqueuers, warm, dur, 0, enqueue)
	if err := <-marks; err != nil {
		return r, fmt.Errorf("asynq floor: %w", err)
	}
	if load.errs > 0 {
		return r, fmt.Errorf("asynq floor: %d enqueues failed, first: %w", load.errs, load.firstErr)
	}
	return r, nil
}

// floorLog writes the first warnings and errors of the asynq floor's
// server to w, and counts the rest.
type floorLog struct {
	w     io.Writer
	mu    sync.Mutex
	lines int
}

func (l *floorLog) log(level string, args ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.lines++; l.lines <= forwardedLogLines {
		fmt.Fprintf(l.w, "[asynq floor] %s: %s\n", level, fmt.Sprint(args...))
	}
}

func (l *floorLog) Debug(...any)      {}
func (l *floorLog) Info(...any)       {}
func (l *floorLog) Warn(args ...any)  { l.log("warn", args...) }
func (l *floorLog) Error(args ...any) { l.log("error", args...) }
func (l *floorLog) Fatal(args ...any) { l.log("fatal", args...) }

// queueFloorRun measures the asynq floor on the bench's Redis, with no
// daemon running, and adds its rows.
func (b *bencher) queueFloorRun(ctx context.Context) error {
	var r queueFloorResult
	var err error
	pprof.Do(ctx, pprof.Labels("part", "floor"), func(ctx context.Context) {
		r, err = runQueueFloor(ctx, b.rdb, b.stderr, b.cfg.Concurrency, b.cfg.Clients, int64(4*b.cfg.Clients),
			warmup(b.cfg.Duration), b.cfg.Duration, func(ctx context.Context) usage { return b.sample(ctx) })
	})
	if err != nil {
		return err
	}
	if r.tasks == 0 {
		b.rep.add("throughput P3", "asynq floor: tasks/s", "n/a", "", "")
		b.rep.note("asynq floor: its server handled no task in the window (its warnings, if any, are on stderr)")
		return nil
	}
	b.perf.queueFloor = r.perSecond()
	b.rep.add("throughput P3", fmt.Sprintf("asynq floor: tasks/s, no-op handler, concurrency %d, %s poll, in the bench", b.cfg.Concurrency, worker.DefaultTaskCheckInterval),
		rate(b.perf.queueFloor), "", "")
	b.addUsage("throughput P3", "task", r.from, r.until, r.tasks, 0)
	b.rep.note(fmt.Sprintf("asynq floor: an asynq server in the bench's process, set up as a worker (an empty queue of its own first, strict priority), drains a queue that %d enqueuers keep %d tasks deep; its CPU is the bench's", b.cfg.Clients, 4*b.cfg.Clients))
	return nil
}
