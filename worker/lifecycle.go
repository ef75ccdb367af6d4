package worker

import (
	"context"
	"errors"
	"fmt"
	"sync"
)

// lifecycle is the start/stop state that the long-lived parts of a worker
// (Heartbeat, Reconciler, Server, Events, Outbox) share: Start runs once, Stop is
// safe to call twice, before Start and from many goroutines at once, and a
// stopped part does not start again. It runs the part's background work in
// one goroutine, under a context that Stop cancels, and Stop returns only
// once that goroutine has returned and the part's cleanup has run.
type lifecycle struct {
	name string

	mu      sync.Mutex
	started bool
	stopped bool
	cancel  context.CancelFunc
	done    chan struct{}
	// stopDone is closed when Stop has finished, for every caller to wait on.
	stopDone chan struct{}
}

// errStopped and errStarted are what a second Start, or a Start after Stop,
// returns (wrapped with the part's name).
var (
	errStopped = errors.New("stopped")
	errStarted = errors.New("already started")
)

func newLifecycle(name string) *lifecycle {
	return &lifecycle{name: name, stopDone: make(chan struct{})}
}

// start calls begin (the part's synchronous start: its error fails Start and
// the part may be started again) and then runs run in a goroutine under a
// context derived from ctx that stop cancels. Either may be nil.
func (l *lifecycle) start(ctx context.Context, begin func(context.Context) error, run func(context.Context)) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	switch {
	case l.stopped:
		return fmt.Errorf("%s: %w", l.name, errStopped)
	case l.started:
		return fmt.Errorf("%s: %w", l.name, errStarted)
	}
	if begin != nil {
		if err := begin(ctx); err != nil {
			return err
		}
	}
	l.started = true
	rctx, cancel := context.WithCancel(ctx)
	l.cancel, l.done = cancel, make(chan struct{})
	go func() {
		defer close(l.done)
		if run != nil {
			run(rctx)
		}
	}()
	return nil
}

// stop cancels the background goroutine, calls wake (to end a blocking call
// that does not watch its context), waits for the goroutine, and then calls
// end. wake and end are called only if the part was started, and may be
// nil. Every call returns once the first has finished.
func (l *lifecycle) stop(wake, end func()) {
	l.mu.Lock()
	if l.stopped {
		l.mu.Unlock()
		<-l.stopDone
		return
	}
	l.stopped = true
	started, cancel, done := l.started, l.cancel, l.done
	l.mu.Unlock()
	defer close(l.stopDone)
	if !started {
		return
	}
	cancel()
	if wake != nil {
		wake()
	}
	<-done
	if end != nil {
		end()
	}
}

// running reports whether the part has started and not begun to stop.
func (l *lifecycle) running() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.started && !l.stopped
}
