package worker

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gocmp "github.com/google/go-cmp/cmp"
	"github.com/hibiken/asynq"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// fakeTurns is a hand-written Turns: turns in memory, routed like chat's
// Service (the session host's queue while that host is alive, else the
// shared queue).
type fakeTurns struct {
	queue *Queue
	hosts chat.Hosts

	mu          sync.Mutex
	turns       map[string]chat.Turn
	sessionHost map[string]string
	settled     map[string]settlement
	// afterRead, if set, runs after PendingTurns has read the turns (what a
	// worker does meanwhile).
	afterRead func()
}

type settlement struct {
	State  chat.State
	Reason chat.Reason
	Note   string
}

func newFakeTurns(e env) *fakeTurns {
	return &fakeTurns{queue: e.queue, hosts: e.hosts, turns: map[string]chat.Turn{}, sessionHost: map[string]string{}, settled: map[string]settlement{}}
}

func (f *fakeTurns) add(t chat.Turn, sessionHost string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.turns[t.ID] = t
	f.sessionHost[t.ID] = sessionHost
}

func (f *fakeTurns) turn(id string) chat.Turn {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.turns[id]
}

func (f *fakeTurns) settlement(id string) (settlement, bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	s, ok := f.settled[id]
	return s, ok
}

func (f *fakeTurns) PendingTurns(context.Context) ([]chat.Turn, error) {
	f.mu.Lock()
	var out []chat.Turn
	for _, t := range f.turns {
		if !t.State.Final() {
			out = append(out, t)
		}
	}
	after := f.afterRead
	f.mu.Unlock()
	slices.SortFunc(out, func(a, b chat.Turn) int { return a.CreatedAt.Compare(b.CreatedAt) })
	if after != nil {
		after()
	}
	return out, nil
}

// Enqueue enqueues a turn that is still as t has it (state and fence), as
// chat.Turns does.
func (f *fakeTurns) Enqueue(ctx context.Context, t chat.Turn) (bool, error) {
	f.mu.Lock()
	host := f.sessionHost[t.ID]
	now, ok := f.turns[t.ID]
	f.mu.Unlock()
	if !ok || now.State != t.State || now.Fence != t.Fence {
		return false, nil
	}
	if alive, err := f.hosts.Alive(ctx, host); err != nil || !alive {
		host = ""
	}
	if err := f.queue.Enqueue(ctx, t.ID, host); err != nil {
		return false, err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	t = f.turns[t.ID]
	t.Queue = host
	f.turns[t.ID] = t
	return true, nil
}

func (f *fakeTurns) Settle(_ context.Context, turnID string, state chat.State, reason chat.Reason, note string) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	t := f.turns[turnID]
	if t.State.Final() {
		return chat.ErrSettled
	}
	t.State, t.Reason, t.Note = state, reason, note
	f.turns[turnID] = t
	f.settled[turnID] = settlement{state, reason, note}
	return nil
}

// clock is a settable time for ReconcilerConfig.Now.
type clock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

func (c *clock) Add(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
}

// rsetup returns an env with fake Turns and a Reconciler on them whose clock
// the test sets.
func rsetup(t *testing.T, qcfg QueueConfig) (env, *fakeTurns, *Reconciler, *clock) {
	t.Helper()
	e := setupQueue(t, qcfg)
	turns := newFakeTurns(e)
	clk := &clock{now: time.Now()}
	r, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Logger: testLogger(t), Now: clk.Now})
	if err != nil {
		t.Fatal(err)
	}
	return e, turns, r, clk
}

func reconcile(t *testing.T, r *Reconciler) Counts {
	t.Helper()
	c, err := r.ReconcileOnce(t.Context())
	if err != nil {
		t.Fatalf("reconcile: %v", err)
	}
	return c
}

func ago(clk *clock, d time.Duration) time.Time { return clk.Now().Add(-d) }

func TestReconcileEnqueuesMissingJob(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	turns.add(chat.Turn{ID: "old", State: chat.StateQueued, CreatedAt: ago(clk, 10*time.Second)}, "")
	turns.add(chat.Turn{ID: "new", State: chat.StateQueued, CreatedAt: ago(clk, 100*time.Millisecond)}, "")

	if diff := gocmp.Diff(Counts{Checked: 2, Enqueued: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("first pass (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff([]string{"old@turns:pending"}, e.where(t, "old")); diff != "" {
		t.Errorf("jobs of the old turn (-want +got):\n%s", diff)
	}
	if got := e.where(t, "new"); len(got) != 0 {
		t.Errorf("a turn within its grace period got jobs %v", got)
	}
	// Once its job is there, nothing more happens.
	if diff := gocmp.Diff(Counts{Checked: 2}, reconcile(t, r)); diff != "" {
		t.Errorf("second pass (-want +got):\n%s", diff)
	}
}

// TestReconcileLeavesATurnThatFinishedDuringThePass: a turn the pass read
// as queued, and whose run finished (its job done and gone) before the pass
// read the jobs, gets no job again.
func TestReconcileLeavesATurnThatFinishedDuringThePass(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	turns.add(chat.Turn{ID: "ran", State: chat.StateQueued, CreatedAt: ago(clk, 10*time.Second)}, "")
	turns.afterRead = func() {
		if err := turns.Settle(t.Context(), "ran", chat.StateSucceeded, "", ""); err != nil {
			t.Error(err)
		}
	}
	if diff := gocmp.Diff(Counts{Checked: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("pass (-want +got):\n%s", diff)
	}
	if got := e.where(t, "ran"); len(got) != 0 {
		t.Errorf("a turn that finished during the pass got jobs %v", got)
	}
}

func TestReconcileAfterRedisLostItsData(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	alive := NewIdentity("alive")
	e.startHeartbeat(t, alive)
	ids := []string{"t1", "t2", "t3"}
	for i, id := range ids {
		turn := chat.Turn{ID: id, State: chat.StateQueued, CreatedAt: ago(clk, time.Minute)}
		turns.add(turn, []string{"", "alive", "gone"}[i])
		if _, err := turns.Enqueue(t.Context(), turn); err != nil {
			t.Fatal(err)
		}
	}
	if err := e.rdb.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	e.startHeartbeat(t, NewIdentity("alive")) // the worker comes back with its next beat

	if diff := gocmp.Diff(Counts{Checked: 3, Enqueued: 3}, reconcile(t, r)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	want := map[string][]string{
		"t1": {"t1@turns:pending"},
		"t2": {"t2@host:alive:pending"},
		"t3": {"t3@turns:pending"},
	}
	for _, id := range ids {
		if diff := gocmp.Diff(want[id], e.where(t, id)); diff != "" {
			t.Errorf("jobs of %s (-want +got):\n%s", id, diff)
		}
	}
}

// TestOutageNeverArchivesAJob: a run that ends because the database is
// unreachable is retried beyond the policy's JobRetries, and its job is never
// archived; once the database is back the turn runs.
func TestOutageNeverArchivesAJob(t *testing.T) {
	t.Parallel()
	e := setupQueue(t, QueueConfig{Policy: chat.TurnPolicy{JobRetries: 1}})
	var outage atomic.Bool
	outage.Store(true)
	unreachable := &chat.Error{Code: chat.CodeUnavailable, Message: "The database is unreachable.", Err: errBoom}
	rec := newRecorder(func(context.Context, string, int) error {
		if outage.Load() {
			return fmt.Errorf("claim turn: %w", unreachable)
		}
		return nil
	})
	e.startServer(t, "w1", rec, nil)
	if err := e.queue.Enqueue(t.Context(), "t1", ""); err != nil {
		t.Fatal(err)
	}
	for range 5 { // JobRetries is 1
		rec.next(t)
	}
	if got := e.where(t, "t1"); slices.Contains(got, "t1@turns:archived") {
		t.Fatalf("job archived during the outage: %v", got)
	}
	outage.Store(false)
	chattest.Eventually(t, "job done after the outage", func() bool { return len(e.where(t, "t1")) == 0 })
}

// TestReconcileRequeuesJobArchivedByAnOutage: a job archived because its
// runs found the database unreachable (by a worker from before outages were
// waited out) is enqueued again, and its turn is not failed.
func TestReconcileRequeuesJobArchivedByAnOutage(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{Policy: chat.TurnPolicy{JobRetries: 1}})
	// An older worker's error, as asynq kept its text.
	old := errors.New("claim turn t1: unavailable: The database is unreachable; try again shortly.: dial tcp 127.0.0.1:5432: connect: connection refused")
	rec := newRecorder(func(context.Context, string, int) error {
		return fmt.Errorf("%w: %w", old, asynq.SkipRetry)
	})
	srv := e.startServer(t, "w1", rec, nil)
	turns.add(chat.Turn{ID: "t1", State: chat.StateQueued, CreatedAt: ago(clk, time.Second)}, "")
	if _, err := turns.Enqueue(t.Context(), turns.turn("t1")); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "job archived", func() bool {
		return slices.Equal(e.where(t, "t1"), []string{"t1@turns:archived"})
	})
	srv.Stop()

	if diff := gocmp.Diff(Counts{Checked: 1, Enqueued: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if s, ok := turns.settlement("t1"); ok {
		t.Errorf("turn settled %+v, want it left queued", s)
	}
	if diff := gocmp.Diff([]string{"t1@turns:pending"}, e.where(t, "t1")); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

// TestKickReconcilesAtOnce: a kicked Reconciler enqueues a lost job within
// a second, not at its next Interval.
func TestKickReconcilesAtOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	turns := newFakeTurns(e)
	r, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Interval: time.Hour, Grace: time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r.Stop()
	turns.add(chat.Turn{ID: "t1", State: chat.StateQueued, CreatedAt: time.Now().Add(-time.Minute)}, "")
	start := time.Now()
	r.Kick()
	chattest.Eventually(t, "lost job enqueued", func() bool { return slices.Equal(e.where(t, "t1"), []string{"t1@turns:pending"}) })
	t.Logf("lost job enqueued %v after the kick", time.Since(start).Round(time.Millisecond))

	// A turn too young for the kicked pass gets its job one Grace later,
	// not at the next Interval (an hour).
	r.Stop()
	r2, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Interval: time.Hour, Grace: 300 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := r2.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer r2.Stop()
	turns.add(chat.Turn{ID: "young", State: chat.StateQueued, CreatedAt: time.Now()}, "")
	r2.Kick()
	chattest.Eventually(t, "young turn's lost job enqueued", func() bool { return slices.Equal(e.where(t, "young"), []string{"young@turns:pending"}) })
}

// TestReconcileSweepsArchivedJobsNoTurnNeeds: an archived job whose turn is
// not pending (settled, or deleted with its conversation) is deleted: asynq
// would keep it without a TTL.
func TestReconcileSweepsArchivedJobsNoTurnNeeds(t *testing.T) {
	t.Parallel()
	e, _, r, _ := rsetup(t, QueueConfig{Policy: chat.TurnPolicy{JobRetries: 1}})
	rec := newRecorder(func(context.Context, string, int) error { return fmt.Errorf("boom: %w", asynq.SkipRetry) })
	e.startServer(t, "w1", rec, nil)
	if err := e.queue.Enqueue(t.Context(), "gone", ""); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "job archived", func() bool {
		return slices.Equal(e.where(t, "gone"), []string{"gone@turns:archived"})
	})
	if diff := gocmp.Diff(Counts{Swept: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if got := e.where(t, "gone"); len(got) != 0 {
		t.Errorf("archived job left: %v", got)
	}
}

// TestReconcileEnqueuesManyLostJobsInOnePass: after a flush every queued
// turn's job is gone; one pass enqueues them all (several at once).
func TestReconcileEnqueuesManyLostJobsInOnePass(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	const n = 300
	for i := range n {
		turns.add(chat.Turn{ID: fmt.Sprintf("t%03d", i), State: chat.StateQueued, CreatedAt: ago(clk, time.Minute)}, "")
	}
	start := time.Now()
	if diff := gocmp.Diff(Counts{Checked: n, Enqueued: n}, reconcile(t, r)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	t.Logf("%d lost jobs enqueued in one pass in %v", n, time.Since(start).Round(time.Millisecond))
	for i := range n {
		id := fmt.Sprintf("t%03d", i)
		if got := e.where(t, id); !slices.Equal(got, []string{id + "@turns:pending"}) {
			t.Fatalf("jobs of %s: %v", id, got)
		}
	}
}

func TestReconcileSettlesArchivedJob(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{Policy: chat.TurnPolicy{JobRetries: 1}})
	rec := newRecorder(func(context.Context, string, int) error { return errBoom })
	e.startServer(t, "w1", rec, nil)
	turns.add(chat.Turn{ID: "t1", State: chat.StateQueued, CreatedAt: ago(clk, time.Second)}, "")
	if _, err := turns.Enqueue(t.Context(), turns.turn("t1")); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "job archived", func() bool {
		return slices.Equal(e.where(t, "t1"), []string{"t1@turns:archived"})
	})

	if diff := gocmp.Diff(Counts{Checked: 1, Failed: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	s, ok := turns.settlement("t1")
	if !ok || s.State != chat.StateFailed || s.Reason != chat.ReasonBackendError || !strings.Contains(s.Note, "trace id ") {
		t.Errorf("settled %+v (%v), want failed, backend_error, a note with a trace id", s, ok)
	}
	// The job's error is the log's, not the client's.
	if strings.Contains(s.Note, errBoom.Error()) {
		t.Errorf("note %q carries the job's error", s.Note)
	}
	if got := e.where(t, "t1"); len(got) != 0 {
		t.Errorf("archived job left: %v", got)
	}
}

func TestReconcileMovesJobsOutOfDeadHostQueues(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	e.startHeartbeat(t, NewIdentity("alive"))
	for id, host := range map[string]string{"on-dead": "dead", "on-alive": "alive"} {
		turns.add(chat.Turn{ID: id, State: chat.StateQueued, Queue: host, CreatedAt: ago(clk, time.Minute)}, host)
		if err := e.queue.Enqueue(t.Context(), id, host); err != nil {
			t.Fatal(err)
		}
	}

	if diff := gocmp.Diff(Counts{Checked: 2, Moved: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff([]string{"on-dead@turns:pending"}, e.where(t, "on-dead")); diff != "" {
		t.Errorf("jobs of the dead host's turn (-want +got):\n%s", diff)
	}
	if q := turns.turn("on-dead").Queue; q != "" {
		t.Errorf("moved turn records queue %q, want the shared one", q)
	}
	if diff := gocmp.Diff([]string{"on-alive@host:alive:pending"}, e.where(t, "on-alive")); diff != "" {
		t.Errorf("jobs of the live host's turn (-want +got):\n%s", diff)
	}
}

func TestReconcileRunningTurns(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		name      string
		runner    string // "alive" = a runner with a heartbeat
		fence     int64
		job       string // host of the turn's job; "-" = none
		started   time.Duration
		want      Counts
		wantJobs  []string
		wantState chat.State
	}{
		{
			name: "dead runner, no job: rescued", runner: "dead/1", fence: 1, job: "-",
			want: Counts{Checked: 1, Rescued: 1}, wantJobs: []string{"t~1@turns:pending"}, wantState: chat.StateRunning,
		},
		{
			name: "dead runner, tried too often: interrupted", runner: "dead/1", fence: 3, job: "-",
			want: Counts{Checked: 1, Interrupted: 1}, wantState: chat.StateInterrupted,
		},
		{
			name: "dead runner, job waiting in the shared queue: left", runner: "dead/1", fence: 1, job: "",
			want: Counts{Checked: 1}, wantJobs: []string{"t@turns:pending"}, wantState: chat.StateRunning,
		},
		{
			name: "dead runner, job waiting in its dead host's queue: moved", runner: "dead/1", fence: 2, job: "dead",
			want: Counts{Checked: 1, Moved: 1}, wantJobs: []string{"t@turns:pending"}, wantState: chat.StateRunning,
		},
		{
			name: "live runner, no job: left", runner: "alive", fence: 1, job: "-", started: time.Minute,
			want: Counts{Checked: 1}, wantState: chat.StateRunning,
		},
		{
			name: "live runner, no job for too long: rescued", runner: "alive", fence: 1, job: "-", started: time.Hour,
			want: Counts{Checked: 1, Rescued: 1}, wantJobs: []string{"t~1@turns:pending"}, wantState: chat.StateRunning,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			e, turns, r, clk := rsetup(t, QueueConfig{})
			runner := tc.runner
			if runner == "alive" {
				runner = e.startHeartbeat(t, NewIdentity("w1")).Runner()
			}
			if id, err := ParseRunner(runner); err == nil && id.ID == "dead" {
				e.crashed(t, id)
			}
			started := ago(clk, cmp.Or(tc.started, time.Minute))
			turns.add(chat.Turn{ID: "t", State: chat.StateRunning, Runner: runner, Fence: tc.fence,
				CreatedAt: ago(clk, 2*time.Hour), StartedAt: &started}, "")
			if tc.job != "-" {
				if err := e.queue.Enqueue(t.Context(), "t", tc.job); err != nil {
					t.Fatal(err)
				}
			}

			if diff := gocmp.Diff(tc.want, reconcile(t, r)); diff != "" {
				t.Errorf("counts (-want +got):\n%s", diff)
			}
			if diff := gocmp.Diff(tc.wantJobs, e.where(t, "t")); diff != "" {
				t.Errorf("jobs (-want +got):\n%s", diff)
			}
			if got := turns.turn("t"); got.State != tc.wantState {
				t.Errorf("turn state %s, want %s", got.State, tc.wantState)
			}
			if tc.wantState == chat.StateInterrupted {
				want := settlement{chat.StateInterrupted, chat.ReasonInterrupted, chat.InterruptedNote(tc.fence)}
				if s, _ := turns.settlement("t"); s != want {
					t.Errorf("settled %+v, want %+v", s, want)
				}
			}
			// A second pass changes nothing: every action is idempotent.
			if diff := gocmp.Diff(Counts{Checked: tc.want.Checked - tc.want.Interrupted}, reconcile(t, r)); diff != "" {
				t.Errorf("second pass (-want +got):\n%s", diff)
			}
		})
	}
}

// A worker dies while running a turn: asynq still counts its job as active
// (for 60-120 s). The reconciler's rescue job lets a live worker take the
// turn over at once.
func TestReconcileRescuesTurnOfDeadWorker(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	hung := newRecorder(func(ctx context.Context, _ string, _ int) error { <-ctx.Done(); return ctx.Err() })
	dead := e.startServer(t, "dead", hung, func(c *ServerConfig) { c.Concurrency = 1 })
	started := ago(clk, time.Second)
	turns.add(chat.Turn{ID: "t", State: chat.StateRunning, Runner: dead.Runner(), Fence: 1,
		CreatedAt: ago(clk, time.Minute), StartedAt: &started}, "dead")
	if err := e.queue.Enqueue(t.Context(), "t", "dead"); err != nil {
		t.Fatal(err)
	}
	hung.next(t) // the job is active on "dead", which sends no heartbeat
	deadID, _ := ParseRunner(dead.Runner())
	e.crashed(t, deadID)

	rec := newRecorder(nil)
	liveID := NewIdentity("live")
	live := e.startServer(t, "live", rec, func(c *ServerConfig) { c.Identity = liveID })
	e.startHeartbeat(t, liveID)

	if diff := gocmp.Diff(Counts{Checked: 1, Rescued: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("counts (-want +got):\n%s", diff)
	}
	if got := rec.next(t); got != (call{"t", live.Runner()}) {
		t.Errorf("rescue ran %+v, want turn t on %s", got, live.Runner())
	}
}

// A queued turn's job runs but never claims the turn (its worker died right
// after taking it): after the grace period the turn gets a rescue job.
func TestReconcileRescuesUnclaimedActiveJob(t *testing.T) {
	t.Parallel()
	e, turns, r, clk := rsetup(t, QueueConfig{})
	hung := newRecorder(func(ctx context.Context, _ string, _ int) error { <-ctx.Done(); return ctx.Err() })
	e.startServer(t, "w1", hung, func(c *ServerConfig) { c.Concurrency = 1 })
	turns.add(chat.Turn{ID: "t", State: chat.StateQueued, CreatedAt: ago(clk, time.Minute)}, "")
	if err := e.queue.Enqueue(t.Context(), "t", ""); err != nil {
		t.Fatal(err)
	}
	hung.next(t)

	if diff := gocmp.Diff(Counts{Checked: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("first pass (-want +got):\n%s", diff)
	}
	clk.Add(time.Second)
	if diff := gocmp.Diff(Counts{Checked: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("pass within the grace period (-want +got):\n%s", diff)
	}
	clk.Add(2 * time.Second)
	if diff := gocmp.Diff(Counts{Checked: 1, Rescued: 1}, reconcile(t, r)); diff != "" {
		t.Errorf("pass after the grace period (-want +got):\n%s", diff)
	}
	if diff := gocmp.Diff([]string{"t@turns:active", "t~0@turns:pending"}, e.where(t, "t")); diff != "" {
		t.Errorf("jobs (-want +got):\n%s", diff)
	}
}

func TestReconcilerStartStop(t *testing.T) {
	t.Parallel()
	e := setup(t)
	turns := newFakeTurns(e)
	turns.add(chat.Turn{ID: "t", State: chat.StateQueued, CreatedAt: time.Now().Add(-time.Minute)}, "")
	r, err := NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Interval: 20 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	r.Stop() // before Start is fine
	r, _ = NewReconciler(turns, e.queue, e.hosts, ReconcilerConfig{Interval: 20 * time.Millisecond, Logger: testLogger(t)})
	if err := r.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := r.Start(t.Context()); err == nil {
		t.Error("started twice")
	}
	chattest.Eventually(t, "background pass", func() bool { return len(e.where(t, "t")) == 1 })
	r.Stop()
	r.Stop()
	if got := r.Totals(); got.Enqueued != 1 || got.Checked < 1 {
		t.Errorf("totals %+v, want one enqueued", got)
	}
}
