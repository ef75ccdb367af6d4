package api

import (
	"context"
	"encoding/json"
	"io"
	"net/http"
	"strconv"
	"strings"
	"time"

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

// sse writes a Server-Sent Events stream.
type sse struct {
	w *echo.Response
}

func startSSE(c echo.Context) *sse {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	c.Response().WriteHeader(http.StatusOK)
	s := &sse{w: c.Response()}
	s.writeString("retry: 3000\n\n")
	s.flush()
	return s
}

// write queues b on the stream; flush sends what is queued.
func (s *sse) write(b []byte) bool {
	_, err := s.w.Write(b)
	return err == nil
}

func (s *sse) writeString(text string) bool {
	_, err := io.WriteString(s.w, text)
	return err == nil
}

func (s *sse) flush() { s.w.Flush() }

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

// sharedTurnFrame renders an event shared by every subscriber of a turn:
// once for all, unless it takes this request's trace id (an error event
// that has none of its own).
func sharedTurnFrame(e *chat.SharedEvent, traceID string) []byte {
	if e.Type == chat.EventError && e.TraceID == "" {
		return turnFrame(e.Event, traceID)
	}
	return e.Rendered(func(e chat.Event) []byte { return turnFrame(e, "") })
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
	ctx, stop := s.streamContext(c)
	defer stop()
	sub, err := s.svc.Subscribe(ctx, c.Param("id"), n, after)
	if err != nil {
		return err
	}
	traceID := requestID(c)
	return s.pump(ctx, c, func(ctx context.Context, wake <-chan time.Time, out *sse) bool {
		evs, ok := sub.Next(ctx, wake)
		for _, e := range evs {
			if !out.write(sharedTurnFrame(e, traceID)) {
				return false
			}
		}
		return ok
	})
}

// repoEvents streams the turn state changes of a repository's
// conversations, for dashboards.
func (s *Server) repoEvents(c echo.Context) error {
	ctx, stop := s.streamContext(c)
	defer stop()
	events, err := s.svc.SubscribeFeed(ctx, repoName(c), lastEventID(c))
	if err != nil {
		return err
	}
	return s.pump(ctx, c, func(ctx context.Context, wake <-chan time.Time, out *sse) bool {
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

// streamContext returns the context of an event stream: the request's,
// ended also when the server begins to stop.
func (s *Server) streamContext(c echo.Context) (context.Context, func()) {
	ctx, cancel := context.WithCancel(c.Request().Context())
	stop := context.AfterFunc(s.stopping, cancel)
	return ctx, func() {
		stop()
		cancel()
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
// of an idle stream.
// The stream ends when next says so, the client leaves or the server stops
// (then with the reconnect hint). ctx is the stream's context
// (streamContext).
func (s *Server) pump(ctx context.Context, c echo.Context, next func(ctx context.Context, wake <-chan time.Time, out *sse) bool) error {
	s.streams.Add(1)
	defer s.streams.Add(-1)
	out := startSSE(c)
	tick := time.NewTicker(s.cfg.PingInterval)
	defer tick.Stop()
	pinged := c.Response().Size // the size at the last wake
	for {
		before := c.Response().Size
		ok := next(ctx, tick.C, out)
		if s.stopping.Err() != nil && c.Request().Context().Err() == nil {
			out.writeString(reconnectHint)
			out.flush()
			return nil
		}
		if size := c.Response().Size; size == before && ok {
			// A wake.
			if size == pinged && !out.writeString(": ping\n\n") {
				return nil
			}
			pinged = c.Response().Size
		}
		out.flush()
		if !ok {
			return nil
		}
	}
}

// transcript returns the stored events of a turn.
func (s *Server) transcript(c echo.Context) error {
	n, err := positiveParam(c, "n")
	if err != nil {
		return err
	}
	evs, err := s.svc.Transcript(c.Request().Context(), c.Param("id"), n)
	if err != nil {
		return err
	}
	out := make([]map[string]any, len(evs))
	for i, e := range evs {
		out[i] = eventJSON(e, requestID(c))
	}
	return c.JSON(http.StatusOK, map[string]any{"events": out})
}
