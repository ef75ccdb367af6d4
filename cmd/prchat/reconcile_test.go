package main

import (
	"context"
	"net/http"
	"strings"
	"sync"
	"testing"

	"github.com/hibiken/asynq"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/worker/workertest"
)

// splitSetup prepares a test whose API and worker run as separate daemons
// on one database and one Redis, and starts the API alone.
func splitSetup(t *testing.T, m mode) *env {
	t.Helper()
	e := prepare(t, m, func(c *Config) {
		if c.RedisURL == "" {
			c.RedisURL = workertest.RedisURL(t)
		}
	})
	e.serve(role{api: true})
	return e
}

// TestReconcilerRecoversLostJobs: Redis loses every job of queued turns;
// the worker's reconciler enqueues them again and they are answered.
func TestReconcilerRecoversLostJobs(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			v := e.review("local", nil)
			a, _ := e.ask(v, "Where is Load?")
			b, _ := e.ask(v, "Where is main?")
			rdb := workertest.Connect(t, e.cfg.RedisURL)
			if n, err := rdb.Keys(context.Background(), "asynq:*").Result(); err != nil || len(n) == 0 {
				t.Fatalf("expected asynq keys before the flush, got %v %v", n, err)
			}
			if err := rdb.FlushDB(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			w := e.serve(role{worker: true})
			for _, conv := range []string{a, b} {
				if got := e.wait(conv, 1); got.State != "succeeded" {
					t.Fatalf("turn of %s = %+v", conv, got)
				}
			}
			// A worker alone serves its liveness and metrics.
			doAt(t, w.URL(), "GET", "/healthz", nil, http.StatusOK, nil)
			// A turn reads settled once stored; the worker counts it a
			// moment later.
			chattest.Eventually(t, "the worker's metrics to count its two turns", func() bool {
				m := string(doAt(t, w.URL(), "GET", "/metrics", nil, http.StatusOK, nil))
				return strings.Contains(m, `prchat_turns_total{backend="local",reason="",state="succeeded"} 2`)
			})
		})
	}
}

// TestReconcilerSettlesArchivedJobs: a turn whose job was archived is
// settled as failed with a reason, not left queued.
func TestReconcilerSettlesArchivedJobs(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			v := e.review("local", nil)
			conv, _ := e.ask(v, "Where is Load?")
			turn, err := e.d.store.Turn(context.Background(), conv, 1)
			if err != nil {
				t.Fatal(err)
			}
			insp := asynq.NewInspectorFromRedisClient(workertest.Connect(t, e.cfg.RedisURL))
			if err := insp.ArchiveTask("turns", turn.ID); err != nil {
				t.Fatalf("archive task: %v", err)
			}
			e.serve(role{worker: true})
			got := e.wait(conv, 1)
			if got.State != "failed" || got.Reason == "" || got.Note == "" {
				t.Fatalf("turn = %+v, want failed with a reason and a note", got)
			}
			// The conversation takes the next question.
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Again?"}, http.StatusAccepted, nil)
			if got := e.wait(conv, 2); got.State != "succeeded" {
				t.Fatalf("turn 2 = %+v", got)
			}
		})
	}
}

// TestServeReconcilesAtStart: a turn left running by a process that died is
// taken over by the next serve on the same database.
func TestServeReconcilesAtStart(t *testing.T) {
	t.Parallel()
	e := prepare(t, mode{name: "embedded"}, nil)
	e.serve(role{api: true, worker: true, embedded: true})
	v := e.review("local", nil)
	conv, _ := e.ask(v, "Where is Load?")
	e.wait(conv, 1)

	// Pretend a dead process holds turn 2: claim it under a runner that
	// sends no heartbeats, while no worker is running.
	e.d.Stop()
	api := e.boot(role{api: true, embedded: true}, e.cfg)
	doAt(t, api.URL(), "POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Again?"}, http.StatusAccepted, nil)
	turn, err := api.store.Turn(context.Background(), conv, 2)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := api.store.ClaimTurn(context.Background(), turn.ID, "gone/0000", nil); err != nil {
		t.Fatal(err)
	}
	api.Stop()

	next := e.boot(roleOf("serve"), e.cfg)
	e.url = next.URL()
	if got := e.wait(conv, 2); got.State != "succeeded" {
		t.Fatalf("turn 2 = %+v", got)
	}
}

// TestDaemonServesDuringItsReconcileAtStart holds a daemon's first
// reconciler pass (which takes seconds with many turns pending) and checks
// that start returns meanwhile: a worker alone answers its liveness probe,
// so that an orchestrator does not kill it for being slow to start, and
// serve answers its API. Released, the pass enqueues the job Redis lost.
func TestDaemonServesDuringItsReconcileAtStart(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		for _, d := range []struct {
			name string
			role role
			path string
		}{
			{"worker", role{worker: true}, "/healthz"},
			{"serve", role{api: true, worker: true}, "/api/v1/repos"},
		} {
			t.Run(m.name+"/"+d.name, func(t *testing.T) {
				t.Parallel()
				e := splitSetup(t, m)
				conv, _ := e.ask(e.review("local", nil), "Where is Load?")
				if err := workertest.Connect(t, e.cfg.RedisURL).FlushDB(context.Background()).Err(); err != nil {
					t.Fatal(err)
				}
				cfg := e.cfg
				cfg.Listen = "127.0.0.1:" + freePort(t)
				held, release := make(chan struct{}), make(chan struct{})
				var first sync.Once
				opts := e.opts
				opts.beforePass = func() { first.Do(func() { close(held); <-release }) }
				started := make(chan *daemon, 1)
				go func() {
					dm, err := start(context.Background(), cfg, d.role, opts)
					if err != nil {
						t.Errorf("start %s: %v", d.name, err)
					}
					started <- dm
				}()
				chattest.Receive(t, "the reconciler's first pass to begin", held)
				dm := chattest.Receive(t, "start to return while that pass is held", started)
				if dm == nil {
					close(release)
					return
				}
				defer dm.Stop()
				// Stop waits for the pass: release it first, however the
				// test ends.
				releasePass := sync.OnceFunc(func() { close(release) })
				defer releasePass()
				doAt(t, "http://"+cfg.Listen, "GET", d.path, nil, http.StatusOK, nil)
				var queued turnJSON
				e.do("GET", "/api/v1/conversations/"+conv+"/turns/1", nil, http.StatusOK, &queued)
				if queued.State != "queued" {
					t.Fatalf("with the pass held the turn whose job was lost is %s, want queued", queued.State)
				}
				releasePass()
				if got := e.wait(conv, 1); got.State != "succeeded" {
					t.Fatalf("turn = %+v", got)
				}
			})
		}
	}
}
