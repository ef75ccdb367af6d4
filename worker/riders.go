package worker

import (
	"context"

	"github.com/redis/go-redis/v9"
)

// riding is the Redis client a Queue gives asynq's client: every command
// passes through unchanged, except that a script call whose context
// carries riders (withRiders) is sent in one pipeline after the riders'
// commands. An enqueue's own commands (its queue's registration, the
// length of the queue it joins, the feed's news of the turn) thus reach
// Redis in the round trip of asynq's enqueue script, in that order,
// instead of in one of their own before it.
type riding struct {
	redis.UniversalClient
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
	pipe := c.UniversalClient.Pipeline()
	r.add(pipe)
	cmd := pipe.EvalSha(ctx, sha, keys, args...)
	cmds, _ := pipe.Exec(ctx)
	for _, rc := range cmds[:len(cmds)-1] {
		if err := rc.Err(); err != nil && err != redis.Nil {
			r.err = err
			break
		}
	}
	return cmd
}
