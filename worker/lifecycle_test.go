package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
)

// TestLifecycleStress: Start and Stop called from many goroutines at once
// start the background work at most once, run the cleanup exactly once when
// it started, and leave no goroutine behind once Stop returns.
func TestLifecycleStress(t *testing.T) {
	t.Parallel()
	for round := range 200 {
		var running, runs, ends atomic.Int32
		l := newLifecycle("part")
		run := func(ctx context.Context) {
			running.Add(1)
			runs.Add(1)
			<-ctx.Done()
			running.Add(-1)
		}
		var wg sync.WaitGroup
		var started atomic.Int32
		for g := range 16 {
			wg.Add(1)
			go func() {
				defer wg.Done()
				if g%2 == 0 {
					if l.start(t.Context(), nil, run) == nil {
						started.Add(1)
					}
					return
				}
				l.stop(nil, func() { ends.Add(1) })
				// Every Stop returns only once the work has ended.
				if n := running.Load(); n != 0 {
					t.Errorf("round %d: %d runs still going after Stop returned", round, n)
				}
			}()
		}
		wg.Wait()
		l.stop(nil, func() { ends.Add(1) })
		if s := started.Load(); s > 1 || runs.Load() != s || ends.Load() != s {
			t.Fatalf("round %d: %d starts, %d runs, %d cleanups; want at most one each, equal", round, s, runs.Load(), ends.Load())
		}
		if err := l.start(t.Context(), nil, run); !errors.Is(err, errStopped) {
			t.Fatalf("round %d: start after stop: %v", round, err)
		}
	}
}

// TestLifecycleFailedBeginCanStartAgain: a Start whose synchronous part
// fails leaves the part unstarted.
func TestLifecycleFailedBeginCanStartAgain(t *testing.T) {
	t.Parallel()
	l := newLifecycle("part")
	boom := errors.New("boom")
	if err := l.start(t.Context(), func(context.Context) error { return boom }, nil); !errors.Is(err, boom) {
		t.Fatalf("start = %v, want boom", err)
	}
	if l.running() {
		t.Fatal("running after a failed start")
	}
	if err := l.start(t.Context(), nil, nil); err != nil {
		t.Fatalf("second start: %v", err)
	}
	if err := l.start(t.Context(), nil, nil); !errors.Is(err, errStarted) {
		t.Fatalf("third start: %v, want already started", err)
	}
	l.stop(nil, nil)
}

// TestPartsStartAndStopFromManyGoroutines drives the real parts (heartbeat,
// reconciler, server, event relay, outbox) through concurrent Start and Stop calls:
// no race, no deadlock, every Stop returns, none starts after a Stop.
func TestPartsStartAndStopFromManyGoroutines(t *testing.T) {
	t.Parallel()
	e := setup(t)
	type part interface {
		Start(context.Context) error
		Stop()
	}
	makers := map[string]func(i int) part{
		"heartbeat": func(i int) part {
			h, err := NewHeartbeat(e.rdb, HeartbeatConfig{Identity: NewIdentity("stress"), TTL: time.Second, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return h
		},
		"reconciler": func(int) part {
			r, err := NewReconciler(&fakeTurns{}, e.queue, e.hosts, ReconcilerConfig{Interval: 10 * time.Millisecond, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return r
		},
		"server": func(int) part {
			s, err := NewServer(e.rdb, newRecorder(nil), ServerConfig{Identity: NewIdentity("stress"), ShutdownGrace: time.Second, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return s
		},
		"events": func(int) part {
			return NewEvents(e.rdb, EventsConfig{Block: 50 * time.Millisecond, Logger: testLogger(t)})
		},
		"outbox": func(int) part {
			o, err := NewOutbox(noReplies{}, OutboxConfig{Interval: 10 * time.Millisecond, Logger: testLogger(t)})
			if err != nil {
				t.Fatal(err)
			}
			return o
		},
	}
	for name, newPart := range makers {
		t.Run(name, func(t *testing.T) {
			for round := range 5 {
				p := newPart(round)
				var wg sync.WaitGroup
				for g := range 12 {
					wg.Add(1)
					go func() {
						defer wg.Done()
						if g%3 == 0 {
							p.Stop()
						} else {
							_ = p.Start(t.Context())
						}
					}()
				}
				done := make(chan struct{})
				go func() { wg.Wait(); p.Stop(); p.Stop(); close(done) }()
				chattest.Receive(t, fmt.Sprintf("round %d: Start and Stop to return", round), done)
				if err := p.Start(t.Context()); err == nil {
					t.Fatalf("round %d: started after Stop", round)
				}
			}
		})
	}
}

// noReplies is an outbox's work with nothing due.
type noReplies struct{}

func (noReplies) DeliverReplies(context.Context) (int, error) { return 0, nil }
