package worker

import (
	"context"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
)

// TestStopHandsOnRunningTurns: a stopping worker takes no more jobs, lets
// its running turn go on for its grace, then releases it and hands it to a
// live worker at once, whose run of it starts within moments; Hurry ends
// the grace at once.
func TestStopHandsOnRunningTurns(t *testing.T) {
	t.Parallel()
	for _, hurry := range []bool{false, true} {
		name := map[bool]string{false: "grace", true: "hurry"}[hurry]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			stopping := NewIdentity("stopping")
			// The stopping worker's run hangs until cancelled and then ends as
			// chat's does for a turn handed on: nil, no retry.
			rec := newRecorder(func(ctx context.Context, _ string, n int) error {
				if n == 1 {
					<-ctx.Done()
				}
				return nil
			})
			grace := 300 * time.Millisecond
			if hurry {
				grace = time.Hour
			}
			old := e.startServer(t, "stopping", rec, func(c *ServerConfig) { c.Identity = stopping; c.ShutdownGrace = grace })
			if err := e.queue.Enqueue(t.Context(), "t1", ""); err != nil {
				t.Fatal(err)
			}
			if got := rec.next(t); got.runner != stopping.Runner() {
				t.Fatalf("first run on %s", got.runner)
			}
			live := e.startServer(t, "live", rec, nil)

			start := time.Now()
			stopped := make(chan struct{})
			go func() { old.Stop(); close(stopped) }()
			if hurry {
				chattest.Eventually(t, "Stop to begin draining", func() bool {
					old.mu.Lock()
					defer old.mu.Unlock()
					return old.draining
				})
				old.Hurry()
			}
			got := rec.next(t)
			took := time.Since(start)
			if got != (call{"t1", live.Runner()}) {
				t.Fatalf("next run %+v, want t1 on the live worker", got)
			}
			// A lower bound a loaded machine cannot break; hurried, the
			// turn was handed on within the test's patience, not the hour.
			if !hurry && took < grace {
				t.Errorf("handed on after %v, before the grace of %v", took, grace)
			}
			chattest.Receive(t, "Stop to return", stopped)
			rec.mu.Lock()
			released := rec.released
			rec.mu.Unlock()
			if released != 1 {
				t.Errorf("released %d turns, want 1", released)
			}
			chattest.Eventually(t, "no job left", func() bool { return len(e.where(t, "t1")) == 0 })
		})
	}
}

// TestStopWithinGraceHandsNothingOn: a turn that ends within the grace is
// not handed on.
func TestStopWithinGraceHandsNothingOn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	release := make(chan struct{})
	rec := newRecorder(func(ctx context.Context, _ string, _ int) error { <-release; return nil })
	s := e.startServer(t, "w1", rec, func(c *ServerConfig) { c.ShutdownGrace = 10 * time.Second })
	if err := e.queue.Enqueue(t.Context(), "t1", ""); err != nil {
		t.Fatal(err)
	}
	rec.next(t)
	go func() { time.Sleep(200 * time.Millisecond); close(release) }() // the turn ends within the grace: the behaviour under test
	s.Stop()
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if rec.released != 0 {
		t.Errorf("released %d turns, want 0", rec.released)
	}
}
