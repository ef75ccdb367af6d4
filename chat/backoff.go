package chat

import (
	"context"
	"errors"
	"math/rand/v2"
	"time"
)

// Backoff is how long to wait between the attempts of something that
// failed for now: First before the first retry, doubled for every retry
// after it, at most Max. With Jitter a random part of up to half of each
// wait is taken off, so that callers that failed together do not retry
// together. Every retry loop of prchat (the store while the database is
// down, a turn's job, a webhook reply, a model call, the event reader)
// takes its waits from one.
type Backoff struct {
	// First is the wait before the first retry.
	First time.Duration
	// Max caps every wait; zero or less than First means First.
	Max time.Duration
	// Jitter takes a random part of up to half off each wait.
	Jitter bool
}

// Delay returns the wait before retry n (1 for the first; less counts as 1).
func (b Backoff) Delay(n int) time.Duration {
	ceiling := max(b.Max, b.First)
	d := b.First
	for i := 1; i < n && d < ceiling; i++ {
		d *= 2
	}
	d = min(d, ceiling)
	if b.Jitter && d > 0 {
		half := d / 2
		d = d - half + rand.N(half+1)
	}
	return d
}

// Wait waits the delay of retry n, or until ctx ends; then it returns ctx's
// error.
func (b Backoff) Wait(ctx context.Context, n int) error { return Sleep(ctx, b.Delay(n)) }

// Sleep waits d, or until ctx ends; then it returns ctx's error.
func Sleep(ctx context.Context, d time.Duration) error {
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

// Validate checks that b waits at all and that its cap is not below its
// first wait.
func (b Backoff) Validate() error {
	switch {
	case b.First <= 0:
		return errors.New("the first wait of a backoff must be positive")
	case b.Max != 0 && b.Max < b.First:
		return errors.New("the longest wait of a backoff must not be less than its first")
	}
	return nil
}
