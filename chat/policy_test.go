package chat_test

import (
	"testing"
	"time"

	"github.com/prchat/prchat/chat"
)

// TestTurnWindowsAreInOrder: for any turn timeout the windows of a run come
// in their documented order, each strictly after the one before, so a run
// ends its turn before the queue cancels its job, the queue cancels it
// before another run may take over, and a rescue job may take over at once.
func TestTurnWindowsAreInOrder(t *testing.T) {
	t.Parallel()
	for _, timeout := range []time.Duration{0, time.Millisecond, 700 * time.Millisecond, time.Minute, 10 * time.Minute, 6 * time.Hour} {
		w := chat.TurnPolicy{TurnTimeout: timeout}.Windows()
		if w.Turn <= 0 || !(w.Turn < w.Job && w.Job < w.Takeover && w.Takeover < w.Stuck) {
			t.Errorf("timeout %v: windows %+v are not Turn < Job < Takeover < Stuck", timeout, w)
		}
		if timeout != 0 && w.Turn != timeout {
			t.Errorf("timeout %v: Turn window %v", timeout, w.Turn)
		}
	}
	if w := (chat.TurnPolicy{}).Windows(); w.Turn != 10*time.Minute {
		t.Errorf("default turn window %v, want 10m", w.Turn)
	}
}

// TestOutOfAttempts: a turn gets MaxAttempts runs, counted by its fence.
func TestOutOfAttempts(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		max  int
		runs int64
		want bool
	}{
		{0, 2, false}, {0, 3, true}, {1, 0, false}, {1, 1, true}, {3, 2, false}, {3, 3, true}, {3, 4, true},
	} {
		if got := (chat.TurnPolicy{MaxAttempts: tc.max}).OutOfAttempts(tc.runs); got != tc.want {
			t.Errorf("max %d, runs %d: out of attempts %v, want %v", tc.max, tc.runs, got, tc.want)
		}
	}
}

func TestTurnPolicyRefusesNegativeLimits(t *testing.T) {
	t.Parallel()
	for _, p := range []chat.TurnPolicy{{TurnTimeout: -time.Second}, {MaxAttempts: -1}} {
		if p.Validate() == nil {
			t.Errorf("%+v: no error", p)
		}
	}
}
