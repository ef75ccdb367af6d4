package api

import (
	"encoding/json"
	"fmt"
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
	c echo.Context
	w *echo.Response
}

func startSSE(c echo.Context) *sse {
	h := c.Response().Header()
	h.Set(echo.HeaderContentType, "text/event-stream")
	h.Set("Cache-Control", "no-cache")
	h.Set("X-Accel-Buffering", "no")
	h.Set("Connection", "keep-alive")
	c.Response().WriteHeader(http.StatusOK)
	s := &sse{c: c, w: c.Response()}
	s.write("retry: 3000\n\n")
	return s
}

func (s *sse) write(text string) bool {
	if _, err := s.w.Write([]byte(text)); err != nil {
		return false
	}
	s.w.Flush()
	return true
}

func (s *sse) event(id string, data any) bool {
	j, err := json.Marshal(data)
	if err != nil {
		return false
	}
	return s.write(fmt.Sprintf("id: %s\nevent: data\ndata: %s\n\n", id, j))
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
	ctx := c.Request().Context()
	events, err := s.svc.Subscribe(ctx, c.Param("id"), n, after)
	if err != nil {
		return err
	}
	return pump(s, c, events, func(e chat.Event) (string, any) {
		return strconv.FormatInt(e.Seq, 10), eventJSON(e, requestID(c))
	})
}

// repoEvents streams the turn state changes of a repository's
// conversations, for dashboards.
func (s *Server) repoEvents(c echo.Context) error {
	ctx := c.Request().Context()
	events, err := s.svc.SubscribeFeed(ctx, repoName(c), lastEventID(c))
	if err != nil {
		return err
	}
	return pump(s, c, events, func(e chat.FeedEvent) (string, any) { return e.ID, e })
}

// reconnectHint is what a stream writes before it ends because the server
// stops: a short retry (EventSource reconnects after it) and a comment that
// tells other readers to reconnect, with Last-Event-ID, to any instance.
const reconnectHint = "retry: 500\n: reconnect: the server is stopping; reconnect with Last-Event-ID\n\n"

// pump writes events as an SSE stream, with a ": ping" comment every ping
// interval, until the events end, the client leaves or the server stops
// (then with the reconnect hint).
func pump[T any](s *Server, c echo.Context, events <-chan T, render func(T) (id string, data any)) error {
	s.streams.Add(1)
	defer s.streams.Add(-1)
	out := startSSE(c)
	tick := time.NewTicker(s.cfg.PingInterval)
	defer tick.Stop()
	ctx := c.Request().Context()
	for {
		select {
		case <-s.stopping:
			out.write(reconnectHint)
			return nil
		case <-ctx.Done():
			return nil
		case <-tick.C:
			if !out.write(": ping\n\n") {
				return nil
			}
		case e, ok := <-events:
			if !ok {
				return nil
			}
			id, data := render(e)
			if !out.event(id, data) {
				return nil
			}
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
