package api_test

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/api"
	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

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

// eventsGolden is a list of events as a golden file holds them: a run of
// text deltas is one event with their text joined, and seqs (checked
// apart) are left out, so that the file does not change with how the
// masker splits text.
func eventsGolden(evs []map[string]any) response {
	var out []map[string]any
	for _, e := range evs {
		c := map[string]any{}
		for k, v := range e {
			if k != "seq" {
				c[k] = v
			}
		}
		if n := len(out); n > 0 && c["type"] == "text_delta" && out[n-1]["type"] == "text_delta" {
			out[n-1]["text"] = out[n-1]["text"].(string) + c["text"].(string)
			continue
		}
		out = append(out, c)
	}
	raw, _ := json.Marshal(map[string]any{"events": out})
	return response{status: http.StatusOK, header: http.Header{}, body: raw}
}

// streamGolden is eventsGolden of a stream's events.
func streamGolden(evs []sseEvent) response {
	data := make([]map[string]any, len(evs))
	for i, e := range evs {
		data[i] = e.Data
	}
	return eventsGolden(data)
}

// TestShutdownTellsStreamsToReconnect: a stopping server ends every open
// event stream with a reconnect hint (a short retry: and a ": reconnect"
// comment); a client that reconnects with Last-Event-ID to a server that
// runs gets the rest of the events, nothing twice.
func TestShutdownTellsStreamsToReconnect(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	release := make(chan struct{})
	f.scripted.Push(liveStep(release))
	conv := f.ask(v, "Why does Load refuse?")
	f.run(conv, 1)
	f.waitCalls(1)
	turn := f.subscribe(conv, 1, "")
	first, ok := turn.Next()
	if !ok {
		t.Fatal("no first event")
	}
	feed := f.c.stream(t, "/api/v1/repos/"+repoName+"/events", "FeedEvent")

	ctx, cancel := context.WithTimeout(context.Background(), chattest.Patience())
	defer cancel()
	start := time.Now()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	t.Logf("shutdown took %v with two open streams", time.Since(start).Round(time.Millisecond))
	for name, s := range map[string]*sseStream{"turn": turn, "feed": feed} {
		for {
			if _, ok := s.Next(); !ok {
				break
			}
		}
		if want := "retry: 500\n: reconnect: the server is stopping; reconnect with Last-Event-ID\n"; s.Hint != want {
			t.Errorf("%s stream ended with %q, want the reconnect hint %q", name, s.Hint, want)
		}
	}

	// Another API instance on the same service serves the rest.
	other, err := api.New(api.Config{PingInterval: time.Minute}, apiDomain(f.svc))
	if err != nil {
		t.Fatal(err)
	}
	f.c = newClient(t, serve(t, other))
	close(release)
	rest := f.subscribe(conv, 1, first.ID).All()
	if len(rest) == 0 || rest[0].Seq != first.Seq+1 || rest[len(rest)-1].Type != "done" {
		t.Errorf("after reconnecting: %v (seqs %v), want seqs from %d ending done", types(rest), seqs(rest), first.Seq+1)
	}
}

// TestSubscribeBeforeDuringAndAfter: subscribers that join before the turn
// starts, while it runs and after it settled see the same ordered events
// (testdata/events/succeeded.json), ending with done; a cancelled turn's
// stream ends with error, for a live and a late subscriber.
func TestSubscribeBeforeDuringAndAfter(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	release := make(chan struct{})
	f.scripted.Push(liveStep(release))
	conv := f.ask(v, "Why does Load refuse?")

	before := f.subscribe(conv, 1, "")
	f.run(conv, 1)
	f.waitCalls(1)
	during := f.subscribe(conv, 1, "")
	first, ok := during.Next()
	if !ok || first.Type != "state" || first.Data["state"] != "running" {
		t.Fatalf("first event while running = %+v", first)
	}
	close(release)
	got := before.All()
	rest := during.All()
	if diff := cmp.Diff(got, append([]sseEvent{first}, rest...)); diff != "" {
		t.Errorf("during differs from before (-before +during):\n%s", diff)
	}
	after := f.subscribe(conv, 1, "").All()
	if diff := cmp.Diff(got, after); diff != "" {
		t.Errorf("after differs from before (-before +after):\n%s", diff)
	}
	for i, ev := range got {
		if ev.Seq != int64(i+1) {
			t.Fatalf("seqs = %v, want 1..%d", seqs(got), len(got))
		}
	}
	f.golden(t, "events/succeeded", streamGolden(got))

	// A cancelled turn ends with error, for a live and a late subscriber.
	f.scripted.Push(scripted.Step{Hang: true, Events: []chat.Event{{Type: chat.EventTextDelta, Text: "thinking"}}})
	n := f.next(conv, "Again?")
	live := f.subscribe(conv, n, "")
	f.run(conv, n)
	f.waitCalls(2)
	f.do("POST", fmt.Sprintf("/api/v1/conversations/%s/turns/%d/cancel", conv, n), nil, http.StatusAccepted, nil)
	failed := live.All()
	last := failed[len(failed)-1]
	if last.Type != "error" || last.Data["reason"] != "cancelled" || last.Data["trace_id"] == "" {
		t.Errorf("last event = %+v, want error with reason cancelled and a trace id", last)
	}
	late := f.subscribe(conv, n, "").All()
	if diff := cmp.Diff(types(failed), types(late)); diff != "" {
		t.Errorf("late subscriber's events differ (-live +late):\n%s", diff)
	}
	if diff := cmp.Diff(seqs(failed), seqs(late)); diff != "" {
		t.Errorf("late subscriber's seqs differ (-live +late):\n%s", diff)
	}
}

// TestReconnectWithLastEventID: a client that drops mid-stream and
// reconnects with Last-Event-ID (or ?last_event_id=) gets the rest, without
// gap or duplicate; one that reconnects with the final event's id (or a
// later one) gets 204 No Content, which stops an EventSource.
func TestReconnectWithLastEventID(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	release := make(chan struct{})
	f.scripted.Push(liveStep(release))
	conv := f.ask(v, "Why?")
	f.run(conv, 1)
	f.waitCalls(1)

	s := f.subscribe(conv, 1, "")
	var head []sseEvent
	for len(head) < 3 {
		ev, ok := s.Next()
		if !ok {
			t.Fatal("stream ended early")
		}
		head = append(head, ev)
	}
	s.Close()
	close(release)
	lastID := head[len(head)-1].ID
	tail := f.subscribe(conv, 1, lastID).All()
	full := f.subscribe(conv, 1, "").All()
	if diff := cmp.Diff(full, append(head, tail...)); diff != "" {
		t.Fatalf("reconnected stream differs (-full +joined):\n%s", diff)
	}
	byQuery := f.c.stream(t, fmt.Sprintf("/api/v1/conversations/%s/turns/1/events?last_event_id=%s", conv, lastID), "TurnEvent").All()
	if diff := cmp.Diff(tail, byQuery); diff != "" {
		t.Fatalf("?last_event_id differs from Last-Event-ID (-header +query):\n%s", diff)
	}

	// A client that reconnects with the final event's id (it had it, the
	// connection dropped before it stopped reading; an EventSource that was
	// never closed) gets nothing twice: 204 No Content, the SSE standard's
	// way to tell it to stop reconnecting.
	final := full[len(full)-1]
	for _, after := range []string{final.ID, strconv.FormatInt(final.Seq+5, 10)} {
		r := f.c.send(t, "GET", fmt.Sprintf("/api/v1/conversations/%s/turns/1/events", conv), nil, "Last-Event-ID", after)
		if r.status != http.StatusNoContent || len(r.body) != 0 {
			t.Errorf("reconnecting after %s (final %s): %d %q, want 204 and no body", after, final.ID, r.status, r.body)
		}
	}
	// One event before the final one still gets the final event.
	if got := f.subscribe(conv, 1, strconv.FormatInt(final.Seq-1, 10)).All(); len(got) != 1 || got[0].Seq != final.Seq {
		t.Errorf("reconnecting one before the final event: %v", seqs(got))
	}
}

// TestStalledSubscriberBlocksNothing: a client that never reads its stream
// delays neither the turn nor another subscriber.
func TestStalledSubscriberBlocksNothing(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	release := make(chan struct{})
	step := scripted.Step{Wait: release, Answer: goodAnswer("done")}
	big := strings.Repeat("word ", 400)
	for i := 0; i < 3000; i++ {
		step.Events = append(step.Events, chat.Event{Type: chat.EventToolResult, ToolID: strconv.Itoa(i), ToolName: "Read", Summary: big})
	}
	f.scripted.Push(step)
	conv := f.ask(v, "Stall?")

	// The stalled client: it sends the request and never reads.
	addr := strings.TrimPrefix(f.url, "http://")
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if tc, ok := conn.(*net.TCPConn); ok {
		_ = tc.SetReadBuffer(4096)
	}
	fmt.Fprintf(conn, "GET /api/v1/conversations/%s/turns/1/events HTTP/1.1\r\nHost: %s\r\n\r\n", conv, addr)

	reader := f.subscribe(conv, 1, "")
	done := f.run(conv, 1)
	close(release)
	got := reader.All()
	// running, the seeded note, 3000 results, usage, succeeded, done.
	if got[len(got)-1].Type != "done" || len(got) != 3000+5 {
		t.Fatalf("the reading subscriber got %d events ending in %s", len(got), got[len(got)-1].Type)
	}
	chattest.Receive(t, "the run to end", done)
}

// TestPingsKeepIdleStreamsOpen: an idle stream gets ": ping" comments.
func TestPingsKeepIdleStreamsOpen(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.api.PingInterval = 20 * time.Millisecond })
	v := f.review("scripted", nil)
	release := make(chan struct{})
	f.scripted.Push(scripted.Step{Wait: release, Answer: goodAnswer("late")})
	conv := f.ask(v, "Slow?")
	f.run(conv, 1)
	f.waitCalls(1)
	s := f.subscribe(conv, 1, "")
	if ev, ok := s.Next(); !ok || ev.Type != "state" {
		t.Fatalf("first event = %+v", ev)
	}
	time.Sleep(150 * time.Millisecond) // the stream stays idle a while: the behaviour under test
	close(release)
	s.All()
	if s.Pings < 2 {
		t.Fatalf("saw %d pings on a stream idle for 150ms with a 20ms ping interval", s.Pings)
	}
}

// TestTranscript returns the stored events of a settled turn
// (testdata/events/transcript.json), the same as its stream.
func TestTranscript(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	release := make(chan struct{})
	close(release)
	f.scripted.Push(liveStep(release))
	conv := f.ask(v, "Why?")
	f.settle(conv, 1)
	r := f.c.send(t, "GET", "/api/v1/conversations/"+conv+"/turns/1/transcript", nil)
	if r.status != http.StatusOK {
		t.Fatalf("transcript = %d %s", r.status, r.body)
	}
	var out struct{ Events []map[string]any }
	if err := json.Unmarshal(r.body, &out); err != nil {
		t.Fatal(err)
	}
	f.golden(t, "events/transcript", eventsGolden(out.Events))
	stream := f.subscribe(conv, 1, "").All()
	if len(stream) != len(out.Events) {
		t.Fatalf("transcript has %d events, the stream %d", len(out.Events), len(stream))
	}
	for i, e := range stream {
		if diff := cmp.Diff(e.Data, out.Events[i]); diff != "" {
			t.Errorf("event %d: stream (-) and transcript (+) differ:\n%s", i+1, diff)
		}
	}
}

// TestRepositoryFeed: a dashboard's feed sees a turn go queued, running,
// succeeded, each event with its feed position as id; a client that
// reconnects with one of them gets the rest; a position that is none is
// refused.
func TestRepositoryFeed(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("local", nil)
	// The feed follows from when its headers came: its position is the
	// feed's last before they are sent.
	s := f.c.stream(t, "/api/v1/repos/"+repoName+"/events", "FeedEvent")
	conv := f.ask(v, "Where is Load?")
	f.run(conv, 1)
	var states []string
	var ids []string
	for len(states) < 3 {
		ev, ok := s.Next()
		if !ok {
			t.Fatalf("feed ended after %v", states)
		}
		if ev.Data["conversation_id"] != conv {
			t.Fatalf("feed event of another conversation: %v", ev.Data)
		}
		states = append(states, ev.Data["state"].(string))
		ids = append(ids, ev.ID)
		if ev.ID == "" {
			t.Error("feed event without id")
		}
	}
	if diff := cmp.Diff([]string{"queued", "running", "succeeded"}, states); diff != "" {
		t.Fatalf("feed states (-want +got):\n%s", diff)
	}
	// A client reconnecting with Last-Event-ID while the first one still
	// reads the feed gets what came after it.
	again := f.c.stream(t, "/api/v1/repos/"+repoName+"/events", "FeedEvent", "Last-Event-ID", ids[0])
	for i, want := range states[1:] {
		ev, ok := again.Next()
		if !ok || ev.ID != ids[i+1] || ev.Data["state"] != want {
			t.Fatalf("reconnected feed event %d = %+v (%v), want %s with id %s", i, ev, ok, want, ids[i+1])
		}
	}
	r := f.c.send(t, "GET", "/api/v1/repos/"+repoName+"/events", nil, "Last-Event-ID", "not-a-position")
	if r.status != http.StatusBadRequest {
		t.Errorf("a bad feed position = %d %s, want 400", r.status, r.body)
	}
}

// TestShutdownEndsStreams: Shutdown ends the open event streams at once.
func TestShutdownEndsStreams(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	f.scripted.Push(scripted.Step{Hang: true})
	conv := f.ask(v, "Forever?")
	srv, err := api.New(api.Config{}, apiDomain(f.svc))
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = srv.Serve(ln) }()
	s := newClient(t, "http://"+ln.Addr().String()).stream(t, fmt.Sprintf("/api/v1/conversations/%s/turns/1/events", conv), "TurnEvent")
	ctx, cancel := context.WithTimeout(context.Background(), chattest.Patience())
	defer cancel()
	if err := srv.Shutdown(ctx); err != nil {
		t.Fatalf("shutdown with a stream open: %v", err)
	}
	if _, ok := s.Next(); ok {
		t.Error("the stream went on after Shutdown")
	}
}

// TestStreamOverHTTP10AndHTTP11: an HTTP/1.1 stream (taken over from the
// HTTP server, in chunks) and an HTTP/1.0 one (served by the handler, the
// body ending with the connection) carry the contract's headers and the
// same events, ending with done.
func TestStreamOverHTTP10AndHTTP11(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	release := make(chan struct{})
	close(release)
	f.scripted.Push(liveStep(release))
	conv := f.ask(v, "Why?")
	f.settle(conv, 1)
	want := f.subscribe(conv, 1, "").All()
	addr := strings.TrimPrefix(f.url, "http://")
	for _, proto := range []string{"HTTP/1.0", "HTTP/1.1"} {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		_ = conn.SetDeadline(time.Now().Add(chattest.Patience()))
		fmt.Fprintf(conn, "GET /api/v1/conversations/%s/turns/1/events %s\r\nHost: %s\r\n\r\n", conv, proto, addr)
		resp, err := http.ReadResponse(bufio.NewReader(conn), &http.Request{Method: "GET"})
		if err != nil {
			t.Fatalf("%s: %v", proto, err)
		}
		for h, v := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
			if got := resp.Header.Get(h); got != v {
				t.Errorf("%s: header %s = %q, want %q", proto, h, got, v)
			}
		}
		if chunked := slices.Contains(resp.TransferEncoding, "chunked"); chunked != (proto == "HTTP/1.1") {
			t.Errorf("%s: transfer encoding %v", proto, resp.TransferEncoding)
		}
		body, err := io.ReadAll(resp.Body)
		if err != nil {
			t.Fatalf("%s: the stream did not end cleanly: %v", proto, err)
		}
		if !strings.HasPrefix(string(body), "retry: 3000\n\n") {
			t.Errorf("%s: the stream begins %.40q", proto, body)
		}
		var ids []string
		for _, line := range strings.Split(string(body), "\n") {
			if id, ok := strings.CutPrefix(line, "id: "); ok {
				ids = append(ids, id)
			}
		}
		var wantIDs []string
		for _, e := range want {
			wantIDs = append(wantIDs, e.ID)
		}
		if diff := cmp.Diff(wantIDs, ids); diff != "" {
			t.Errorf("%s: event ids (-want +got):\n%s", proto, diff)
		}
		if !strings.Contains(string(body), `"type":"done"`) {
			t.Errorf("%s: no done event in %q", proto, body)
		}
	}
}

// TestTakenOverStreamSaysConnectionClose: a client that asks for a
// keep-alive connection gets "Connection: close" on an HTTP/1.1 stream,
// and the server does close the connection after the final event, so a
// keep-alive pool (Node's agent, say) never sends a request on a socket
// that is about to go.
func TestTakenOverStreamSaysConnectionClose(t *testing.T) {
	t.Parallel()
	f := setup(t)
	v := f.review("scripted", nil)
	f.scripted.Push(scripted.Step{Answer: goodAnswer("done")})
	conv := f.ask(v, "Why?")
	<-f.run(conv, 1)

	conn := rawEvents(t, f, conv, "Connection: keep-alive\r\n")
	r := bufio.NewReader(conn)
	resp, err := http.ReadResponse(r, nil)
	if err != nil {
		t.Fatal(err)
	}
	// net/http takes "Connection: close" out of the header into Close.
	if !resp.Close {
		t.Errorf("the stream does not say Connection: close: %v", resp.Header)
	}
	body, err := io.ReadAll(resp.Body)
	if err != nil || !strings.Contains(string(body), `"type":"done"`) {
		t.Fatalf("stream: %v\n%s", err, body)
	}
	// The server closed the connection: a second request gets no answer.
	fmt.Fprintf(conn, "GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")
	if n, err := r.Read(make([]byte, 1)); err == nil {
		t.Errorf("read %d bytes after the stream ended; want the connection closed", n)
	}
}

// TestStreamEndIsSpreadAfterTheFinalEvent: a taken-over stream gets its
// final event at once and then stays open, up to EndSpread, before its
// last chunk (the thousands of streams of one turn do not all close at
// the same moment); a server that begins to stop ends it at once, with
// the last chunk.
func TestStreamEndIsSpreadAfterTheFinalEvent(t *testing.T) {
	t.Parallel()
	f := setup(t, func(o *options) { o.api.EndSpread = time.Hour })
	v := f.review("scripted", nil)
	f.scripted.Push(scripted.Step{Answer: goodAnswer("done")})
	conv := f.ask(v, "Why?")
	<-f.run(conv, 1)

	conn := rawEvents(t, f, conv, "")
	// Read raw: a read that times out breaks an http.Response's body.
	r := bufio.NewReader(conn)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			t.Fatalf("the stream ended before its done event: %v", err)
		}
		if strings.Contains(line, `"type":"done"`) {
			break
		}
	}
	// The blank line that ends the event, and the end of its chunk.
	for _, want := range []string{"\n", "\r\n"} {
		if line, err := r.ReadString('\n'); line != want || err != nil {
			t.Fatalf("after the done event: %q, %v; want %q", line, err, want)
		}
	}
	// Still open: a short read finds nothing (an hour's spread).
	_ = conn.SetReadDeadline(time.Now().Add(300 * time.Millisecond))
	if b, err := r.ReadByte(); !errors.Is(err, os.ErrDeadlineExceeded) {
		t.Fatalf("after done: read %q, %v; want the stream still open", b, err)
	}
	_ = conn.SetReadDeadline(time.Now().Add(chattest.Patience()))

	ctx, cancel := context.WithTimeout(context.Background(), chattest.Patience())
	defer cancel()
	if err := f.srv.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if rest, err := io.ReadAll(r); err != nil || string(rest) != "0\r\n\r\n" {
		t.Errorf("when the server stopped, the stream ended with %q, %v; want the last chunk, then the close", rest, err)
	}
}

// rawEvents asks for the events of turn 1 of conv over a connection of its
// own, with the given header lines (each ending "\r\n"), and returns the
// connection, closed when the test ends.
func rawEvents(t *testing.T, f *fixture, conv, headers string) net.Conn {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(f.url, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close() })
	_ = conn.SetDeadline(time.Now().Add(chattest.Patience()))
	fmt.Fprintf(conn, "GET /api/v1/conversations/%s/turns/1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n%s\r\n", conv, headers)
	return conn
}
