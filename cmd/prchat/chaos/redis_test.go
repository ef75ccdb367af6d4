//go:build chaos

package chaos

import (
	"context"
	"sync"
	"testing"
	"time"
)

// TestRedisFlush empties Redis (FLUSHALL) under a cluster twice: with a
// backlog of 500 queued turns, and (three times) with 10 turns running. Every turn must
// be answered once: the backlog's lost jobs are enqueued again, and the
// running turns, whose workers are alive though their heartbeats were
// flushed, are not taken over (one model call each).
func TestRedisFlush(t *testing.T) {
	t.Run("queued", func(t *testing.T) {
		c := newCluster(t, "flushqueued", clusterConfig{concurrency: 8})
		const n = 500
		ts := make([]*turn, n)
		var wg sync.WaitGroup
		errs := make(chan error, n)
		next := make(chan int, n)
		for i := range n {
			next <- i
		}
		close(next)
		for range 8 {
			wg.Go(func() {
				for i := range next {
					tr, _, err := c.ask(300 * time.Millisecond)
					if err != nil {
						errs <- err
						continue
					}
					ts[i] = tr
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Fatalf("ask: %v", err)
		}
		flushAt := time.Now()
		if err := c.redis.client.FlushAll(context.Background()).Err(); err != nil {
			t.Fatal(err)
		}
		var queued []*turn
		for _, tr := range ts {
			if len(lab.model.Calls(tr.token)) == 0 {
				queued = append(queued, tr)
			}
		}
		c.settle(ts, time.Now().Add(3*time.Minute))
		c.verify(t, "FLUSHALL with 500 queued", ts)

		var firstRuns []time.Duration
		var last time.Time
		for _, tr := range queued {
			if calls := lab.model.Calls(tr.token); len(calls) > 0 {
				firstRuns = append(firstRuns, calls[0].At.Sub(flushAt))
			}
		}
		for _, tr := range ts {
			if tr.final.FinishedAt != nil && tr.final.FinishedAt.After(last) {
				last = *tr.final.FinishedAt
			}
		}
		wasted := countWasted(t, "FLUSHALL with 500 queued", ts)
		figure(t, "FLUSHALL with %d queued (of %d asked): %d settled succeeded, %d wasted model calls; flush → a queued turn's run %s; flush → all settled %s (%.1f turns/s)",
			len(queued), n, succeeded(ts), wasted, dist(firstRuns), last.Sub(flushAt).Round(10*time.Millisecond),
			float64(len(queued))/last.Sub(flushAt).Seconds())
	})

	t.Run("running", func(t *testing.T) {
		c := newCluster(t, "flushrunning", clusterConfig{concurrency: 8})
		ts := c.mustAsk(10, 10*time.Second)
		c.waitRunning(t, "FLUSHALL with 10 running", ts, 30*time.Second)
		// Three flushes 2.5 s apart: whatever the phase of the heartbeats
		// (every 5 s) and of the reconcilers' passes (every 5 s), one
		// of them finds the heartbeats gone if a flush can fool it.
		var flushAt time.Time
		for i := range 3 {
			time.Sleep(500 * time.Millisecond)
			if i > 0 {
				time.Sleep(2 * time.Second)
			}
			if i == 0 {
				flushAt = time.Now()
			}
			if err := c.redis.client.FlushAll(context.Background()).Err(); err != nil {
				t.Fatal(err)
			}
		}
		c.settle(ts, time.Now().Add(2*time.Minute))
		c.verify(t, "FLUSHALL with 10 running", ts)
		wasted := countWasted(t, "FLUSHALL with 10 running", ts)
		var last time.Time
		for _, tr := range ts {
			if tr.final.FinishedAt != nil && tr.final.FinishedAt.After(last) {
				last = *tr.final.FinishedAt
			}
		}
		figure(t, "FLUSHALL ×3 with 10 running: %d settled succeeded, %d wasted takeovers (model calls beyond one per turn); first flush → all settled %s",
			succeeded(ts), wasted, last.Sub(flushAt).Round(10*time.Millisecond))
	})
}

// countWasted reports every turn that called the model more than once and
// returns how many calls were wasted.
func countWasted(t *testing.T, trial string, ts []*turn) int {
	t.Helper()
	wasted := 0
	for _, tr := range ts {
		if n := len(lab.model.Calls(tr.token)); n > 1 {
			wasted += n - 1
			if wasted > 20 {
				continue
			}
			t.Errorf("%s: turn %s called the model %d times, want once: its live run was taken over", trial, tr.conv, n)
		}
	}
	if wasted > 20 {
		t.Errorf("%s: %d model calls wasted in all", trial, wasted)
	}
	return wasted
}

// succeeded counts the turns that settled as succeeded.
func succeeded(ts []*turn) int {
	n := 0
	for _, tr := range ts {
		if tr.settled && tr.final.State == "succeeded" {
			n++
		}
	}
	return n
}
