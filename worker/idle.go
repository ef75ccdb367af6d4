package worker

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/redis/go-redis/v9"
)

// DefaultIdlePollInterval is how often a worker whose queues have been
// empty for idleAfter looks at them when no wake-up comes.
const DefaultIdlePollInterval = time.Second

// idleAfter is how long a worker's queues stay empty before it polls at
// the idle interval instead of the poll interval.
const idleAfter = time.Second

// asynqCheckInterval is the TaskCheckInterval the Server gives asynq: asynq
// sleeps a half to one and a half of it, uninterruptibly, after every poll
// that found the queues empty. The Server's wait is the idlePoller's, which
// a wake-up ends, so asynq's is kept short.
const asynqCheckInterval = time.Millisecond

// wakeHealthCheck is how long the wake-up subscription may stay silent
// before it is pinged; a ping unanswered for as long again makes it
// reconnect.
const wakeHealthCheck = 10 * time.Second

// WakeChannel is the Redis pub/sub channel on which a Queue announces that
// queue of Redis database db got a job, so that the workers consuming it
// look at once. Pub/sub channels are not per database, hence db.
func WakeChannel(db int, queue string) string {
	return "prchat:wake:" + strconv.Itoa(db) + ":" + queue
}

// redisDB is the database rdb selects: that of its options, 0 for a
// client that has none (a cluster has database 0 only).
func redisDB(rdb redis.UniversalClient) int {
	if c, ok := rdb.(interface{ Options() *redis.Options }); ok {
		return c.Options().DB
	}
	return 0
}

// asynq's keys of a queue (asynq v0.26, internal/base).
func asynqKey(queue, kind string) string { return "asynq:{" + queue + "}:" + kind }

// idlePoller is the Redis client the Server gives asynq: the process's
// client, through which every command passes unchanged, except that it
// sees asynq's polls of the queues and makes the worker wait between them
// the way asynq cannot be told to.
//
// asynq's processor polls the queues in order, one dequeue script call
// each, and sleeps (asynqCheckInterval) when all were empty. idlePoller
// answers the first poll of a round from all the queues at once
// (dequeueFirst), so that a round costs one round trip to Redis whatever
// the queues hold. When the last
// poll found them empty, idlePoller holds the next poll of the first queue
// until a wake-up comes or a wait passes: the poll interval while the
// queues have been empty for less than idleAfter, then the idle poll
// interval. A wake-up is a message on the WakeChannel of a queue consumed
// (a Queue publishes one for a job it enqueues on an empty queue; the
// subscription holds one connection) or a retry or scheduled job that
// asynq's forwarder made pending. A wake-up makes the queues count as just emptied, so a
// wake-up that came before its job was visible costs one poll interval,
// not an idle one; a lost subscription only leaves the wait to its timer.
// release ends a wait at once and for good, so that asynq's Stop, which
// waits for the poll under way, is not delayed. A job that the end of the
// job before took ahead answers the first poll of a round without Redis
// (prefetch.go).
type idlePoller struct {
	redis.UniversalClient

	first    string               // pending key of the first queue polled
	last     string               // ... and of the last
	pending  map[string][3]string // pending key -> paused, active and lease keys
	order    []string             // the queues, in the order asynq polls them
	finals   *finals              // the final publishes the jobs' ends take; nil: none
	poll     time.Duration
	idle     time.Duration
	channels []string
	log      *slog.Logger

	wake    chan struct{} // a wake-up not yet taken; buffered 1
	stop    chan struct{} // closed by release
	ctx     context.Context
	cancel  context.CancelFunc // of ctx, the subscription's; by release
	once    sync.Once
	stopped sync.WaitGroup // the subscription's goroutine

	mu            sync.Mutex
	ps            *redis.PubSub // the current subscription
	released      bool
	lastEmpty     bool        // the last round of polls took no job
	emptyNext     string      // pending key of the queue whose poll the round's first poll found empty
	ahead         *prefetched // a job taken ahead for the next poll (prefetch.go)
	fetching      bool        // a job end is taking one
	inflight      sync.WaitGroup
	answeredAhead int64     // polls a job taken ahead answered, for tests
	emptySince    time.Time // when the queues were last found empty after taking a job or a wake-up
	polls         int64     // dequeue calls, for tests
	woken         int64     // holds a wake-up ended, for tests
	idleHold      bool      // a hold of the idle length is under way, for tests
	idleTimeouts  int64     // holds of the idle length that ran out, for tests
}

// newIdlePoller returns the client asynq polls queues (in that order)
// through, on rdb.
func newIdlePoller(rdb redis.UniversalClient, queues []string, poll, idle time.Duration, log *slog.Logger) *idlePoller {
	p := &idlePoller{
		UniversalClient: rdb,
		first:           asynqKey(queues[0], "pending"),
		last:            asynqKey(queues[len(queues)-1], "pending"),
		pending:         map[string][3]string{},
		poll:            poll,
		idle:            idle,
		log:             log,
		wake:            make(chan struct{}, 1),
		stop:            make(chan struct{}),
	}
	p.ctx, p.cancel = context.WithCancel(context.Background())
	db := redisDB(rdb)
	for _, q := range queues {
		p.pending[asynqKey(q, "pending")] = [3]string{asynqKey(q, "paused"), asynqKey(q, "active"), asynqKey(q, "lease")}
		p.channels = append(p.channels, WakeChannel(db, q))
	}
	p.order = queues
	return p
}

// EvalSha runs a script by its SHA, as the client does; asynq runs its
// dequeue and forward scripts so.
func (p *idlePoller) EvalSha(ctx context.Context, sha string, keys []string, args ...any) *redis.Cmd {
	pub := p.finals.take(keys) // of the job that ends, if its turn's final events wait
	prefetch := p.isJobEnd(keys) && p.startPrefetch()
	if pub != nil || prefetch {
		return p.endJob(ctx, pub, prefetch, sha, keys, args)
	}
	switch {
	case p.isDequeue(keys):
		return p.dequeue(ctx, sha, keys, args)
	case len(keys) == 2 && p.isPending(keys[1]):
		// asynq's forwarder: KEYS are a queue's scheduled or retry set and
		// its pending list; the script returns how many jobs it moved.
		cmd := p.UniversalClient.EvalSha(ctx, sha, keys, args...)
		if n, err := cmd.Int64(); err == nil && n > 0 {
			p.wakeUp()
		}
		return cmd
	}
	return p.UniversalClient.EvalSha(ctx, sha, keys, args...)
}

// isDequeue reports whether keys are those of asynq's dequeue script for
// one of the queues: its pending list, paused flag, active list and lease
// set.
func (p *idlePoller) isDequeue(keys []string) bool {
	if len(keys) != 4 {
		return false
	}
	others, ok := p.pending[keys[0]]
	return ok && keys[1] == others[0] && keys[2] == others[1] && keys[3] == others[2]
}

// isPending reports whether key is the pending list of one of the queues.
func (p *idlePoller) isPending(key string) bool {
	_, ok := p.pending[key]
	return ok
}

// dequeue runs one poll of a queue, held first when it begins a round
// after an empty one. The first poll of a round polls every queue, in
// asynq's order, in one script call (dequeueFirst), so that a round costs
// one round trip to Redis, not one per queue.
func (p *idlePoller) dequeue(ctx context.Context, sha string, keys []string, args []any) *redis.Cmd {
	var cmd *redis.Cmd
	switch {
	case keys[0] == p.first && p.answerAhead(ctx, &cmd):
		// The end of a job took this one ahead.
	case keys[0] == p.first:
		p.hold()
		cmd = p.dequeueFirst(ctx, sha, keys, args)
	case p.takeEmptyNext(keys[0]):
		// The round's first poll found this queue empty a moment ago.
		cmd = redis.NewCmd(ctx)
		cmd.SetErr(redis.Nil)
	default:
		cmd = p.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	err := cmd.Err()
	p.mu.Lock()
	defer p.mu.Unlock()
	p.polls++
	switch {
	case err == nil: // took a job
		p.lastEmpty = false
	case redis.HasErrorPrefix(err, "NOSCRIPT"):
		// go-redis runs the script again by its text at once.
	case !errors.Is(err, redis.Nil) || keys[0] == p.last:
		// The round ended empty, or with an error (asynq does not sleep
		// after one: the hold paces its next round).
		if !p.lastEmpty {
			p.emptySince = time.Now()
		}
		p.lastEmpty = true
	}
	return cmd
}

// dequeueAny is asynq's dequeue (v0.26, internal/rdb's dequeueCmd) over
// several queues in order: the first job of the first queue that is not
// paused and has one is made active under the lease, and its message
// returned; nil when none has a job. KEYS are each queue's pending list,
// paused flag, active list and lease set, in that order; ARGV[1] is the
// lease's expiry (unix seconds) and ARGV[1+i] the task key prefix of the
// i-th queue.
var dequeueAny = dequeueOver(`redis.call("HGET", key, "msg")`)

// dequeueOver is the script of asynq's dequeue over several queues in
// order (dequeueAny's KEYS and ARGV) that returns what the Lua expression
// ret makes of the job taken (i, the queue's index from 0; id; key, its
// task key), or nil when no queue has a job.
func dequeueOver(ret string) *redis.Script {
	return redis.NewScript(`
for i = 0, #KEYS / 4 - 1 do
	local pending, paused, active, lease = KEYS[4*i+1], KEYS[4*i+2], KEYS[4*i+3], KEYS[4*i+4]
	if redis.call("EXISTS", paused) == 0 then
		local id = redis.call("RPOPLPUSH", pending, active)
		if id then
			local key = ARGV[i+2] .. id
			redis.call("HSET", key, "state", "active")
			redis.call("HDEL", key, "pending_since")
			redis.call("ZADD", lease, ARGV[1], id)
			return ` + ret + `
		end
	end
end
return nil`)
}

// dequeueFirst is the first poll of a round, of the first queue: with one
// queue asynq's own script (sha), else dequeueAny over all the queues.
// asynq takes a job whatever queue the poll it answers was of (it reads
// the job's queue from the job), so a job of a later queue is the answer
// to this poll; when every queue was empty, the polls of the later queues
// that asynq makes next are answered empty without asking Redis again
// (takeEmptyNext). A job enqueued in between is found by the next round,
// which the wake-up of its enqueue starts at once.
func (p *idlePoller) dequeueFirst(ctx context.Context, sha string, keys []string, args []any) *redis.Cmd {
	p.mu.Lock()
	p.emptyNext = ""
	p.mu.Unlock()
	if len(p.order) < 2 || len(args) != 2 {
		return p.UniversalClient.EvalSha(ctx, sha, keys, args...)
	}
	allKeys, argv := p.dequeueArgs(args[0])
	cmd := dequeueAny.Run(ctx, p.UniversalClient, allKeys, argv...)
	if errors.Is(cmd.Err(), redis.Nil) {
		p.mu.Lock()
		p.emptyNext = asynqKey(p.order[1], "pending")
		p.mu.Unlock()
	}
	return cmd
}

// dequeueArgs are the KEYS and ARGV of dequeueAny (and prefetchAny) over
// the poller's queues, in asynq's order, with the lease expiring at
// leaseExpiry (unix seconds).
func (p *idlePoller) dequeueArgs(leaseExpiry any) ([]string, []any) {
	keys := make([]string, 0, 4*len(p.order))
	argv := make([]any, 0, 1+len(p.order))
	argv = append(argv, leaseExpiry)
	for _, q := range p.order {
		pending := asynqKey(q, "pending")
		others := p.pending[pending]
		keys = append(keys, pending, others[0], others[1], others[2])
		argv = append(argv, asynqKey(q, "t:"))
	}
	return keys, argv
}

// takeEmptyNext reports whether the poll of the queue with pending key
// key is one the round's first poll found empty, and if so moves the
// mark to the queue after it.
func (p *idlePoller) takeEmptyNext(key string) bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.emptyNext == "" || p.emptyNext != key {
		p.emptyNext = ""
		return false
	}
	p.emptyNext = ""
	for i, q := range p.order {
		if asynqKey(q, "pending") == key && i+1 < len(p.order) {
			p.emptyNext = asynqKey(p.order[i+1], "pending")
		}
	}
	return true
}

// hold waits before a round of polls that follows an empty one.
func (p *idlePoller) hold() {
	p.mu.Lock()
	if !p.lastEmpty || p.released {
		p.mu.Unlock()
		return
	}
	wait := p.poll
	idle := time.Since(p.emptySince) >= idleAfter
	if idle {
		wait = p.idle
	}
	p.idleHold = idle
	p.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-p.wake:
		p.mu.Lock()
		p.emptySince = time.Now()
		p.woken++
		p.mu.Unlock()
	case <-t.C:
		if idle {
			p.mu.Lock()
			p.idleTimeouts++
			p.mu.Unlock()
		}
	case <-p.stop:
	}
	p.mu.Lock()
	p.idleHold = false
	p.mu.Unlock()
}

// wakeUp ends a hold under way, or the next one.
func (p *idlePoller) wakeUp() {
	select {
	case p.wake <- struct{}{}:
	default:
	}
}

// counts are how many polls asynq made so far, and how many holds a
// wake-up ended.
func (p *idlePoller) counts() (polls, woken int64) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.polls, p.woken
}

// inIdleHold reports whether a hold of the idle length is under way, for
// tests: a job enqueued now is found by a wake-up or the idle poll.
func (p *idlePoller) inIdleHold() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleHold
}

// idleTimedOut is how many holds of the idle length ran out, for tests:
// a job found after one was found by the idle poll, not a wake-up.
func (p *idlePoller) idleTimedOut() int64 {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.idleTimeouts
}

// idling reports whether the queues have been empty for idleAfter, so that
// the next hold lasts the idle interval.
func (p *idlePoller) idling() bool {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.lastEmpty && time.Since(p.emptySince) >= idleAfter
}

// listen subscribes to the wake-ups of the queues until release.
func (p *idlePoller) listen() {
	p.stopped.Add(1)
	go func() {
		defer p.stopped.Done()
		for {
			p.mu.Lock()
			if p.released {
				p.mu.Unlock()
				return
			}
			// Subscribed outside the lock: it may wait for a connection.
			ps := p.UniversalClient.Subscribe(p.ctx)
			p.ps = ps
			p.mu.Unlock()
			_ = ps.Subscribe(p.ctx, p.channels...)
			p.receive(ps)
			_ = ps.Close()
		}
	}()
}

// receive takes the wake-ups of ps until release, or until ps's
// connection stops answering pings.
func (p *idlePoller) receive(ps *redis.PubSub) {
	ctx := p.ctx
	pinged, pause := false, 50*time.Millisecond
	for {
		msg, err := ps.ReceiveTimeout(ctx, wakeHealthCheck)
		select {
		case <-p.stop:
			return
		default:
		}
		var ne net.Error
		switch {
		case err == nil:
			pinged, pause = false, 50*time.Millisecond
			switch msg.(type) {
			case *redis.Message, *redis.Subscription:
				// A (re)subscription may follow lost wake-ups: look once.
				p.wakeUp()
			}
		case errors.As(err, &ne) && ne.Timeout():
			if pinged {
				p.log.Debug("wake-up subscription unanswered; reconnecting")
				return
			}
			pinged = true
			_ = ps.Ping(ctx)
		default:
			// go-redis reconnects on the next receive; meanwhile the
			// worker polls at its idle interval.
			p.log.Debug("wake-up subscription", slog.Any("err", err))
			select {
			case <-p.stop:
				return
			case <-time.After(pause):
			}
			pause = min(2*pause, time.Second)
		}
	}
}

// release ends a hold under way and every later one, and the
// subscription. Safe to call twice.
func (p *idlePoller) release() {
	p.once.Do(func() {
		p.mu.Lock()
		p.released = true
		ps := p.ps
		p.mu.Unlock()
		close(p.stop)
		p.cancel() // a connection being dialled
		if ps != nil {
			_ = ps.Close()
		}
		p.stopped.Wait()
	})
}

// wakeups publishes the wake-ups of a Queue's jobs on their queues'
// WakeChannel, off the caller's path: one goroutine at a time, which
// coalesces the wake-ups that arrive while it publishes.
type wakeups struct {
	rdb redis.UniversalClient
	db  int // redisDB(rdb)
	log *slog.Logger

	mu      sync.Mutex
	queues  []string // to announce
	running bool
}

// notify announces that queue got a job.
func (w *wakeups) notify(queue string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, q := range w.queues {
		if q == queue {
			return
		}
	}
	w.queues = append(w.queues, queue)
	if !w.running {
		w.running = true
		go w.publish()
	}
}

func (w *wakeups) publish() {
	for {
		w.mu.Lock()
		queues := w.queues
		w.queues = nil
		if len(queues) == 0 {
			w.running = false
			w.mu.Unlock()
			return
		}
		w.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		var err error
		if len(queues) == 1 {
			err = w.rdb.Publish(ctx, WakeChannel(w.db, queues[0]), "").Err()
		} else {
			_, err = w.rdb.Pipelined(ctx, func(pipe redis.Pipeliner) error {
				for _, q := range queues {
					pipe.Publish(ctx, WakeChannel(w.db, q), "")
				}
				return nil
			})
		}
		cancel()
		if err != nil {
			// The workers find the job at their next idle poll.
			w.log.Debug("publish wake-up", slog.Any("queues", queues), slog.Any("err", err))
		}
	}
}
