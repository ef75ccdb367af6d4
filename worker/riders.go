package worker

import (
	"context"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat/handoff"
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
	return riding{UniversalClient: rdb, share: newRideShare(rdb)}
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
// after its own riders. A caller waits for nobody: its callers take turns
// sending the pipelines (a handoff.Line), so a lone call goes at once.
// Each call's outcome is its own command's: a pipeline's first error is
// nobody's in particular.
type rideShare struct {
	rdb  redis.UniversalClient
	line *handoff.Line[*ride]
}

// newRideShare returns an idle rideShare on rdb.
func newRideShare(rdb redis.UniversalClient) *rideShare {
	s := &rideShare{rdb: rdb}
	s.line = handoff.New(maxRides, s.exec)
	return s
}

// ride is one script call of a rideShare.
type ride struct {
	ctx    context.Context
	riders *riders
	sha    string
	keys   []string
	args   []any
	cmd    *redis.Cmd // the call's outcome, once its pipeline was sent
}

// call sends r in the next shared pipeline and returns its outcome. It
// gives up (with its context's error) only while the call still waits for
// a pipeline.
func (s *rideShare) call(r *ride) *redis.Cmd {
	if err := s.line.Do(r.ctx, r); err != nil {
		cmd := redis.NewCmd(r.ctx)
		cmd.SetErr(err)
		return cmd
	}
	return r.cmd
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
