package api

import (
	"context"
	"encoding/json"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"
	"weak"

	"github.com/labstack/echo/v4"
	"github.com/prchat/prchat/chat"
)

// eventJSON renders an event with exactly the fields of its type in the
// contract's SSE table, plus type, seq and at.
func eventJSON(e chat.Event, traceID string) map[string]any {
	m := map[string]any{"type": e.Type, "seq": e.Seq, "at": e.At}
	switch e.Type {
	case chat.EventState:
		m["state"] = e.State
	case chat.EventTextDelta, chat.EventNote:
		m["text"] = e.Text
	case chat.EventToolStart:
		m["tool_id"], m["tool_name"] = e.ToolID, e.ToolName
		m["input"] = json.RawMessage("null")
		if len(e.Input) > 0 && json.Valid(e.Input) {
			m["input"] = e.Input
		}
	case chat.EventToolResult:
		m["tool_id"], m["tool_name"], m["summary"] = e.ToolID, e.ToolName, e.Summary
	case chat.EventUsage:
		m["input_tokens"], m["output_tokens"], m["cost_usd"] = deref(e.InputTokens), deref(e.OutputTokens), e.CostUSD
	case chat.EventDone:
		m["conversation_id"], m["turn"], m["answer"] = e.ConversationID, e.Turn, e.Answer
	case chat.EventError:
		if e.TraceID == "" {
			e.TraceID = traceID
		}
		m["message"], m["reason"], m["trace_id"] = e.Message, e.Reason, e.TraceID
	}
	return m
}

func deref(p *int64) int64 {
	if p == nil {
		return 0
	}
	return *p
}

// lastEventID reads where a reconnecting client left off: the
// Last-Event-ID header, or the last_event_id query parameter for clients
// that cannot set headers.
func lastEventID(c echo.Context) string {
	if v := c.Request().Header.Get("Last-Event-ID"); v != "" {
		return strings.TrimSpace(v)
	}
	return c.QueryParam("last_event_id")
}

// stalledWrite is how long a write to a taken-over stream may block (the
// client reads nothing) before the stream is given up.
const stalledWrite = time.Minute

// sse writes a Server-Sent Events stream: through the response, or, once
// taken over from the HTTP server (HTTP/1.1), straight to the connection,
// in chunks of its own, so that an open stream holds neither the server's
// buffers and goroutines nor the request.
type sse struct {
	w    *echo.Response // nil when taken over
	conn net.Conn       // when taken over
	buf  *[]byte        // the chunk being written on conn, nil between flushes
	// shared is a frame queued alone on conn, sent as its shared chunk
	// with no copy (nil when buf is used).
	shared *sharedFrame
	size   int64 // bytes written
	dead   bool  // a write failed
	// deadline is conn's write deadline.
	deadline time.Time
	// ctx is the stream's: once it ended, a write to conn may block
	// streamGoodbyeWait at most.
	ctx context.Context
}

// chunkRoom is the room kept before a chunk's data for its size line.
const chunkRoom = 18

var chunkPool = sync.Pool{New: func() any { b := make([]byte, chunkRoom, 1024); return &b }}

// startSSE begins the stream of c with the contract's headers and retry
// line. It takes the connection over from the HTTP server when it can (an
// HTTP/1.1 request): the stream then outlives the handler, which must
// return at once, and ends when ctx ends.
func startSSE(ctx context.Context, c echo.Context) *sse {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	s := &sse{ctx: ctx}
	if r := c.Request(); r.ProtoMajor == 1 && r.ProtoMinor >= 1 {
		if conn, _, err := c.Response().Hijack(); err == nil {
			s.conn = conn
			// The connection closes when the stream ends: a client's
			// keep-alive pool must not reuse it.
			h.Set("Connection", "close")
			h.Set("Transfer-Encoding", "chunked")
			h.Set("Date", time.Now().UTC().Format(http.TimeFormat))
			var head strings.Builder
			head.WriteString("HTTP/1.1 200 OK\r\n")
			_ = h.Write(&head)
			head.WriteString("\r\n")
			s.deadline = time.Now().Add(stalledWrite)
			_ = conn.SetWriteDeadline(s.deadline)
			if _, err := io.WriteString(conn, head.String()); err != nil {
				s.dead = true
			}
			s.writeString("retry: 3000\n\n")
			s.flush()
			return s
		}
	}
	c.Response().WriteHeader(http.StatusOK)
	s.w = c.Response()
	s.writeString("retry: 3000\n\n")
	s.flush()
	return s
}

// taken reports whether the stream was taken over from the HTTP server.
func (s *sse) taken() bool { return s.conn != nil }

// write queues b on the stream; flush sends what is queued.
func (s *sse) write(b []byte) bool {
	if s.dead {
		return false
	}
	if s.conn == nil {
		n, err := s.w.Write(b)
		s.size += int64(n)
		s.dead = err != nil
		return !s.dead
	}
	s.own()
	*s.buf = append(*s.buf, b...)
	s.size += int64(len(b))
	return true
}

// writeFrame queues a frame that many streams send: alone in a flush, its
// shared chunk goes out as it is, without a copy into the stream's own.
func (s *sse) writeFrame(f *sharedFrame) bool {
	if s.conn == nil || s.dead || s.buf != nil || s.shared != nil {
		return s.write(f.frame())
	}
	s.shared = f
	s.size += int64(len(f.frame()))
	return true
}

// own makes the stream's own chunk the one being written: a shared frame
// queued alone is copied into it.
func (s *sse) own() {
	if s.buf != nil {
		return
	}
	s.buf = chunkPool.Get().(*[]byte)
	if s.shared != nil {
		*s.buf = append(*s.buf, s.shared.frame()...)
		s.shared = nil
	}
}

func (s *sse) writeString(text string) bool {
	if s.conn == nil {
		if s.dead {
			return false
		}
		n, err := io.WriteString(s.w, text)
		s.size += int64(n)
		s.dead = err != nil
		return !s.dead
	}
	if s.dead {
		return false
	}
	s.own()
	*s.buf = append(*s.buf, text...)
	s.size += int64(len(text))
	return true
}

// flush sends what is queued: on a taken-over connection, as one chunk in
// one write.
func (s *sse) flush() bool {
	if s.conn == nil {
		if !s.dead {
			s.w.Flush()
		}
		return !s.dead
	}
	if f := s.shared; f != nil {
		s.shared = nil
		s.send(f.chunk)
		return !s.dead
	}
	if s.buf != nil {
		s.sendOwn("")
	}
	return !s.dead
}

// sendOwn sends the stream's own chunk, then tail, in one write, and gives
// the chunk's buffer back.
func (s *sse) sendOwn(tail string) {
	b := *s.buf
	start := chunkRoom
	if data := len(b) - chunkRoom; data > 0 {
		var size [chunkRoom]byte
		line := append(strconv.AppendInt(size[:0], int64(data), 16), "\r\n"...)
		start -= len(line)
		copy(b[start:], line)
		b = append(b, "\r\n"...)
	}
	b = append(b, tail...)
	s.send(b[start:])
	*s.buf = b[:chunkRoom]
	if cap(b) <= 64<<10 {
		chunkPool.Put(s.buf)
	}
	s.buf = nil
}

// send writes b on the taken-over connection.
func (s *sse) send(b []byte) {
	if s.dead {
		return
	}
	// The deadline moves when half of it is spent (a write that blocks
	// then has half a stalledWrite at least), or to the goodbye's.
	now := time.Now()
	if s.ctx.Err() != nil {
		s.deadline = now.Add(streamGoodbyeWait)
		_ = s.conn.SetWriteDeadline(s.deadline)
	} else if s.deadline.Sub(now) < stalledWrite/2 {
		s.deadline = now.Add(stalledWrite)
		_ = s.conn.SetWriteDeadline(s.deadline)
	}
	if _, err := s.conn.Write(b); err != nil {
		s.dead = true
	}
}

// lastChunk ends a chunked response.
const lastChunk = "0\r\n\r\n"

// end ends a taken-over stream: what is queued and the last chunk go out
// in one write (when every stream of a turn ends at its final event, that
// is one write each, not two), and the connection closes. A stream the
// HTTP server holds is flushed; the server ends it.
func (s *sse) end() {
	if s.conn == nil {
		s.flush()
		return
	}
	if !s.dead {
		s.own()
		s.sendOwn(lastChunk)
	}
	_ = s.conn.Close()
}

// frame renders an event of a stream: its id and its data, JSON.
func frame(id string, data any) []byte {
	j, err := json.Marshal(data)
	if err != nil {
		return nil
	}
	b := make([]byte, 0, len(id)+len(j)+32)
	b = append(b, "id: "...)
	b = append(b, id...)
	b = append(b, "\nevent: data\ndata: "...)
	b = append(b, j...)
	return append(b, "\n\n"...)
}

// turnFrame renders a turn's event.
func turnFrame(e chat.Event, traceID string) []byte {
	return frame(strconv.FormatInt(e.Seq, 10), eventJSON(e, traceID))
}

// sharedFrame is a rendered event that every stream of its turn in the
// process sends: its frame (id and data) wrapped in one HTTP/1.1 chunk,
// so that a stream that has nothing else to send writes it as it is.
type sharedFrame struct {
	chunk []byte // <size>\r\n<frame>\r\n
	start int    // where the frame begins in chunk
}

func newSharedFrame(frame []byte) *sharedFrame {
	head := strconv.AppendInt(make([]byte, 0, len(frame)+chunkRoom), int64(len(frame)), 16)
	head = append(head, "\r\n"...)
	start := len(head)
	return &sharedFrame{chunk: append(append(head, frame...), "\r\n"...), start: start}
}

// frame returns the frame without its chunk's framing.
func (f *sharedFrame) frame() []byte { return f.chunk[f.start : len(f.chunk)-2] }

// frames renders each live event once for every subscriber of its turn
// in the process: a Follower hands them all one *chat.Event per event,
// and its frame is kept, keyed by that pointer, for as long as the event
// lives.
type frames struct {
	m sync.Map // weak.Pointer[chat.Event] -> *sharedFrame
}

// turnFrame renders e, once for all who pass the same e, unless it takes
// this request's trace id (an error event that has none of its own).
func (f *frames) turnFrame(e *chat.Event, traceID string) *sharedFrame {
	if e.Type == chat.EventError && e.TraceID == "" {
		return newSharedFrame(turnFrame(*e, traceID))
	}
	key := weak.Make(e)
	if b, ok := f.m.Load(key); ok {
		return b.(*sharedFrame)
	}
	b := newSharedFrame(turnFrame(*e, ""))
	if had, loaded := f.m.LoadOrStore(key, b); loaded {
		return had.(*sharedFrame)
	}
	runtime.AddCleanup(e, func(k weak.Pointer[chat.Event]) { f.m.Delete(k) }, key)
	return b
}

// turnEvents streams a turn's events: the stored ones, then the live ones,
// until its final event.
func (s *Server) turnEvents(c echo.Context) error {
	n, err := positiveParam(c, "n")
	if err != nil {
		return err
	}
	var after int64
	if v := lastEventID(c); v != "" {
		if after, err = strconv.ParseInt(v, 10, 64); err != nil || after < 0 {
			return chat.Errorf(chat.CodeInvalid, "Last-Event-ID must be an event's id, not %q", v)
		}
	}
	ctx, detach, cancel := s.streamContext(c)
	sub, err := s.domain.Subscriptions.Subscribe(ctx, c.Param("id"), n, after)
	if err != nil {
		cancel()
		return err
	}
	if sub.Over() {
		// The client has the final event: 204 tells an EventSource to
		// stop reconnecting (DESIGN.md §6 "Subscribing").
		cancel()
		return c.NoContent(http.StatusNoContent)
	}
	traceID := requestID(c)
	return s.pump(ctx, c, detach, cancel, func(ctx context.Context, wake <-chan time.Time, out *sse) bool {
		evs, ok := sub.Next(ctx, wake)
		for _, e := range evs {
			if !out.writeFrame(s.frames.turnFrame(e, traceID)) {
				return false
			}
		}
		return ok
	})
}

// repoEvents streams the turn state changes of a repository's
// conversations, for dashboards.
func (s *Server) repoEvents(c echo.Context) error {
	ctx, detach, cancel := s.streamContext(c)
	events, err := s.domain.Subscriptions.SubscribeFeed(ctx, repoName(c), lastEventID(c))
	if err != nil {
		cancel()
		return err
	}
	return s.pump(ctx, c, detach, cancel, func(ctx context.Context, wake <-chan time.Time, out *sse) bool {
		select {
		case <-ctx.Done():
			return false
		case <-wake:
			return true
		case e, ok := <-events:
			// This event and the ones ready after it.
			for ok {
				if !out.write(frame(e.ID, e)) {
					return false
				}
				select {
				case e, ok = <-events:
				default:
					return true
				}
			}
			return false
		}
	})
}

// streamContext returns the context of an event stream: the request's
// values (its token: what the stream may see), ended when the server
// begins to stop, when cancel is called, and with the request until detach
// (the stream outlives a handler that handed its connection over).
func (s *Server) streamContext(c echo.Context) (ctx context.Context, detach func(), cancel func()) {
	req := c.Request().Context()
	ctx, end := context.WithCancel(context.WithoutCancel(req))
	unstop := context.AfterFunc(s.stopping, end)
	unreq := context.AfterFunc(req, end)
	return ctx, func() { unreq() }, func() {
		unstop()
		unreq()
		end()
	}
}

// reconnectHint is what a stream writes before it ends because the server
// stops: a short retry (EventSource reconnects after it) and a comment that
// tells other readers to reconnect, with Last-Event-ID, to any instance.
const reconnectHint = "retry: 500\n: reconnect: the server is stopping; reconnect with Last-Event-ID\n\n"

// pump writes an SSE stream: next writes the events that are ready (it
// returns false once the stream is over) or returns when wake fires first;
// what it wrote goes out in one flush. A wake when nothing was written
// since the one before writes a ": ping" comment: one every ping interval
// of an idle stream. The stream ends when next says so, the client leaves
// (a write fails, or the request ends while the HTTP server still holds
// the connection) or the server stops (then with the reconnect hint). ctx
// is the stream's (streamContext); pump calls cancel when the stream ends.
// A stream taken over from the HTTP server runs on a goroutine of its own
// and pump returns at once.
func (s *Server) pump(ctx context.Context, c echo.Context, detach, cancel func(), next func(ctx context.Context, wake <-chan time.Time, out *sse) bool) error {
	s.streams.Add(1)
	out := startSSE(ctx, c)
	if !out.taken() {
		s.stream(ctx, out, cancel, next)
		return nil
	}
	detach()
	go s.stream(ctx, out, cancel, next)
	return nil
}

// stream is pump's loop.
func (s *Server) stream(ctx context.Context, out *sse, cancel func(), next func(ctx context.Context, wake <-chan time.Time, out *sse) bool) {
	defer s.streams.Add(-1)
	defer cancel()
	defer out.end()
	tick := time.NewTicker(s.cfg.PingInterval)
	defer tick.Stop()
	pinged := out.size // the size at the last wake
	for {
		before := out.size
		ok := next(ctx, tick.C, out)
		if s.stopping.Err() != nil {
			out.writeString(reconnectHint)
			return
		}
		if out.size == before && ok {
			// A wake.
			if out.size == pinged && !out.writeString(": ping\n\n") {
				return
			}
			pinged = out.size
		}
		if !ok {
			s.spreadEnd(ctx, out)
			return // end sends what is queued with the last chunk
		}
		if !out.flush() {
			return
		}
	}
}

// spreadEnd sends what a stream whose events are over has queued (its
// final event) at once and then, when the HTTP server no longer holds the
// stream, waits a random part of Config.EndSpread before it ends: the
// thousands of streams of one turn end together, at its final event, and
// closing them all at once (a write and a close each, on both ends) took
// both cores from the live events of other turns for as long. Spread,
// they cost the same but delay nobody. A client that closes at the final
// event does not wait for it; a stream whose client left, or whose server
// stops, ends at once.
func (s *Server) spreadEnd(ctx context.Context, out *sse) {
	if !out.taken() || out.dead || ctx.Err() != nil || s.cfg.EndSpread <= 0 {
		return
	}
	if !out.flush() {
		return
	}
	t := time.NewTimer(rand.N(s.cfg.EndSpread))
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C:
	}
}

// transcript returns the stored events of a turn.
func (s *Server) transcript(c echo.Context) error {
	n, err := positiveParam(c, "n")
	if err != nil {
		return err
	}
	evs, err := s.domain.Subscriptions.Transcript(c.Request().Context(), c.Param("id"), n)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(evs))
	for i, e := range evs {
		out[i] = eventJSON(e, requestID(c))
	}
	return c.JSON(http.StatusOK, map[string]any{"events": out})
}
