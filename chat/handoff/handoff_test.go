package handoff_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prchat/prchat/chat/chattest"
	"github.com/prchat/prchat/chat/handoff"
)

// call is an item of the tests' Lines: its batch records where it went.
type call struct {
	n     int
	batch int // the number of the batch that sent it, from 1
}

// sender sends a test Line's batches: it records them and, when hold is
// set, tells entered of each one and holds it until the test releases it.
type sender struct {
	hold    bool
	release chan struct{}
	entered chan struct{} // gets a value as each held batch starts

	mu      sync.Mutex
	batches [][]int
}

func newSender(hold bool) *sender {
	return &sender{hold: hold, release: make(chan struct{}), entered: make(chan struct{}, 100)}
}

func (s *sender) send(batch []*call) {
	if s.hold {
		s.entered <- struct{}{}
		<-s.release
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var ns []int
	for _, c := range batch {
		ns = append(ns, c.n)
		c.batch = len(s.batches) + 1
	}
	s.batches = append(s.batches, ns)
}

func (s *sender) sent() [][]int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.batches)
}

// TestLoneCallGoesAtOnce: a call that finds the Line idle is sent alone,
// by its own caller, before Do returns.
func TestLoneCallGoesAtOnce(t *testing.T) {
	t.Parallel()
	s := newSender(false)
	l := handoff.New(8, s.send)
	for i := 1; i <= 3; i++ {
		c := &call{n: i}
		if err := l.Do(context.Background(), c); err != nil {
			t.Fatalf("call %d: %v", i, err)
		}
		if c.batch != i {
			t.Fatalf("call %d went in batch %d; want %d, a batch of its own", i, c.batch, i)
		}
	}
	if got := s.sent(); len(got) != 3 {
		t.Fatalf("batches %v; want three of one call", got)
	}
}

// TestCallsMadeMeanwhileShareTheNextBatch: the calls made while a batch is
// out go together in the next, at most max of them, in the order they
// came; each caller returns once its own batch was sent.
func TestCallsMadeMeanwhileShareTheNextBatch(t *testing.T) {
	t.Parallel()
	s := newSender(true)
	l := handoff.New(4, s.send)
	ctx := context.Background()
	first := &call{n: 0}
	firstDone := make(chan error, 1)
	go func() { firstDone <- l.Do(ctx, first) }()
	<-s.entered

	const n = 6
	calls := make([]*call, n)
	errs := make(chan error, n)
	for i := range calls {
		calls[i] = &call{n: i + 1}
		go func() { errs <- l.Do(ctx, calls[i]) }()
		chattest.Eventually(t, "the call queues", func() bool { return l.Queued() == i+1 })
	}
	select {
	case err := <-firstDone:
		t.Fatalf("the first call returned (%v) while its batch was out", err)
	default:
	}
	// Each batch is let go in turn: the queued six go as four, then two.
	for range 3 {
		s.release <- struct{}{}
	}
	if err := <-firstDone; err != nil {
		t.Fatal(err)
	}
	for range n {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	want := [][]int{{0}, {1, 2, 3, 4}, {5, 6}}
	if got := s.sent(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v; want %v", got, want)
	}
	for _, c := range calls {
		if c.batch == 0 {
			t.Errorf("call %d returned unsent", c.n)
		}
	}
	if q := l.Queued(); q != 0 {
		t.Fatalf("%d calls still queued", q)
	}
}

// TestGivingUpWhileQueuedSendsNothing: a caller whose context ends while
// its call waits hears the context's error and its call is never sent; the
// calls beside it are.
func TestGivingUpWhileQueuedSendsNothing(t *testing.T) {
	t.Parallel()
	s := newSender(true)
	l := handoff.New(8, s.send)
	go func() { _ = l.Do(context.Background(), &call{n: 0}) }()
	<-s.entered

	ctx, cancel := context.WithCancel(context.Background())
	quitter := &call{n: 1}
	quit := make(chan error, 1)
	go func() { quit <- l.Do(ctx, quitter) }()
	chattest.Eventually(t, "the call queues", func() bool { return l.Queued() == 1 })
	stayer := &call{n: 2}
	stay := make(chan error, 1)
	go func() { stay <- l.Do(context.Background(), stayer) }()
	chattest.Eventually(t, "the second call queues", func() bool { return l.Queued() == 2 })

	cancel()
	if err := <-quit; !errors.Is(err, context.Canceled) {
		t.Fatalf("the call that gave up heard %v; want context.Canceled", err)
	}
	s.release <- struct{}{}
	s.release <- struct{}{}
	if err := <-stay; err != nil {
		t.Fatal(err)
	}
	if quitter.batch != 0 {
		t.Fatalf("the call that gave up went in batch %d", quitter.batch)
	}
	want := [][]int{{0}, {2}}
	if got := s.sent(); !slices.EqualFunc(got, want, slices.Equal) {
		t.Fatalf("batches %v; want %v", got, want)
	}
}

// TestCloseFailsQueuedAndWaitsForTheBatchOut: Close fails the queued calls
// with ErrClosed, waits until the batch out was sent, and a Line closed
// refuses at once.
func TestCloseFailsQueuedAndWaitsForTheBatchOut(t *testing.T) {
	t.Parallel()
	s := newSender(true)
	l := handoff.New(8, s.send)
	out := &call{n: 0}
	outDone := make(chan error, 1)
	go func() { outDone <- l.Do(context.Background(), out) }()
	<-s.entered
	queued := make(chan error, 1)
	go func() { queued <- l.Do(context.Background(), &call{n: 1}) }()
	chattest.Eventually(t, "the call queues", func() bool { return l.Queued() == 1 })

	closed := make(chan struct{})
	go func() { l.Close(); close(closed) }()
	if err := <-queued; !errors.Is(err, handoff.ErrClosed) {
		t.Fatalf("the queued call heard %v; want ErrClosed", err)
	}
	select {
	case <-closed:
		t.Fatal("Close returned while a batch was out")
	default:
	}
	s.release <- struct{}{}
	<-closed
	if err := <-outDone; err != nil || out.batch != 1 {
		t.Fatalf("the call out: %v, batch %d; want sent in batch 1", err, out.batch)
	}
	if err := l.Do(context.Background(), &call{n: 2}); !errors.Is(err, handoff.ErrClosed) {
		t.Fatalf("a call to the closed Line heard %v; want ErrClosed", err)
	}
	if got := s.sent(); len(got) != 1 {
		t.Fatalf("batches %v; want only the one that was out", got)
	}
}

// TestManyCallersEachSentOnce: under many concurrent callers every call is
// sent exactly once and no batch is over max.
func TestManyCallersEachSentOnce(t *testing.T) {
	t.Parallel()
	s := newSender(false)
	const most = 5
	l := handoff.New(most, s.send)
	var wg sync.WaitGroup
	const n = 400
	for i := range n {
		wg.Go(func() {
			if err := l.Do(context.Background(), &call{n: i}); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	seen := make([]int, n)
	for _, b := range s.sent() {
		if len(b) > most {
			t.Errorf("a batch of %d; most is %d", len(b), most)
		}
		for _, c := range b {
			seen[c]++
		}
	}
	for i, k := range seen {
		if k != 1 {
			t.Errorf("call %d sent %d times", i, k)
		}
	}
}

// BenchmarkLine: the cost of a call through a Line whose send takes a
// round trip's time (20 µs here), with GOMAXPROCS × 16 callers at once as
// a worker's runs are; it reports the calls a batch carried.
func BenchmarkLine(b *testing.B) {
	var batches, calls atomic.Int64
	l := handoff.New(64, func(batch []*call) {
		batches.Add(1)
		calls.Add(int64(len(batch)))
		time.Sleep(20 * time.Microsecond)
	})
	b.SetParallelism(16)
	b.ReportAllocs()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := l.Do(context.Background(), &call{}); err != nil {
				b.Error(err)
			}
		}
	})
	b.ReportMetric(float64(calls.Load())/float64(batches.Load()), "calls/batch")
}
