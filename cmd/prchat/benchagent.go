package main

import (
	"context"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/prchat/prchat/chat"
)

// benchAgent is the zero-latency agent of `prchat bench`: it answers at
// once, so only the daemon is measured. `prchat serve` registers it (as
// backend "bench") when PRCHAT_BENCH_AGENT=1. A question may carry
// directives: "events=N interval=D hold=D" make it wait hold, then emit N
// tool_result events interval apart whose summary is the send time in Unix
// nanoseconds (for delivery latency).
type benchAgent struct {
	sessions atomic.Int64
}

var _ chat.Backend = (*benchAgent)(nil)

// BenchBackend is the bench agent's backend name.
const BenchBackend = "bench"

// BenchAnswer is the bench agent's answer: it cites line 1 of bench.txt,
// which the bench's repository has.
const BenchAnswer = `{"answer_markdown":"ok","citations":[{"path":"bench.txt","start_line":1,"end_line":1}],"suggests_fix":null}`

func (b *benchAgent) Name() string                                      { return BenchBackend }
func (b *benchAgent) Available(context.Context) error                   { return nil }
func (b *benchAgent) HasSession(context.Context, chat.SessionRef) error { return nil }

func (b *benchAgent) Run(ctx context.Context, req chat.RunRequest, emit func(chat.Event)) (chat.RunResult, error) {
	var events int
	var interval, hold time.Duration
	for _, f := range strings.Fields(req.Question) {
		k, v, _ := strings.Cut(f, "=")
		switch k {
		case "events":
			events, _ = strconv.Atoi(v)
		case "interval":
			interval, _ = time.ParseDuration(v)
		case "hold":
			hold, _ = time.ParseDuration(v)
		}
	}
	if err := sleep(ctx, hold); err != nil {
		return chat.RunResult{}, err
	}
	for i := 0; i < events; i++ {
		if i > 0 {
			if err := sleep(ctx, interval); err != nil {
				return chat.RunResult{}, err
			}
		}
		emit(chat.Event{Type: chat.EventToolResult, ToolID: strconv.Itoa(i), ToolName: "bench", Summary: strconv.FormatInt(time.Now().UnixNano(), 10)})
	}
	id := req.Session.ID
	if req.Mode != chat.SessionResumed || id == "" {
		id = "bench-" + strconv.FormatInt(b.sessions.Add(1), 10)
	}
	zero := 0.0
	return chat.RunResult{Text: BenchAnswer, SessionID: id, Usage: chat.Usage{Calls: 1, CostUSD: &zero}}, nil
}

func sleep(ctx context.Context, d time.Duration) error {
	if d <= 0 {
		return ctx.Err()
	}
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
