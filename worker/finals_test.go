package worker

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
	"github.com/prchat/prchat/chat/chattest"
)

// pipelineLog keeps the commands of every pipeline a client sends.
type pipelineLog struct {
	mu    sync.Mutex
	pipes [][]string // each pipeline's commands, as "name first-key"
}

func (l *pipelineLog) DialHook(next redis.DialHook) redis.DialHook          { return next }
func (l *pipelineLog) ProcessHook(next redis.ProcessHook) redis.ProcessHook { return next }
func (l *pipelineLog) ProcessPipelineHook(next redis.ProcessPipelineHook) redis.ProcessPipelineHook {
	return func(ctx context.Context, cmds []redis.Cmder) error {
		var p []string
		for _, c := range cmds {
			args := c.Args()
			switch {
			case c.Name() == "evalsha" && len(args) > 3:
				p = append(p, fmt.Sprint("evalsha ", args[3]))
			case len(args) > 1:
				p = append(p, fmt.Sprint(c.Name(), " ", args[1]))
			default:
				p = append(p, c.Name())
			}
		}
		l.mu.Lock()
		l.pipes = append(l.pipes, p)
		l.mu.Unlock()
		return next(ctx, cmds)
	}
}

// with returns the pipelines that hold a command starting with each of
// prefixes.
func (l *pipelineLog) with(prefixes ...string) [][]string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out [][]string
	for _, p := range l.pipes {
		all := true
		for _, pre := range prefixes {
			found := false
			for _, c := range p {
				found = found || strings.HasPrefix(c, pre)
			}
			all = all && found
		}
		if all {
			out = append(out, p)
		}
	}
	return out
}

// TestFinalPublishRidesWithTheJobsEnd: the publish of a turn's final
// events in its job's handler goes to Redis in the pipeline of asynq's
// script that ends the job, ahead of it; a follower gets the events. A
// publish of events that do not end the turn goes at once.
func TestFinalPublishRidesWithTheJobsEnd(t *testing.T) {
	t.Parallel()
	e := setup(t)
	log := &pipelineLog{}
	e.rdb.AddHook(log)
	ev := NewEvents(e.rdb, EventsConfig{Logger: testLogger(t)})
	t.Cleanup(ev.Stop)
	published := make(chan error, 2)
	rec := newRecorder(func(ctx context.Context, turnID string, _ int) error {
		published <- ev.Publish(ctx, turnID, []chat.Event{{Seq: 1, Type: chat.EventState, State: chat.StateRunning}}, nil)
		published <- ev.Publish(ctx, turnID, []chat.Event{{Seq: 2, Type: chat.EventState, State: chat.StateSucceeded}, {Seq: 3, Type: chat.EventDone}}, nil)
		return nil
	})
	e.startServer(t, "rides", rec, func(c *ServerConfig) { c.Events = ev })
	follow, err := ev.Follow(t.Context(), "turn-r", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(t.Context(), "turn-r", ""); err != nil {
		t.Fatal(err)
	}
	for range 2 {
		if err := <-published; err != nil {
			t.Fatal(err)
		}
	}
	got := receive(t, "the follower", follow, 3)
	if got[2].Type != chat.EventDone {
		t.Errorf("the follower's last event %+v, want done", got[2])
	}
	chattest.Eventually(t, "the job done", func() bool { return len(e.tasks(t, "turn-r")) == 0 })
	rides := log.with("xadd prchat:events:turn-r", "evalsha asynq:{turns}:active")
	if len(rides) != 1 {
		t.Fatalf("pipelines with the final events and the job's end: %v; want one", rides)
	}
	if p := rides[0]; !strings.HasPrefix(p[len(p)-1], "evalsha") {
		t.Errorf("pipeline %v: the job's end goes after the events", p)
	}
	if early := log.with("xadd prchat:events:turn-r"); len(early) != 2 {
		t.Errorf("pipelines with the turn's events: %v; want the running event's alone, then the final ones'", early)
	}
}

// TestHeldFinalPublishGoesOutByItself: a final publish whose job does not
// end (its handler still runs) goes out by itself after finalsWait.
func TestHeldFinalPublishGoesOutByItself(t *testing.T) {
	t.Parallel()
	e := setup(t)
	ev := NewEvents(e.rdb, EventsConfig{Logger: testLogger(t)})
	t.Cleanup(ev.Stop)
	release := make(chan struct{})
	rec := newRecorder(func(ctx context.Context, turnID string, _ int) error {
		if err := ev.Publish(ctx, turnID, []chat.Event{{Seq: 1, Type: chat.EventDone}}, nil); err != nil {
			return err
		}
		<-release
		return nil
	})
	e.startServer(t, "held", rec, func(c *ServerConfig) { c.Events = ev })
	t.Cleanup(func() { close(release) })
	follow, err := ev.Follow(t.Context(), "turn-h", 0)
	if err != nil {
		t.Fatal(err)
	}
	if err := e.queue.Enqueue(t.Context(), "turn-h", ""); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	got := receive(t, "the follower", follow, 1)
	if got[0].Type != chat.EventDone {
		t.Errorf("the follower got %+v, want done", got[0])
	}
	if took := time.Since(start); took < finalsWait/2 {
		t.Errorf("the held publish went out after %v, before its wait of %v", took, finalsWait)
	}
}
