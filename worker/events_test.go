package worker

import (
	"context"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestPublishEventsWithFeed: one Publish delivers a turn's events to its
// followers and the turn's state changes to its repository's feed, in order.
func TestPublishEventsWithFeed(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ev := NewEvents(e.rdb, EventsConfig{})
	t.Cleanup(ev.Stop)
	ctx := t.Context()
	turns, err := ev.Follow(ctx, "turn-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	feed, err := ev.FollowFeed(ctx, "acme/a", "")
	if err != nil {
		t.Fatal(err)
	}
	events := []chat.Event{
		{Seq: 1, Type: chat.EventState, State: chat.StateRunning},
		{Seq: 2, Type: chat.EventDone},
	}
	news := []chat.FeedEvent{
		{Type: "turn", Repository: "acme/a", ConversationID: "c1", Turn: 1, State: chat.StateRunning},
		{Type: "turn", Repository: "acme/a", ConversationID: "c1", Turn: 1, State: chat.StateSucceeded},
	}
	if err := ev.Publish(ctx, "turn-1", events, news); err != nil {
		t.Fatal(err)
	}
	for _, want := range events {
		select {
		case got := <-turns:
			if got.Seq != want.Seq || got.Type != want.Type {
				t.Errorf("turn event %+v, want %+v", got, want)
			}
		case <-time.After(chattest.Patience()):
			t.Fatalf("turn event %d not delivered", want.Seq)
		}
	}
	for _, want := range news {
		select {
		case got := <-feed:
			if got.State != want.State || got.ConversationID != "c1" || got.ID == "" {
				t.Errorf("feed event %+v, want state %s of c1 with an id", got, want.State)
			}
		case <-time.After(chattest.Patience()):
			t.Fatalf("feed event %s not delivered", want.State)
		}
	}
	// Feed news alone, with no events of the turn.
	if err := ev.Publish(ctx, "turn-1", nil, news[:1]); err != nil {
		t.Fatal(err)
	}
	select {
	case got := <-feed:
		if got.State != chat.StateRunning {
			t.Errorf("feed event %+v, want running", got)
		}
	case <-time.After(chattest.Patience()):
		t.Fatal("feed event without turn events not delivered")
	}
}

// eventsBackends runs fn on Events over the test's Redis (workertest: the
// real one when PRCHAT_TEST_REDIS_URL is set, else a miniredis) and over
// the embedded Redis that prchat serve runs without one.
func eventsBackends(t *testing.T, fn func(t *testing.T, ev *Events)) {
	t.Run("redis", func(t *testing.T) {
		t.Parallel()
		ev := NewEvents(setup(t).rdb, EventsConfig{Logger: testLogger(t)})
		t.Cleanup(ev.Stop)
		fn(t, ev)
	})
	t.Run("embedded", func(t *testing.T) {
		t.Parallel()
		e, err := StartEmbeddedRedis()
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(e.Close)
		rdb, err := e.Client(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = rdb.Close() })
		ev := NewEvents(rdb, EventsConfig{Logger: testLogger(t)})
		t.Cleanup(ev.Stop) // before the client and the server close
		fn(t, ev)
	})
}

// receive reads n values from ch, failing the test after chattest.Patience.
func receive[T any](t *testing.T, what string, ch <-chan T, n int) []T {
	t.Helper()
	var got []T
	for len(got) < n {
		select {
		case v, ok := <-ch:
			if !ok {
				t.Fatalf("%s: channel closed after %d of %d", what, len(got), n)
			}
			got = append(got, v)
		case <-time.After(chattest.Patience()):
			t.Fatalf("%s: %d of %d delivered", what, len(got), n)
		}
	}
	return got
}

// quiet fails the test if ch delivers anything within a short while: a
// while for a wrong delivery to show, not a wait for a condition.
func quiet[T any](t *testing.T, what string, ch <-chan T) {
	t.Helper()
	select {
	case v, ok := <-ch:
		if ok {
			t.Errorf("%s got %+v more", what, v)
		}
	case <-time.After(100 * time.Millisecond):
	}
}

// TestFollowerJoiningWithAPositionGetsWhatCameAfter: a follower that joins
// a stream another follower reads already, with a position (a client
// reconnecting with Last-Event-ID), gets the entries after that position
// and then the live ones; the follower that was there gets none twice.
func TestFollowerJoiningWithAPositionGetsWhatCameAfter(t *testing.T) {
	t.Parallel()
	eventsBackends(t, func(t *testing.T, ev *Events) {
		ctx := t.Context()
		states := []chat.State{chat.StateQueued, chat.StateRunning, chat.StateSucceeded, chat.StateQueued}
		news := make([]chat.FeedEvent, len(states))
		for i, s := range states {
			news[i] = chat.FeedEvent{Type: "turn", Repository: "acme/a", ConversationID: "c1", Turn: 1 + i/3, State: s}
		}
		stateOf := func(evs []chat.FeedEvent) []chat.State {
			out := make([]chat.State, len(evs))
			for i, e := range evs {
				out[i] = e.State
			}
			return out
		}

		// The feed.
		first, err := ev.FollowFeed(ctx, "acme/a", "")
		if err != nil {
			t.Fatal(err)
		}
		for _, fe := range news[:3] {
			if err := ev.PublishFeed(ctx, "acme/a", fe); err != nil {
				t.Fatal(err)
			}
		}
		had := receive(t, "first feed follower", first, 3)
		second, err := ev.FollowFeed(ctx, "acme/a", had[0].ID)
		if err != nil {
			t.Fatal(err)
		}
		replayed := receive(t, "feed follower joining after the first entry", second, 2)
		if diff := cmp.Diff(had[1:], replayed); diff != "" {
			t.Errorf("replayed feed (-first got +second got):\n%s", diff)
		}
		if err := ev.PublishFeed(ctx, "acme/a", news[3]); err != nil {
			t.Fatal(err)
		}
		for name, ch := range map[string]<-chan chat.FeedEvent{"first": first, "second": second} {
			got := receive(t, name+" feed follower, live", ch, 1)
			if diff := cmp.Diff(states[3:], stateOf(got)); diff != "" {
				t.Errorf("%s feed follower's live entry (-want +got):\n%s", name, diff)
			}
			quiet(t, name+" feed follower", ch)
		}

		// A turn's stream.
		turn, err := ev.Follow(ctx, "turn-1", 0)
		if err != nil {
			t.Fatal(err)
		}
		seqs := func(evs []*chat.Event) []int64 {
			out := make([]int64, len(evs))
			for i, e := range evs {
				out[i] = e.Seq
			}
			return out
		}
		events := []chat.Event{
			{Seq: 1, Type: chat.EventState, State: chat.StateRunning},
			{Seq: 2, Type: chat.EventTextDelta, Text: "a"},
			{Seq: 3, Type: chat.EventTextDelta, Text: "b"},
			{Seq: 4, Type: chat.EventDone},
		}
		if err := ev.Publish(ctx, "turn-1", events[:3], nil); err != nil {
			t.Fatal(err)
		}
		if got := seqs(receive(t, "first turn follower", turn, 3)); !cmp.Equal(got, []int64{1, 2, 3}) {
			t.Errorf("first turn follower got seqs %v, want 1..3", got)
		}
		again, err := ev.Follow(ctx, "turn-1", 1)
		if err != nil {
			t.Fatal(err)
		}
		if got := seqs(receive(t, "turn follower joining after 1", again, 2)); !cmp.Equal(got, []int64{2, 3}) {
			t.Errorf("turn follower joining after 1 got seqs %v, want 2, 3", got)
		}
		if err := ev.Publish(ctx, "turn-1", events[3:], nil); err != nil {
			t.Fatal(err)
		}
		for name, ch := range map[string]<-chan *chat.Event{"first": turn, "second": again} {
			if got := seqs(receive(t, name+" turn follower, live", ch, 1)); !cmp.Equal(got, []int64{4}) {
				t.Errorf("%s turn follower's live event: seqs %v, want 4", name, got)
			}
			quiet(t, name+" turn follower", ch)
		}
	})
}

// TestFollowersJoiningWhilePublishing: followers that join a turn's stream
// at any position while its events are published, one by one, each get
// every event after their position, in order, none twice.
func TestFollowersJoiningWhilePublishing(t *testing.T) {
	t.Parallel()
	eventsBackends(t, func(t *testing.T, ev *Events) {
		ev.cfg.Buffer = 1024 // room for a replay of the whole stream
		ctx := t.Context()
		const total, followers = 200, 20
		published := make(chan int64, total)
		go func() {
			for seq := int64(1); seq <= total; seq++ {
				if err := ev.Publish(ctx, "turn-1", []chat.Event{{Seq: seq, Type: chat.EventTextDelta, Text: "x"}}, nil); err != nil {
					t.Error(err)
					return
				}
				published <- seq
			}
		}()
		errs := make(chan error, followers)
		for i := range followers {
			// Join after a number of events, at a position behind them.
			var last int64
			for range total / followers {
				last = <-published
			}
			after := last / int64(1+i%3)
			ch, err := ev.Follow(ctx, "turn-1", after)
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				want := after + 1
				for want <= total {
					select {
					case e, ok := <-ch:
						if !ok {
							errs <- fmt.Errorf("follower after %d: closed at %d", after, want)
							return
						}
						if e.Seq != want {
							errs <- fmt.Errorf("follower after %d: seq %d, want %d", after, e.Seq, want)
							return
						}
						want++
					case <-time.After(chattest.Patience()):
						errs <- fmt.Errorf("follower after %d: waited for %d", after, want)
						return
					}
				}
				errs <- nil
			}()
		}
		for range followers {
			if err := <-errs; err != nil {
				t.Error(err)
			}
		}
	})
}

// TestFollowersShareOneValuePerEvent: every follower of a turn gets the
// same decoded value (one pointer) for an entry, so that the API renders it
// once for all of them, and a
// follower that joins a stream already read gets the entries after its
// position.
func TestFollowersShareOneValuePerEvent(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ev := NewEvents(e.rdb, EventsConfig{})
	t.Cleanup(ev.Stop)
	ctx := t.Context()
	a, err := ev.Follow(ctx, "turn-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	b, err := ev.Follow(ctx, "turn-1", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Publish(ctx, "turn-1", []chat.Event{{Seq: 1, Type: chat.EventTextDelta, Text: "a"}}, nil); err != nil {
		t.Fatal(err)
	}
	first, second := receive(t, "a", a, 1)[0], receive(t, "b", b, 1)[0]
	if first != second {
		t.Errorf("the followers got two values for one entry: %p and %p", first, second)
	}
	if first.Text != "a" {
		t.Errorf("the followers got %q, want a", first.Text)
	}
	// A follower joining at the reader's position: no replay, the next
	// entry.
	c, err := ev.Follow(ctx, "turn-1", 1)
	if err != nil {
		t.Fatal(err)
	}
	if err := ev.Publish(ctx, "turn-1", []chat.Event{{Seq: 2, Type: chat.EventTextDelta, Text: "b"}}, nil); err != nil {
		t.Fatal(err)
	}
	if got := receive(t, "c", c, 1)[0]; got.Seq != 2 {
		t.Errorf("the follower joining after 1 got seq %d, want 2", got.Seq)
	}
	quiet(t, "c", c)
}

// TestPublishSetsTTLsOnce: a running turn's stream and its repository's feed
// get their TTL with the first publish, not again with every one; the final
// event sets the settled TTL. A turn's life (queued and running news, three
// batches of events, done) sends three EXPIREs, not six.
func TestPublishSetsTTLsOnce(t *testing.T) {
	t.Parallel()
	e := setup(t)
	counter := &commandCounter{}
	expires := &expireCounter{}
	e.rdb.AddHook(counter)
	e.rdb.AddHook(expires)
	ev := NewEvents(e.rdb, EventsConfig{TTL: time.Hour, SettledTTL: time.Minute})
	t.Cleanup(ev.Stop)
	ctx := t.Context()
	news := func(s chat.State) []chat.FeedEvent {
		return []chat.FeedEvent{{Type: "turn", Repository: "acme/a", ConversationID: "c1", Turn: 1, State: s}}
	}
	publish := func(evs []chat.Event, feed []chat.FeedEvent) {
		t.Helper()
		if err := ev.Publish(ctx, "turn-1", evs, feed); err != nil {
			t.Fatal(err)
		}
	}
	publish(nil, news(chat.StateQueued))
	publish([]chat.Event{{Seq: 1, Type: chat.EventState, State: chat.StateRunning}}, news(chat.StateRunning))
	if ttl := e.rdb.TTL(ctx, turnKey("turn-1")).Val(); ttl <= 50*time.Minute {
		t.Errorf("running turn's stream TTL %v, want about an hour", ttl)
	}
	publish([]chat.Event{{Seq: 2, Type: chat.EventNote, Text: "a"}}, nil)
	publish([]chat.Event{{Seq: 3, Type: chat.EventNote, Text: "b"}}, nil)
	publish([]chat.Event{{Seq: 4, Type: chat.EventDone}}, news(chat.StateSucceeded))
	if ttl := e.rdb.TTL(ctx, turnKey("turn-1")).Val(); ttl <= 0 || ttl > time.Minute {
		t.Errorf("settled turn's stream TTL %v, want the settled TTL (1m)", ttl)
	}
	if ttl := e.rdb.TTL(ctx, feedKey("acme/a")).Val(); ttl <= 50*time.Minute {
		t.Errorf("feed TTL %v, want about an hour", ttl)
	}
	// feed queued, turn running, turn done (the settled TTL).
	if n := expires.n.Load(); n != 3 {
		t.Errorf("%d EXPIREs for a turn's life, want 3 (the feed's, the running stream's, the settled stream's)", n)
	}
	t.Logf("Redis commands for a turn's life: %d", counter.n.Load())
}

// expireCounter counts the EXPIREs a client sends.
type expireCounter struct{ n atomic.Int64 }

func (c *expireCounter) DialHook(next redis.DialHook) redis.DialHook { return next }
func (c *expireCounter) ProcessHook(next redis.ProcessHook) redis.ProcessHook {
	return func(ctx context.Context, cmd redis.Cmder) error { c.count(cmd); return next(ctx, cmd) }
}
func (c *expireCounter) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		for _, cmd := range cmds {
			c.count(cmd)
		}
		return next(ctx, cmds)
	}
}
func (c *expireCounter) count(cmd redis.Cmder) {
	if cmd.Name() == "expire" {
		c.n.Add(1)
	}
}

// TestPublishSendsTheEventsEncoding: the events of one Publish are one
// entry of the turn's stream, the array of their own encodings (not
// encoded again), whose id is the last one's seq; one event alone is an
// entry of its own.
func TestPublishSendsTheEventsEncoding(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ev := NewEvents(e.rdb, EventsConfig{})
	t.Cleanup(ev.Stop)
	ctx := t.Context()
	encoded := `{"seq":1,"type":"text_delta","text":"encoded once","at":"2026-01-02T03:04:05Z"}`
	events := []chat.Event{
		{Seq: 1, Type: chat.EventTextDelta, Text: "fields", Encoded: []byte(encoded)},
		{Seq: 2, Type: chat.EventState, State: chat.StateRunning}, // no encoding: made here
	}
	if err := ev.Publish(ctx, "turn-enc", events, nil); err != nil {
		t.Fatal(err)
	}
	if err := ev.Publish(ctx, "turn-enc", []chat.Event{{Seq: 3, Type: chat.EventDone}}, nil); err != nil {
		t.Fatal(err)
	}
	msgs, err := e.rdb.XRange(ctx, turnKey("turn-enc"), "-", "+").Result()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 2 || msgs[0].ID != "2-1" || msgs[1].ID != "3-1" {
		t.Fatalf("entries %v, want 2-1 (events 1 and 2) and 3-1", msgs)
	}
	batch, _ := msgs[0].Values["b"].(string)
	if !strings.HasPrefix(batch, "["+encoded+",") {
		t.Errorf("entry 2-1 = %q, want the array of the events starting with the first's own encoding %s", batch, encoded)
	}
	evs, err := decodeTurnEntry(msgs[0])
	if err != nil || len(evs) != 2 || evs[0].Text != "encoded once" || evs[1].State != chat.StateRunning {
		t.Errorf("entry 2-1 decodes to %+v, %v", evs, err)
	}
	if got, _ := msgs[1].Values["e"].(string); !strings.Contains(got, `"type":"done"`) {
		t.Errorf("entry 3-1 = %q, want the done event", got)
	}
}

// TestFollowInsideABatch: a follower that joins after an event in the
// middle of an entry gets only the events after it, also when the events
// it has are published again with more.
func TestFollowInsideABatch(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ev := NewEvents(e.rdb, EventsConfig{})
	t.Cleanup(ev.Stop)
	ctx := t.Context()
	if err := ev.Publish(ctx, "turn-b", []chat.Event{{Seq: 1, Type: chat.EventState}, {Seq: 2, Type: chat.EventNote}, {Seq: 3, Type: chat.EventNote}}, nil); err != nil {
		t.Fatal(err)
	}
	ch, err := ev.Follow(ctx, "turn-b", 2)
	if err != nil {
		t.Fatal(err)
	}
	// A retried publish repeats 3 with 4 and 5.
	if err := ev.Publish(ctx, "turn-b", []chat.Event{{Seq: 3, Type: chat.EventNote}, {Seq: 4, Type: chat.EventNote}, {Seq: 5, Type: chat.EventDone}}, nil); err != nil {
		t.Fatal(err)
	}
	var got []int64
	for len(got) < 3 {
		select {
		case e := <-ch:
			got = append(got, e.Seq)
		case <-time.After(5 * time.Second):
			t.Fatalf("got %v, then nothing", got)
		}
	}
	if diff := cmp.Diff([]int64{3, 4, 5}, got); diff != "" {
		t.Errorf("seqs (-want +got):\n%s", diff)
	}
}
