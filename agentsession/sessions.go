package agentsession

import (
	"context"
	"fmt"
	"strings"
	"sync"

	"github.com/google/uuid"
)

// IsUUID reports whether s is a UUID in its canonical textual form
// (xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx, hex digits of either case), the
// only form the agent CLIs take as a session id: the braced, urn: and
// undashed forms that uuid.Parse also reads are refused.
func IsUUID(s string) bool {
	if len(s) != 36 {
		return false
	}
	_, err := uuid.Parse(s)
	return err == nil
}

// SessionLocks serialises the agent calls on one session within the
// process: a call that writes to the session (a resume) holds it alone,
// calls that only read it (forks) may hold it together. Session ids are
// compared without regard to case. Waiting for a lock ends with the
// context. The zero SessionLocks is ready; it is safe for concurrent use.
type SessionLocks struct {
	mu    sync.Mutex
	locks map[string]*sessionLock
}

// sessionLock is the state of one session's lock.
type sessionLock struct {
	readers int
	writer  bool
	refs    int           // holders and waiters; the entry goes at zero
	changed chan struct{} // closed and replaced when the lock is released
}

// Lock takes session id's lock alone and returns its release function, or
// an error wrapping ctx.Err() when ctx ends first.
func (l *SessionLocks) Lock(ctx context.Context, id string) (func(), error) {
	return l.lock(ctx, id, true)
}

// RLock takes session id's lock shared with other readers and returns its
// release function, or an error wrapping ctx.Err() when ctx ends first.
func (l *SessionLocks) RLock(ctx context.Context, id string) (func(), error) {
	return l.lock(ctx, id, false)
}

func (l *SessionLocks) lock(ctx context.Context, id string, write bool) (func(), error) {
	key := strings.ToLower(id)
	l.mu.Lock()
	if l.locks == nil {
		l.locks = map[string]*sessionLock{}
	}
	s, ok := l.locks[key]
	if !ok {
		s = &sessionLock{changed: make(chan struct{})}
		l.locks[key] = s
	}
	s.refs++
	for {
		if !s.writer && (!write || s.readers == 0) {
			if write {
				s.writer = true
			} else {
				s.readers++
			}
			l.mu.Unlock()
			var once sync.Once
			return func() { once.Do(func() { l.unlock(key, s, write) }) }, nil
		}
		changed := s.changed
		l.mu.Unlock()
		select {
		case <-changed:
			l.mu.Lock()
		case <-ctx.Done():
			l.mu.Lock()
			l.release(key, s)
			l.mu.Unlock()
			return nil, fmt.Errorf("wait for session %s, which another call is using: %w", id, ctx.Err())
		}
	}
}

// unlock releases a lock taken by lock.
func (l *SessionLocks) unlock(key string, s *sessionLock, write bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if write {
		s.writer = false
	} else {
		s.readers--
	}
	close(s.changed)
	s.changed = make(chan struct{})
	l.release(key, s)
}

// release drops one reference to s; l.mu is held.
func (l *SessionLocks) release(key string, s *sessionLock) {
	if s.refs--; s.refs == 0 {
		delete(l.locks, key)
	}
}

// held returns how many sessions have a lock entry (held or waited for).
func (l *SessionLocks) held() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.locks)
}
