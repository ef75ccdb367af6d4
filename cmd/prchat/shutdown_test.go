package main

import (
	"context"
	"log/slog"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/prchat/prchat/agentsession/scripted"
	"github.com/prchat/prchat/chat/chattest"
)

// logRecords is a slog.Handler that keeps the messages of the records it
// is given, with their turn attribute.
type logRecords struct {
	mu   *sync.Mutex
	seen *[]string // "message turn"
}

func newLogRecords() logRecords { return logRecords{mu: new(sync.Mutex), seen: new([]string)} }

func (l logRecords) Enabled(context.Context, slog.Level) bool { return true }
func (l logRecords) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l logRecords) WithGroup(string) slog.Handler            { return l }
func (l logRecords) Handle(_ context.Context, r slog.Record) error {
	msg := r.Message
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "turn" {
			msg += " " + a.Value.String()
		}
		return true
	})
	l.mu.Lock()
	*l.seen = append(*l.seen, msg)
	l.mu.Unlock()
	return nil
}

func (l logRecords) has(msg string) bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Contains(*l.seen, msg)
}

// TestWorkerStopHandsTurnsOn: a worker stopped while a turn runs past its
// shutdown grace hands the turn to the other live worker at once, which
// answers it; the stopped run's late answer is fenced off.
func TestWorkerStopHandsTurnsOn(t *testing.T) {
	t.Parallel()
	for _, m := range modes(t) {
		t.Run(m.name, func(t *testing.T) {
			t.Parallel()
			e := splitSetup(t, m)
			first := e.cfg
			first.WorkerID = "w-" + uuid.NewString()[:8]
			first.ShutdownGrace = 300 * time.Millisecond
			logs := newLogRecords()
			o := e.opts
			o.logger = slog.New(logs)
			stopping, err := start(context.Background(), first, role{worker: true}, o)
			if err != nil {
				t.Fatalf("start the worker to stop: %v", err)
			}
			t.Cleanup(stopping.Stop)

			v := e.review("scripted", nil)
			e.scripted.Push(scripted.Step{Hang: true}, scripted.Step{Answer: goodAnswer("from the live worker")})
			conv, _ := e.ask(v, "What does Load do?")
			e.waitState(conv, 1, "running")

			second := e.cfg
			second.WorkerID = "w-" + uuid.NewString()[:8]
			e.boot(role{worker: true}, second)
			start := time.Now()
			stopping.Stop()
			got := e.wait(conv, 1)
			took := time.Since(start)
			if got.State != "succeeded" || got.Answer == nil || got.Answer.AnswerMarkdown != "from the live worker" {
				t.Fatalf("turn %+v, want answered by the live worker", got)
			}
			t.Logf("answered %v after the stop began (grace %v)", took.Round(time.Millisecond), first.ShutdownGrace)
			if n := len(e.scripted.Requests()); n != 2 {
				t.Errorf("agent calls %d, want 2", n)
			}
			// By the stopping worker's hand-on, not by a lease running out
			// or a reconciler finding the turn (they would answer it too,
			// later).
			turn := mustTurnID(t, e, conv, 1)
			chattest.Eventually(t, "the stopping worker to log the hand-on of "+turn, func() bool {
				return logs.has("turn handed on to a live worker " + turn)
			})
		})
	}
}
