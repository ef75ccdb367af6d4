package chattest

import (
	"context"
	"math"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"
)

// TimeoutScaleEnv names the environment variable that multiplies every
// deadline a test waits under (Patience, Within): 3 gives a machine three
// times slower three times as long. Unset, it is 1; it only lengthens.
const TimeoutScaleEnv = "PRCHAT_TEST_TIMEOUT_SCALE"

// patience is how long a test waits for a condition before it fails, on
// a scale of 1: far longer than anything a test awaits takes on a loaded
// machine, since a passing test never waits it out.
const patience = 30 * time.Second

// pollEvery is how often Eventually checks its condition.
const pollEvery = 5 * time.Millisecond

// scaleOnce is PRCHAT_TEST_TIMEOUT_SCALE's factor, read once.
var scaleOnce = sync.OnceValue(func() float64 { return parseScale(os.Getenv(TimeoutScaleEnv)) })

// parseScale reads a timeout scale: a number at least 1, else 1.
func parseScale(s string) float64 {
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || f < 1 || math.IsInf(f, 0) || math.IsNaN(f) {
		return 1
	}
	return f
}

// Within returns d scaled by PRCHAT_TEST_TIMEOUT_SCALE: the deadline to
// give something a test starts (a context, a process) that a slow machine
// could take d to finish.
func Within(d time.Duration) time.Duration {
	return time.Duration(float64(d) * scaleOnce())
}

// Patience is how long a test waits for what it awaits before it fails:
// 30 s, scaled by PRCHAT_TEST_TIMEOUT_SCALE.
func Patience() time.Duration { return Within(patience) }

// Eventually waits until cond holds, checking it every few milliseconds,
// and fails t if it does not hold within Patience, saying what was
// awaited ("the reply posted").
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	EventuallyWithin(t, Patience(), what, cond)
}

// EventuallyWithin is Eventually with its own deadline d (scaled by
// PRCHAT_TEST_TIMEOUT_SCALE), for a test that must see cond before
// something else would make it hold anyway (the next periodic beat).
func EventuallyWithin(t testing.TB, d time.Duration, what string, cond func() bool) {
	t.Helper()
	d = Within(d)
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up after %v waiting for %s", d, what)
		}
		time.Sleep(pollEvery)
	}
}

// Receive waits for a value from ch, or for ch to close, and returns
// what it got (the zero value when closed), failing t if neither happens
// within Patience, saying what was awaited.
func Receive[T any](t testing.TB, what string, ch <-chan T) T {
	t.Helper()
	timer := time.NewTimer(Patience())
	defer timer.Stop()
	select {
	case v := <-ch:
		return v
	case <-timer.C:
		t.Fatalf("gave up after %v waiting for %s", Patience(), what)
		panic("unreachable: Fatalf ends the test")
	}
}

// Context returns t's context with a deadline Patience from now, for a
// call that should return long before it: a call that hangs fails the
// test at the deadline instead of hanging the suite.
func Context(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), Patience())
	t.Cleanup(cancel)
	return ctx
}

// Expiring returns a context that ends as at its deadline (Err is
// context.DeadlineExceeded) when expire is called, or when the test ends:
// for a test of what a deadline does, whose deadline must not pass before
// the thing it cuts short is under way (a CLI that has yet to start on a
// loaded machine). The test waits for that with its own deadline.
func Expiring(t testing.TB) (ctx context.Context, expire func()) {
	parent := t.Context()
	c := &expiring{Context: parent, done: make(chan struct{})}
	stop := context.AfterFunc(parent, c.expire)
	t.Cleanup(func() { stop(); c.expire() })
	return c, c.expire
}

// expiring is Expiring's context.
type expiring struct {
	context.Context
	once sync.Once
	done chan struct{}
}

func (c *expiring) expire() { c.once.Do(func() { close(c.done) }) }

func (c *expiring) Done() <-chan struct{} { return c.done }

func (c *expiring) Err() error {
	select {
	case <-c.done:
		return context.DeadlineExceeded
	default:
		return nil
	}
}
