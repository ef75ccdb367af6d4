package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

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

// text joins the text deltas of evs.
func text(evs []sseEvent) string {
	var b strings.Builder
	for _, e := range evs {
		if e.Type == "text_delta" {
			b.WriteString(e.Data["text"].(string))
		}
	}
	return b.String()
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

// TestSubscribeBeforeDuringAndAfter: subscribers that join before the turn
// starts, while it runs and after it settled see the same ordered events,
// ending with done; a failing turn's stream ends with error.
func TestSubscribeBeforeDuringAndAfter(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			v := e.review("scripted", nil)
			release := make(chan struct{})
			e.scripted.Push(liveStep(release))
			conv, _ := e.ask(v, "Why does Load refuse?")

			before := subscribe(t, e.url, conv, 1, "")
			e.serve(role{worker: true})
			e.waitCalls(1)
			during := subscribe(t, e.url, conv, 1, "")
			first, ok := during.next()
			if !ok || first.Type != "state" || first.Data["state"] != "running" {
				t.Fatalf("first event while running = %+v", first)
			}
			close(release)
			got := before.all()
			rest := during.all()
			if diff := cmp.Diff(got, append([]sseEvent{first}, rest...)); diff != "" {
				t.Errorf("during differs from before (-before +during):\n%s", diff)
			}
			after := subscribe(t, e.url, conv, 1, "").all()
			if diff := cmp.Diff(got, after); diff != "" {
				t.Errorf("after differs from before (-before +after):\n%s", diff)
			}
			// The review kept no session, so the turn is seeded and says so.
			wantTypes := []string{"state", "note", "tool_start", "tool_result", "text", "note", "usage", "state", "done"}
			if diff := cmp.Diff(wantTypes, types(got)); diff != "" {
				t.Errorf("event types (-want +got):\n%s", diff)
			}
			if txt := text(got); txt != "Load refuses an empty path." {
				t.Errorf("streamed text = %q", txt)
			}
			for i, ev := range got {
				if ev.Seq != int64(i+1) {
					t.Fatalf("seqs = %v, want 1..%d", seqs(got), len(got))
				}
			}
			done := got[len(got)-1].Data
			if done["conversation_id"] != conv || done["turn"] != float64(1) || done["answer"] == nil {
				t.Errorf("done = %v", done)
			}

			// A failing turn ends with error, for a live and a late subscriber.
			e.scripted.Push(scripted.Step{Wait: make(chan struct{}), Events: []chat.Event{{Type: chat.EventTextDelta, Text: "thinking"}}})
			e.do("POST", "/api/v1/conversations/"+conv+"/turns", map[string]any{"question": "Again?"}, http.StatusAccepted, nil)
			live := subscribe(t, e.url, conv, 2, "")
			e.waitCalls(2)
			e.do("POST", "/api/v1/conversations/"+conv+"/turns/2/cancel", nil, http.StatusAccepted, nil)
			failed := live.all()
			last := failed[len(failed)-1]
			if last.Type != "error" || last.Data["reason"] != "cancelled" || last.Data["trace_id"] == "" {
				t.Errorf("last event = %+v, want error with reason cancelled and a trace id", last)
			}
			late := subscribe(t, e.url, conv, 2, "").all()
			if diff := cmp.Diff(seqs(failed), seqs(late)); diff != "" {
				t.Errorf("late subscriber's seqs differ:\n%s", diff)
			}
		})
	}
}

// TestReconnectWithLastEventID: a client that drops mid-stream and
// reconnects with Last-Event-ID gets the rest, without gap or duplicate.
func TestReconnectWithLastEventID(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("scripted", nil)
	release := make(chan struct{})
	e.scripted.Push(liveStep(release))
	conv, _ := e.ask(v, "Why?")
	e.waitCalls(1)

	s := subscribe(t, e.url, conv, 1, "")
	var head []sseEvent
	for len(head) < 3 {
		ev, ok := s.next()
		if !ok {
			t.Fatal("stream ended early")
		}
		head = append(head, ev)
	}
	s.close()
	close(release)
	tail := subscribe(t, e.url, conv, 1, head[len(head)-1].ID).all()
	joined := append(head, tail...)
	full := subscribe(t, e.url, conv, 1, "").all()
	if diff := cmp.Diff(seqs(full), seqs(joined)); diff != "" {
		t.Fatalf("reconnected stream differs (-full +joined):\n%s", diff)
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
			want := []string{"note", "tool_start", "tool_result", "text", "note", "usage", "state", "done"}
			if diff := cmp.Diff(want, types(ga)); diff != "" {
				t.Fatalf("events after the first (-want +got):\n%s", diff)
			}
		})
	}
}

// TestStalledSubscriberBlocksNothing: a client that never reads its stream
// delays neither the turn nor another subscriber.
func TestStalledSubscriberBlocksNothing(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("scripted", nil)
	release := make(chan struct{})
	step := scripted.Step{Wait: release, Answer: goodAnswer("done")}
	big := strings.Repeat("word ", 400)
	for i := 0; i < 3000; i++ {
		step.Events = append(step.Events, chat.Event{Type: chat.EventToolResult, ToolID: strconv.Itoa(i), ToolName: "Read", Summary: big})
	}
	e.scripted.Push(step)
	conv, _ := e.ask(v, "Stall?")

	// The stalled client: it sends the request and never reads.
	addr := strings.TrimPrefix(e.url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET /api/v1/conversations/%s/turns/1/events HTTP/1.1\r\nHost: %s\r\n\r\n", conv, addr)

	reader := subscribe(t, e.url, conv, 1, "")
	close(release)
	got := reader.all()
	if got[len(got)-1].Type != "done" || len(got) != 3000+6 {
		t.Fatalf("the reading subscriber got %d events ending in %s", len(got), got[len(got)-1].Type)
	}
	if turn := e.wait(conv, 1); turn.State != "succeeded" {
		t.Fatalf("turn = %+v", turn)
	}
}

// TestPingsKeepIdleStreamsOpen: an idle stream gets ": ping" comments.
func TestPingsKeepIdleStreamsOpen(t *testing.T) {
	t.Parallel()
	e := prepare(t, mode{name: "embedded"}, nil)
	e.opts.pingInterval = 20 * time.Millisecond
	e.serve(roleOf("serve"))
	v := e.review("scripted", nil)
	release := make(chan struct{})
	e.scripted.Push(scripted.Step{Wait: release, Answer: goodAnswer("late")})
	conv, _ := e.ask(v, "Slow?")
	e.waitCalls(1)
	s := subscribe(t, e.url, conv, 1, "")
	if ev, ok := s.next(); !ok || ev.Type != "state" {
		t.Fatalf("first event = %+v", ev)
	}
	time.Sleep(150 * time.Millisecond)
	close(release)
	s.all()
	if s.pings < 2 {
		t.Fatalf("saw %d pings on a stream idle for 150ms with a 20ms ping interval", s.pings)
	}
}

// TestTranscript returns the stored events of a settled turn.
func TestTranscript(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("scripted", nil)
	release := make(chan struct{})
	close(release)
	e.scripted.Push(liveStep(release))
	conv, _ := e.ask(v, "Why?")
	e.wait(conv, 1)
	var out struct{ Events []map[string]any }
	e.do("GET", "/api/v1/conversations/"+conv+"/turns/1/transcript", nil, http.StatusOK, &out)
	var evs []sseEvent
	for _, ev := range out.Events {
		evs = append(evs, sseEvent{Type: ev["type"].(string), Data: ev})
	}
	got := types(evs)
	want := []string{"state", "note", "tool_start", "tool_result", "text", "note", "usage", "state", "done"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("transcript (-want +got):\n%s", diff)
	}
}

// TestRepositoryFeed: a dashboard's feed sees a turn go queued, running,
// succeeded.
func TestRepositoryFeed(t *testing.T) {
	t.Parallel()
	e := setup(t, mode{name: "embedded"}, nil)
	v := e.review("local", nil)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, "GET", e.url+"/api/v1/repos/"+e.repo+"/events", nil)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	s := &sseStream{t: t, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	time.Sleep(50 * time.Millisecond) // the feed follows from now
	conv, _ := e.ask(v, "Where is Load?")
	var states []string
	for len(states) < 3 {
		ev, ok := s.next()
		if !ok {
			t.Fatalf("feed ended after %v", states)
		}
		if ev.Data["conversation_id"] != conv {
			t.Fatalf("feed event of another conversation: %v", ev.Data)
		}
		states = append(states, ev.Data["state"].(string))
		if ev.ID == "" {
			t.Error("feed event without id")
		}
	}
	if diff := cmp.Diff([]string{"queued", "running", "succeeded"}, states); diff != "" {
		t.Fatalf("feed states (-want +got):\n%s", diff)
	}
}
