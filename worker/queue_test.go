package worker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/worker/workertest"
	"github.com/redis/go-redis/v9"
)

func TestEnqueueRunsTurn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := newRecorder(nil)
	srv := e.startServer(t, "w1", rec, nil)

	start := time.Now()
	if err := e.queue.Enqueue(t.Context(), "turn-1", ""); err != nil {
		t.Fatal(err)
	}
	got := rec.next(t)
	t.Logf("enqueue to handler: %v", time.Since(start))
	if want := (call{"turn-1", srv.Runner()}); got != want {
		t.Errorf("ran %+v, want %+v", got, want)
	}
	if !strings.HasPrefix(srv.Runner(), "w1/") {
		t.Errorf("runner %q is not w1/<instance>", srv.Runner())
	}
	// A completed job is not kept.
	chattest.Eventually(t, "completed job deleted", func() bool { return len(e.tasks(t, "turn-1")) == 0 })
}

// feedQueue returns a Redis client of its own, Events on it and a Queue
// that adds the feed events of its enqueues with them.
func feedQueue(t *testing.T) (redis.UniversalClient, *Events, *Queue) {
	t.Helper()
	rdb, err := NewRedisClient(workertest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	ev := NewEvents(rdb, EventsConfig{})
	t.Cleanup(ev.Stop)
	q, err := NewQueue(rdb, QueueConfig{Feeds: ev, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	return rdb, ev, q
}

// TestEnqueueCarriesFeedEvents: the feed events an Enqueue is given are in
// their repository's feed by the time the job is queued (they go first, in
// the pipeline that registers the queue).
func TestEnqueueCarriesFeedEvents(t *testing.T) {
	t.Parallel()
	rdb, ev, q := feedQueue(t)
	feed, err := ev.FollowFeed(t.Context(), "acme/a", "")
	if err != nil {
		t.Fatal(err)
	}
	queued := chat.FeedEvent{Type: "turn", Repository: "acme/a", PR: 7, ConversationID: "c1", Turn: 1, State: chat.StateQueued}
	if err := q.Enqueue(t.Context(), "turn-feed", "", queued); err != nil {
		t.Fatal(err)
	}
	entries, err := rdb.XRange(t.Context(), feedKey("acme/a"), "-", "+").Result()
	if err != nil || len(entries) != 1 {
		t.Fatalf("feed entries when the job was queued: %v (%v), want 1", entries, err)
	}
	got := receive(t, "the feed follower", feed, 1)[0]
	got.ID = ""
	if diff := cmp.Diff(queued, got); diff != "" {
		t.Errorf("feed event (-want +got):\n%s", diff)
	}
	n, err := rdb.LLen(t.Context(), asynqKey(HostQueue(""), "pending")).Result()
	if err != nil || n != 1 {
		t.Errorf("pending jobs = %d (%v), want 1", n, err)
	}
}

func TestEnqueueTwiceRunsOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for range 2 {
		if err := e.queue.Enqueue(t.Context(), "turn-1", ""); err != nil {
			t.Fatalf("enqueue: %v", err)
		}
	}
	if diff := cmp.Diff([]string{"turn-1@turns:pending"}, e.where(t, "turn-1")); diff != "" {
		t.Fatalf("jobs (-want +got):\n%s", diff)
	}
	stats, err := e.queue.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]QueueStats{{Queue: SharedQueue, Pending: 1}}, stats); diff != "" {
		t.Errorf("stats (-want +got):\n%s", diff)
	}

	rec := newRecorder(nil)
	e.startServer(t, "w1", rec, nil)
	rec.next(t)
	chattest.Eventually(t, "job done", func() bool { return len(e.tasks(t, "turn-1")) == 0 })
	if n := rec.count("turn-1"); n != 1 {
		t.Errorf("turn ran %d times, want once", n)
	}
}

func TestHostQueuesRunOnTheirHost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	recA, recB := newRecorder(nil), newRecorder(nil)
	a := e.startServer(t, "a", recA, nil)
	b := e.startServer(t, "b", recB, nil)

	want := map[string]string{} // turn -> runner that must run it
	for i := range 5 {
		for host, srv := range map[string]*Server{"a": a, "b": b} {
			id := host + "-turn-" + string(rune('0'+i))
			want[id] = srv.Runner()
			if err := e.queue.Enqueue(t.Context(), id, host); err != nil {
				t.Fatal(err)
			}
		}
		if err := e.queue.Enqueue(t.Context(), "shared-turn-"+string(rune('0'+i)), ""); err != nil {
			t.Fatal(err)
		}
	}
	chattest.Eventually(t, "all 15 turns run", func() bool { return len(recA.Calls())+len(recB.Calls()) == 15 })
	for _, c := range append(recA.Calls(), recB.Calls()...) {
		if w, ok := want[c.turnID]; ok && c.runner != w {
			t.Errorf("turn %s ran on %s, want %s", c.turnID, c.runner, w)
		}
	}
}

// TestSoleWorkerConsumesTheSharedQueueAlone: a sole worker runs the shared
// queue's jobs and leaves its host queue alone (chat routes nothing there).
func TestSoleWorkerConsumesTheSharedQueueAlone(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := newRecorder(nil)
	solo := e.startServer(t, "solo", rec, func(c *ServerConfig) { c.Policy.SoleWorker = true })
	if err := e.queue.Enqueue(t.Context(), "pinned-turn", "solo"); err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(t.Context(), "shared-turn", ""); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "the shared turn runs", func() bool { return rec.count("shared-turn") == 1 })
	polls, _ := solo.poller.counts()
	chattest.Eventually(t, "ten more polls", func() bool { n, _ := solo.poller.counts(); return n >= polls+10 })
	if n := rec.count("pinned-turn"); n != 0 {
		t.Errorf("the host queue's turn ran %d times on a sole worker", n)
	}
	if got, want := e.where(t, "pinned-turn"), []string{"pinned-turn@host:solo:pending"}; !slices.Equal(got, want) {
		t.Errorf("pinned turn's jobs = %v, want %v", got, want)
	}
}

func TestCancelStopsRunningHandler(t *testing.T) {
	t.Parallel()
	for _, rescue := range []bool{false, true} {
		name := "own job"
		if rescue {
			name = "rescue job"
		}
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := setup(t)
			stopped := make(chan error, 1)
			rec := newRecorder(func(ctx context.Context, _ string, n int) error {
				if n > 1 {
					return nil // the retried job finds the turn settled
				}
				<-ctx.Done()
				stopped <- ctx.Err()
				return ctx.Err()
			})
			e.startServer(t, "w1", rec, nil)
			if rescue {
				if _, err := e.queue.Rescue(t.Context(), "turn-1", 1); err != nil {
					t.Fatal(err)
				}
			} else if err := e.queue.Enqueue(t.Context(), "turn-1", ""); err != nil {
				t.Fatal(err)
			}
			rec.next(t)

			// asynq signals a cancel on pub/sub, to which a freshly started
			// server subscribes in a goroutine of its own: on a busy machine
			// the handler can start before that subscription is live, and a
			// signal sent then is lost (the turn's cancel is in the database
			// for the retried run). So the signal is sent again until the
			// handler stops.
			deadline := time.After(chattest.Patience())
		cancelled:
			for {
				if err := e.queue.Cancel(t.Context(), "turn-1"); err != nil {
					t.Fatal(err)
				}
				select {
				case err := <-stopped:
					if !errors.Is(err, context.Canceled) {
						t.Errorf("handler context ended with %v, want context.Canceled", err)
					}
					break cancelled
				case <-time.After(250 * time.Millisecond):
				case <-deadline:
					t.Fatal("the running handler's context was not cancelled")
				}
			}
			// asynq puts a cancelled job up for retry: Cancel deletes it if
			// it got there first, else the retry finds the turn settled.
			chattest.Eventually(t, "cancelled job gone", func() bool { return len(e.tasks(t, "turn-1")) == 0 })
			if n := rec.count("turn-1"); n > 2 {
				t.Errorf("cancelled turn ran %d times, want at most 2", n)
			}
		})
	}
}

func TestCancelDeletesWaitingJobs(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	if err := e.queue.Enqueue(ctx, "turn-1", ""); err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(ctx, "turn-1", "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := e.queue.Rescue(ctx, "turn-1", 2); err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(ctx, "turn-2", ""); err != nil {
		t.Fatal(err)
	}
	want := []string{"turn-1@host:gone:pending", "turn-1@turns:pending", "turn-1~2@turns:pending"}
	if diff := cmp.Diff(want, e.where(t, "turn-1")); diff != "" {
		t.Fatalf("jobs before cancel (-want +got):\n%s", diff)
	}
	if err := e.queue.Cancel(ctx, "turn-1"); err != nil {
		t.Fatal(err)
	}
	if got := e.where(t, "turn-1"); len(got) != 0 {
		t.Errorf("jobs after cancel: %v, want none", got)
	}
	if diff := cmp.Diff([]string{"turn-2@turns:pending"}, e.where(t, "turn-2")); diff != "" {
		t.Errorf("another turn's jobs (-want +got):\n%s", diff)
	}
	// Cancelling a turn with no job is not an error.
	if err := e.queue.Cancel(ctx, "turn-1"); err != nil {
		t.Errorf("second cancel: %v", err)
	}
}

func TestRescueIsIdempotentPerFence(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for i, tc := range []struct {
		fence   int64
		created bool
	}{{1, true}, {1, false}, {2, true}} {
		created, err := e.queue.Rescue(t.Context(), "turn-1", tc.fence)
		if err != nil || created != tc.created {
			t.Errorf("rescue %d (fence %d) = %v, %v; want %v, nil", i, tc.fence, created, err, tc.created)
		}
	}
	want := []string{"turn-1~1@turns:pending", "turn-1~2@turns:pending"}
	if diff := cmp.Diff(want, e.where(t, "turn-1")); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

func TestFailedJobIsRetried(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := newRecorder(func(_ context.Context, _ string, n int) error {
		if n == 1 {
			return errBoom
		}
		return nil
	})
	e.startServer(t, "w1", rec, nil)
	if err := e.queue.Enqueue(t.Context(), "turn-1", ""); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "failed job retried and done", func() bool {
		return rec.count("turn-1") == 2 && len(e.tasks(t, "turn-1")) == 0
	})
}

func TestMalformedPayloadIsArchived(t *testing.T) {
	t.Parallel()
	e := setup(t)
	rec := newRecorder(nil)
	e.startServer(t, "w1", rec, nil)
	client := asynq.NewClientFromRedisClient(e.rdb)
	for id, body := range map[string]string{"bad-json": "{", "no-turn": `{"other": 1}`} {
		if _, err := client.EnqueueContext(t.Context(), asynq.NewTask(TaskType, []byte(body)),
			asynq.TaskID(id), asynq.Queue(SharedQueue), asynq.MaxRetry(3)); err != nil {
			t.Fatal(err)
		}
	}
	insp := asynq.NewInspectorFromRedisClient(e.rdb)
	for _, id := range []string{"bad-json", "no-turn"} {
		chattest.Eventually(t, id+" archived", func() bool {
			info, err := insp.GetTaskInfo(SharedQueue, id)
			return err == nil && info.State == asynq.TaskStateArchived && info.Retried == 0
		})
	}
	if calls := rec.Calls(); len(calls) != 0 {
		t.Errorf("runner called for malformed jobs: %v", calls)
	}
}

func TestJobPayload(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if err := e.queue.Enqueue(t.Context(), "turn-1", "h"); err != nil {
		t.Fatal(err)
	}
	info, err := asynq.NewInspectorFromRedisClient(e.rdb).GetTaskInfo("host:h", "turn-1")
	if err != nil {
		t.Fatal(err)
	}
	var p map[string]any
	if err := json.Unmarshal(info.Payload, &p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(map[string]any{"turn_id": "turn-1"}, p); diff != "" {
		t.Errorf("payload (-want +got):\n%s", diff)
	}
	if info.Type != TaskType || info.MaxRetry != 3 || info.Timeout != 11*time.Minute || info.Retention != 0 {
		t.Errorf("job type %q, max retry %d, timeout %v, retention %v; want %q, 3, 11m, 0",
			info.Type, info.MaxRetry, info.Timeout, info.Retention, TaskType)
	}
}

func TestPing(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if err := e.queue.Ping(t.Context()); err != nil {
		t.Errorf("ping: %v", err)
	}
	dead, err := NewRedisClient("redis://127.0.0.1:1/0?max_retries=-1")
	if err != nil {
		t.Fatal(err)
	}
	defer dead.Close()
	q, err := NewQueue(dead, QueueConfig{})
	if err != nil {
		t.Fatal(err)
	}
	if err := q.Ping(t.Context()); err == nil {
		t.Error("ping of a closed port succeeded")
	}
}

// TestTasksFindsEveryJobOfATurn: a turn's jobs are found in every queue,
// its rescue jobs on the shared queue, in the order of the queues, by the
// key in which asynq keeps a job; a deleted job and another turn's are not.
func TestTasksFindsEveryJobOfATurn(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ctx := t.Context()
	for _, host := range []string{"b", "a", ""} {
		if err := e.queue.Enqueue(ctx, "turn-1", host); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := e.queue.Rescue(ctx, "turn-1", 3); err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(ctx, "turn-2", "c"); err != nil {
		t.Fatal(err)
	}
	// The key existingTasks asks for is where asynq keeps the job.
	if n, err := e.rdb.Exists(ctx, asynqTaskKey(HostQueue("a"), "turn-1")).Result(); err != nil || n != 1 {
		t.Fatalf("EXISTS %s = %d, %v; want 1: asynq keeps its jobs elsewhere", asynqTaskKey(HostQueue("a"), "turn-1"), n, err)
	}
	tasks, err := e.queue.Tasks(ctx, "turn-1")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, task := range tasks {
		got = append(got, fmt.Sprintf("%s@%s:%s", task.ID, task.Queue, task.State))
	}
	want := []string{"turn-1@turns:pending", "turn-1~3@turns:pending", "turn-1@host:a:pending", "turn-1@host:b:pending"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("jobs of turn-1 (-want +got):\n%s", diff)
	}
	if err := e.queue.DeleteTask(ctx, tasks[2]); err != nil {
		t.Fatal(err)
	}
	want = []string{"turn-1@host:b:pending", "turn-1@turns:pending", "turn-1~3@turns:pending"}
	if diff := cmp.Diff(want, e.where(t, "turn-1")); diff != "" {
		t.Errorf("jobs of turn-1 after a delete (-want +got):\n%s", diff)
	}
	if got := e.where(t, "turn-3"); len(got) != 0 {
		t.Errorf("jobs of a turn with none: %v", got)
	}
}

// roundTrips counts a client's round trips to Redis: a command sent alone
// or a pipeline.
type roundTrips struct{ n atomic.Int64 }

func (c *roundTrips) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *roundTrips) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *roundTrips) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(1); return next(ctx, cmds) }
}

// TestEnqueueIsOneRoundTrip: an enqueue's registration of its queue, the
// length of the queue it joins and the feed's news ride in the pipeline of
// asynq's enqueue script: one round trip to Redis (once asynq's client has
// registered the queue itself, on its first enqueue to it), with the news
// in the feed and the job pending; a job that found its queue empty is
// announced.
func TestEnqueueIsOneRoundTrip(t *testing.T) {
	t.Parallel()
	rdb, _, q := feedQueue(t)
	ctx := t.Context()
	news := func(turn int) chat.FeedEvent {
		return chat.FeedEvent{Type: "turn", Repository: "acme/a", PR: 7, ConversationID: fmt.Sprint("c", turn), Turn: 1, State: chat.StateQueued}
	}
	// The first job finds the queue empty: its wake-up goes out from a
	// goroutine of its own, which is waited for here, so that it is not
	// counted below.
	woken := rdb.Subscribe(ctx, WakeChannel(redisDB(rdb), SharedQueue))
	t.Cleanup(func() { _ = woken.Close() })
	if _, err := woken.Receive(ctx); err != nil {
		t.Fatal(err)
	}
	if err := q.Enqueue(ctx, "turn-0", "", news(0)); err != nil {
		t.Fatal(err)
	}
	select {
	case <-woken.Channel():
	case <-time.After(chattest.Patience()):
		t.Fatal("no wake-up for a job on an empty queue")
	}
	counter := &roundTrips{}
	rdb.AddHook(counter)
	if err := q.Enqueue(ctx, "turn-1", "", news(1)); err != nil {
		t.Fatal(err)
	}
	if n := counter.n.Load(); n != 1 {
		t.Errorf("an enqueue made %d round trips to Redis, want 1", n)
	}
	entries, err := rdb.XRange(ctx, feedKey("acme/a"), "-", "+").Result()
	if err != nil || len(entries) != 2 {
		t.Errorf("feed entries: %v (%v), want 2", entries, err)
	}
	if n, err := rdb.LLen(ctx, asynqKey(SharedQueue, "pending")).Result(); err != nil || n != 2 {
		t.Errorf("pending jobs = %d (%v), want 2", n, err)
	}
	if ok, err := rdb.SIsMember(ctx, asynqQueuesKey, SharedQueue).Result(); err != nil || !ok {
		t.Errorf("the queue is not registered (%v)", err)
	}

}

// heldPipelines counts a client's pipelines and holds the first at the
// hook until released.
type heldPipelines struct {
	n       atomic.Int64
	out     chan struct{} // closed once the first pipeline is held
	release chan struct{}
}

func (h *heldPipelines) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (h *heldPipelines) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (h *heldPipelines) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		if h.n.Add(1) == 1 {
			close(h.out)
			<-h.release
		}
		return next(ctx, cmds)
	}
}

// TestEnqueuesAtOnceShareAPipeline: enqueues made while another's
// pipeline is at Redis go together in the next one, each with its own
// riders, and each caller hears its own outcome: a job already queued is
// no error, and a caller that gave up while it waited enqueued nothing.
func TestEnqueuesAtOnceShareAPipeline(t *testing.T) {
	t.Parallel()
	rdb, _, q := feedQueue(t)
	ctx := t.Context()
	news := func(turn string) chat.FeedEvent {
		return chat.FeedEvent{Type: "turn", Repository: "acme/a", PR: 7, ConversationID: "c-" + turn, Turn: 1, State: chat.StateQueued}
	}
	// asynq's client registers a queue on its first enqueue to it.
	if err := q.Enqueue(ctx, "turn-0", "", news("turn-0")); err != nil {
		t.Fatal(err)
	}
	held := &heldPipelines{out: make(chan struct{}), release: make(chan struct{})}
	rdb.AddHook(held)
	errs := make(map[string]chan error)
	enqueue := func(ctx context.Context, turn string) {
		ch := make(chan error, 1)
		errs[turn+fmt.Sprint(len(errs))] = ch
		go func() { ch <- q.Enqueue(ctx, turn, "", news(turn)) }()
	}
	enqueue(ctx, "turn-1")
	select {
	case <-held.out:
	case <-time.After(chattest.Patience()):
		t.Fatal("the first enqueue sent no pipeline")
	}
	const n = 12
	for i := 2; i < 2+n; i++ {
		enqueue(ctx, fmt.Sprint("turn-", i))
	}
	enqueue(ctx, "turn-2") // already in this batch: no error, one job
	gaveUp, giveUp := context.WithCancel(ctx)
	enqueue(gaveUp, "turn-late")
	queued := q.rides.line.Queued
	deadline := time.Now().Add(chattest.Patience())
	for queued() < n+2 {
		if time.Now().After(deadline) {
			t.Fatalf("%d enqueues wait for the held pipeline, want %d", queued(), n+2)
		}
		time.Sleep(time.Millisecond)
	}
	giveUp()
	// asynq's client passes the script call's error on as text.
	if err := <-errs["turn-late"+fmt.Sprint(n+2)]; err == nil || !strings.Contains(err.Error(), context.Canceled.Error()) {
		t.Errorf("an enqueue that gave up while it waited: %v, want %v", err, context.Canceled)
	}
	close(held.release)
	for name, ch := range errs {
		if strings.HasPrefix(name, "turn-late") {
			continue
		}
		if err := <-ch; err != nil {
			t.Errorf("enqueue %s: %v", name, err)
		}
	}
	if got := held.n.Load(); got != 2 {
		t.Errorf("%d pipelines for %d enqueues, want 2 (the first, then all that waited for it)", got, n+2)
	}
	if got, err := rdb.LLen(ctx, asynqKey(SharedQueue, "pending")).Result(); err != nil || got != n+2 {
		t.Errorf("pending jobs = %d (%v), want %d (turn-0, turn-1 and %d more, turn-2 once, none given up)", got, err, n+2, n)
	}
	if got, err := rdb.XLen(ctx, feedKey("acme/a")).Result(); err != nil || got != n+3 {
		t.Errorf("feed entries = %d (%v), want %d (every enqueue's news that was sent, the repeated one's too)", got, err, n+3)
	}
}
