package worker_test

import (
	"context"
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/worker"
	"github.com/prchat/prchat/worker/workertest"
)

// TestRateLimiterWithAFakeClock drives the Redis limiter with a clock of
// its own: a burst of Count passes, the next waits one interval, and a key
// is independent of others.
func TestRateLimiterWithAFakeClock(t *testing.T) {
	t.Parallel()
	l := worker.NewRateLimiter(workertest.Client(t))
	ctx := context.Background()
	limit := chat.Rate{Count: 3, Per: time.Minute}
	now := time.Date(2026, 5, 1, 12, 0, 0, 0, time.UTC)
	for i := range 3 {
		if wait, err := l.Allow(ctx, "repo:acme/a", limit, now); err != nil || wait != 0 {
			t.Fatalf("event %d: wait %v, err %v; want allowed", i+1, wait, err)
		}
	}
	wait, err := l.Allow(ctx, "repo:acme/a", limit, now)
	if err != nil {
		t.Fatal(err)
	}
	if wait != 20*time.Second {
		t.Errorf("4th event waits %v, want 20s (one interval of 1m/3)", wait)
	}
	// Refused events take nothing: the wait shrinks with time only.
	if wait, _ := l.Allow(ctx, "repo:acme/a", limit, now.Add(5*time.Second)); wait != 15*time.Second {
		t.Errorf("5s later the wait is %v, want 15s", wait)
	}
	if wait, _ := l.Allow(ctx, "repo:acme/b", limit, now); wait != 0 {
		t.Errorf("another key is limited too: wait %v", wait)
	}
	if wait, _ := l.Allow(ctx, "repo:acme/a", limit, now.Add(20*time.Second)); wait != 0 {
		t.Errorf("after one interval: wait %v, want allowed", wait)
	}
	if wait, _ := l.Allow(ctx, "repo:acme/a", limit, now.Add(20*time.Second)); wait == 0 {
		t.Error("a second event in the same interval was allowed")
	}
	// A quiet minute fills the burst again.
	later := now.Add(2 * time.Minute)
	for i := range 3 {
		if wait, _ := l.Allow(ctx, "repo:acme/a", limit, later); wait != 0 {
			t.Errorf("after a quiet while, event %d waits %v", i+1, wait)
		}
	}
	if wait, _ := l.Allow(ctx, "x", chat.Rate{}, now); wait != 0 {
		t.Errorf("no limit set: wait %v", wait)
	}
}
