package worker

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/worker/workertest"
)

// idleServer starts a Server for worker id with the given idle poll
// interval and waits until it holds its polls for the idle interval.
func (e env) idleServer(t *testing.T, id string, runner TurnRunner, idle time.Duration, tweak func(*ServerConfig)) *Server {
	t.Helper()
	s := e.startServer(t, id, runner, func(c *ServerConfig) {
		c.IdlePollInterval = idle
		if tweak != nil {
			tweak(c)
		}
	})
	chattest.Eventually(t, "the worker to wait at its idle interval", s.poller.inIdleHold)
	return s
}

// atRun records, for each turn a recorder runs, how many holds a wake-up
// and the idle timer had ended when it ran.
type atRun struct {
	server atomic.Pointer[Server]
	mu     sync.Mutex
	woken  map[string]int64
	timed  map[string]int64
}

func (a *atRun) record(_ context.Context, turnID string, _ int) error {
	s := a.server.Load()
	_, w := s.poller.counts()
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.woken == nil {
		a.woken, a.timed = map[string]int64{}, map[string]int64{}
	}
	a.woken[turnID], a.timed[turnID] = w, s.poller.idleTimedOut()
	return nil
}

// ranOnAWakeUp fails t unless turn ran after a wake-up ended the idle
// wait and before the idle poll would have found it: since woken and
// timed (the poller's counts before its enqueue), a wake-up ended a hold
// and no idle hold ran out.
func (a *atRun) ranOnAWakeUp(t *testing.T, turn string, woken, timed int64) {
	t.Helper()
	// The recorder tells of a run as it starts, before record has stored
	// the counts of it.
	chattest.Eventually(t, turn+"'s counts recorded", func() bool {
		a.mu.Lock()
		defer a.mu.Unlock()
		_, ok := a.woken[turn]
		return ok
	})
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.woken[turn] <= woken {
		t.Errorf("%s ran without a wake-up ending the worker's wait", turn)
	}
	if a.timed[turn] > timed {
		t.Errorf("%s ran after the idle wait ran out, not on the wake-up", turn)
	}
}

// TestIdleWorkerPollsAtTheIdleInterval: once its queues have been empty for
// a while, a worker polls them about once per idle poll interval, not once
// per poll interval (5ms: some 300 script calls a second on two queues).
func TestIdleWorkerPollsAtTheIdleInterval(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const idle = 500 * time.Millisecond
	s := e.idleServer(t, "idle-rate", newRecorder(nil), idle, nil)
	before, _ := s.poller.counts()
	start := time.Now()
	chattest.Eventually(t, "three idle polls to run out", func() bool { return s.poller.idleTimedOut() >= 3 })
	after, _ := s.poller.counts()
	took := time.Since(start)
	// A round of two polls per idle interval, and a round of slack for
	// where the first began; a loaded machine only polls less often.
	if n, most := after-before, 2*(int64(took/idle)+2); n > most {
		t.Fatalf("an idle worker polled %d times in %v at a %v idle interval; want at most %d", n, took, idle, most)
	}
}

// TestWakeUpEndsTheIdleWait: a job enqueued while the worker idles, on its
// own queue or the shared one, starts on the wake-up, long before the idle
// poll would have found it.
func TestWakeUpEndsTheIdleWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const idle = 10 * time.Second
	var at atRun
	rec := newRecorder(at.record)
	s := e.idleServer(t, "idle-wake", rec, idle, nil)
	at.server.Store(s)
	// The API's Queue is another one on another client, as in an api process.
	other := redis.NewClient(e.rdb.(*redis.Client).Options())
	t.Cleanup(func() { _ = other.Close() })
	api, err := NewQueue(other, QueueConfig{Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	for i, host := range []string{"idle-wake", ""} {
		// A job enqueued before the worker holds its idle wait (it polls
		// at the poll interval for idleAfter first) is found by a poll.
		chattest.Eventually(t, fmt.Sprintf("the worker to wait at its idle interval (job %d)", i+1), s.poller.inIdleHold)
		_, woken := s.poller.counts()
		timed := s.poller.idleTimedOut()
		turn := fmt.Sprintf("turn-%d", i)
		if err := api.Enqueue(t.Context(), turn, host); err != nil {
			t.Fatal(err)
		}
		if c := rec.next(t); c.turnID != turn {
			t.Fatalf("ran %s, want %s", c.turnID, turn)
		}
		at.ranOnAWakeUp(t, turn, woken, timed)
	}
}

// TestRetryEndsTheIdleWait: a job that asynq moves back to pending for its
// retry, with no enqueue to announce it, wakes the worker too.
func TestRetryEndsTheIdleWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const idle = 10 * time.Second
	// Well past idleAfter, so that the worker holds its idle wait when the
	// retry is due even on a loaded machine: a retry forwarded while it
	// still polls at the poll interval may be taken by a poll before any
	// hold sees its wake-up.
	const retry = idleAfter + 3*time.Second
	var at atRun
	var woken, timed atomic.Int64 // the poller's counts at the failed run
	rec := newRecorder(func(ctx context.Context, turnID string, n int) error {
		if n == 1 {
			s := at.server.Load()
			_, w := s.poller.counts()
			woken.Store(w)
			timed.Store(s.poller.idleTimedOut())
			return errBoom
		}
		return at.record(ctx, turnID, n)
	})
	at.server.Store(e.idleServer(t, "idle-retry", rec, idle, func(c *ServerConfig) {
		c.Policy.JobRetry = chat.Backoff{First: retry}
	}))
	if err := e.queue.Enqueue(t.Context(), "turn-retried", ""); err != nil {
		t.Fatal(err)
	}
	rec.next(t)
	rec.next(t)
	// The retry ran when it was due, not at the next idle poll.
	at.ranOnAWakeUp(t, "turn-retried", woken.Load(), timed.Load())
}

// TestStopReleasesTheIdleWait: Stop does not wait for an idle worker's
// wait between polls to end.
func TestStopReleasesTheIdleWait(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const idle = 10 * time.Second
	s := e.idleServer(t, "idle-stop", newRecorder(nil), idle, nil)
	timed := s.poller.idleTimedOut()
	stopped := make(chan struct{})
	go func() { s.Stop(); close(stopped) }()
	chattest.Receive(t, "Stop to return", stopped)
	if s.poller.idleTimedOut() > timed {
		t.Fatalf("Stop returned after the idle wait (%v) ran out: it waited for it", idle)
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
		if c := rec.next(t); c.turnID != turn {
			t.Fatalf("ran %s, want %s", c.turnID, turn)
		}
		chattest.Eventually(t, "the worker to idle again", s.poller.idling)
	}
	if _, woken := s.poller.counts(); woken != 0 {
		t.Fatalf("%d wake-ups arrived on a subscription that cannot connect", woken)
	}
	timed := s.poller.idleTimedOut()
	chattest.Eventually(t, "the worker to keep polling at its idle interval", func() bool { return s.poller.idleTimedOut() >= timed+2 })
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
	var at atRun
	rec := newRecorder(at.record)
	s := e.idleServer(t, "idle-kill", rec, idle, nil)
	at.server.Store(s)
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
	_, before := s.poller.counts()
	if err := e.rdb.Do(t.Context(), "CLIENT", "KILL", "ID", ids[0]).Err(); err != nil {
		t.Fatal(err)
	}
	// The resubscription itself wakes the worker once; wait until it idles.
	chattest.Eventually(t, "the resubscription's wake-up", func() bool { _, w := s.poller.counts(); return w > before })
	chattest.Eventually(t, "the worker to idle again", s.poller.idling)
	chattest.Eventually(t, "the worker to wait at its idle interval again", s.poller.inIdleHold)
	_, woken := s.poller.counts()
	timed := s.poller.idleTimedOut()
	if err := e.queue.Enqueue(t.Context(), "turn-after-kill", ""); err != nil {
		t.Fatal(err)
	}
	rec.next(t)
	at.ranOnAWakeUp(t, "turn-after-kill", woken, timed)
}

// dequeueCounter counts the script calls that poll a queue: a command
// whose first key is a queue's pending list.
type dequeueCounter struct{ n atomic.Int64 }

func (c *dequeueCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *dequeueCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error {
		args := cmd.Args()
		if len(args) > 3 && (cmd.Name() == "evalsha" || cmd.Name() == "eval") {
			if k, ok := args[3].(string); ok && strings.HasSuffix(k, ":pending") {
				c.n.Add(1)
			}
		}
		return next(ctx, cmd)
	}
}
func (c *dequeueCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return next
}

// TestARoundOfPollsIsOneCallToRedis: asynq polls a worker's two queues
// one after the other; the first poll of a round polls both in one script
// call, so an idle round costs Redis one call, not two.
func TestARoundOfPollsIsOneCallToRedis(t *testing.T) {
	t.Parallel()
	e := setup(t)
	counter := &dequeueCounter{}
	e.rdb.AddHook(counter)
	s := e.startServer(t, "rounds", newRecorder(nil), nil)
	chattest.Eventually(t, "twenty polls", func() bool { n, _ := s.poller.counts(); return n >= 20 })
	polls, _ := s.poller.counts()
	calls := counter.n.Load()
	// Each count is read while a round may be under way: one round of
	// slack.
	if calls > polls/2+1 {
		t.Errorf("%d polls made %d dequeue calls to Redis; want a call per round of two polls (%d)", polls, calls, polls/2)
	}
	if calls < polls/2-1 {
		t.Errorf("%d polls made only %d dequeue calls to Redis; a round polls Redis once", polls, calls)
	}
}

// TestTheFirstPollTakesTheSharedQueuesJob: the round's first poll takes a
// job of the shared queue when the host queue has none, and a job of the
// host queue before one of the shared queue; a worker with one job slot
// runs them in that order, each once.
func TestTheFirstPollTakesTheSharedQueuesJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, j := range []struct{ turn, host string }{{"shared-1", ""}, {"shared-2", ""}, {"pinned-1", "order"}} {
		if err := e.queue.Enqueue(t.Context(), j.turn, j.host); err != nil {
			t.Fatal(err)
		}
	}
	rec := newRecorder(nil)
	e.startServer(t, "order", rec, func(c *ServerConfig) { c.Concurrency = 1 })
	var ran []string
	for range 3 {
		ran = append(ran, rec.next(t).turnID)
	}
	if want := []string{"pinned-1", "shared-1", "shared-2"}; !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v (the host queue first, then the shared queue in order)", ran, want)
	}
	chattest.Eventually(t, "every job done", func() bool {
		return len(e.tasks(t, "shared-1"))+len(e.tasks(t, "shared-2"))+len(e.tasks(t, "pinned-1")) == 0
	})
	for _, turn := range ran {
		if n := rec.count(turn); n != 1 {
			t.Errorf("%s ran %d times, want once", turn, n)
		}
	}
}
