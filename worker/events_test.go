package worker

import (
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
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
		case <-time.After(5 * time.Second):
			t.Fatalf("turn event %d not delivered", want.Seq)
		}
	}
	for _, want := range news {
		select {
		case got := <-feed:
			if got.State != want.State || got.ConversationID != "c1" || got.ID == "" {
				t.Errorf("feed event %+v, want state %s of c1 with an id", got, want.State)
			}
		case <-time.After(5 * time.Second):
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
	case <-time.After(5 * time.Second):
		t.Fatal("feed event without turn events not delivered")
	}
}
