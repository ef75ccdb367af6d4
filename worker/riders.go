package worker

import (
	"context"
	"slices"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// riding is the Redis client a Queue gives asynq's client: every command
// passes through unchanged, except that a script call whose context
// carries riders (withRiders) is sent in one pipeline after the riders'
// commands. An enqueue's own commands (its queue's registration, the
// length of the queue it joins, the feed's news of the turn) thus reach
// Redis in the round trip of asynq's enqueue script, in that order,
// instead of in one of their own before it.
//
// Script calls with riders made at the same time share a pipeline (see
// rideShare): the asks of one batch, committed together, enqueue their
// jobs in one round trip.
type riding struct {
	redis.UniversalClient
	share *rideShare
}

// newRiding returns a riding client on rdb.
func newRiding(rdb redis.UniversalClient) riding {
	return riding{UniversalClient: rdb, share: &rideShare{rdb: rdb}}
}

// ridersKey is the context key of the riders of the next script call.
type ridersKey struct{}

// riders are commands to send ahead of a script call, once.
type riders struct {
	add  func(redis.Pipeliner)
	sent bool
	err  error // of the pipeline that carried them, if it failed
}

// withRiders returns ctx carrying add, whose commands go in the pipeline
// of the next script call made with it through a riding client.
func withRiders(ctx context.Context, add func(redis.Pipeliner)) (context.Context, *riders) {
	r := &riders{add: add}
	return context.WithValue(ctx, ridersKey{}, r), r
}

// EvalSha runs a script by its SHA, with the context's riders ahead of it
// in one pipeline when it carries some not yet sent. (go-redis's Script
// runs a script by its SHA first, and by its text only after NOSCRIPT: the
// riders go with the first.)
func (c riding) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	r, _ := ctx.Value(ridersKey{}).(*riders)
	if r == nil || r.sent {
		return c.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	r.sent = true
	return c.share.call(&ride{ctx: ctx, riders: r, sha: sha, keys: keys, args: args})
}

// rideTimeout bounds a shared pipeline: it runs for all its callers, so
// under none's context.
const rideTimeout = 30 * time.Second

// maxRides is the most script calls one shared pipeline carries.
const maxRides = 64

// A rideShare sends script calls with riders in shared pipelines: the calls
// made while its last pipeline was at Redis go together in the next, each
// after its own riders. A caller waits for nobody: the one that finds it
// idle sends its call at once (it leads), one that finds a pipeline out
// queues, and the leader, once its pipeline is back, hands what queued
// meanwhile to the first of those callers, which sends it. Each call's
// outcome is its own command's: a pipeline's first error is nobody's in
// particular.
type rideShare struct {
	rdb redis.UniversalClient

	mu    sync.Mutex // guards what follows
	busy  bool       // a leader sends a pipeline
	queue []*ride    // waiting for the next pipeline
}

// ride is one script call of a rideShare.
type ride struct {
	ctx    context.Context
	riders *riders
	sha    string
	keys   []string
	args   []any
	cmd    *redis.Cmd    // the call's outcome, once done is closed
	done   chan struct{} // closed once cmd is set
	lead   chan []*ride  // gets the pipeline this call's caller is to send
}

// call sends r in the next shared pipeline and returns its outcome. It
// gives up (with its context's error) only while the call still waits for
// a pipeline.
func (s *rideShare) call(r *ride) *redis.Cmd {
	r.done, r.lead = make(chan struct{}), make(chan []*ride, 1)
	s.mu.Lock()
	if !s.busy {
		s.busy = true
		s.mu.Unlock()
		s.send([]*ride{r})
		return r.cmd
	}
	s.queue = append(s.queue, r)
	s.mu.Unlock()
	select {
	case <-r.done:
		return r.cmd
	case next := <-r.lead:
		s.send(next)
		return r.cmd
	case <-r.ctx.Done():
	}
	s.mu.Lock()
	if i := slices.Index(s.queue, r); i >= 0 {
		s.queue = slices.Delete(s.queue, i, i+1)
		s.mu.Unlock()
		cmd := redis.NewCmd(r.ctx)
		cmd.SetErr(r.ctx.Err())
		return cmd
	}
	s.mu.Unlock()
	// A pipeline holds it already: its outcome is what the caller must hear.
	select {
	case <-r.done:
	case next := <-r.lead:
		s.send(next)
	}
	return r.cmd
}

// send sends rides in one pipeline as their leader, then hands what queued
// meanwhile to the first of its callers, or leaves the share idle.
func (s *rideShare) send(rides []*ride) {
	s.exec(rides)
	s.mu.Lock()
	var next []*ride
	if len(s.queue) == 0 {
		s.busy = false
	} else {
		n := min(len(s.queue), maxRides)
		next = slices.Clone(s.queue[:n])
		s.queue = slices.Delete(s.queue, 0, n)
	}
	s.mu.Unlock()
	if len(next) > 0 {
		next[0].lead <- next
	}
	for _, r := range rides {
		close(r.done)
	}
}

// exec sends rides' riders and script calls in one pipeline and sets each
// call's outcome.
func (s *rideShare) exec(rides []*ride) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(rides[0].ctx), rideTimeout)
	defer cancel()
	pipe := s.rdb.Pipeline()
	own := make([][]redis.Cmder, len(rides)) // each call's riders
	for i, r := range rides {
		n := pipe.Len()
		r.riders.add(pipe)
		r.cmd = pipe.EvalSha(r.ctx, r.sha, r.keys, r.args...)
		all := pipe.Cmds()
		own[i] = all[n : len(all)-1]
	}
	_, _ = pipe.Exec(ctx)
	for i, r := range rides {
		for _, rc := range own[i] {
			if err := rc.Err(); err != nil && err != redis.Nil {
				r.riders.err = err
				break
			}
		}
	}
}
