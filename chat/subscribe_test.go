package chat_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/agentsession"
	"github.com/prchat/prchat/agentsession/agentsessiontest"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/store/storetest"
	"github.com/prchat/prchat/worker"
	"github.com/prchat/prchat/worker/workertest"
)

// countingStore counts the reads of a turn.
type countingStore struct {
	chattest.Store
	reads atomic.Int64
}

func (s *countingStore) Turn(ctx context.Context, conversationID string, number int) (chat.Turn, error) {
	s.reads.Add(1)
	return s.Store.Turn(ctx, conversationID, number)
}

func (s *countingStore) TurnByID(ctx context.Context, id string) (chat.Turn, error) {
	s.reads.Add(1)
	return s.Store.TurnByID(ctx, id)
}

// hookedFollower is the real follower, with a hook run when a follow
// starts.
type hookedFollower struct {
	chat.Follower
	follows  atomic.Int64
	onFollow func()
}

func (f *hookedFollower) Follow(ctx context.Context, turnID string, after int64) (<-chan *chat.Event, error) {
	ch, err := f.Follower.Follow(ctx, turnID, after)
	f.follows.Add(1)
	if f.onFollow != nil {
		f.onFollow()
	}
	return ch, err
}

type waitFixture struct {
	svc *chattest.Domain
	// other is a second Service on the same store and Redis, whose reads
	// are not counted: it settles turns as another API process would.
	other    *chattest.Domain
	store    *countingStore
	follower *hookedFollower
	deps     chattest.Deps // other's
	rdb      redis.UniversalClient
	conv     string
	turnID   string
}

// setupWait makes a Service on a real store and Redis (queue, hosts and
// events) and asks a question whose turn stays queued: nothing runs it.
// follow false leaves the Service without a follower.
func setupWait(t *testing.T, follow bool) *waitFixture {
	t.Helper()
	rdb, err := worker.NewRedisClient(workertest.RedisURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rdb.Close() })
	events := worker.NewEvents(rdb, worker.EventsConfig{})
	t.Cleanup(events.Stop)
	queue, err := worker.NewQueue(rdb, worker.QueueConfig{Feeds: events})
	if err != nil {
		t.Fatal(err)
	}
	f := &waitFixture{store: &countingStore{Store: storetest.New(t)}, follower: &hookedFollower{Follower: events}, rdb: rdb}
	ws, err := agentsession.NewWorkspaces(agentsession.Config{DataDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	deps := chattest.Deps{Store: f.store, Queue: queue, Hosts: worker.NewHosts(rdb, worker.HostsConfig{}), Publisher: events, Clones: ws}
	if follow {
		deps.Follower = f.follower
	}
	if f.svc, err = chattest.New(chattest.Config{AnyPath: true}, deps); err != nil {
		t.Fatal(err)
	}
	deps.Store, deps.Follower = f.store.Store, nil
	if f.other, err = chattest.New(chattest.Config{AnyPath: true}, deps); err != nil {
		t.Fatal(err)
	}
	f.deps = deps
	ctx := context.Background()
	repo := agentsessiontest.NewRepo(t, map[string]string{"a.go": "package a\n"})
	if _, _, err := f.svc.Admin.RegisterRepository(ctx, repo.Repository("acme/a")); err != nil {
		t.Fatal(err)
	}
	if _, err := f.svc.Admin.RecordReview(ctx, "acme/a", chat.Review{PR: 1, HeadSHA: repo.Head()}); err != nil {
		t.Fatal(err)
	}
	c, turn, err := f.svc.Turns.Ask(ctx, "acme/a", 1, 0, chat.Ask{Question: "Why?"})
	if err != nil {
		t.Fatal(err)
	}
	f.conv, f.turnID = c.ID, turn.ID
	return f
}

// waitResult is what a WaitTurn call returned and how long it took.
type waitResult struct {
	turn    chat.Turn
	err     error
	elapsed time.Duration
}

func (f *waitFixture) waitAsync(wait time.Duration) <-chan waitResult {
	out := make(chan waitResult, 1)
	go func() {
		start := time.Now()
		t, err := f.svc.Subscriptions.WaitTurn(context.Background(), f.conv, 1, wait)
		out <- waitResult{t, err, time.Since(start)}
	}()
	return out
}

// TestWaitTurnWakesOnTheFinalEvent: a long-poll follows the turn's events
// and reads the store only to start and once the final event came, not in
// a loop.
func TestWaitTurnWakesOnTheFinalEvent(t *testing.T) {
	t.Parallel()
	f := setupWait(t, true)
	f.store.reads.Store(0)
	res := f.waitAsync(time.Hour) // returning within the test's patience, it followed
	chattest.Eventually(t, "the long-poll to follow the turn", func() bool { return f.follower.follows.Load() == 1 })
	// Not a wait for a condition: the time a polling waiter would take
	// to read the store again, which the read count below would show.
	time.Sleep(100 * time.Millisecond)
	if _, err := f.other.Turns.Cancel(context.Background(), f.conv, 1); err != nil {
		t.Fatal(err)
	}
	got := chattest.Receive(t, "WaitTurn to return at the final event", res)
	if got.err != nil || got.turn.State != chat.StateCancelled {
		t.Fatalf("WaitTurn = %v, %v; want the cancelled turn", got.turn.State, got.err)
	}
	// The first read, the read after following, the read at the final
	// event.
	if n := f.store.reads.Load(); n != 3 {
		t.Errorf("the long-poll read the turn %d times, want 3", n)
	}
}

// TestWaitTurnSeesASettleBeforeItFollows: a turn settled after the first
// read but before the follow started, whose event the follow never
// delivers, is seen by the read after following.
func TestWaitTurnSeesASettleBeforeItFollows(t *testing.T) {
	t.Parallel()
	f := setupWait(t, true)
	f.follower.onFollow = func() {
		// Settle in the store alone: no event is published.
		if _, err := f.store.SettleTurn(context.Background(), f.turnID, chat.StateCancelled, chat.ReasonCancelled, "gone", nil); err != nil {
			t.Error(err)
		}
	}
	// Had it missed the settle, it would wait the hour out.
	got := chattest.Receive(t, "WaitTurn to return with the settled turn", f.waitAsync(time.Hour))
	if got.err != nil || got.turn.State != chat.StateCancelled {
		t.Fatalf("WaitTurn = %v, %v; want the cancelled turn", got.turn.State, got.err)
	}
}

// TestWaitTurnEndsWithTheWait: a turn that does not settle is returned as
// it is when the wait ends; without a follower the store is polled.
func TestWaitTurnEndsWithTheWait(t *testing.T) {
	t.Parallel()
	for _, follow := range []bool{true, false} {
		f := setupWait(t, follow)
		// elapsed is a lower bound a loaded machine cannot break: the
		// wait is not cut short.
		got := chattest.Receive(t, "WaitTurn to return at the end of its wait", f.waitAsync(150*time.Millisecond))
		if got.err != nil || got.turn.State != chat.StateQueued || got.elapsed < 150*time.Millisecond {
			t.Fatalf("follow %v: WaitTurn = %v, %v after %v; want the queued turn after the wait", follow, got.turn.State, got.err, got.elapsed)
		}
		reads := f.store.reads.Load()
		res := f.waitAsync(time.Hour)
		chattest.Eventually(t, "WaitTurn's first read", func() bool { return f.store.reads.Load() > reads })
		if _, err := f.other.Turns.Cancel(context.Background(), f.conv, 1); err != nil {
			t.Fatal(err)
		}
		if got := chattest.Receive(t, "WaitTurn to return at the cancel", res); got.err != nil || got.turn.State != chat.StateCancelled {
			t.Fatalf("follow %v: WaitTurn = %v, %v; want cancelled", follow, got.turn.State, got.err)
		}
	}
}

// settleHookStore is the real store, with a hook run as soon as a settle
// is committed, before its caller goes on.
type settleHookStore struct {
	chattest.Store
	onSettled func()
}

func (s *settleHookStore) SettleTurn(ctx context.Context, turnID string, state chat.State, reason chat.Reason, note string, events []chat.Event) (chat.Turn, error) {
	t, err := s.Store.SettleTurn(ctx, turnID, state, reason, note, events)
	if err == nil && s.onSettled != nil {
		s.onSettled()
	}
	return t, err
}

// collect reads a subscription to its end.
func collect(t *testing.T, sub *chat.Subscription) []chat.Event {
	t.Helper()
	ctx := chattest.Context(t)
	var got []chat.Event
	for {
		batch, ok := sub.Next(ctx, nil)
		if !ok {
			if ctx.Err() != nil {
				t.Fatalf("subscription did not end; got %d events", len(got))
			}
			return got
		}
		for _, e := range batch {
			got = append(got, *e)
		}
	}
}

// seqTypes is each event as "seq:type".
func seqTypes(evs []chat.Event) []string {
	out := make([]string, len(evs))
	for i, e := range evs {
		out[i] = fmt.Sprintf("%d:%s", e.Seq, e.Type)
	}
	return out
}

// TestSubscribeRightAfterASettle: a client that subscribes the moment a
// settle is committed, before the settler goes on, gets the turn's stored
// final events (the settle stored them with the state), not an event made
// up in their stead; and a client that reconnects with the final event's
// id gets nothing more, its stream ends at once.
func TestSubscribeRightAfterASettle(t *testing.T) {
	t.Parallel()
	f := setupWait(t, true)
	hooked := &settleHookStore{Store: f.deps.Store}
	deps := f.deps
	deps.Store = hooked
	settler, err := chattest.New(chattest.Config{AnyPath: true}, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	var early []chat.Event
	hooked.onSettled = func() {
		ch, err := f.svc.Subscriptions.Subscribe(ctx, f.conv, 1, 0)
		if err != nil {
			t.Error(err)
			return
		}
		early = collect(t, ch)
	}
	if _, err := settler.Turns.Cancel(ctx, f.conv, 1); err != nil {
		t.Fatal(err)
	}
	stored, err := f.svc.Subscriptions.Transcript(ctx, f.conv, 1)
	if err != nil {
		t.Fatal(err)
	}
	if len(stored) == 0 || stored[len(stored)-1].Type != chat.EventError {
		t.Fatalf("stored events %v, want them to end with error", seqTypes(stored))
	}
	if diff := cmp.Diff(seqTypes(stored), seqTypes(early)); diff != "" {
		t.Errorf("a subscriber right after the settle (-stored +got):\n%s", diff)
	}
	last := stored[len(stored)-1].Seq
	ch, err := f.svc.Subscriptions.Subscribe(ctx, f.conv, 1, last)
	if err != nil {
		t.Fatal(err)
	}
	if again := collect(t, ch); len(again) != 0 {
		t.Errorf("reconnecting after the final event got %v, want nothing", seqTypes(again))
	}
}

// TestSubscribeWhileSettling: subscribers that join while another process
// cancels the turn, many times over, each get exactly the stored events.
func TestSubscribeWhileSettling(t *testing.T) {
	t.Parallel()
	f := setupWait(t, true)
	ctx := context.Background()
	for n := 1; n <= 30; n++ {
		if n > 1 {
			if _, err := f.svc.Turns.Continue(ctx, f.conv, chat.Ask{Question: "Again?"}); err != nil {
				t.Fatal(err)
			}
		}
		results := make(chan []chat.Event, 4)
		var start sync.WaitGroup
		start.Add(1)
		for range cap(results) {
			go func() {
				start.Wait()
				ch, err := f.svc.Subscriptions.Subscribe(ctx, f.conv, n, 0)
				if err != nil {
					t.Error(err)
					results <- nil
					return
				}
				results <- collect(t, ch)
			}()
		}
		start.Done()
		if _, err := f.other.Turns.Cancel(ctx, f.conv, n); err != nil {
			t.Fatal(err)
		}
		stored, err := f.svc.Subscriptions.Transcript(ctx, f.conv, n)
		if err != nil {
			t.Fatal(err)
		}
		for range cap(results) {
			if diff := cmp.Diff(seqTypes(stored), seqTypes(<-results)); diff != "" {
				t.Fatalf("turn %d: a subscriber's events (-stored +got):\n%s", n, diff)
			}
		}
	}
}

// TestSubscriptionFallingBehindCatchesUpFromTheStore: a subscriber that
// does not read while more events are published than its follow holds is
// dropped by the follower, then gets the rest from the store and follows
// again: every event once, in order.
func TestSubscriptionFallingBehindCatchesUpFromTheStore(t *testing.T) {
	t.Parallel()
	f := setupWait(t, false)
	events := worker.NewEvents(f.rdb, worker.EventsConfig{Buffer: 2})
	t.Cleanup(events.Stop)
	follower := &hookedFollower{Follower: events}
	deps := f.deps
	deps.Store, deps.Follower = f.store.Store, follower
	svc, err := chattest.New(chattest.Config{AnyPath: true}, deps)
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	turn, err := f.store.TurnByID(ctx, f.turnID)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := svc.Subscriptions.Subscribe(ctx, f.conv, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := make(chan time.Time)
	close(now) // Next returns at once when nothing is ready
	var got []int64
	read := func() {
		batch, ok := sub.Next(ctx, now)
		if !ok {
			t.Fatalf("the stream ended after %v", got)
		}
		for _, e := range batch {
			got = append(got, e.Seq)
		}
	}
	read() // the stored events; the follow is on
	if follower.follows.Load() != 1 {
		t.Fatalf("%d follows after the first read, want 1", follower.follows.Load())
	}
	// Another follower of the turn, as full as the subscriber's: once it
	// is dropped, the subscriber's follow was dropped too (the same entry
	// overflowed both).
	witness, err := events.Follow(ctx, f.turnID, turn.LastSeq)
	if err != nil {
		t.Fatal(err)
	}
	var evs []chat.Event
	for i := range 20 {
		evs = append(evs, chat.Event{Seq: turn.LastSeq + int64(i) + 1, Type: chat.EventTextDelta, Text: "x", At: time.Now()})
	}
	if err := f.store.AppendEvents(ctx, f.turnID, turn.Fence, evs); err != nil {
		t.Fatal(err)
	}
	if err := events.Publish(ctx, f.turnID, evs, nil); err != nil {
		t.Fatal(err)
	}
	chattest.Eventually(t, "the follow to be dropped", func() bool {
		select {
		case _, ok := <-witness:
			return !ok
		default:
			return false
		}
	})
	chattest.Eventually(t, "the subscriber to catch up on every event", func() bool {
		read()
		return len(got) >= int(turn.LastSeq)+len(evs)
	})
	var want []int64
	for seq := int64(1); seq <= turn.LastSeq+int64(len(evs)); seq++ {
		want = append(want, seq)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
	if n := follower.follows.Load(); n != 2 {
		t.Errorf("%d follows, want 2 (dropped once, then followed again)", n)
	}
}

// TestSubscriptionStreamsStoredThenLiveToTheFinalEvent: a subscription
// returns the stored events, then the live ones, and ends after the final
// event; one opened after it, with the final event's seq, ends with none.
func TestSubscriptionStreamsStoredThenLiveToTheFinalEvent(t *testing.T) {
	t.Parallel()
	f := setupWait(t, true)
	ctx := t.Context()
	stored, err := f.svc.Subscriptions.Transcript(ctx, f.conv, 1)
	if err != nil {
		t.Fatal(err)
	}
	sub, err := f.svc.Subscriptions.Subscribe(ctx, f.conv, 1, 0)
	if err != nil {
		t.Fatal(err)
	}
	now := make(chan time.Time)
	close(now)
	first, ok := sub.Next(ctx, now)
	if !ok || len(first) != len(stored) {
		t.Fatalf("first Next = %d events (%v), want the %d stored", len(first), ok, len(stored))
	}
	if _, err := f.other.Turns.Cancel(ctx, f.conv, 1); err != nil {
		t.Fatal(err)
	}
	rest := collect(t, sub)
	all, err := f.svc.Subscriptions.Transcript(ctx, f.conv, 1)
	if err != nil {
		t.Fatal(err)
	}
	var got []chat.Event
	for _, e := range first {
		got = append(got, *e)
	}
	got = append(got, rest...)
	if diff := cmp.Diff(seqTypes(all), seqTypes(got)); diff != "" {
		t.Errorf("stored then live (-transcript +got):\n%s", diff)
	}
	if len(got) == 0 || !got[len(got)-1].Final() {
		t.Fatalf("the stream did not end with the final event: %v", seqTypes(got))
	}
	again, err := f.svc.Subscriptions.Subscribe(ctx, f.conv, 1, got[len(got)-1].Seq)
	if err != nil {
		t.Fatal(err)
	}
	if evs, ok := again.Next(ctx, nil); ok || len(evs) != 0 {
		t.Errorf("after the final event: Next = %d events, %v; want none, ended", len(evs), ok)
	}
}
