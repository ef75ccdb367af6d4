package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat"
)

// sseEvent is one event as a client reads it off the wire.
type sseEvent struct {
	ID   string
	Type string
	Seq  int64
	Data map[string]any
}

// sseStream is an open SSE connection.
type sseStream struct {
	t      *testing.T
	resp   *http.Response
	r      *bufio.Reader
	retry  bool
	pings  int
	cancel context.CancelFunc
}

// subscribe opens a turn's event stream, from lastID if not "".
func subscribe(t *testing.T, base, conv string, n int, lastID string) *sseStream {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	req, _ := http.NewRequestWithContext(ctx, "GET", fmt.Sprintf("%s/api/v1/conversations/%s/turns/%d/events", base, conv, n), nil)
	if lastID != "" {
		req.Header.Set("Last-Event-ID", lastID)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		cancel()
		t.Fatalf("subscribe: status %d", resp.StatusCode)
	}
	checkResponse(t, req, resp, nil)
	for h, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no", "Connection": "keep-alive"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	s := &sseStream{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.close)
	return s
}

func (s *sseStream) close() {
	s.cancel()
	s.resp.Body.Close()
}

// next reads the next event; ok is false at the end of the stream.
func (s *sseStream) next() (sseEvent, bool) {
	s.t.Helper()
	var e sseEvent
	for {
		line, err := s.r.ReadString('\n')
		if err != nil {
			return e, false
		}
		line = strings.TrimRight(line, "\n")
		switch {
		case line == "":
			if e.Type != "" {
				return e, true
			}
		case line == "retry: 3000":
			s.retry = true
		case strings.HasPrefix(line, ": ping"):
			s.pings++
		case strings.HasPrefix(line, "id: "):
			e.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			if line != "event: data" {
				s.t.Errorf("event line %q, want event: data", line)
			}
		case strings.HasPrefix(line, "data: "):
			checkEvent(s.t, "TurnEvent", []byte(line[6:]))
			if err := json.Unmarshal([]byte(line[6:]), &e.Data); err != nil {
				s.t.Fatalf("data %q: %v", line, err)
			}
			e.Type, _ = e.Data["type"].(string)
			seq, hasSeq := e.Data["seq"].(float64)
			e.Seq = int64(seq)
			if hasSeq && strconv.FormatInt(e.Seq, 10) != e.ID {
				s.t.Errorf("event id %q and seq %d differ", e.ID, e.Seq)
			}
		}
	}
}

// all reads events until the stream ends, and checks it ended with done or
// error and that retry came first.
func (s *sseStream) all() []sseEvent {
	s.t.Helper()
	var out []sseEvent
	for {
		e, ok := s.next()
		if !ok {
			break
		}
		out = append(out, e)
	}
	if !s.retry {
		s.t.Error("the stream did not start with retry: 3000")
	}
	if len(out) == 0 || (out[len(out)-1].Type != "done" && out[len(out)-1].Type != "error") {
		s.t.Fatalf("the stream did not end with done or error: %v", types(out))
	}
	return out
}

// types lists the events' types, a run of text deltas as one "text" (the
// masker may split text differently than the agent did).
func types(evs []sseEvent) []string {
	var out []string
	for _, e := range evs {
		t := e.Type
		if t == "text_delta" {
			t = "text"
			if len(out) > 0 && out[len(out)-1] == t {
				continue
			}
		}
		out = append(out, t)
	}
	return out
}

func seqs(evs []sseEvent) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
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
				if ev, ok := s.next(); !ok || ev.Seq != 1 {
					t.Fatalf("first event = %+v", ev)
				}
			}
			close(release)
			ga, gb := a.all(), b.all()
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
