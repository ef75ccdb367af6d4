package fakeapi_test

import (
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/prchat/prchat/agentsession/fakeapi"
	"github.com/prchat/prchat/chat/chattest"
)

type request struct {
	N    int
	Text string
}

func TestScript(t *testing.T) {
	t.Parallel()
	s := &fakeapi.Script[request, string]{Number: func(r *request, n int) { r.N = n }}
	if _, _, ok := s.Take(request{Text: "a"}); ok {
		t.Error("Take with nothing scripted reported a reply")
	}
	s.Push("one", "two")
	if got := s.Pending(); got != 2 {
		t.Errorf("Pending = %d, want 2", got)
	}
	var handled []request
	s.Handle(func(r request) string { handled = append(handled, r); return "handled " + r.Text })
	var got []string
	for _, text := range []string{"b", "c", "d"} {
		n, reply, ok := s.Take(request{Text: text})
		if !ok {
			t.Fatalf("Take(%s): no reply", text)
		}
		got = append(got, reply)
		if n != len(s.Requests()) {
			t.Errorf("Take(%s) numbered it %d, want %d", text, n, len(s.Requests()))
		}
	}
	if diff := cmp.Diff([]string{"one", "two", "handled d"}, got); diff != "" {
		t.Errorf("replies (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]request{{N: 4, Text: "d"}}, handled); diff != "" {
		t.Errorf("the handler saw (-want +got):\n%s", diff)
	}
	n := s.Record(request{Text: "e"})
	s.Amend(n, func(r *request) { r.Text = "e!" })
	want := []request{{1, "a"}, {2, "b"}, {3, "c"}, {4, "d"}, {5, "e!"}}
	if diff := cmp.Diff(want, s.Requests()); diff != "" {
		t.Errorf("Requests (-want +got):\n%s", diff)
	}
}

// TestScriptConcurrent: concurrent requests take the queued replies once
// each.
func TestScriptConcurrent(t *testing.T) {
	t.Parallel()
	var s fakeapi.Script[int, int]
	for i := range 100 {
		s.Push(i)
	}
	var mu sync.Mutex
	seen := map[int]bool{}
	var wg sync.WaitGroup
	for i := range 100 {
		wg.Go(func() {
			_, r, ok := s.Take(i)
			mu.Lock()
			defer mu.Unlock()
			if !ok || seen[r] {
				t.Errorf("reply %d (ok %v) taken twice or missing", r, ok)
			}
			seen[r] = true
		})
	}
	wg.Wait()
	if len(seen) != 100 || s.Pending() != 0 || len(s.Requests()) != 100 {
		t.Errorf("%d replies taken, %d pending, %d requests; want 100, 0, 100", len(seen), s.Pending(), len(s.Requests()))
	}
}

func TestSplit(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		s    string
		size int
		want []string
	}{
		{"", 3, nil},
		{"abcdefg", 3, []string{"abc", "def", "g"}},
		{"héllo", 2, []string{"hé", "ll", "o"}}, // é is 2 bytes: a piece may run over to end a rune
		{"ab", 0, []string{"a", "b"}},
	} {
		if diff := cmp.Diff(tc.want, fakeapi.Split(tc.s, tc.size)); diff != "" {
			t.Errorf("Split(%q, %d) (-want +got):\n%s", tc.s, tc.size, diff)
		}
		if strings.Join(fakeapi.Split(tc.s, tc.size), "") != tc.s {
			t.Errorf("Split(%q, %d) loses text", tc.s, tc.size)
		}
	}
	if diff := cmp.Diff([]string{"hé", "ll", "o"}, fakeapi.SplitN("héllo", 3)); diff != "" {
		t.Errorf("SplitN (-want +got):\n%s", diff)
	}
	if got := fakeapi.SplitN("", 3); got != nil {
		t.Errorf("SplitN of nothing = %q", got)
	}
}

func TestEventsAndErrors(t *testing.T) {
	t.Parallel()
	rec := httptest.NewRecorder()
	e := fakeapi.StartEvents(rec)
	_ = e.Send("ping", map[string]int{"n": 1})
	_ = e.Send("", []int{2})
	_ = e.Raw("data: [DONE]")
	if got, want := rec.Body.String(), "event: ping\ndata: {\"n\":1}\n\ndata: [2]\n\ndata: [DONE]\n\n"; got != want || e.Err() != nil {
		t.Errorf("events = %q (err %v), want %q", got, e.Err(), want)
	}
	if ct := rec.Header().Get("Content-Type"); ct != "text/event-stream" {
		t.Errorf("Content-Type = %q", ct)
	}

	rec = httptest.NewRecorder()
	fakeapi.WriteJSON(rec, http.StatusTooManyRequests, fakeapi.OpenAIError("slow down", "rate_limit_error", "", nil))
	if got, want := rec.Body.String(), `{"error":{"code":null,"message":"slow down","param":null,"type":"rate_limit_error"}}`+"\n"; got != want || rec.Code != 429 {
		t.Errorf("error = %d %q, want 429 %q", rec.Code, got, want)
	}
}

// TestServerWait: a hanging reply ends when the server closes, a delay
// when the client goes away.
func TestServerWait(t *testing.T) {
	t.Parallel()
	var s *fakeapi.Server
	waited := make(chan bool, 1)
	arrived := make(chan struct{})
	s = fakeapi.Start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(arrived)
		waited <- s.Wait(r, 0, r.URL.Path == "/hang")
	}))
	go func() {
		if resp, err := http.Get(s.Base + "/hang"); err == nil {
			resp.Body.Close()
		}
	}()
	chattest.Receive(t, "the hanging request", arrived)
	s.Close()
	if ok := chattest.Receive(t, "Close to end a hanging reply", waited); ok {
		t.Error("Wait of a hang reported true after Close")
	}

	var s2 *fakeapi.Server
	s2 = fakeapi.Start(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		waited <- s2.Wait(r, time.Minute, false)
	}))
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	req, _ := http.NewRequestWithContext(ctx, http.MethodGet, s2.Base, nil)
	if resp, err := http.DefaultClient.Do(req); err == nil {
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	if ok := chattest.Receive(t, "the delay to end with its client", waited); ok {
		t.Error("Wait of a long delay reported true after the client went away")
	}
}
