// Package benchagent is the zero-latency agent of prchat-bench: a backend
// that answers at once, so that only the daemon is measured. Only a prchat
// binary built with -tags prchatbench registers it (as backend "bench");
// a production build cannot reach it.
package benchagent

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prchat/prchat/chat"
)

// Agent is the zero-latency agent of prchat-bench: it answers at once, so
// only the daemon is measured. A question may carry directives: "events=N
// interval=D hold=D" make it wait hold, then emit N tool_result events
// interval apart whose summary is the send time in Unix nanoseconds (for
// delivery latency). "start=NS" (Unix nanoseconds) sets when the first
// event goes out instead of hold. The events keep their schedule, event i
// at the first's time plus i intervals, however long emitting takes:
// turns the bench starts a fraction of an interval apart stay that far
// apart, rather than drifting into each other by what each emit costs.
// The zero value is ready to use.
type Agent struct {
	sessions atomic.Int64
}

var _ chat.Backend = (*Agent)(nil)

// Backend is the bench agent's backend name.
const Backend = "bench"

// Answer is the bench agent's answer: it cites line 1 of bench.txt, which
// the bench's repository has.
const Answer = `{"answer_markdown":"ok","citations":[{"path":"bench.txt","start_line":1,"end_line":1}],"suggests_fix":null}`

// Name returns Backend.
func (b *Agent) Name() string { return Backend }

// Available reports that the agent can run: it needs nothing.
func (b *Agent) Available(context.Context) error { return nil }

// HasSession reports every session as present: the agent keeps none.
func (b *Agent) HasSession(context.Context, chat.SessionRef) error { return nil }

// Run answers req with Answer after the events its question's directives
// ask for.
func (b *Agent) Run(ctx context.Context, req chat.RunRequest, emit func(chat.Event)) (chat.RunResult, error) {
	var events int
	var interval, hold time.Duration
	var start time.Time
	for _, f := range strings.Fields(req.Question) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "events":
			events, _ = strconv.Atoi(v)
		case "interval":
			interval, _ = time.ParseDuration(v)
		case "hold":
			hold, _ = time.ParseDuration(v)
		case "start":
			if ns, err := strconv.ParseInt(v, 10, 64); err == nil {
				start = time.Unix(0, ns)
			}
		}
	}
	if start.IsZero() {
		start = time.Now().Add(hold)
	}
	if err := chat.Sleep(ctx, time.Until(start)); err != nil {
		return chat.RunResult{}, err
	}
	for i := 0; i < events; i++ {
		if err := chat.Sleep(ctx, time.Until(start.Add(time.Duration(i)*interval))); err != nil {
			return chat.RunResult{}, err
		}
		emit(chat.Event{Type: chat.EventToolResult, ToolID: strconv.Itoa(i), ToolName: "bench", Summary: strconv.FormatInt(time.Now().UnixNano(), 10)})
	}
	id := req.Session.ID
	if req.Mode != chat.SessionResumed || id == "" {
		id = "bench-" + strconv.FormatInt(b.sessions.Add(1), 10)
	}
	zero := 0.0
	return chat.RunResult{Text: Answer, SessionID: id, Usage: chat.Usage{Calls: 1, CostUSD: &zero}}, nil
}
