package worker

import (
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/worker/workertest"
)

// idleServer starts a Server for worker id with the given idle poll
// interval and waits until its queues count as idle (empty for idleAfter),
// so that its next wait is an idle one.
func (e env) idleServer(t *testing.T, id string, runner TurnRunner, idle time.Duration, tweak func(*ServerConfig)) *Server {
	t.Helper()
	s := e.startServer(t, id, runner, func(c *ServerConfig) {
		c.IdlePollInterval = idle
		if tweak != nil {
			tweak(c)
		}
	})
	eventually(t, 5*time.Second, "the worker idles", s.poller.idling)
	time.Sleep(20 * time.Millisecond) // the poll-interval hold under way ends
	return s
}

// TestIdleWorkerPollsAtTheIdleInterval: once its queues have been empty for
// a while, a worker polls them about once per idle poll interval, not once
// per poll interval (5ms: some 300 script calls a second on two queues).
func TestIdleWorkerPollsAtTheIdleInterval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	s := e.idleServer(t, "idle-rate", newRecorder(nil), 500*time.Millisecond, nil)
	before, _ := s.poller.counts()
	time.Sleep(time.Second)
	after, _ := s.poller.counts()
	// Two rounds of two polls a second, and one round of slack for where
	// the second began.
	if n := after - before; n < 2 || n > 6 {
		t.Fatalf("an idle worker polled %d times in a second at a 500ms idle interval; want 2..6", n)
	}
}

// TestWakeUpEndsTheIdleWait: a job enqueued while the worker idles, on its
// own queue or the shared one, starts on the wake-up, long before the idle
// poll would have found it.
func TestWakeUpEndsTheIdleWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const idle = 10 * time.Second
	rec := newRecorder(nil)
	s := e.idleServer(t, "idle-wake", rec, idle, nil)
	// The API's Queue is another one on another client, as in an api process.
	other := redis.NewClient(e.rdb.(*redis.Client).Options())
	t.Cleanup(func() { _ = other.Close() })
	api, err := NewQueue(other, QueueConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i, host := range []string{"idle-wake", ""} {
		if i > 0 {
			eventually(t, 5*time.Second, "the worker idles again", s.poller.idling)
			time.Sleep(20 * time.Millisecond)
		}
		_, woken := s.poller.counts()
		turn := fmt.Sprintf("turn-%d", i)
		start := time.Now()
		if err := api.Enqueue(t.Context(), turn, host); err != nil {
			t.Fatal(err)
		}
		c := rec.next(t, idle/2)
		t.Logf("queue %q: enqueue → run %v", HostQueue(host), time.Since(start))
		if c.turnID != turn {
			t.Fatalf("ran %s, want %s", c.turnID, turn)
		}
		if _, w := s.poller.counts(); w <= woken {
			t.Fatalf("queue %q: the job ran without a wake-up ending the worker's wait", HostQueue(host))
		}
	}
}

// TestRetryEndsTheIdleWait: a job that asynq moves back to pending for its
// retry, with no enqueue to announce it, wakes the worker too.
func TestRetryEndsTheIdleWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const idle = 10 * time.Second
	const retry = 1500 * time.Millisecond // past idleAfter: the worker idles by then
	var mu sync.Mutex
	var runs []time.Time
	rec := newRecorder(func(_ context.Context, _ string, n int) error {
		mu.Lock()
		runs = append(runs, time.Now())
		mu.Unlock()
		if n == 1 {
			return errBoom
		}
		return nil
	})
	e.idleServer(t, "idle-retry", rec, idle, func(c *ServerConfig) {
		c.Policy.JobRetry = chat.Backoff{First: retry}
	})
	if err := e.queue.Enqueue(t.Context(), "turn-retried", ""); err != nil {
		t.Fatal(err)
	}
	rec.next(t, idle/2)
	rec.next(t, idle/2)
	mu.Lock()
	defer mu.Unlock()
	// The retry ran when it was due, not at the next idle poll.
	if gap := runs[1].Sub(runs[0]); gap >= idle {
		t.Fatalf("the retry ran %v after the failed run, at the idle poll (%v), not when it was due (%v)", gap, idle, retry)
	}
}

// TestStopReleasesTheIdleWait: Stop does not wait for an idle worker's
// wait between polls to end.
func TestStopReleasesTheIdleWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const idle = 10 * time.Second
	s := e.idleServer(t, "idle-stop", newRecorder(nil), idle, nil)
	start := time.Now()
	s.Stop()
	// The wait under way began at most some milliseconds ago.
	if took := time.Since(start); took >= idle/2 {
		t.Fatalf("Stop took %v: it waited for the idle wait (%v)", took, idle)
	}
}

// deadSubscriptions is a client whose pub/sub connections go to a Redis that
// does not answer: the wake-ups never arrive.
type deadSubscriptions struct {
	redis.UniversalClient
	dead redis.UniversalClient
}

func (c deadSubscriptions) Subscribe(ctx context.Context, channels ...string) *redis.PubSub {
	return c.dead.Subscribe(ctx, channels...)
}

// TestLostSubscriptionStillPolls: with no wake-up subscription, an idle
// worker still finds a job at its next idle poll, and keeps polling.
func TestLostSubscriptionStillPolls(t *testing.T) {
	t.Parallel()
	e := setup(t)
	dead := redis.NewClient(&redis.Options{Addr: "127.0.0.1:1", DialTimeout: 50 * time.Millisecond, MaxRetries: -1})
	t.Cleanup(func() { _ = dead.Close() })
	e.rdb = deadSubscriptions{UniversalClient: e.rdb, dead: dead}
	const idle = 300 * time.Millisecond
	rec := newRecorder(nil)
	s := e.idleServer(t, "idle-lost", rec, idle, nil)
	for i := range 2 {
		turn := fmt.Sprintf("turn-%d", i)
		if err := e.queue.Enqueue(t.Context(), turn, ""); err != nil {
			t.Fatal(err)
		}
		if c := rec.next(t, 10*time.Second); c.turnID != turn {
			t.Fatalf("ran %s, want %s", c.turnID, turn)
		}
		eventually(t, 5*time.Second, "the worker idles again", s.poller.idling)
	}
	if _, woken := s.poller.counts(); woken != 0 {
		t.Fatalf("%d wake-ups arrived on a subscription that cannot connect", woken)
	}
	before, _ := s.poller.counts()
	time.Sleep(3 * idle)
	if after, _ := s.poller.counts(); after <= before {
		t.Fatal("the worker stopped polling without its subscription")
	}
}

// TestWakeUpsResumeAfterTheSubscriptionDrops: when Redis drops the wake-up
// subscription's connection, the worker subscribes again and wake-ups end
// its idle wait again. Real Redis only (CLIENT KILL).
func TestWakeUpsResumeAfterTheSubscriptionDrops(t *testing.T) {
	t.Parallel()
	if os.Getenv(workertest.EnvRedisURL) == "" {
		t.Skip("needs " + workertest.EnvRedisURL + " (CLIENT KILL)")
	}
	e := setup(t)
	const idle = 10 * time.Second
	rec := newRecorder(nil)
	s := e.idleServer(t, "idle-kill", rec, idle, nil)
	db := e.rdb.(*redis.Client).Options().DB
	list, err := e.rdb.ClientList(t.Context()).Result()
	if err != nil {
		t.Fatal(err)
	}
	// The wake-up subscription is the connection of this database on two
	// channels (asynq's own is on one).
	var ids []string
	for _, line := range strings.Split(list, "\n") {
		if strings.Contains(line, " db="+strconv.Itoa(db)+" ") && strings.Contains(line, " sub=2 ") {
			for _, f := range strings.Fields(line) {
				if id, ok := strings.CutPrefix(f, "id="); ok {
					ids = append(ids, id)
				}
			}
		}
	}
	if len(ids) != 1 {
		t.Fatalf("found %d wake-up subscriptions on database %d, want 1:\n%s", len(ids), db, list)
	}
	if err := e.rdb.Do(t.Context(), "CLIENT", "KILL", "ID", ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	// The resubscription itself wakes the worker once; wait until it idles.
	time.Sleep(100 * time.Millisecond)
	eventually(t, 5*time.Second, "the worker idles again", s.poller.idling)
	time.Sleep(20 * time.Millisecond)
	_, woken := s.poller.counts()
	if err := e.queue.Enqueue(t.Context(), "turn-after-kill", ""); err != nil {
		t.Fatal(err)
	}
	rec.next(t, idle/2)
	if _, w := s.poller.counts(); w <= woken {
		t.Fatal("the job ran without a wake-up: the subscription did not come back")
	}
}
