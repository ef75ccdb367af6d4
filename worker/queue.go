package worker

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/hibiken/asynq"
	"github.com/redis/go-redis/v9"

	"github.com/prchat/prchat/chat"
)

// Queue names and the task type of a turn's job.
const (
	// SharedQueue is the queue every worker consumes.
	SharedQueue = "turns"
	// HostQueuePrefix starts the name of a worker's own queue, host:<id>.
	HostQueuePrefix = "host:"
	// TaskType is the asynq task type of a turn's job.
	TaskType = "turn:run"
	// RemoveRunDirType is the asynq task type of a job that removes a
	// deleted conversation's run directory on the worker whose queue has it.
	RemoveRunDirType = "rundir:remove"
)

// rescueTTL is how long the ids of a turn's rescue jobs are remembered; far
// longer than any turn runs.
const rescueTTL = 7 * 24 * time.Hour

// HostQueue is the name of the queue of worker host ("" = SharedQueue).
func HostQueue(host string) string {
	if host == "" {
		return SharedQueue
	}
	return HostQueuePrefix + host
}

// queueHost is the host of a host queue, and "" for the shared one.
func queueHost(queue string) string {
	host, ok := strings.CutPrefix(queue, HostQueuePrefix)
	if !ok {
		return ""
	}
	return host
}

func isOurQueue(queue string) bool {
	return queue == SharedQueue || (strings.HasPrefix(queue, HostQueuePrefix) && len(queue) > len(HostQueuePrefix))
}

// RescueTaskID is the TaskID of the rescue job of a turn held by the run
// with fence (see the package doc).
func RescueTaskID(turnID string, fence int64) string {
	return turnID + "~" + strconv.FormatInt(fence, 10)
}

func rescueKey(turnID string) string { return "prchat:rescues:" + turnID }

// asynqQueuesKey is the set of queue names that asynq's Inspector knows
// (asynq's base.AllQueues). asynq's client adds a queue to it only on its
// first enqueue to that queue, so after Redis lost its data the Inspector
// would not see the queue's new jobs; Queue adds it on every enqueue.
const asynqQueuesKey = "asynq:queues"

// payload is the body of a turn:run task.
type payload struct {
	TurnID string `json:"turn_id"`
}

// QueueConfig configures a Queue.
type QueueConfig struct {
	// Policy is the turns' policy, as chat.Turns and chat.Runner have it: its Job
	// window bounds one run of a job, so that chat ends a turn before the
	// queue does, and its JobRetries is how often a failed job is tried
	// again before asynq archives it (the Reconciler then settles its turn
	// as failed).
	Policy chat.TurnPolicy
	// Feeds, if set, carries the feed events an Enqueue is given: they go
	// to their repositories' feeds in the pipeline that registers the
	// job's queue, before the job is put. Without it they are dropped.
	Feeds *Events
	// Logger receives what the queue does. Default: discard.
	Logger *slog.Logger
}

func (c QueueConfig) withDefaults() QueueConfig {
	c.Policy = c.Policy.WithDefaults()
	c.Logger = cmp.Or(c.Logger, slog.New(slog.DiscardHandler))
	return c
}

func (c QueueConfig) validate() error {
	if err := c.Policy.Validate(); err != nil {
		return fmt.Errorf("queue: %w", err)
	}
	return nil
}

// Queue carries turn jobs to workers through asynq. It implements
// chat.Queue, and lets the Reconciler inspect and repair a turn's jobs.
type Queue struct {
	rdb    redis.UniversalClient
	client *asynq.Client
	rides  *rideShare // the shared pipelines of client's enqueues
	insp   *asynq.Inspector
	cfg    QueueConfig
	log    *slog.Logger
	wake   *wakeups
}

var _ chat.Queue = (*Queue)(nil)

// NewQueue returns a Queue on rdb. The Queue does not own rdb: close it after
// the Queue is no longer used.
func NewQueue(rdb redis.UniversalClient, cfg QueueConfig) (*Queue, error) {
	cfg = cfg.withDefaults()
	if err := cfg.validate(); err != nil {
		return nil, fmt.Errorf("worker queue config: %w", err)
	}
	if rdb == nil {
		return nil, errors.New("worker queue: a Redis client is required")
	}
	riding := newRiding(rdb)
	return &Queue{
		rdb:    rdb,
		client: asynq.NewClientFromRedisClient(riding),
		rides:  riding.share,
		insp:   asynq.NewInspectorFromRedisClient(rdb),
		cfg:    cfg,
		log:    cfg.Logger,
		wake:   &wakeups{rdb: rdb, db: redisDB(rdb), log: cfg.Logger},
	}, nil
}

// Enqueue puts the turn's job on host's queue ("" = the shared queue). A job
// with the turn's id that is already in that queue (waiting, running or
// archived) is left as it is and is not an error.
func (q *Queue) Enqueue(ctx context.Context, turnID, host string, feed ...chat.FeedEvent) error {
	_, err := q.enqueue(ctx, turnID, turnID, HostQueue(host), feed...)
	return err
}

// Rescue enqueues a rescue job for a turn whose worker died while its old
// job still counts as active, on the shared queue, with the TaskID
// RescueTaskID(turnID, fence). It reports whether a new job was enqueued
// (false: that rescue job already exists).
func (q *Queue) Rescue(ctx context.Context, turnID string, fence int64) (bool, error) {
	id := RescueTaskID(turnID, fence)
	pipe := q.rdb.TxPipeline()
	pipe.SAdd(ctx, rescueKey(turnID), id)
	pipe.Expire(ctx, rescueKey(turnID), rescueTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return false, fmt.Errorf("rescue turn %s: remember job %s: %w", turnID, id, err)
	}
	return q.enqueue(ctx, turnID, id, SharedQueue)
}

// HandOn enqueues a job for a turn that a stopping worker handed on, on the
// shared queue, with a TaskID of its own (the stopping worker's job still
// holds the turn's).
func (q *Queue) HandOn(ctx context.Context, turnID string) error {
	var b [6]byte
	_, _ = rand.Read(b[:])
	id := turnID + "~h" + hex.EncodeToString(b[:])
	pipe := q.rdb.TxPipeline()
	pipe.SAdd(ctx, rescueKey(turnID), id)
	pipe.Expire(ctx, rescueKey(turnID), rescueTTL)
	if _, err := pipe.Exec(ctx); err != nil {
		return fmt.Errorf("hand on turn %s: remember job %s: %w", turnID, id, err)
	}
	_, err := q.enqueue(ctx, turnID, id, SharedQueue)
	return err
}

func (q *Queue) enqueue(ctx context.Context, turnID, taskID, queue string, feed ...chat.FeedEvent) (bool, error) {
	if turnID == "" {
		return false, errors.New("enqueue turn: empty turn id")
	}
	body, err := json.Marshal(payload{TurnID: turnID})
	if err != nil {
		return false, fmt.Errorf("enqueue turn %s: %w", turnID, err)
	}
	// A queue that has jobs waiting has no worker waiting for a wake-up
	// (one that just took a job looks again within the poll interval), so
	// only a job that finds its queue empty is announced: under load, none.
	// The queue's registration and the feed events ride along with asynq's
	// enqueue, ahead of it: one round trip for all, and the turn's news is
	// out before any worker can take its job.
	var news [][]byte
	if q.cfg.Feeds != nil {
		for _, fe := range feed {
			data, err := encodeFeed(fe)
			if err != nil {
				return false, fmt.Errorf("enqueue turn %s on %s: %w", turnID, queue, err)
			}
			news = append(news, data)
		}
	}
	var waiting *redis.IntCmd
	rctx, sent := withRiders(ctx, func(pipe redis.Pipeliner) {
		for i, data := range news {
			q.cfg.Feeds.addEncodedFeed(ctx, pipe, feed[i].Repository, data)
		}
		pipe.SAdd(ctx, asynqQueuesKey, queue)
		waiting = pipe.LLen(ctx, asynqKey(queue, "pending"))
	})
	task := asynq.NewTask(TaskType, body)
	_, err = q.client.EnqueueContext(rctx, task,
		asynq.TaskID(taskID),
		asynq.Queue(queue),
		asynq.MaxRetry(q.cfg.Policy.JobRetries),
		asynq.Timeout(q.cfg.Policy.Windows().Job),
	)
	if err == nil && sent.err != nil {
		err = fmt.Errorf("register the queue or the feed's news: %w", sent.err)
	}
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
		q.log.DebugContext(ctx, "turn job already queued", slog.String("turn", turnID), slog.String("task", taskID), slog.String("queue", queue))
		return false, nil
	case err != nil:
		return false, fmt.Errorf("enqueue turn %s on %s: %w", turnID, queue, err)
	}
	if waiting != nil && waiting.Val() == 0 {
		q.wake.notify(queue)
	}
	q.log.DebugContext(ctx, "turn job queued", slog.String("turn", turnID), slog.String("task", taskID), slog.String("queue", queue))
	return true, nil
}

// removePayload is the body of a rundir:remove task.
type removePayload struct {
	Dir string `json:"dir"`
}

// RemoveRunDir enqueues a job on host's queue ("" = the shared queue) that
// removes the run directory dir on that worker's disk.
func (q *Queue) RemoveRunDir(ctx context.Context, host, dir string) error {
	body, err := json.Marshal(removePayload{Dir: dir})
	if err != nil {
		return fmt.Errorf("remove run directory: %w", err)
	}
	queue := HostQueue(host)
	if err := q.rdb.SAdd(ctx, asynqQueuesKey, queue).Err(); err != nil {
		return fmt.Errorf("remove run directory on %s: register queue: %w", queue, err)
	}
	sum := sha256.Sum256([]byte(dir))
	_, err = q.client.EnqueueContext(ctx, asynq.NewTask(RemoveRunDirType, body),
		asynq.TaskID("rundir:"+hex.EncodeToString(sum[:12])), asynq.Queue(queue), asynq.MaxRetry(3), asynq.Timeout(time.Minute))
	switch {
	case errors.Is(err, asynq.ErrTaskIDConflict):
	case err != nil:
		return fmt.Errorf("remove run directory on %s: %w", queue, err)
	default:
		q.wake.notify(queue)
	}
	return nil
}

// Cancel stops the turn's jobs, its own and its rescue jobs: a handler
// running one on any worker has its context cancelled (through Redis
// pub/sub; asynq then puts that job up for retry, and the retried handler
// finds the turn settled), and the jobs waiting in any of prchat's queues,
// or archived there, are deleted. A turn with no job is not an error.
func (q *Queue) Cancel(ctx context.Context, turnID string) error {
	rescues, err := q.rdb.SMembers(ctx, rescueKey(turnID)).Result()
	if err != nil {
		return fmt.Errorf("cancel turn %s: list rescue jobs: %w", turnID, err)
	}
	var errs []error
	for _, id := range append([]string{turnID}, rescues...) {
		if err := q.insp.CancelProcessing(id); err != nil {
			errs = append(errs, fmt.Errorf("cancel turn %s: signal job %s: %w", turnID, id, err))
		}
	}
	tasks, err := q.Tasks(ctx, turnID)
	if err != nil {
		return errors.Join(append(errs, fmt.Errorf("cancel turn %s: %w", turnID, err))...)
	}
	for _, t := range tasks {
		if !t.State.waiting() && t.State != TaskArchived {
			continue
		}
		if err := q.DeleteTask(ctx, t); err != nil {
			errs = append(errs, fmt.Errorf("cancel turn %s: %w", turnID, err))
		}
	}
	return errors.Join(errs...)
}

// Ping checks that Redis answers.
func (q *Queue) Ping(ctx context.Context) error {
	if err := q.rdb.Ping(ctx).Err(); err != nil {
		return fmt.Errorf("ping redis: %w", err)
	}
	return nil
}

// TaskState is the state of a job in asynq.
type TaskState string

// Job states, as asynq names them.
const (
	TaskPending     TaskState = "pending"
	TaskActive      TaskState = "active"
	TaskScheduled   TaskState = "scheduled"
	TaskRetry       TaskState = "retry"
	TaskArchived    TaskState = "archived"
	TaskCompleted   TaskState = "completed"
	TaskAggregating TaskState = "aggregating"
)

// waiting reports whether a job in state s waits to run (and can be deleted).
func (s TaskState) waiting() bool {
	return s == TaskPending || s == TaskScheduled || s == TaskRetry || s == TaskAggregating
}

// live reports whether a job in state s may still run a turn.
func (s TaskState) live() bool { return s.waiting() || s == TaskActive }

// Task is one job of a turn as asynq holds it.
type Task struct {
	// ID is the asynq TaskID: the turn id, or RescueTaskID for a rescue job.
	ID string
	// TurnID is the turn the job runs.
	TurnID string
	// Queue is the asynq queue: SharedQueue or host:<id>.
	Queue string
	// Host is the worker whose queue holds the job ("" = the shared queue).
	Host  string
	State TaskState
	// Retried and MaxRetry count the job's failed runs and its allowance.
	Retried  int
	MaxRetry int
	// LastErr is the error of the job's last failed run.
	LastErr string
}

func taskFromInfo(turnID string, info *asynq.TaskInfo) Task {
	return Task{
		ID:       info.ID,
		TurnID:   turnID,
		Queue:    info.Queue,
		Host:     queueHost(info.Queue),
		State:    TaskState(info.State.String()),
		Retried:  info.Retried,
		MaxRetry: info.MaxRetry,
		LastErr:  info.LastErr,
	}
}

// Tasks returns the jobs of a turn, its own and its rescue jobs, in any
// state, across the shared queue and every host queue.
func (q *Queue) Tasks(ctx context.Context, turnID string) ([]Task, error) {
	queues, err := q.Queues(ctx)
	if err != nil {
		return nil, err
	}
	return q.tasksIn(ctx, queues, turnID)
}

// tasksIn looks for the turn's jobs in queues (prchat's, as Queues returns).
func (q *Queue) tasksIn(ctx context.Context, queues []string, turnID string) ([]Task, error) {
	found, err := q.existingTasks(ctx, queues, turnID)
	if err != nil {
		return nil, fmt.Errorf("jobs of turn %s: %w", turnID, err)
	}
	var out []Task
	for _, queue := range queues {
		for _, id := range found[queue] {
			if err := ctx.Err(); err != nil {
				return nil, err
			}
			info, err := q.insp.GetTaskInfo(queue, id)
			switch {
			case errors.Is(err, asynq.ErrTaskNotFound), errors.Is(err, asynq.ErrQueueNotFound):
				continue
			case err != nil:
				return nil, fmt.Errorf("jobs of turn %s: job %s in %s: %w", turnID, id, queue, err)
			}
			out = append(out, taskFromInfo(turnID, info))
		}
	}
	return out, nil
}

// asynqTaskKey is the key of the hash in which asynq keeps the job id of
// queue (asynq's base.TaskKey): it exists as long as the job does, in any
// state.
func asynqTaskKey(queue, id string) string { return asynqKey(queue, "t:"+id) }

// existingTasks returns, by queue, the ids of the turn's jobs (its own, and
// its rescue jobs on the shared queue) that exist in queues. It asks Redis
// with one pipeline of EXISTS (two if the turn has rescue jobs) rather than
// asynq's inspector once per queue and id, which is two round trips each:
// a reconciler pass looks up every pending turn in every queue, and with a
// deep backlog and many host queues that was most of what Redis did.
func (q *Queue) existingTasks(ctx context.Context, queues []string, turnID string) (map[string][]string, error) {
	type candidate struct{ queue, id string }
	exist := func(pipe redis.Pipeliner, cands []candidate) []*redis.IntCmd {
		cmds := make([]*redis.IntCmd, len(cands))
		for i, c := range cands {
			cmds[i] = pipe.Exists(ctx, asynqTaskKey(c.queue, c.id))
		}
		return cmds
	}
	own := make([]candidate, len(queues))
	for i, queue := range queues {
		own[i] = candidate{queue, turnID}
	}
	pipe := q.rdb.Pipeline()
	rescuesCmd := pipe.SMembers(ctx, rescueKey(turnID))
	cmds := exist(pipe, own)
	if _, err := pipe.Exec(ctx); err != nil {
		return nil, fmt.Errorf("look for jobs: %w", err)
	}
	cands := own
	if rescues := rescuesCmd.Val(); len(rescues) > 0 && slices.Contains(queues, SharedQueue) {
		more := make([]candidate, len(rescues))
		for i, id := range rescues {
			more[i] = candidate{SharedQueue, id}
		}
		pipe := q.rdb.Pipeline()
		moreCmds := exist(pipe, more)
		if _, err := pipe.Exec(ctx); err != nil {
			return nil, fmt.Errorf("look for rescue jobs: %w", err)
		}
		cands, cmds = append(slices.Clone(own), more...), append(cmds, moreCmds...)
	}
	found := map[string][]string{}
	for i, c := range cands {
		if cmds[i].Val() > 0 {
			found[c.queue] = append(found[c.queue], c.id)
		}
	}
	return found, nil
}

// DeleteTask deletes a waiting or archived job. A job that is gone already
// is not an error; a running one is (asynq cannot delete it).
func (q *Queue) DeleteTask(ctx context.Context, t Task) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	err := q.insp.DeleteTask(t.Queue, t.ID)
	if err != nil && !errors.Is(err, asynq.ErrTaskNotFound) && !errors.Is(err, asynq.ErrQueueNotFound) {
		return fmt.Errorf("delete job %s of turn %s in %s: %w", t.ID, t.TurnID, t.Queue, err)
	}
	return nil
}

// Queues lists prchat's queues that asynq knows: the shared one first (also
// when it was never used), then the host queues, sorted.
func (q *Queue) Queues(ctx context.Context) ([]string, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	all, err := q.insp.Queues()
	if err != nil {
		return nil, fmt.Errorf("list queues: %w", err)
	}
	hosts := slices.DeleteFunc(all, func(n string) bool { return n == SharedQueue || !isOurQueue(n) })
	slices.Sort(hosts)
	return append([]string{SharedQueue}, hosts...), nil
}

// QueueStats counts the jobs of one queue by state.
type QueueStats struct {
	Queue string
	// Host is the worker whose queue it is ("" = the shared queue).
	Host      string
	Pending   int
	Active    int
	Scheduled int
	Retry     int
	Archived  int
}

// Stats counts the jobs of each of prchat's queues, for metrics and the
// dashboard.
func (q *Queue) Stats(ctx context.Context) ([]QueueStats, error) {
	queues, err := q.Queues(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]QueueStats, 0, len(queues))
	for _, name := range queues {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		info, err := q.insp.GetQueueInfo(name)
		switch {
		case errors.Is(err, asynq.ErrQueueNotFound):
			out = append(out, QueueStats{Queue: name, Host: queueHost(name)})
			continue
		case err != nil:
			return nil, fmt.Errorf("stats of queue %s: %w", name, err)
		}
		out = append(out, QueueStats{
			Queue: name, Host: queueHost(name),
			Pending: info.Pending, Active: info.Active, Scheduled: info.Scheduled,
			Retry: info.Retry, Archived: info.Archived,
		})
	}
	return out, nil
}
