package api

import (
	"net"
	"runtime"
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// TestFramesRenderASharedEventOnce: every subscriber handed the same live
// event (one pointer, as the Follower shares it) gets one rendering of it;
// another event, even with the same fields, its own; an error event
// without a trace id of its own takes each request's; and a frame is
// dropped with its event.
func TestFramesRenderASharedEventOnce(t *testing.T) {
	var f frames
	e := &chat.Event{Seq: 1, Type: chat.EventTextDelta, Text: "a"}
	first, second := f.turnFrame(e, "req-1").frame(), f.turnFrame(e, "req-2").frame()
	if string(first) != string(turnFrame(*e, "")) {
		t.Fatalf("frame = %q, want %q", first, turnFrame(*e, ""))
	}
	if &first[0] != &second[0] {
		t.Error("the same event was rendered twice")
	}
	same := *e
	if third := f.turnFrame(&same, "").frame(); &third[0] == &first[0] {
		t.Error("another event got the first one's frame")
	}
	fail := &chat.Event{Seq: 2, Type: chat.EventError, Message: "no", Reason: chat.ReasonCancelled}
	a, b := f.turnFrame(fail, "req-1").frame(), f.turnFrame(fail, "req-2").frame()
	if string(a) == string(b) || string(a) != string(turnFrame(*fail, "req-1")) {
		t.Errorf("an error event without a trace id: %q and %q, want each request's trace id", a, b)
	}
	runtime.KeepAlive(e)
	e, fail = nil, nil
	chattest.Eventually(t, "no frame kept after its events are gone", func() bool {
		runtime.GC()
		return countFrames(&f) == 0
	})
}

func countFrames(f *frames) int {
	n := 0
	f.m.Range(func(any, any) bool { n++; return true })
	return n
}

// TestSharedFrameGoesOutAsItsChunk: a taken-over stream that sends one
// shared frame alone writes the frame's own chunk (no copy); with more
// queued beside it, one chunk of its own that holds both.
func TestSharedFrameGoesOutAsItsChunk(t *testing.T) {
	f := newSharedFrame([]byte("id: 1\nevent: data\ndata: {}\n\n"))
	if want := "1c\r\nid: 1\nevent: data\ndata: {}\n\n\r\n"; string(f.chunk) != want {
		t.Fatalf("chunk = %q, want %q", f.chunk, want)
	}
	conn := &writesConn{}
	s := &sse{conn: conn, ctx: t.Context()}
	s.writeFrame(f)
	s.flush()
	s.writeFrame(f)
	s.writeString(": ping\n\n")
	s.flush()
	if len(conn.writes) != 2 {
		t.Fatalf("%d writes, want 2", len(conn.writes))
	}
	if &conn.writes[0][0] != &f.chunk[0] {
		t.Error("a shared frame sent alone was copied")
	}
	if want := "24\r\nid: 1\nevent: data\ndata: {}\n\n: ping\n\n\r\n"; string(conn.writes[1]) != want {
		t.Errorf("second chunk = %q, want %q", conn.writes[1], want)
	}
	if string(f.chunk) != "1c\r\nid: 1\nevent: data\ndata: {}\n\n\r\n" {
		t.Errorf("the shared chunk changed: %q", f.chunk)
	}
}

// TestStreamEndsInOneWrite: a taken-over stream's end sends what is
// queued (its final event) and the last chunk in one write, then closes
// the connection; with nothing queued, the last chunk alone.
func TestStreamEndsInOneWrite(t *testing.T) {
	f := newSharedFrame([]byte("id: 1\nevent: data\ndata: {}\n\n"))
	conn := &writesConn{}
	s := &sse{conn: conn, ctx: t.Context()}
	s.writeFrame(f)
	s.end()
	if len(conn.writes) != 1 {
		t.Fatalf("%d writes, want 1", len(conn.writes))
	}
	if want := "1c\r\nid: 1\nevent: data\ndata: {}\n\n\r\n0\r\n\r\n"; string(conn.writes[0]) != want {
		t.Errorf("write = %q, want %q", conn.writes[0], want)
	}
	if !conn.closed {
		t.Error("the connection was not closed")
	}
	if string(f.chunk) != "1c\r\nid: 1\nevent: data\ndata: {}\n\n\r\n" {
		t.Errorf("the shared chunk changed: %q", f.chunk)
	}

	idle := &writesConn{}
	s = &sse{conn: idle, ctx: t.Context()}
	s.end()
	if len(idle.writes) != 1 || string(idle.writes[0]) != "0\r\n\r\n" || !idle.closed {
		t.Errorf("an idle stream's end wrote %q (closed %v), want the last chunk alone, then a close", idle.writes, idle.closed)
	}
}

// writesConn is a connection that keeps what is written to it, each write
// as it came (the bytes are not copied).
type writesConn struct {
	net.Conn
	writes [][]byte
	closed bool
}

func (c *writesConn) Close() error {
	c.closed = true
	return nil
}

func (c *writesConn) Write(b []byte) (int, error) {
	c.writes = append(c.writes, b)
	return len(b), nil
}

func (c *writesConn) SetWriteDeadline(time.Time) error { return nil }
