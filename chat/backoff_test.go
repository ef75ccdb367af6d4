package chat_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
)

// TestBackoffDoublesUpToItsCap: the wait doubles from First for each retry
// and stops at Max.
func TestBackoffDoublesUpToItsCap(t *testing.T) {
	t.Parallel()
	b := chat.Backoff{First: 100 * time.Millisecond, Max: time.Second}
	for n, want := range map[int]time.Duration{-1: 100 * time.Millisecond, 0: 100 * time.Millisecond, 1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second, 1000: time.Second} {
		if got := b.Delay(n); got != want {
			t.Errorf("Delay(%d) = %v, want %v", n, got, want)
		}
	}
	if got := (chat.Backoff{First: time.Second}).Delay(5); got != time.Second {
		t.Errorf("no Max: Delay(5) = %v, want First", got)
	}
}

// TestBackoffJitter: with Jitter each wait lies in the upper half of the
// plain one, and varies.
func TestBackoffJitter(t *testing.T) {
	t.Parallel()
	b := chat.Backoff{First: 100 * time.Millisecond, Max: time.Second, Jitter: true}
	for n, full := range map[int]time.Duration{1: 100 * time.Millisecond, 2: 200 * time.Millisecond, 3: 400 * time.Millisecond, 4: 800 * time.Millisecond, 5: time.Second, 60: time.Second} {
		seen := map[time.Duration]bool{}
		for range 200 {
			d := b.Delay(n)
			if d < full/2 || d > full {
				t.Fatalf("Delay(%d) = %v, want within [%v, %v]", n, d, full/2, full)
			}
			seen[d] = true
		}
		if len(seen) < 10 {
			t.Errorf("Delay(%d) took only %d values in 200 draws: no jitter", n, len(seen))
		}
	}
}

// TestBackoffWaitEndsWithItsContext: a wait returns the context's error as
// soon as the context ends.
func TestBackoffWaitEndsWithItsContext(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := (chat.Backoff{First: time.Hour}).Wait(ctx, 1); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait on an ended context: %v, want context.Canceled", err)
	}
	if err := (chat.Backoff{First: time.Microsecond}).Wait(context.Background(), 1); err != nil {
		t.Errorf("Wait: %v", err)
	}
}

func TestBackoffValidate(t *testing.T) {
	t.Parallel()
	for b, ok := range map[chat.Backoff]bool{
		{First: time.Second}:                   true,
		{First: time.Second, Max: time.Minute}: true,
		{}:                                     false,
		{First: -time.Second}:                  false,
		{First: time.Minute, Max: time.Second}: false,
	} {
		if err := b.Validate(); (err == nil) != ok {
			t.Errorf("%+v: Validate() = %v, want ok %v", b, err, ok)
		}
	}
}
