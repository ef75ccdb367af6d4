package apitest

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
)

// Event is one SSE event as a client reads it off the wire.
type Event struct {
	ID   string
	Type string
	Seq  int64
	Data map[string]any
}

// Stream is an open Server-Sent Events stream of the API, read the way the
// contract frames it; each event's data is checked against a schema of the
// document.
type Stream struct {
	// Retry is whether the stream began with "retry: 3000"; Pings counts
	// ": ping" comments; Hint holds the retry line and reconnect comment of
	// a stream a stopping server ended ("" for none).
	Retry bool
	Pings int
	Hint  string

	t      testing.TB
	v      *Validator
	schema string
	resp   *http.Response
	r      *bufio.Reader
	cancel context.CancelFunc
}

// OpenStream sends req, a GET of an SSE route, and returns its stream, whose
// events' data must follow schema (TurnEvent or FeedEvent). It fails t when
// the answer is not 200 with the contract's headers, or breaks the
// document. The stream is closed when the test ends, and a stream still
// open after five minutes (chattest.Within) fails the test rather than
// hanging it.
func OpenStream(t testing.TB, v *Validator, req *http.Request, schema string) *Stream {
	t.Helper()
	ctx, cancel := context.WithTimeout(req.Context(), chattest.Within(5*time.Minute))
	req = req.WithContext(ctx)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		cancel()
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		raw, _ := io.ReadAll(resp.Body)
		cancel()
		t.Fatalf("subscribe %s: status %d: %s", req.URL.Path, resp.StatusCode, raw)
	}
	if err := v.Check(req, resp.StatusCode, resp.Header, nil); err != nil {
		t.Error(err)
	}
	for h, want := range map[string]string{"Content-Type": "text/event-stream", "Cache-Control": "no-cache", "X-Accel-Buffering": "no"} {
		if got := resp.Header.Get(h); got != want {
			t.Errorf("header %s = %q, want %q", h, got, want)
		}
	}
	// An HTTP/1.1 stream is closed by the server when it ends, and says
	// so: Connection: close (which net/http reads into Close).
	if resp.ProtoMajor == 1 && resp.ProtoMinor == 1 && !resp.Close {
		t.Errorf("an HTTP/1.1 stream without Connection: close")
	}
	s := &Stream{t: t, v: v, schema: schema, resp: resp, r: bufio.NewReader(resp.Body), cancel: cancel}
	t.Cleanup(s.Close)
	return s
}

// Close ends the stream.
func (s *Stream) Close() {
	s.cancel()
	s.resp.Body.Close()
}

// Next reads the next event; ok is false at the end of the stream.
func (s *Stream) Next() (Event, bool) {
	s.t.Helper()
	var e Event
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
			s.Retry = true
		case strings.HasPrefix(line, "retry: "), strings.HasPrefix(line, ": reconnect"):
			s.Hint += line + "\n"
		case strings.HasPrefix(line, ": ping"):
			s.Pings++
		case strings.HasPrefix(line, "id: "):
			e.ID = line[4:]
		case strings.HasPrefix(line, "event: "):
			if line != "event: data" {
				s.t.Errorf("event line %q, want event: data", line)
			}
		case strings.HasPrefix(line, "data: "):
			raw := []byte(line[6:])
			if err := s.v.CheckSchema(s.schema, raw); err != nil {
				s.t.Errorf("event: %v", err)
			}
			if err := json.Unmarshal(raw, &e.Data); err != nil {
				s.t.Fatalf("data %q: %v", line, err)
			}
			e.Type, _ = e.Data["type"].(string)
			if seq, ok := e.Data["seq"].(float64); ok {
				e.Seq = int64(seq)
				if strconv.FormatInt(e.Seq, 10) != e.ID {
					s.t.Errorf("event id %q and seq %d differ", e.ID, e.Seq)
				}
			}
		default:
			s.t.Errorf("unexpected line %q in the stream", line)
		}
	}
}

// All reads events until the stream ends, and checks that retry came first
// and that the stream ended with done or error.
func (s *Stream) All() []Event {
	s.t.Helper()
	var out []Event
	for {
		e, ok := s.Next()
		if !ok {
			break
		}
		out = append(out, e)
	}
	if !s.Retry {
		s.t.Error("the stream did not start with retry: 3000")
	}
	if len(out) == 0 || (out[len(out)-1].Type != "done" && out[len(out)-1].Type != "error") {
		s.t.Fatalf("the stream did not end with done or error: %v", Types(out))
	}
	return out
}

// Types lists the events' types, a run of text deltas as one "text" (the
// masker may split text differently than the agent did).
func Types(evs []Event) []string {
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

// Seqs lists the events' sequence numbers.
func Seqs(evs []Event) []int64 {
	out := make([]int64, len(evs))
	for i, e := range evs {
		out[i] = e.Seq
	}
	return out
}
