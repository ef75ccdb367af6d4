package chat_test

import (
	"bytes"
	"context"
	"encoding/json"
	"sync"
	"testing"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/store/storetest"
)

// handedEvents records the events a run hands to the store and to the
// publisher.
type handedEvents struct {
	mu        sync.Mutex
	stored    []chat.Event
	published []chat.Event
}

// recordingStore is a store that records the events it is given.
type recordingStore struct {
	chattest.Store
	h *handedEvents
}

func (s recordingStore) AppendEvents(ctx context.Context, turnID string, fence int64, evs []chat.Event) error {
	s.h.mu.Lock()
	s.h.stored = append(s.h.stored, evs...)
	s.h.mu.Unlock()
	return s.Store.AppendEvents(ctx, turnID, fence, evs)
}

func (s recordingStore) FinishTurn(ctx context.Context, turnID string, fence int64, o chat.Outcome) error {
	s.h.mu.Lock()
	s.h.stored = append(s.h.stored, o.Events...)
	s.h.mu.Unlock()
	return s.Store.FinishTurn(ctx, turnID, fence, o)
}

// recordingPublisher records what is published.
type recordingPublisher struct{ h *handedEvents }

func (p recordingPublisher) Publish(_ context.Context, _ string, evs []chat.Event, _ []chat.FeedEvent) error {
	p.h.mu.Lock()
	p.h.published = append(p.h.published, evs...)
	p.h.mu.Unlock()
	return nil
}

func (recordingPublisher) PublishFeed(context.Context, string, chat.FeedEvent) error { return nil }

// TestEventsAreEncodedOnce: a run encodes each event once, when it is
// masked and numbered, and hands the store and the publisher the same
// bytes, which are the event's JSON.
func TestEventsAreEncodedOnce(t *testing.T) {
	t.Parallel()
	h := &handedEvents{}
	f := setupPublishing(t, recordingStore{Store: storetest.New(t), h: h}, recordingPublisher{h})
	f.scripted.Push(scripted.Step{
		Events: []chat.Event{
			{Type: chat.EventToolStart, ToolID: "t1", ToolName: "read_file", Input: json.RawMessage(`{"path":"a.go"}`)},
			{Type: chat.EventToolResult, ToolID: "t1", ToolName: "read_file", Summary: "3 lines"},
			{Type: chat.EventTextDelta, Text: "A does nothing."},
		},
		Answer: answer("A does nothing."),
	})
	if err := f.services[0].Runner.Run(context.Background(), f.turn, "w1/a"); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.stored) < 5 || len(h.published) != len(h.stored) {
		t.Fatalf("stored %d events, published %d; want the same 5 or more", len(h.stored), len(h.published))
	}
	for i, st := range h.stored {
		pub := h.published[i]
		if len(st.Encoded) == 0 {
			t.Errorf("event %d (%s) reached the store without its encoding", st.Seq, st.Type)
			continue
		}
		plain := st
		plain.Encoded = nil
		want, err := json.Marshal(plain)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(st.Encoded, want) {
			t.Errorf("event %d: encoded %s, want its JSON %s", st.Seq, st.Encoded, want)
		}
		if len(pub.Encoded) == 0 || &pub.Encoded[0] != &st.Encoded[0] {
			t.Errorf("event %d (%s): the publisher got other bytes than the store (encoded twice)", st.Seq, st.Type)
		}
	}
}
