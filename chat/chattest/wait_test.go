package chattest_test

import (
	"context"
	"errors"
	"os"
	"os/exec"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
)

// TestEventually: the condition is awaited until it holds.
func TestEventually(t *testing.T) {
	t.Parallel()
	var n atomic.Int32
	go func() {
		for range 3 {
			time.Sleep(time.Millisecond) // the condition becomes true later
			n.Add(1)
		}
	}()
	chattest.Eventually(t, "three increments", func() bool { return n.Load() == 3 })
}

// TestReceive: a value sent later is returned; a closed channel gives the
// zero value.
func TestReceive(t *testing.T) {
	t.Parallel()
	ch := make(chan int)
	go func() { ch <- 7; close(ch) }()
	if got := chattest.Receive(t, "the value", ch); got != 7 {
		t.Errorf("Receive = %d, want 7", got)
	}
	if got := chattest.Receive(t, "the close", ch); got != 0 {
		t.Errorf("Receive of a closed channel = %d, want 0", got)
	}
}

// TestWithinScales: PRCHAT_TEST_TIMEOUT_SCALE multiplies every deadline,
// and a wait that gives up says what it awaited, after how long. Checked
// in a child process, as the scale is read once per process.
func TestWithinScales(t *testing.T) {
	t.Parallel()
	if os.Getenv("CHATTEST_CHILD") != "" {
		return
	}
	for _, c := range []struct{ scale, want string }{
		{"", "gave up after 10ms waiting for a flag never set"},
		{"3", "gave up after 30ms waiting for a flag never set"},
		{"0.5", "gave up after 10ms waiting for a flag never set"},
		{"many", "gave up after 10ms waiting for a flag never set"},
	} {
		cmd := exec.Command(os.Args[0], "-test.run=^TestGivesUp$", "-test.count=1")
		cmd.Env = append(os.Environ(), "CHATTEST_CHILD=1", chattest.TimeoutScaleEnv+"="+c.scale)
		out, err := cmd.CombinedOutput()
		if err == nil {
			t.Errorf("scale %q: a wait for a condition that never holds passed:\n%s", c.scale, out)
		}
		if !strings.Contains(string(out), c.want) {
			t.Errorf("scale %q: the failure does not say %q:\n%s", c.scale, c.want, out)
		}
	}
}

// TestGivesUp fails, in TestWithinScales's child process only.
func TestGivesUp(t *testing.T) {
	if os.Getenv("CHATTEST_CHILD") == "" {
		t.Skip("run by TestWithinScales")
	}
	chattest.EventuallyWithin(t, 10*time.Millisecond, "a flag never set", func() bool { return false })
}

// TestExpiring: the context, and one derived from it, end with
// context.DeadlineExceeded when expired, not before.
func TestExpiring(t *testing.T) {
	t.Parallel()
	ctx, expire := chattest.Expiring(t)
	child, cancel := context.WithCancel(ctx)
	defer cancel()
	if ctx.Err() != nil || child.Err() != nil {
		t.Fatalf("before expire: Err = %v, %v; want nil", ctx.Err(), child.Err())
	}
	expire()
	chattest.Receive(t, "the derived context to end", child.Done())
	if !errors.Is(ctx.Err(), context.DeadlineExceeded) || !errors.Is(child.Err(), context.DeadlineExceeded) {
		t.Errorf("after expire: Err = %v, %v; want context.DeadlineExceeded", ctx.Err(), child.Err())
	}
	expire() // twice is fine
}
