package worker

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat/chattest"
)

// TestAJobsEndTakesTheNextJob: a worker draining a backlog takes each next
// job in the pipeline of the script call that ends the one before, so
// that its polls seldom ask Redis; every job runs once, in order.
func TestAJobsEndTakesTheNextJob(t *testing.T) {
	t.Parallel()
	e := setup(t)
	const jobs = 20
	var want []string
	for i := range jobs {
		turn := fmt.Sprintf("drain-%02d", i)
		want = append(want, turn)
		if err := e.queue.Enqueue(t.Context(), turn, ""); err != nil {
			t.Fatal(err)
		}
	}
	log := &pipelineLog{}
	e.rdb.AddHook(log)
	rec := newRecorder(nil)
	s := e.startServer(t, "drain", rec, func(c *ServerConfig) { c.Concurrency = 1 })
	var ran []string
	for range jobs {
		ran = append(ran, rec.next(t).turnID)
	}
	if !slices.Equal(ran, want) {
		t.Errorf("ran %v, want %v", ran, want)
	}
	chattest.Eventually(t, "every job done", func() bool {
		for _, turn := range want {
			if len(e.tasks(t, turn)) != 0 {
				return false
			}
		}
		return true
	})
	for _, turn := range want {
		if n := rec.count(turn); n != 1 {
			t.Errorf("%s ran %d times, want once", turn, n)
		}
	}
	// Each job end but the last takes the next job: at least jobs-1 job
	// ends carry a poll, and those jobs answer the Server's polls, which
	// reach Redis only for the first job and while it idles afterwards.
	rides := log.with("evalsha asynq:{turns}:active", "evalsha "+asynqKey(HostQueue("drain"), "pending"))
	if len(rides) < jobs-1 {
		t.Errorf("%d job ends took the next job; want at least %d", len(rides), jobs-1)
	}
	s.poller.mu.Lock()
	answered := s.poller.answeredAhead
	s.poller.mu.Unlock()
	if answered < jobs-1 {
		t.Errorf("jobs taken ahead answered %d polls; want %d, every job but the first", answered, jobs-1)
	}
}

// aheadPoller returns an idle poller of worker id's queues on e whose
// last poll took a job, and makes a job end under it take the next job
// ahead; it fails t unless one was taken.
func (e env) aheadPoller(t *testing.T, id string) *idlePoller {
	t.Helper()
	p := newIdlePoller(e.rdb, []string{HostQueue(id), SharedQueue}, time.Millisecond, time.Second, testLogger(t))
	t.Cleanup(p.release)
	if !p.startPrefetch() {
		t.Fatal("a fresh poller takes no job ahead")
	}
	end := redis.NewScript("return 1") // stands for asynq's done
	for _, script := range []*redis.Script{end, prefetchAny} {
		if err := script.Load(t.Context(), e.rdb).Err(); err != nil {
			t.Fatal(err)
		}
	}
	keys := []string{asynqKey(SharedQueue, "active"), asynqKey(SharedQueue, "lease"), asynqKey(SharedQueue, "t:x"), "processed", "total"}
	if !p.isJobEnd(keys) {
		t.Fatalf("keys %v are not a job end's", keys)
	}
	if err := p.endJob(t.Context(), nil, true, end.Hash(), keys, nil).Err(); err != nil {
		t.Fatal(err)
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.ahead == nil {
		t.Fatal("the job end took no job ahead")
	}
	return p
}

// TestAJobTakenAheadGoesBackWhenTheServerStops: a job a job end took
// ahead that no poll took is put back at the head of its queue when the
// Server stops, pending again, and the next worker runs it once.
func TestAJobTakenAheadGoesBackWhenTheServerStops(t *testing.T) {
	t.Parallel()
	e := setup(t)
	for _, turn := range []string{"ahead-1", "ahead-2"} {
		if err := e.queue.Enqueue(t.Context(), turn, ""); err != nil {
			t.Fatal(err)
		}
	}
	p := e.aheadPoller(t, "stopping")
	if got := e.where(t, "ahead-1"); !slices.Equal(got, []string{"ahead-1@turns:active"}) {
		t.Fatalf("the job taken ahead is %v, want active", got)
	}
	p.release()
	p.putBackAll()
	if got := e.where(t, "ahead-1"); !slices.Equal(got, []string{"ahead-1@turns:pending"}) {
		t.Fatalf("the job put back is %v, want pending", got)
	}
	if n, err := e.rdb.ZCard(t.Context(), asynqKey(SharedQueue, "lease")).Result(); err != nil || n != 0 {
		t.Errorf("leases left: %d (%v), want none", n, err)
	}
	rec := newRecorder(nil)
	e.startServer(t, "next", rec, func(c *ServerConfig) { c.Concurrency = 1 })
	if first := rec.next(t).turnID; first != "ahead-1" {
		t.Errorf("the next worker ran %s first, want the job put back at the head of its queue", first)
	}
	rec.next(t)
	chattest.Eventually(t, "both jobs done", func() bool {
		return len(e.tasks(t, "ahead-1"))+len(e.tasks(t, "ahead-2")) == 0
	})
	for _, turn := range []string{"ahead-1", "ahead-2"} {
		if n := rec.count(turn); n != 1 {
			t.Errorf("%s ran %d times, want once", turn, n)
		}
	}
}

// TestAJobTakenAheadGoesBackByItself: a job taken ahead that no poll
// takes within prefetchHold goes back on its queue by itself.
func TestAJobTakenAheadGoesBackByItself(t *testing.T) {
	t.Parallel()
	e := setup(t)
	if err := e.queue.Enqueue(t.Context(), "untaken", ""); err != nil {
		t.Fatal(err)
	}
	p := e.aheadPoller(t, "stuck")
	chattest.Eventually(t, "the job back on its queue", func() bool {
		return slices.Equal(e.where(t, "untaken"), []string{"untaken@turns:pending"})
	})
	p.mu.Lock()
	ahead := p.ahead
	p.mu.Unlock()
	if ahead != nil {
		t.Errorf("the poller still holds %s ahead after putting it back", ahead.id)
	}
}

// TestNoJobIsTakenAheadAfterRelease: a job end on a released poller (its
// Server stopping) takes nothing ahead.
func TestNoJobIsTakenAheadAfterRelease(t *testing.T) {
	t.Parallel()
	e := setup(t)
	p := newIdlePoller(e.rdb, []string{SharedQueue}, time.Millisecond, time.Second, testLogger(t))
	p.release()
	if p.startPrefetch() {
		t.Error("a released poller starts taking a job ahead")
	}
}
