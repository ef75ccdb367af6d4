// Package handoff sends calls in batches without a goroutine of its own:
// the calls made while one batch is out go together in the next, and the
// callers themselves take turns sending them.
//
// prchat uses it where many goroutines of one process each make a small
// call to the same server and a round trip, not the call, is what costs:
// the store's lane of the runs' statements to Postgres, and the worker's
// shared pipelines of enqueues to Redis.
package handoff

import (
	"context"
	"errors"
	"slices"
	"sync"
)

// ErrClosed is what a call to a closed Line hears: refused at once, or
// still waiting for a batch when the Line closed.
var ErrClosed = errors.New("handoff: line closed")

// A Line sends the items given to Do in batches through its send function.
// A caller waits for nobody: the one that finds the Line idle sends its
// item at once (it leads); one that finds a batch out queues; and the
// leader, once its send returned, hands what queued meanwhile (at most max
// items) to the first of those callers, which sends it as the next batch.
// A lone item costs no hand-off, and a queued one the one wake-up that
// tells it its batch was sent.
//
// send records each item's outcome in the item itself (a Line's items are
// pointers): a Line only tells a caller that its item's batch was sent.
type Line[T any] struct {
	max     int
	send    func(batch []T)
	leaders sync.WaitGroup // a batch being sent, and the hand-off after it

	mu     sync.Mutex // guards what follows
	busy   bool       // a leader sends a batch
	closed bool
	queue  []*seat[T] // waiting for the next batch
}

// seat is one item of a Line and its caller's wait.
type seat[T any] struct {
	item T
	err  error           // ErrClosed if the Line closed while it queued
	done chan struct{}   // closed once its batch was sent, or err set
	lead chan []*seat[T] // gets the batch its caller is to send
}

// New returns an idle Line whose batches carry at most most items (at
// least one), each sent by send.
func New[T any](most int, send func(batch []T)) *Line[T] {
	return &Line[T]{max: max(most, 1), send: send}
}

// Do puts item in the Line's next batch and returns once that batch was
// sent: nil, with item's outcome in item. It gives up only while item still
// waits for a batch, with ctx's error, and then no batch ever holds it;
// once a batch holds it, its outcome is what the caller must hear. A
// closed Line refuses with ErrClosed.
func (l *Line[T]) Do(ctx context.Context, item T) error {
	s := &seat[T]{item: item, done: make(chan struct{}), lead: make(chan []*seat[T], 1)}
	l.mu.Lock()
	switch {
	case l.closed:
		l.mu.Unlock()
		return ErrClosed
	case !l.busy:
		l.busy = true
		l.leaders.Add(1)
		l.mu.Unlock()
		l.lead([]*seat[T]{s})
		return nil
	}
	l.queue = append(l.queue, s)
	l.mu.Unlock()
	if over, err := l.wait(s, ctx.Done()); over {
		return err
	}
	l.mu.Lock()
	if i := slices.Index(l.queue, s); i >= 0 {
		l.queue = slices.Delete(l.queue, i, i+1)
		l.mu.Unlock()
		return ctx.Err()
	}
	l.mu.Unlock()
	// A batch holds it already, or the Line closed.
	_, err := l.wait(s, nil)
	return err
}

// wait waits until s's batch was sent, sending it itself when handed it
// (over, with s's outcome), or until stop is closed (not over; a nil stop
// never is).
func (l *Line[T]) wait(s *seat[T], stop <-chan struct{}) (over bool, err error) {
	select {
	case <-s.done:
		return true, s.err
	case batch := <-s.lead:
		l.lead(batch)
		return true, nil
	case <-stop:
		return false, nil
	}
}

// lead sends batch as its leader, then hands what queued meanwhile to the
// first of its callers as the next batch, or leaves the Line idle, and
// then tells the batch's callers it was sent.
func (l *Line[T]) lead(batch []*seat[T]) {
	items := make([]T, len(batch))
	for i, s := range batch {
		items[i] = s.item
	}
	l.send(items)
	l.mu.Lock()
	var next []*seat[T]
	if len(l.queue) == 0 {
		l.busy = false
	} else {
		n := min(len(l.queue), l.max)
		next = slices.Clone(l.queue[:n])
		l.queue = slices.Delete(l.queue, 0, n)
		l.leaders.Add(1)
	}
	l.mu.Unlock()
	if next != nil {
		next[0].lead <- next
	}
	for _, s := range batch {
		close(s.done)
	}
	l.leaders.Done()
}

// Queued is how many items wait for the next batch.
func (l *Line[T]) Queued() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.queue)
}

// Close refuses new items and fails those still queued with ErrClosed,
// then waits until the batch under way was sent.
func (l *Line[T]) Close() {
	l.mu.Lock()
	l.closed = true
	queued := l.queue
	l.queue = nil
	l.mu.Unlock()
	for _, s := range queued {
		s.err = ErrClosed
		close(s.done)
	}
	l.leaders.Wait()
}
