package main

import (
	"context"
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/worker/workertest"
)

// TestRedisFlushWhileATurnRuns: Redis loses every key (FLUSHDB of the
// test's own database) while two workers run and one of them runs a turn.
// No reconciler takes the live worker for dead: the turn is not taken over,
// the agent is called once, and the turn is answered by the run that had
// it.
func TestRedisFlushWhileATurnRuns(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			for range 2 {
				cfg := e.cfg
				cfg.WorkerID = "w-" + uuid.NewString()[:8]
				e.boot(role{worker: true}, cfg)
			}
			v := e.review("scripted", nil)
			release := make(chan struct{})
			e.scripted.Push(scripted.Step{Wait: release, Answer: goodAnswer("from the one run")})
			conv, _ := e.ask(v, "What does Load do?")
			e.waitState(conv, 1, "running")

			rdb := workertest.Connect(t, e.cfg.RedisURL)
			if err := rdb.FlushDB(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
			// Two heartbeat TTLs and many reconcile passes: a while for a
			// wrong takeover to show, not a wait for a condition.
			time.Sleep(2*e.opts.heartbeatTTL + time.Second)
			if n := len(e.scripted.Requests()); n != 1 {
				t.Fatalf("the agent was called %d times after the flush, want 1 (a live run was taken over)", n)
			}
			close(release)
			got := e.wait(conv, 1)
			if got.State != "succeeded" || got.Answer == nil || got.Answer.AnswerMarkdown != "from the one run" {
				t.Fatalf("turn %+v, want succeeded by the run that had it", got)
			}
		})
	}
}
