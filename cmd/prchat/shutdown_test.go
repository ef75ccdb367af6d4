package main

import (
	"testing"
	"time"

	"github.com/google/uuid"
	"github.com/prchat/prchat/agentsession/scripted"
)

// TestWorkerStopHandsTurnsOn: a worker stopped while a turn runs past its
// shutdown grace hands the turn to the other live worker at once, which
// answers it; the stopped run's late answer is fenced off.
func TestWorkerStopHandsTurnsOn(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			first := e.cfg
			first.WorkerID = "w-" + uuid.NewString()[:8]
			first.ShutdownGrace = 300 * time.Millisecond
			stopping := e.boot(role{worker: true}, first)

			v := e.review("scripted", nil)
			e.scripted.Push(scripted.Step{Hang: true}, scripted.Step{Answer: goodAnswer("from the live worker")})
			conv, _ := e.ask(v, "What does Load do?")
			e.waitState(conv, 1, "running")

			second := e.cfg
			second.WorkerID = "w-" + uuid.NewString()[:8]
			e.boot(role{worker: true}, second)
			start := time.Now()
			stopping.Stop()
			got := e.wait(conv, 1)
			took := time.Since(start)
			if got.State != "succeeded" || got.Answer == nil || got.Answer.AnswerMarkdown != "from the live worker" {
				t.Fatalf("turn %+v, want answered by the live worker", got)
			}
			t.Logf("answered %v after the stop began (grace %v)", took.Round(time.Millisecond), first.ShutdownGrace)
			if n := len(e.scripted.Requests()); n != 2 {
				t.Errorf("agent calls %d, want 2", n)
			}
		})
	}
}
