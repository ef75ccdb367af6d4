package worker

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// finalsWait is how long a held final publish waits for the script call
// that ends its job before it goes out by itself: asynq makes that call as
// soon as the handler returns, so only a worker stopping under its job
// leaves one to the timer.
const finalsWait = 250 * time.Millisecond

// finals holds the final publish of each turn whose job this process's
// Server runs, from the moment the job's handler publishes it until asynq's
// script call that ends the job (done, or retry, archive, requeue) takes it
// and sends it ahead of itself in one pipeline: the events a turn ends with
// reach Redis in the round trip that ends its job, not in one of their own
// just before it. The events are stored before they are published, so a
// subscriber that reads the store in between loses nothing; a held publish
// that no call takes within finalsWait goes out by itself.
type finals struct {
	rdb redis.UniversalClient
	log *slog.Logger
	on  atomic.Bool  // a Server takes them
	n   atomic.Int32 // len(held), read without the lock

	mu   sync.Mutex
	held map[string]*heldPublish // by the id of the job that published it
}

// heldPublish is a final publish that waits for its job's end.
type heldPublish struct {
	pub   *publication
	timer *time.Timer
}

func newFinals(rdb redis.UniversalClient, log *slog.Logger) *finals {
	return &finals{rdb: rdb, log: log, held: map[string]*heldPublish{}}
}

// hold keeps pub for the script call that ends the job whose handler ctx
// is, when a Server takes finals, pub ends its turn and the job is the
// turn's own (its id the turn's, or a rescue job's). It reports whether it
// kept it; if not, the caller publishes it.
func (f *finals) hold(ctx context.Context, pub *publication) bool {
	if f == nil || !f.on.Load() || !pub.final {
		return false
	}
	taskID, ok := asynq.GetTaskID(ctx)
	if !ok || (taskID != pub.turnID && !strings.HasPrefix(taskID, pub.turnID+"~")) {
		return false
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.held[taskID] != nil {
		return false // a second final publish of one job goes out as it comes
	}
	h := &heldPublish{pub: pub}
	h.timer = time.AfterFunc(finalsWait, func() { f.flush(taskID, h) })
	f.held[taskID] = h
	f.n.Add(1)
	return true
}

// take returns the held publish of the job whose task key (asynq's
// asynq:{<queue>}:t:<id>) is among keys, and forgets it; nil if none.
func (f *finals) take(keys []string) *publication {
	if f == nil || f.n.Load() == 0 {
		return nil
	}
	for _, k := range keys {
		i := strings.Index(k, "}:t:")
		if i < 0 || !strings.HasPrefix(k, "asynq:{") {
			continue
		}
		id := k[i+len("}:t:"):]
		f.mu.Lock()
		h := f.held[id]
		if h != nil {
			delete(f.held, id)
			f.n.Add(-1)
		}
		f.mu.Unlock()
		if h != nil {
			h.timer.Stop()
			return h.pub
		}
	}
	return nil
}

// flush publishes h by itself, unless a script call took it meanwhile.
func (f *finals) flush(taskID string, h *heldPublish) {
	f.mu.Lock()
	if f.held[taskID] != h {
		f.mu.Unlock()
		return
	}
	delete(f.held, taskID)
	f.n.Add(-1)
	f.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	pipe := f.rdb.Pipeline()
	h.pub.queue(ctx, pipe)
	cmds, err := pipe.Exec(ctx)
	if err := h.pub.check(cmds, err); err != nil {
		f.log.Warn("publish events", slog.String("turn", h.pub.turnID), slog.Any("err", err))
	}
}

// flushAll publishes every held publish by itself now.
func (f *finals) flushAll() {
	if f == nil {
		return
	}
	f.mu.Lock()
	held := make(map[string]*heldPublish, len(f.held))
	for id, h := range f.held {
		held[id] = h
	}
	f.mu.Unlock()
	for id, h := range held {
		h.timer.Stop()
		f.flush(id, h)
	}
}
