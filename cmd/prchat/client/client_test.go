package client

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestDoReturnsTheContractsError: an error answer becomes "code: message",
// and the token goes out as a bearer token.
func TestDoReturnsTheContractsError(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Authorization") != "Bearer tok" {
			http.Error(w, "no token", http.StatusUnauthorized)
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusConflict)
		_, _ = w.Write([]byte(`{"error":{"code":"busy","message":"a turn is pending"}}`))
	}))
	defer srv.Close()
	err := New(srv.URL+"/", "tok").Do(t.Context(), "POST", "/api/v1/x", map[string]string{"a": "b"}, nil)
	if err == nil || err.Error() != "busy: a turn is pending" {
		t.Errorf("Do = %v, want busy: a turn is pending", err)
	}
	err = New(srv.URL, "").Do(t.Context(), "GET", "/api/v1/x", nil, nil)
	if err == nil || !strings.HasPrefix(err.Error(), "GET /api/v1/x: HTTP 401 (") || !strings.Contains(err.Error(), "set PRCHAT_TOKEN") {
		t.Errorf("Do without a token = %v, want HTTP 401 and PRCHAT_TOKEN", err)
	}
}

// TestNotesShownOnce: a note line Progress showed is not printed again
// with the turn; one it did not show is.
func TestNotesShownOnce(t *testing.T) {
	t.Parallel()
	var live, final bytes.Buffer
	p := NewProgress(&live, false)
	p.event(map[string]any{"type": chat.EventNote, "text": "seeded"})
	p.event(map[string]any{"type": chat.EventNote, "text": "seeded"})
	PrintTurn(&final, chat.Turn{State: chat.StateSucceeded, Answer: &chat.Answer{AnswerMarkdown: "ok"}, Note: "seeded\nno session kept"}, false, p)
	if diff := cmp.Diff("note: seeded\n", live.String()); diff != "" {
		t.Errorf("live (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff("ok\n\nno session kept\n", final.String()); diff != "" {
		t.Errorf("printed turn (-want +got):\n%s", diff)
	}
	final.Reset()
	PrintTurn(&final, chat.Turn{State: chat.StateFailed, Reason: "timeout", Note: "took too long"}, false, nil)
	if diff := cmp.Diff("\ntook too long\nThe turn failed (timeout).\n", final.String()); diff != "" {
		t.Errorf("printed failed turn (-want +got):\n%s", diff)
	}
}

func TestRenderMarkdown(t *testing.T) {
	t.Parallel()
	md := "## Why\n\nLoad **refuses** it:\n\n- returns `errEmptyPath`\n\n```go\nreturn err\n```\n"
	want := "Why\n\nLoad refuses it:\n\n• returns errEmptyPath\n\n    return err"
	if diff := cmp.Diff(want, renderMarkdown(md, false)); diff != "" {
		t.Errorf("plain (-want +got):\n%s", diff)
	}
	if got := renderMarkdown("**b**", true); !strings.Contains(got, bold+"b\033[0m") {
		t.Errorf("terminal rendering of bold = %q", got)
	}
}

// TestStreamFollowsTheReconnectHint: a stream that a stopping server ends
// with its reconnect hint is followed again with Last-Event-ID, after the
// retry it asked for, as often as it asks (more often than the reconnects
// allowed for broken connections), and no event is shown twice.
func TestStreamFollowsTheReconnectHint(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lastIDs []string
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("Content-Type", "application/json")
			_, _ = w.Write([]byte(`{"state":"succeeded","answer":{"answer_markdown":"ok","citations":[]}}`))
			return
		}
		mu.Lock()
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		n := len(lastIDs)
		mu.Unlock()
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 3600000\n\n") // an hour: only the hint's 10ms ends the stream within the test's patience
		if n <= 7 {                         // one note per connection, then the server stops
			fmt.Fprintf(w, "id: %d\nevent: data\ndata: {\"type\":\"note\",\"seq\":%d,\"text\":\"note %d\"}\n\n", n, n, n)
			fmt.Fprint(w, "retry: 10\n: reconnect: the server is stopping; reconnect with Last-Event-ID\n\n")
			return
		}
		fmt.Fprintf(w, "id: %d\nevent: data\ndata: {\"type\":\"done\",\"seq\":%d}\n\n", n, n)
	}))
	defer srv.Close()
	var live bytes.Buffer
	turn, err := New(srv.URL, "").Stream(chattest.Context(t), "c1", 1, NewProgress(&live, false))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if turn.State != chat.StateSucceeded {
		t.Errorf("turn %+v", turn)
	}
	if diff := cmp.Diff([]string{"", "1", "2", "3", "4", "5", "6", "7"}, lastIDs); diff != "" {
		t.Errorf("Last-Event-ID of each connection (-want +got):\n%s", diff)
	}
	if got := strings.Count(live.String(), "note "); got != 7 {
		t.Errorf("%d notes shown, want 7:\n%s", got, live.String())
	}
}

// TestStreamEndsAtASettledTurnsEmptyStream: a stream that ends with no
// final event and no reconnect hint is a settled turn's (the server sends
// nothing twice to a client past the final event) when the turn reads
// settled: Stream returns that turn at once instead of reconnecting until
// it gives up; while the turn is pending it reconnects as before.
func TestStreamEndsAtASettledTurnsEmptyStream(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	var lastIDs []string
	settled := false
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("Content-Type", "application/json")
			state := "running"
			if settled {
				state = "failed"
			}
			fmt.Fprintf(w, `{"state":%q,"note":"boom"}`, state)
			return
		}
		lastIDs = append(lastIDs, r.Header.Get("Last-Event-ID"))
		w.Header().Set("Content-Type", "text/event-stream")
		fmt.Fprint(w, "retry: 3000\n\n")
		if len(lastIDs) == 1 {
			// The connection breaks after one event; the turn is pending.
			fmt.Fprint(w, "id: 1\nevent: data\ndata: {\"type\":\"state\",\"seq\":1,\"state\":\"running\"}\n\n")
			return
		}
		// The turn settled meanwhile; this stream has nothing to send.
		settled = true
	}))
	defer srv.Close()
	turn, err := New(srv.URL, "").Stream(t.Context(), "c1", 1, NewProgress(&bytes.Buffer{}, false))
	if err != nil {
		t.Fatalf("Stream: %v", err)
	}
	if turn.State != chat.StateFailed || turn.Note != "boom" {
		t.Errorf("turn %+v, want the failed turn", turn)
	}
	mu.Lock()
	defer mu.Unlock()
	if diff := cmp.Diff([]string{"", "1"}, lastIDs); diff != "" {
		t.Errorf("Last-Event-ID of each connection (-want +got):\n%s", diff)
	}
}

// TestStreamStopsAt204: a reconnect the server answers 204 (the client had
// the final event) reads the turn and stops, with no error.
func TestStreamStopsAt204(t *testing.T) {
	t.Parallel()
	var mu sync.Mutex
	streams := 0
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		defer mu.Unlock()
		if !strings.HasSuffix(r.URL.Path, "/events") {
			w.Header().Set("Content-Type", "application/json")
			fmt.Fprint(w, `{"state":"succeeded","answer":{"answer_markdown":"ok","citations":[],"suggests_fix":null}}`)
			return
		}
		streams++
		w.WriteHeader(http.StatusNoContent)
	}))
	defer srv.Close()
	turn, err := New(srv.URL, "").Stream(t.Context(), "c1", 1, NewProgress(&bytes.Buffer{}, false))
	if err != nil || turn.State != chat.StateSucceeded {
		t.Fatalf("Stream = %+v, %v; want the succeeded turn", turn, err)
	}
	mu.Lock()
	defer mu.Unlock()
	if streams != 1 {
		t.Errorf("%d requests of the stream, want 1", streams)
	}
}
