package worker

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/worker/workertest"
)

// startReconciler starts a Reconciler on turns that passes every 20ms and
// holds its lease for 150ms, until ctx ends or the test does.
func startReconciler(t *testing.T, ctx context.Context, e env, turns Turns, holder string) *Reconciler {
	t.Helper()
	r, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{
		Interval: 20 * time.Millisecond, LeaseTTL: 150 * time.Millisecond, Holder: holder, Logger: testLogger(t),
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(r.Stop)
	return r
}

// TestOneReconcilerPassesAtATime: of two started reconcilers on one Redis
// only the lease's holder passes; when it dies (its context ends, as its
// process would, without giving the lease up) the other takes over once the
// lease expires, and when that one stops (giving the lease up) a third takes
// over at its next try.
func TestOneReconcilerPassesAtATime(t *testing.T) {
	t.Parallel()
	e := setup(t)
	turns := newFakeTurns(e)
	turns.add(chat.Turn{ID: "t", State: chat.StateQueued, CreatedAt: time.Now()}, "")

	ctxA, dieA := context.WithCancel(t.Context())
	a := startReconciler(t, ctxA, e, turns, "a")
	b := startReconciler(t, t.Context(), e, turns, "b")
	if !a.Holds() || b.Holds() {
		t.Fatalf("holds: a %v, b %v; want a, the first to start", a.Holds(), b.Holds())
	}
	chattest.Eventually(t, "ten passes by the holder", func() bool { return a.Passes() >= 10 })
	if n := b.Passes(); n != 0 {
		t.Fatalf("the reconciler without the lease made %d passes while the holder made %d", n, a.Passes())
	}

	dieA()
	died := time.Now()
	chattest.Eventually(t, "a pass by the other reconciler", func() bool { return b.Passes() > 0 })
	t.Logf("taken over %v after the holder died (lease TTL 150ms)", time.Since(died).Round(time.Millisecond))
	if !b.Holds() {
		t.Error("the reconciler that took over does not hold the lease")
	}
	held, err := e.rdb.Get(t.Context(), reconcilerLeaseKey).Result()
	if err != nil || held != "b" {
		t.Errorf("lease held by %q (%v), want b", held, err)
	}

	c := startReconciler(t, t.Context(), e, turns, "c")
	passesB := b.Passes()
	b.Stop()
	chattest.Eventually(t, "a pass by the third reconciler", func() bool { return c.Passes() > 0 })
	if n := b.Passes(); n != passesB {
		t.Errorf("the stopped reconciler passed %d times more", n-passesB)
	}
}

// TestKickTakesTheLeaseRedisLost: after Redis lost its data (the lease with
// it) a kicked reconciler takes the lease and passes at once.
func TestKickTakesTheLeaseRedisLost(t *testing.T) {
	t.Parallel()
	e := setup(t)
	turns := newFakeTurns(e)
	r, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Interval: time.Hour, LeaseTTL: time.Hour, Grace: time.Millisecond, Holder: "a", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	other, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Interval: time.Hour, LeaseTTL: time.Hour, Holder: "b", Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := other.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	if r.Holds() {
		t.Fatal("the second reconciler took a held lease")
	}
	// The holder's first pass runs in its loop: done before the turn is
	// added, so that only the kicked reconciler can enqueue it (a late
	// first pass did, on a busy machine, before the kick was handled).
	chattest.Eventually(t, "the holder's first pass", func() bool { return other.Passes() > 0 })
	turns.add(chat.Turn{ID: "t1", State: chat.StateQueued, CreatedAt: time.Now().Add(-time.Minute)}, "")
	if err := e.rdb.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	r.Kick()
	chattest.Eventually(t, "lost job enqueued", func() bool { return len(e.where(t, "t1")) == 1 })
	if !r.Holds() || r.Passes() == 0 {
		t.Errorf("kicked reconciler: holds %v, %d passes", r.Holds(), r.Passes())
	}
}

// TestReconcileRestoresALostLease: a running job whose lease Redis lost (a
// failover to a replica that missed it) gets a fresh lease, which asynq's
// recoverer needs to ever retry it and which its live worker extends.
func TestReconcileRestoresALostLease(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	hung := newRecorder(func(ctx context.Context, _ string, _ int) error { <-ctx.Done(); return ctx.Err() })
	e.startServer(t, "w1", hung, func(c *ServerConfig) { c.Concurrency = 1 })
	turns.add(chat.Turn{ID: "t", State: chat.StateQueued, CreatedAt: ago(clk, time.Minute)}, "")
	if err := e.queue.Enqueue(t.Context(), "t", ""); err != nil {
		t.Fatal(err)
	}
	hung.next(t)
	leaseKey := asynqKey(SharedQueue, "lease")
	if n, err := e.rdb.ZRem(t.Context(), leaseKey, "t").Result(); err != nil || n != 1 {
		t.Fatalf("drop the lease: %d, %v", n, err)
	}

	if diff := gocmp.Diff(Counts{Checked: 1, Leased: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("first pass (-want +got):\n%s", diff)
	}
	until, err := e.rdb.ZScore(t.Context(), leaseKey, "t").Result()
	if err != nil {
		t.Fatalf("lease after the pass: %v", err)
	}
	if left := time.Until(time.Unix(int64(until), 0)); left < 20*time.Second || left > 31*time.Second {
		t.Errorf("restored lease ends in %v, want asynq's 30s", left)
	}
	if diff := gocmp.Diff(Counts{Checked: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("second pass (-want +got):\n%s", diff)
	}
}

// commandCounter counts the Redis commands a client sends, those of a
// pipeline or MULTI one by one.
type commandCounter struct{ n atomic.Int64 }

func (c *commandCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *commandCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.n.Add(1); return next(ctx, cmd) }
}
func (c *commandCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error { c.n.Add(int64(len(cmds))); return next(ctx, cmds) }
}

// TestPassCostsTheSameForTenTurnsOrTwoHundred: a pass over queued turns
// whose jobs wait sends as many Redis commands for 200 turns as for 10, and
// as many with 8 host queues as with one.
func TestPassCostsTheSameForTenTurnsOrTwoHundred(t *testing.T) {
	t.Parallel()
	commands := func(turnCount, hostCount int) int64 {
		e := setup(t)
		counter := &commandCounter{}
		e.rdb.AddHook(counter)
		turns := newFakeTurns(e)
		for i := range hostCount {
			if err := e.queue.Enqueue(t.Context(), fmt.Sprintf("h%d", i), fmt.Sprintf("w%d", i)); err != nil {
				t.Fatal(err)
			}
		}
		for i := range turnCount {
			id := fmt.Sprintf("t%d", i)
			turns.add(chat.Turn{ID: id, State: chat.StateQueued, CreatedAt: time.Now().Add(-time.Minute)}, "")
			if err := e.queue.Enqueue(t.Context(), id, ""); err != nil {
				t.Fatal(err)
			}
		}
		r, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Logger: testLogger(t)})
		if err != nil {
			t.Fatal(err)
		}
		// The fewest of two passes over the same turns: a command another
		// user of the client sends during a pass (a pool's new connection,
		// a background tick on a busy machine) only adds to a pass's count.
		var fewest int64
		for i := range 2 {
			before := counter.n.Load()
			c := reconcile(t, r)
			if c.Checked != turnCount || c.Enqueued != 0 || c.Errors != 0 {
				t.Fatalf("pass over %d turns: %+v", turnCount, c)
			}
			if n := counter.n.Load() - before; i == 0 || n < fewest {
				fewest = n
			}
		}
		return fewest
	}
	// Flat: twenty times the turns cost no more commands, give or take the
	// one or two a pass sends when its client's pool opens a connection.
	few, many := commands(10, 1), commands(200, 1)
	if many > few+2 || many < few-2 {
		t.Errorf("a pass sent %d Redis commands for 10 turns, %d for 200", few, many)
	}
	oneHost, eightHosts := commands(50, 1), commands(50, 8)
	t.Logf("commands per pass: %d for 10 and 200 turns with 1 host queue, %d with 8", few, eightHosts)
	if perQueue := float64(eightHosts-oneHost) / 7; perQueue > 10 {
		t.Errorf("a host queue more costs a pass %.1f Redis commands, want a few", perQueue)
	}
}

// BenchmarkReconcilerWith10000Queued runs 1, 2, 4 and 8 started reconcilers
// (as many worker processes) over 10,000 queued turns whose jobs wait, and
// reports the Redis commands per pending turn and pass of the whole
// deployment: with the lease, one reconciler passes whatever their number.
//
//	go test -run '^$' -bench Reconciler -benchtime 1x ./worker/
func BenchmarkReconcilerWith10000Queued(b *testing.B) {
	const queued = 10_000
	url := workertest.RedisURL(b)
	setupClient, err := NewRedisClient(url)
	if err != nil {
		b.Fatal(err)
	}
	defer setupClient.Close()
	setupQueue, err := NewQueue(setupClient, QueueConfig{})
	if err != nil {
		b.Fatal(err)
	}
	e := env{rdb: setupClient, queue: setupQueue, hosts: NewHosts(setupClient, HostsConfig{})}
	turns := newFakeTurns(e)
	for i := range queued {
		id := fmt.Sprintf("q%05d", i)
		turns.add(chat.Turn{ID: id, State: chat.StateQueued, CreatedAt: time.Now().Add(-time.Minute)}, "")
		if err := e.queue.Enqueue(b.Context(), id, ""); err != nil {
			b.Fatal(err)
		}
	}
	for _, procs := range []int{1, 2, 4, 8} {
		b.Run(fmt.Sprintf("processes=%d", procs), func(b *testing.B) {
			for range b.N {
				counter := &commandCounter{}
				rdb, err := NewRedisClient(url)
				if err != nil {
					b.Fatal(err)
				}
				rdb.AddHook(counter)
				q, err := NewQueue(rdb, QueueConfig{})
				if err != nil {
					b.Fatal(err)
				}
				ctx, stop := context.WithCancel(b.Context())
				var rs []*Reconciler
				for i := range procs {
					r, err := NewReconciler(turns, q, NewHosts(rdb, HostsConfig{}), ReconcilerConfig{Interval: 200 * time.Millisecond, LeaseTTL: 600 * time.Millisecond, Holder: fmt.Sprint("p", i)})
					if err != nil {
						b.Fatal(err)
					}
					if err := r.Start(ctx); err != nil {
						b.Fatal(err)
					}
					rs = append(rs, r)
				}
				passes := func() int {
					n := 0
					for _, r := range rs {
						n += r.Passes()
					}
					return n
				}
				deadline := time.Now().Add(2 * time.Minute)
				for passes() < 5 && time.Now().Before(deadline) {
					time.Sleep(10 * time.Millisecond)
				}
				for _, r := range rs {
					r.Stop()
				}
				stop()
				n, cmds := passes(), counter.n.Load()
				_ = rdb.Close()
				b.ReportMetric(float64(n), "passes")
				b.ReportMetric(float64(cmds)/float64(n)/queued, "commands/turn/pass")
			}
		})
	}
}
