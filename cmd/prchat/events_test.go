package main

import (
	"encoding/json"
	"fmt"
	"net/http"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/api/apitest"
	"github.com/prchat/prchat/chat"
)

// sseEvent and sseStream are the API tests' stream reader (apitest).
type (
	sseEvent  = apitest.Event
	sseStream = apitest.Stream
)

func types(evs []sseEvent) []string { return apitest.Types(evs) }
func seqs(evs []sseEvent) []int64   { return apitest.Seqs(evs) }

// subscribe opens a turn's event stream, from lastID if not "".
func subscribe(t *testing.T, base, conv string, n int, lastID string) *sseStream {
	t.Helper()
	v, err := validator()
	if err != nil {
		t.Fatal(err)
	}
	req, _ := http.NewRequest("GET", fmt.Sprintf("%s/api/v1/conversations/%s/turns/%d/events", base, conv, n), nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	return apitest.OpenStream(t, v, req, "TurnEvent")
}

// liveStep is a scripted agent call that reports tool steps and text, then
// waits for release.
func liveStep(release chan struct{}) scripted.Step {
	return scripted.Step{
		Events: []chat.Event{
			{Type: chat.EventToolStart, ToolID: "t1", ToolName: "Read", Input: json.RawMessage(`{"path":"settings/settings.go"}`)},
			{Type: chat.EventToolResult, ToolID: "t1", ToolName: "Read", Summary: "read 13 lines"},
			{Type: chat.EventTextDelta, Text: "Load refuses "},
			{Type: chat.EventTextDelta, Text: "an empty path."},
		},
		Wait:   release,
		Answer: goodAnswer("Load refuses an empty path."),
	}
}

// TestTwoAPIProcessesOneWorker: a subscriber on each of two API processes
// receives every event of a turn the one worker runs.
func TestTwoAPIProcessesOneWorker(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			second := e.serve(role{api: true})
			e.serve(role{worker: true})
			v := e.review("scripted", nil)
			release := make(chan struct{})
			e.scripted.Push(liveStep(release))
			conv, _ := e.ask(v, "Why?")
			e.waitCalls(1)
			a := subscribe(t, e.url, conv, 1, "")
			b := subscribe(t, second.URL(), conv, 1, "")
			// Both are following live before the rest of the events come.
			for _, s := range []*sseStream{a, b} {
				if ev, ok := s.Next(); !ok || ev.Seq != 1 {
					t.Fatalf("first event = %+v", ev)
				}
			}
			close(release)
			ga, gb := a.All(), b.All()
			if diff := cmp.Diff(seqs(ga), seqs(gb)); diff != "" {
				t.Fatalf("the two API processes delivered different events:\n%s", diff)
			}
			// The seeded note comes first and once: the final note holds
			// nothing new.
			want := []string{"note", "tool_start", "tool_result", "text", "usage", "state", "done"}
			if diff := cmp.Diff(want, types(ga)); diff != "" {
				t.Fatalf("events after the first (-want +got):\n%s", diff)
			}
		})
	}
}
