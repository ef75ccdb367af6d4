package worker

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"
)

// jobStates are the asynq states a snapshot reads, each a list or a sorted
// set of job ids per queue (asynq v0.26, internal/base). prchat's jobs are
// never grouped (aggregating) nor retained once done (completed).
var jobStates = []struct {
	state TaskState
	list  bool // a list (LRANGE); else a sorted set (ZRANGE)
}{
	{TaskPending, true},
	{TaskActive, true},
	{TaskScheduled, false},
	{TaskRetry, false},
	{TaskArchived, false},
}

// asynqLeaseDuration is how long a dequeued job's lease lasts before
// asynq's recoverer takes its worker for gone (asynq v0.26, rdb.LeaseDuration);
// a live worker extends it every few seconds.
const asynqLeaseDuration = 30 * time.Second

// jobSnapshot is every job of prchat's queues, read in one MULTI/EXEC, so
// that a reconciler pass costs a few Redis commands per queue, not a few
// per pending turn and queue.
type jobSnapshot struct {
	// byTurn holds the jobs of each turn, by turn id (its own job and its
	// rescue and hand-on jobs, whose ids start with the turn's).
	byTurn map[string][]Task
	// archived holds every archived job, a turn's or not.
	archived []Task
	// orphans holds the active jobs without a lease: asynq's recoverer never
	// looks at them (asynq issue #1144; a Redis failover to a replica that
	// missed the lease's write leaves such jobs).
	orphans []Task
}

// turnOfTask is the turn a job id belongs to: the turn's own job has the
// turn's id, a rescue or hand-on job the turn's id, '~' and a suffix.
func turnOfTask(id string) string {
	turn, _, _ := strings.Cut(id, "~")
	return turn
}

// snapshot reads the jobs of queues.
func (q *Queue) snapshot(ctx context.Context, queues []string) (*jobSnapshot, error) {
	type read struct {
		queue string
		state TaskState
		cmd   *redis.StringSliceCmd
	}
	var reads []read
	leases := make([]*redis.StringSliceCmd, len(queues))
	_, err := q.rdb.TxPipelined(ctx, func(pipe redis.Pipeliner) error {
		for i, queue := range queues {
			for _, s := range jobStates {
				key := asynqKey(queue, string(s.state))
				var cmd *redis.StringSliceCmd
				if s.list {
					cmd = pipe.LRange(ctx, key, 0, -1)
				} else {
					cmd = pipe.ZRange(ctx, key, 0, -1)
				}
				reads = append(reads, read{queue, s.state, cmd})
			}
			leases[i] = pipe.ZRange(ctx, asynqKey(queue, "lease"), 0, -1)
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read the queues' jobs: %w", err)
	}
	leased := map[string]bool{}
	for i, queue := range queues {
		for _, id := range leases[i].Val() {
			leased[queue+"\x00"+id] = true
		}
	}
	s := &jobSnapshot{byTurn: map[string][]Task{}}
	for _, r := range reads {
		for _, id := range r.cmd.Val() {
			t := Task{ID: id, TurnID: turnOfTask(id), Queue: r.queue, Host: queueHost(r.queue), State: r.state}
			s.byTurn[t.TurnID] = append(s.byTurn[t.TurnID], t)
			switch {
			case r.state == TaskArchived:
				s.archived = append(s.archived, t)
			case r.state == TaskActive && !leased[r.queue+"\x00"+id]:
				s.orphans = append(s.orphans, t)
			}
		}
	}
	return s, nil
}

// withInfo fills in the retries and last error of archived jobs, which the
// snapshot does not read.
func (q *Queue) withInfo(ctx context.Context, tasks []Task) ([]Task, error) {
	out := tasks[:0:0]
	for _, t := range tasks {
		info, err := q.insp.GetTaskInfo(t.Queue, t.ID)
		switch {
		case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
			continue
		case err != nil:
			return nil, fmt.Errorf("job %s in %s: %w", t.ID, t.Queue, err)
		}
		out = append(out, taskFromInfo(t.TurnID, info))
	}
	return out, nil
}

// leaseScript gives the active job ARGV[1] (whose hash is KEYS[1]) the lease
// ARGV[2] in the sorted set KEYS[2] when it is still active and has none.
var leaseScript = redis.NewScript(`
if redis.call("HGET", KEYS[1], "state") == "active" and not redis.call("ZSCORE", KEYS[2], ARGV[1]) then
	redis.call("ZADD", KEYS[2], ARGV[2], ARGV[1])
	return 1
end
return 0`)

// restoreLease gives an active job that has no lease a fresh one, as asynq's
// dequeue does: a live worker running it extends the lease from then on (it
// extends only leases that exist), and if none does, asynq's recoverer
// retries the job once the lease expires. It reports whether it did.
func (q *Queue) restoreLease(ctx context.Context, t Task, now time.Time) (bool, error) {
	n, err := leaseScript.Run(ctx, q.rdb,
		[]string{asynqTaskKey(t.Queue, t.ID), asynqKey(t.Queue, "lease")},
		t.ID, now.Add(asynqLeaseDuration).Unix()).Int()
	if err != nil {
		return false, fmt.Errorf("restore the lease of job %s in %s: %w", t.ID, t.Queue, err)
	}
	return n == 1, nil
}
