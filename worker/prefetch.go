package worker

import (
	"context"
	"errors"
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// prefetchHold is how long a job taken ahead for asynq's next poll waits
// for that poll before it goes back to its queue: asynq polls as soon as
// the job whose end took it frees its slot, so only a stopping or stuck
// processor leaves one to the timer. It is far below asynq's lease (30 s),
// which the job's Redis lease started counting when it was taken.
const prefetchHold = 2 * time.Second

// prefetchAny is dequeueAny returning, besides the job's message, which
// queue it came from (its index among the queues, from 0) and its id, so
// that a job taken ahead and not handed on can go back where it was. nil
// when no queue has a job.
var prefetchAny = dequeueOver(`{i, id, redis.call("HGET", key, "msg")}`)

// putBack returns a job taken and never handed to asynq to the head of its
// queue's pending list, as asynq's own requeue does, and marks it pending
// since now. KEYS are the queue's active list, lease set and pending list
// and the job's task key; ARGV[1] the job's id and ARGV[2] now in unix
// nanoseconds. It returns 0 when the job was not active (asynq's recoverer
// moved it meanwhile), 1 when it put it back.
var putBack = redis.NewScript(`
if redis.call("LREM", KEYS[1], 0, ARGV[1]) == 0 then
	return 0
end
redis.call("ZREM", KEYS[2], ARGV[1])
redis.call("RPUSH", KEYS[3], ARGV[1])
redis.call("HSET", KEYS[4], "state", "pending", "pending_since", ARGV[2])
return 1`)

// prefetched is a job taken ahead: its message, what putBack needs, and
// the timer that puts it back.
type prefetched struct {
	msg   string
	queue string
	id    string
	timer *time.Timer
}

// isJobEnd reports whether keys are those of asynq's script that ends a
// job of one of the queues as done (done, or mark as complete when tasks
// are retained): the queue's active list and lease set first, then not
// its pending list (which is requeue's, made when a worker stops).
func (p *idlePoller) isJobEnd(keys []string) bool {
	if len(keys) < 5 {
		return false
	}
	for _, others := range p.pending {
		if keys[0] == others[1] && keys[1] == others[2] {
			return true
		}
	}
	return false
}

// startPrefetch reports whether the job end under way should take the
// next job ahead, and if so marks a prefetch under way: when the poller
// runs, the queues had a job at the last poll, and no job taken ahead
// waits or is being taken.
func (p *idlePoller) startPrefetch() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.released || p.lastEmpty || p.fetching || p.ahead != nil {
		return false
	}
	p.fetching = true
	p.inflight.Add(1)
	return true
}

// endJob runs asynq's script that ends a job (sha, keys, args) in one
// pipeline with what rides with it: ahead of it the held final publish pub
// (nil: none), after it, when prefetch, the taking of the next job of the
// queues for asynq's next poll (prefetchAny). It returns the script's
// result.
func (p *idlePoller) endJob(ctx context.Context, pub *publication, prefetch bool, sha string, keys []string, args []any) *redis.Cmd {
	pipe := p.UniversalClient.Pipeline()
	if pub != nil {
		pub.queue(ctx, pipe)
	}
	cmd := pipe.EvalSha(ctx, sha, keys, args...)
	var next *redis.Cmd
	if prefetch {
		keys, argv := p.dequeueArgs(time.Now().Add(asynqLease).Unix())
		next = pipe.EvalSha(ctx, prefetchAny.Hash(), keys, argv...)
	}
	cmds, err := pipe.Exec(ctx)
	if pub != nil {
		n := len(cmds) - 1
		if prefetch {
			n--
		}
		if err := pub.check(cmds[:n], err); err != nil {
			p.log.WarnContext(ctx, "publish events", slog.String("turn", pub.turnID), slog.Any("err", err))
		}
	}
	if prefetch {
		p.keepAhead(ctx, next)
	}
	return cmd
}

// asynqLease is asynq's lease of a job it takes (v0.26, rdb.LeaseDuration),
// which its heartbeat extends while the job runs.
const asynqLease = 30 * time.Second

// keepAhead keeps the job prefetchAny's call next took, if any, for
// asynq's next poll, and ends the prefetch under way.
func (p *idlePoller) keepAhead(ctx context.Context, next *redis.Cmd) {
	defer p.inflight.Done()
	vals, err := next.Slice()
	var job *prefetched
	switch {
	case err == nil && len(vals) == 3:
		i, _ := vals[0].(int64)
		id, _ := vals[1].(string)
		msg, _ := vals[2].(string)
		if int(i) < len(p.order) && id != "" {
			job = &prefetched{msg: msg, queue: p.order[i], id: id}
		}
	case errors.Is(err, redis.Nil):
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		// Loaded for the next job end; this one took nothing.
		if err := prefetchAny.Load(ctx, p.UniversalClient).Err(); err != nil {
			p.log.DebugContext(ctx, "load the prefetch script", slog.Any("err", err))
		}
	default:
		// The job end's own error, if the pipeline failed, is asynq's to
		// handle; a job taken but not answered stays active under its
		// lease, which asynq's recoverer ends.
		p.log.DebugContext(ctx, "take the next job ahead", slog.Any("err", err))
	}
	p.mu.Lock()
	p.fetching = false
	if job != nil {
		job.timer = time.AfterFunc(prefetchHold, func() { p.putBackAhead(job) })
		p.ahead = job
	}
	p.mu.Unlock()
	if job != nil {
		p.wakeUp() // a hold under way ends: the job is there to take
	}
}

// takeAhead returns the job taken ahead and forgets it; nil if none.
func (p *idlePoller) takeAhead() *prefetched {
	p.mu.Lock()
	defer p.mu.Unlock()
	job := p.ahead
	if job != nil {
		p.ahead = nil
		p.answeredAhead++
		job.timer.Stop()
	}
	return job
}

// putBackAhead puts job back on its queue unless asynq's poll took it
// meanwhile.
func (p *idlePoller) putBackAhead(job *prefetched) {
	p.mu.Lock()
	if p.ahead != job {
		p.mu.Unlock()
		return
	}
	p.ahead = nil
	p.mu.Unlock()
	job.timer.Stop()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	keys := []string{asynqKey(job.queue, "active"), asynqKey(job.queue, "lease"), asynqKey(job.queue, "pending"), asynqKey(job.queue, "t:") + job.id}
	if err := putBack.Run(ctx, p.UniversalClient, keys, job.id, strconv.FormatInt(time.Now().UnixNano(), 10)).Err(); err != nil {
		// It stays active under its lease, which asynq's recoverer ends.
		p.log.Warn("put a job taken ahead back on its queue", slog.String("job", job.id), slog.Any("err", err))
	}
}

// putBackAll waits for a prefetch under way and puts back the job taken
// ahead, if any; for a Server that stopped polling (after release).
func (p *idlePoller) putBackAll() {
	p.inflight.Wait()
	p.mu.Lock()
	job := p.ahead
	p.mu.Unlock()
	if job != nil {
		p.putBackAhead(job)
	}
}

// answerAhead sets *cmd to the answer of a poll from the job taken ahead
// and reports whether there was one.
func (p *idlePoller) answerAhead(ctx context.Context, cmd **redis.Cmd) bool {
	job := p.takeAhead()
	if job == nil {
		return false
	}
	c := redis.NewCmd(ctx)
	c.SetVal(job.msg)
	*cmd = c
	return true
}
