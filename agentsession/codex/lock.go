package codex

import (
	"context"
	"fmt"
	"strings"
	"sync"
)

// sessionLocks serialises the calls that write to one session: the CLI
// refuses a second process resuming a session ("already has an active
// writer").
type sessionLocks struct {
	mu sync.Mutex
	m  map[string]*sessionLock
}

type sessionLock struct {
	ch   chan struct{} // holds a token while the session is locked
	refs int           // holders and waiters
}

// lock locks session id until the returned function is called, or fails
// when ctx ends first.
func (l *sessionLocks) lock(ctx context.Context, id string) (func(), error) {
	id = strings.ToLower(id)
	l.mu.Lock()
	s, ok := l.m[id]
	if !ok {
		s = &sessionLock{ch: make(chan struct{}, 1)}
		l.m[id] = s
	}
	s.refs++
	l.mu.Unlock()

	release := func() {
		l.mu.Lock()
		defer l.mu.Unlock()
		if s.refs--; s.refs == 0 {
			delete(l.m, id)
		}
	}
	select {
	case s.ch <- struct{}{}:
		return func() { <-s.ch; release() }, nil
	case <-ctx.Done():
		release()
		return nil, fmt.Errorf("wait for another call to session %s: %w", id, ctx.Err())
	}
}
