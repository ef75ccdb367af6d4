package worker

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// alive asks Hosts about a worker and a runner, failing the test on error.
func (e env) alive(t *testing.T, host, runner string) (hostAlive, runnerAlive bool) {
	t.Helper()
	h, err := e.hosts.Alive(t.Context(), host)
	if err != nil {
		t.Fatal(err)
	}
	r, err := e.hosts.RunnerAlive(t.Context(), runner)
	if err != nil {
		t.Fatal(err)
	}
	return h, r
}

func TestHeartbeatMakesRunnerAlive(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := NewIdentity("w1")
	if a, _ := e.alive(t, "w1", ""); a {
		t.Fatal("before start: alive")
	}
	h, err := NewHeartbeat(e.rdb, HeartbeatConfig{Identity: id, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	if a, r := e.alive(t, "w1", id.Runner()); !a || !r {
		t.Errorf("started: alive %v, runner alive %v; want true, true", a, r)
	}
	for _, runner := range []string{"w1/other", "", "w1", "/x", "w1/"} {
		if _, r := e.alive(t, "w1", runner); r {
			t.Errorf("runner %q alive, want not", runner)
		}
	}
	if a, _ := e.alive(t, "w2", ""); a {
		t.Error("w2 alive without a heartbeat")
	}
	workers, err := e.hosts.Workers(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"w1"}, workers); diff != "" {
		t.Errorf("workers (-want +got):\n%s", diff)
	}

	h.Stop()
	if _, r := e.alive(t, "w1", id.Runner()); r {
		t.Error("stopped: runner alive")
	}
	// The worker was found alive just now: it is taken for alive a little
	// longer, then found dead.
	if a, _ := e.alive(t, "w1", ""); !a {
		t.Error("stopped: not alive within seenAliveFor of being found alive")
	}
	chattest.EventuallyWithin(t, seenAliveFor+5*time.Second, "the stopped worker found dead", func() bool {
		a, _ := e.alive(t, "w1", "")
		return !a
	})
	h.Stop() // twice is fine
	if err := h.Start(t.Context()); err == nil {
		t.Error("a stopped heartbeat started again")
	}
}

// TestFlushedRunnerIsDeadOnlyAfterTTL: a runner of which Redis knows
// nothing (a FLUSHALL took its keys) counts as alive until Hosts has found
// it missing for the whole TTL; one that beat again meanwhile stays alive.
func TestFlushedRunnerIsDeadOnlyAfterTTL(t *testing.T) {
	t.Parallel()
	e := setup(t)
	clk := &clock{now: time.Now()}
	hosts := NewHosts(e.rdb, HostsConfig{TTL: 15 * time.Second, Now: clk.Now})
	ask := func(runner string) bool {
		t.Helper()
		a, err := hosts.RunnerAlive(t.Context(), runner)
		if err != nil {
			t.Fatal(err)
		}
		return a
	}
	lost := NewIdentity("lost").Runner()
	if !ask(lost) {
		t.Fatal("missing once: dead, want alive until the TTL has passed")
	}
	clk.Add(14 * time.Second)
	if !ask(lost) {
		t.Fatal("missing for 14s of a 15s TTL: dead")
	}
	clk.Add(2 * time.Second)
	if ask(lost) {
		t.Fatal("missing for longer than the TTL: alive")
	}
	// A crashed runner (Redis remembers it, its heartbeat is gone) is dead
	// at once.
	id := NewIdentity("crashed")
	e.crashed(t, id)
	if ask(id.Runner()) {
		t.Fatal("crashed runner alive")
	}
}

// TestHeartbeatRewritesFlushedKey: the heartbeat notices at once that its
// key is gone and writes it again, long before its next beat.
func TestHeartbeatRewritesFlushedKey(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := NewIdentity("w1")
	lost := make(chan struct{}, 10)
	h, err := NewHeartbeat(e.rdb, HeartbeatConfig{Identity: id, TTL: 2 * time.Hour, Interval: time.Hour, CheckInterval: 50 * time.Millisecond,
		OnLost: func() { lost <- struct{}{} }, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	if err := h.Start(t.Context()); err != nil {
		t.Fatal(err)
	}
	defer h.Stop()
	// FLUSHDB of this test's own database.
	if err := e.rdb.FlushDB(t.Context()).Err(); err != nil {
		t.Fatal(err)
	}
	// The next beat is due in an hour.
	chattest.Eventually(t, "heartbeat written again", func() bool {
		n, _ := e.rdb.Exists(t.Context(), heartbeatKey("w1"), knownKey("w1")).Result()
		return n == 2
	})
	chattest.Receive(t, "OnLost to be called", lost)
	if len(lost) != 0 {
		t.Errorf("OnLost called %d more times for one flush", len(lost))
	}
}

func TestHeartbeatRenewsAndExpires(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := NewIdentity("w1")
	// A TTL forty beats long: only a machine that stalls the beat that
	// long lets it lapse.
	const ttl = 2 * time.Second
	h, err := NewHeartbeat(e.rdb, HeartbeatConfig{Identity: id, TTL: ttl, Interval: 50 * time.Millisecond, Logger: testLogger(t)})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer h.Stop()
	if err := h.Start(ctx); err != nil {
		t.Fatal(err)
	}
	// Beats keep it alive well past one TTL: how long it is watched is
	// the behaviour under test, not a wait for a condition.
	for end := time.Now().Add(2 * ttl); time.Now().Before(end); time.Sleep(20 * time.Millisecond) {
		if _, r := e.alive(t, "w1", id.Runner()); !r {
			t.Fatal("runner died while its heartbeat ran")
		}
	}
	// A process that stops beating without deleting its key (a crash) dies
	// when the TTL runs out.
	cancel()
	chattest.Eventually(t, "heartbeat expiry", func() bool {
		a, _ := e.alive(t, "w1", id.Runner())
		return !a
	})
}

func TestHeartbeatOfNewInstanceWins(t *testing.T) {
	t.Parallel()
	e := setup(t)
	old, cur := NewIdentity("w1"), NewIdentity("w1")
	hOld := e.startHeartbeat(t, old)
	e.startHeartbeat(t, cur)
	if _, r := e.alive(t, "w1", old.Runner()); r {
		t.Error("the old run is alive after a new run of its worker started")
	}
	hOld.Stop() // must not delete the new run's key
	if a, r := e.alive(t, "w1", cur.Runner()); !a || !r {
		t.Errorf("new run: alive %v, runner alive %v; want true, true", a, r)
	}
}

func TestConfigValidation(t *testing.T) {
	t.Parallel()
	e := setup(t)
	id := NewIdentity("w1")
	for name, err := range map[string]error{
		"heartbeat without identity":  second(NewHeartbeat(e.rdb, HeartbeatConfig{})),
		"heartbeat id with slash":     second(NewHeartbeat(e.rdb, HeartbeatConfig{Identity: Identity{ID: "a/b", Instance: "x"}})),
		"heartbeat interval over ttl": second(NewHeartbeat(e.rdb, HeartbeatConfig{Identity: id, TTL: time.Second, Interval: time.Second})),
		"server without identity":     second(NewServer(e.rdb, newRecorder(nil), ServerConfig{})),
		"server negative concurrency": second(NewServer(e.rdb, newRecorder(nil), ServerConfig{Identity: id, Concurrency: -1})),
		"server without runner":       second(NewServer(e.rdb, nil, ServerConfig{Identity: id})),
		"queue negative retry":        second(NewQueue(e.rdb, QueueConfig{Policy: chat.TurnPolicy{JobRetries: -1}})),
		"reconciler without turns":    second(NewReconciler(nil, e.queue, e.hosts, ReconcilerConfig{})),
		"reconciler negative grace":   second(NewReconciler(&fakeTurns{}, e.queue, e.hosts, ReconcilerConfig{Grace: -1})),
	} {
		if err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

func second[T any](_ T, err error) error { return err }

func TestParseRunner(t *testing.T) {
	t.Parallel()
	id := NewIdentity("host-1.example")
	got, err := ParseRunner(id.Runner())
	if err != nil || got != id {
		t.Errorf("ParseRunner(%q) = %+v, %v; want %+v", id.Runner(), got, err, id)
	}
	if a, b := NewIdentity("a"), NewIdentity("a"); a.Instance == b.Instance {
		t.Error("two identities share an instance id")
	}
	for _, bad := range []string{"", "a", "a/", "/b", "a/b/c", "a b/c"} {
		if _, err := ParseRunner(bad); err == nil {
			t.Errorf("ParseRunner(%q) accepted", bad)
		}
	}
}
